package shell

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// HandleResult is what synchronous command handling returns: the command as
// appended (stamped), the decider's state after its events, and the events.
type HandleResult[S any] struct {
	Command core.Message
	State   S
	Events  []core.Message
	// Position is the command's position in the log.
	Position int64
}

// HandleOptions tune Handle.
type HandleOptions struct {
	// Now stamps the command (default: the store's clock).
	Now func() time.Time
	// Metadata is merged into the command's metadata.
	Metadata map[string]any
}

// Handle decides a command synchronously, for web handlers: it validates
// the command, reads the decider's partition, decides, appends the command
// and its events under the read's guard, and moves the decider's offset
// past the command so that workers do not decide it again, all in one
// transaction. Reactions to the events still run: the decider's workers
// claim the events as usual.
//
// Errors: an invalid command (codec.ErrInvalid, with every failing field);
// the decider's own rejection, as returned by its handler; an append that
// conflicts with a concurrent one (ErrConcurrentAppend: decide again); a
// decider whose group is not registered with the store
// (ErrGroupNotRegistered). In every case nothing is appended.
func Handle[S any](ctx context.Context, store RouterStore, d core.Decider[S], cmd any, opts ...HandleOptions) (HandleResult[S], error) {
	var o HandleOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Now == nil {
		o.Now = store.Now
	}
	reg := store.Registry()
	msg := core.NewMessage(cmd).WithMetadata(o.Metadata)
	res := HandleResult[S]{Command: msg}
	if err := d.Err(); err != nil {
		return res, err
	}
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
		for _, p := range spec.PartitionBy {
			if k.Name == p {
				if _, seen := partition[p]; seen {
					return res, fmt.Errorf("sourced: command %T holds several values of partition key %q: a command decides in one partition", msg.Payload, p)
				}
				partition[p] = k.Value
			}
		}
	}
	if len(partition) != len(spec.PartitionBy) {
		return res, fmt.Errorf("sourced: command %T does not carry every partition key %v of %s", msg.Payload, spec.PartitionBy, spec.Group)
	}
	if _, err := store.Group(ctx, spec.Group); err != nil {
		return res, err
	}
	history, err := typeNames(reg, spec.Evolved)
	if err != nil {
		return res, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return res, err
	}
	msg = msg.Stamp(id, o.Now()).WithMetadata(map[string]any{core.DecidedByKey: spec.Group})
	res.Command = msg
	err = store.Update(ctx, func(tx Tx) error {
		gtx, ok := tx.(GroupTx)
		if !ok {
			return fmt.Errorf("sourced: the store's transactions do not move offsets (%T is not a GroupTx)", tx)
		}
		read, err := tx.ReadPartition(partition, history, ReadOptions{})
		if err != nil {
			return err
		}
		s := d.Evolve(d.Initial(), messagesOf(read.Messages)...)
		events, err := d.Decide(s, msg)
		if err != nil {
			res.State = s
			return err
		}
		appended, err := tx.Append(append([]core.Message{msg}, events...), AppendOptions{Guard: &read.Guard})
		if err != nil {
			return err
		}
		res.Command, res.Events = appended.Messages[0], appended.Messages[1:]
		res.Position = appended.Positions[0]
		res.State = d.Evolve(s, res.Events...)
		_, err = gtx.AdvanceOffset(spec.Group, partition, res.Position)
		return err
	})
	if err != nil {
		res.Events = nil
		return res, err
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
	types, err := typeNames(store.Registry(), e.EvolvedTypes())
	if err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	res, err := store.ReadPartition(ctx, partition, types, o)
	if err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	return e.Evolve(e.Initial(), messagesOf(res.Messages)...), res.Guard, nil
}

func typeNames(reg *codec.Registry, ts []reflect.Type) ([]string, error) {
	out := make([]string, 0, len(ts))
	var errs []error
	for _, t := range ts {
		ct, err := reg.ByGoType(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ct.Name)
	}
	return out, errors.Join(errs...)
}

func messagesOf(ms []core.PositionedMessage) []core.Message {
	out := make([]core.Message, len(ms))
	for i, m := range ms {
		out[i] = m.Message
	}
	return out
}
