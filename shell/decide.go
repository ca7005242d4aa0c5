package shell

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

// DecideOptions tune Decide.
type DecideOptions struct {
	// Now dates the command (default: the store's clock, store.Now). A
	// time after the store's clock is refused with ErrFutureCommand: the
	// append would schedule the command instead of storing it.
	Now func() time.Time
	// Metadata is merged into the command's metadata.
	Metadata map[string]any
}

// Decided is a decision Decide made and did not append: the command,
// dated and with its id, the events it decided (correlated with it), the
// state after them, and the guard of the read it was decided on.
type Decided[S any] struct {
	// Command is the command as decided: stamped with an id and the time
	// it was decided at, and marked as decided by the decider's group
	// (core.DecidedByKey), so that its workers do not decide it again
	// once it is appended.
	Command core.Message
	// Events are the decision's events.
	Events []core.Message
	// State is the decider's state after the events.
	State S
	// Guard is the guard of the read the decision was made on: append
	// with it, and the append fails with ErrConcurrentAppend if a fact
	// the decision read changed meanwhile.
	Guard core.Guard
}

// Messages are the command followed by its events: what to append, with
// the guard, to store the decision:
//
//	dec, err := shell.Decide(ctx, store, d, cmd, nil)
//	...
//	_, err = store.Append(ctx, dec.Messages(), shell.AppendOptions{Guard: &dec.Guard})
func (d Decided[S]) Messages() []core.Message {
	return append([]core.Message{d.Command}, d.Events...)
}

// Decide reads the state d decides cmd on (as LoadDecision: its query's
// union, or its partition), dates the command with the store's clock (or
// opts.Now), decides it, and returns the command, its events, the state
// after them and the guard of the read, without appending anything: for
// a decision checked or combined with other writes before it is stored.
// A DecideEnvelope handler sees the command's real time and id, as under
// Handle. The decider's sync and after-sync work is not run (there is no
// transaction): use Handle for a decision that needs it.
//
// Errors: those of LoadDecision (an invalid command, an invalid decider,
// a query refused by core.Query.Plan), ErrFutureCommand for opts.Now
// after the store's clock, and the decider's own rejection as its handler
// returned it.
//
// opts may be nil: the defaults.
func Decide[S any](ctx context.Context, store Store, d core.Decider[S], cmd any, opts *DecideOptions) (Decided[S], error) {
	o := orDefaults(opts)
	var res Decided[S]
	group, err := core.NormalizeGroup(d.Spec().Group)
	if err != nil {
		return res, err
	}
	msg := core.NewMessage(cmd).WithMetadata(o.Metadata).WithMetadata(map[string]any{core.DecidedByKey: group})
	id, err := uuid.NewV7()
	if err != nil {
		return res, err
	}
	now := store.Now()
	at := now
	if o.Now != nil {
		at = o.Now()
		if at.After(now) {
			return res, fmt.Errorf("sourced: decide %T dated %v, after the store's clock (%v): %w", msg.Payload, at.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), ErrFutureCommand)
		}
	}
	msg = msg.Stamp(id, at)
	res.Command = msg
	l, err := loadDecision(ctx, store, d, msg, ReadOptions{})
	if err != nil {
		return res, err
	}
	res.Guard, res.State = l.guard, l.state
	evs, err := d.Decide(l.state, msg)
	if err != nil {
		return res, err
	}
	res.Events = evs
	if l.plan != nil {
		res.State = d.QueryState(msg, *l.plan, core.IndexWith(store.Registry()), append(l.read, evs...))
	} else {
		res.State = d.Evolve(l.state, evs...)
	}
	return res, nil
}
