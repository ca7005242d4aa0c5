package statechart

import (
	"context"
	"fmt"
	"reflect"

	"github.com/sourced-go/sourced/core"
)

// Reaction is a machine's reaction to events of one type that it does not
// decide: its own data events and state events, or other reactors'
// events. Its group claims them; each is applied to the instance first
// (a state event moves it, a data event evolves its context), then the
// reaction's follow-up messages (payloads, Messages, or core.Delayed) are
// appended without a guard, correlated with the event and with the
// partition keys filled in. Reactions never run while the group replays.
// Build them with React and ReactAny.
type Reaction[C any] struct {
	t  reflect.Type // nil: every reacted type without a reaction of its own
	fn func(in Instance[C], m core.Message) []any
}

// React reacts to events of type E (a state's event type reacts to the
// machine entering that state, the manual's reaction(State)). C and E are
// inferred from fn.
func React[C, E any](fn func(in Instance[C], event E) []any) Reaction[C] {
	return Reaction[C]{t: reflect.TypeFor[E](), fn: func(in Instance[C], m core.Message) []any {
		return fn(in, payloadAs[E](m.Payload))
	}}
}

// ReactAny reacts to the given event types with one function, for those
// without a React of their own (audit logs, outboxes).
func ReactAny[C any](fn func(in Instance[C], event core.Message) []any, types ...reflect.Type) []Reaction[C] {
	out := make([]Reaction[C], len(types))
	for i, t := range types {
		out[i] = Reaction[C]{t: t, fn: fn}
	}
	return out
}

// reactionTypes checks the machine's reactions and returns their types, in
// order.
func (m Machine[C]) reactionTypes() ([]reflect.Type, []error) {
	mc := m.core()
	var ts []reflect.Type
	var errs []error
	for _, r := range m.Reactions {
		switch {
		case r.t == nil || r.fn == nil:
			errs = append(errs, fmt.Errorf("a zero Reaction (build reactions with React or ReactAny)"))
		case r.t.Kind() != reflect.Struct:
			errs = append(errs, fmt.Errorf("statechart.React[%v]: message types are structs", r.t))
		case containsType(mc.ch.commands, r.t), containsType(mc.ch.events, r.t):
			errs = append(errs, fmt.Errorf("statechart.React[%v]: the machine decides %v (Command or On): react to the events it produces instead", r.t, r.t))
		case containsType(ts, r.t):
			errs = append(errs, fmt.Errorf("two reactions to %v", r.t))
		default:
			ts = append(ts, r.t)
		}
	}
	return ts, errs
}

func containsType(ts []reflect.Type, t reflect.Type) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// reaction returns the reaction to t, if any.
func (m Machine[C]) reaction(t reflect.Type) func(Instance[C], core.Message) []any {
	for _, r := range m.Reactions {
		if r.t == t {
			return r.fn
		}
	}
	return nil
}

// react applies a claimed event the machine reacts to and returns its
// follow-up messages.
func (m Machine[C]) react(in Instance[C], msg core.Message) (Instance[C], []core.Message, error) {
	if err := m.apply(&in, msg); err != nil {
		return in, nil, err
	}
	fn := m.reaction(core.PayloadType(msg.Payload))
	if fn == nil {
		return in, nil, nil
	}
	mc := m.core()
	r := run{ch: mc.ch, fill: mc.fill, keys: in.Partition, trigger: msg}
	r.dispatch(fn(in, msg), outDispatch)
	out := make([]core.Message, len(r.out.msgs))
	for i, o := range r.out.msgs {
		out[i] = o.Correlate(msg)
	}
	return in, out, nil
}

// bindSync binds the machine's Sync and AfterSync work to one decided
// message.
func (m Machine[C]) bindSync(b core.Batch[Instance[C]]) ([]func(context.Context, core.SyncTx) error, []func(context.Context) error) {
	var syncs []func(context.Context, core.SyncTx) error
	for _, fn := range m.Sync {
		syncs = append(syncs, func(ctx context.Context, tx core.SyncTx) error { return fn(ctx, tx, b) })
	}
	var afters []func(context.Context) error
	for _, fn := range m.AfterSync {
		afters = append(afters, func(ctx context.Context) error { return fn(ctx, b) })
	}
	return syncs, afters
}
