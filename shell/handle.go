package shell

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

// CommandResult is what synchronous command handling returns: the command
// as appended (stamped) and its position, and the messages the decision
// appended with it.
type CommandResult struct {
	Command  core.Message
	Position int64
	Events   []core.Message
}

// HandleResult is what Handle returns for a decider: the command, its
// events, and the decider's state after them.
type HandleResult[S any] struct {
	CommandResult
	State S
}

// HandleOptions tune Handle.
type HandleOptions struct {
	// Now dates the command, read inside the write transaction (default:
	// the store's clock, read once by the append). Handle decides now, so a
	// time after the store's clock is refused with ErrFutureCommand: to
	// decide a command later, append it dated later (core.Message.At) and
	// let the decider's workers claim it when the store promotes it. An
	// earlier time back-dates the command.
	Now func() time.Time
	// Metadata is merged into the command's metadata.
	Metadata map[string]any
}

// ErrFutureCommand is matched by the error of Handle for a command dated
// after the store's clock (HandleOptions.Now, or a core.Message given
// with a CreatedAt): the store would schedule it rather than append it.
var ErrFutureCommand = errors.New("sourced: command dated after the store's clock")

// Handle decides a command synchronously, for web handlers: it validates
// the command, reads the decider's partition, decides, appends the command
// and its events, and moves the decider's offset past the command so that
// workers do not decide it again, all in one write transaction (sync work
// included; after-sync work runs after commit). The transaction holds the
// store's write lock from before the read, so no concurrent append can
// come between the read and the decision's append: Handle never conflicts.
// Reactions to the events still run: the decider's workers claim the
// events as usual.
//
// Errors: an invalid command (codec.ErrInvalid, with every failing field);
// the decider's own rejection, as returned by its handler; a decider whose
// group is not registered with the store (ErrGroupNotRegistered); a
// command dated after the store's clock (ErrFutureCommand); a busy store
// (ErrBusy: try again). In every case nothing is appended.
func Handle[S any](ctx context.Context, store Store, d core.Decider[S], cmd any, opts ...HandleOptions) (HandleResult[S], error) {
	var res HandleResult[S]
	if err := d.Err(); err != nil {
		return res, err
	}
	var history []core.PositionedMessage
	cr, err := handle(ctx, store, d, cmd, opts, func(h []core.PositionedMessage) { history = h })
	res.CommandResult = cr
	res.State = d.Evolve(d.Evolve(d.Initial(), core.MessagesOf(history)...), cr.Events...)
	return res, err
}

// HandleCommand is Handle for any definition that decides commands one at
// a time (core.CommandDecider), such as a statechart.Machine: a command no
// active state accepts returns an error matching core.ErrNotHandled.
func HandleCommand(ctx context.Context, store Store, d core.CommandDecider, cmd any, opts ...HandleOptions) (CommandResult, error) {
	return handle(ctx, store, d, cmd, opts, nil)
}

func handle(ctx context.Context, store Store, d core.CommandDecider, cmd any, opts []HandleOptions, read func([]core.PositionedMessage)) (CommandResult, error) {
	var o HandleOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	reg := store.Registry()
	msg := core.NewMessage(cmd).WithMetadata(o.Metadata)
	res := CommandResult{Command: msg}
	if err := reg.Validate(msg.Payload); err != nil {
		return res, err
	}
	spec := d.Spec()
	keys, err := reg.Keys(msg.Payload, nil)
	if err != nil {
		return res, err
	}
	partition := map[string]string{}
	for _, k := range keys {
		if slices.Contains(spec.PartitionBy, k.Name) {
			if _, seen := partition[k.Name]; seen {
				return res, fmt.Errorf("sourced: command %T holds several values of partition key %q: a command decides in one partition", msg.Payload, k.Name)
			}
			partition[k.Name] = k.Value
		}
	}
	if len(partition) != len(spec.PartitionBy) {
		return res, fmt.Errorf("sourced: command %T does not carry every partition key %v of %s", msg.Payload, spec.PartitionBy, spec.Group)
	}
	history, err := reg.Names(spec.Evolved...)
	if err != nil {
		return res, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return res, err
	}
	// The time is left to the transaction: the store stamps the command
	// with the same reading of its clock that decides whether a message is
	// scheduled, so a clock stepping back cannot defer the command.
	msg = msg.Stamp(id, time.Time{})
	res.Command = msg
	var afters []func(context.Context) error
	err = store.Update(ctx, func(tx Tx) error {
		if o.Now != nil {
			msg.CreatedAt = o.Now()
		}
		h, err := tx.ReadPartition(partition, history, ReadOptions{})
		if err != nil {
			return err
		}
		if read != nil {
			read(h.Messages)
		}
		// The transaction has held the write lock since before the read, so
		// nothing can have been appended since: the command and the
		// decision's events need no guard check.
		marked := msg.WithMetadata(map[string]any{core.DecidedByKey: spec.Group})
		appended, err := tx.Append([]core.Message{marked}, AppendOptions{})
		if err != nil {
			return err
		}
		res.Command, res.Position = appended.Messages[0], appended.Positions[0]
		if res.Position == 0 {
			return fmt.Errorf("sourced: handle %s dated %v: %w (Handle decides now: append it dated later for a worker to decide when it is due)", res.Command.Type, res.Command.CreatedAt.Format(time.RFC3339Nano), ErrFutureCommand)
		}
		cmdMsg := core.PositionedMessage{Message: res.Command, Position: res.Position}
		out, err := d.DecideCommand(partition, h.Messages, cmdMsg)
		if err != nil {
			var be *core.BatchError
			if errors.As(err, &be) {
				err = be.Err
			}
			return err
		}
		if len(out.Events) > 0 {
			evs, err := tx.Append(out.Events, AppendOptions{})
			if err != nil {
				return err
			}
			res.Events = evs.Messages
		}
		// An unregistered group fails here (*UnknownGroupError), which rolls
		// the command and its events back.
		if _, err := tx.AdvanceOffset(spec.Group, partition, res.Position); err != nil {
			return err
		}
		for _, w := range out.Sync {
			if err := protect(func() error { return w(ctx, tx.Context()) }); err != nil {
				return err
			}
		}
		afters = out.AfterSync
		return nil
	})
	if err != nil {
		res.Events = nil
		return res, err
	}
	for _, w := range afters {
		if err := protect(func() error { return w(ctx) }); err != nil {
			return res, fmt.Errorf("sourced: after-sync work failed (the command and its events are stored): %w", err)
		}
	}
	return res, nil
}

// Load reads a decider's, projector's or projection's state for a
// partition straight from the log, with the guard of the read (append with
// it to decide on that state). With opts.Upto it loads the state as it was
// at that position.
func Load[S any](ctx context.Context, store Store, e core.Evolver[S], partition map[string]string, opts ...ReadOptions) (S, core.Guard, error) {
	var o ReadOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	types, err := store.Registry().Names(e.EvolvedTypes()...)
	if err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	res, err := store.ReadPartition(ctx, partition, types, o)
	if err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	return e.Evolve(e.Initial(), core.MessagesOf(res.Messages)...), res.Guard, nil
}
