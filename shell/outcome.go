package shell

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// CommandOutcome is what a command appended to the log came to once a
// background worker decided it: the events it caused (its decider's
// decision), or its business refusal (see core.CommandRejected).
type CommandOutcome struct {
	// Events are the messages the command caused (causation id: the
	// command's id), in position order; none when it was refused.
	Events []core.PositionedMessage
	// Refusal is the command's business refusal, nil when it was decided.
	Refusal *core.RefusalError
	// Decided is false when the command has no outcome yet.
	Decided bool
}

// AwaitOptions tune AwaitCommand.
type AwaitOptions struct {
	// Group, when set, is the consumer group that decides the command: a
	// decision that caused no events is then recognised by the group's
	// offset having passed the command (without it, AwaitCommand waits
	// for an event or a refusal, and a decision with neither is never
	// seen).
	Group string
	// Poll is how often the log is read again (default 20 ms).
	Poll time.Duration
}

// AwaitCommand waits until the command with id commandID, appended to the
// log for a background worker to decide, has an outcome, and returns it:
// its events, or its business refusal as a *core.RefusalError error
// (errors.Is matches the decider's sentinel, and core.ErrRefused). It
// polls the store (ReadCorrelation) until then, or until ctx ends (then
// it returns ctx's error and the outcome so far). A command appended with
// its own correlation id is awaited all the same: its outcome is what it
// caused.
//
// opts may be nil: the defaults.
func AwaitCommand(ctx context.Context, store Store, commandID uuid.UUID, opts *AwaitOptions) (CommandOutcome, error) {
	o := orDefaults(opts)
	if o.Poll <= 0 {
		o.Poll = 20 * time.Millisecond
	}
	for {
		out, err := CommandOutcomeOf(ctx, store, commandID, o.Group)
		if err != nil {
			return out, err
		}
		if out.Decided {
			if out.Refusal != nil {
				return out, out.Refusal
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}

// CommandOutcomeOf reads the outcome of the command with id commandID
// once, without waiting (see AwaitCommand; Decided is false while it has
// none). With group, a command the group's offset passed without events
// or refusal counts as decided.
func CommandOutcomeOf(ctx context.Context, store Store, commandID uuid.UUID, group string) (CommandOutcome, error) {
	var out CommandOutcome
	chain, err := store.ReadCorrelation(ctx, commandID)
	if err != nil {
		return out, err
	}
	var cmd *core.PositionedMessage
	for i, m := range chain {
		switch {
		case m.ID == commandID:
			cmd = &chain[i]
		case m.CausationID != commandID:
		case m.Type == core.CommandRejectedType:
			if r, ok := m.Payload.(core.CommandRejected); ok {
				out.Refusal = r.Refusal()
			} else {
				out.Refusal = &core.RefusalError{CommandID: commandID.String(), Message: fmt.Sprintf("refused (the rejection's payload is a %T)", m.Payload)}
			}
		default:
			out.Events = append(out.Events, m)
		}
	}
	if out.Refusal != nil {
		out.Events = nil
	}
	out.Decided = out.Refusal != nil || len(out.Events) > 0
	if out.Decided || group == "" || cmd == nil {
		return out, nil
	}
	passed, err := offsetPassed(ctx, store, group, *cmd)
	out.Decided = passed
	return out, err
}

// offsetPassed tells whether group acknowledged cmd: an offset of the
// group whose partition values cmd carries is at or past its position.
func offsetPassed(ctx context.Context, store Store, group string, cmd core.PositionedMessage) (bool, error) {
	var keys []codec.KeyPair
	if reg := store.Registry(); reg != nil {
		var err error
		if keys, err = reg.Keys(cmd.Payload, nil); err != nil {
			return false, err
		}
	}
	carries := func(partition core.Partition) bool {
		if id, ok := partition[core.IDKey]; ok {
			return id == cmd.ID.String()
		}
		for name, value := range partition {
			found := false
			for _, k := range keys {
				if k.Name == name && k.Value == value {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	for o, err := range store.Offsets(ctx, OffsetQuery{Group: group}) {
		if err != nil {
			return false, err
		}
		if o.LastPosition >= cmd.Position && carries(o.Partition) {
			return true, nil
		}
	}
	return false, nil
}
