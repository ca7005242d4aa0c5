package core

import (
	"context"
	"reflect"
	"slices"

	"github.com/sourced-go/sourced/codec"
)

// Projector builds a read model from events, per partition, and writes it
// in sync work (inside the batch's transaction) or after-sync work.
//
// Without Load the projector is event-sourced: before each batch it rebuilds
// the state from the partition's full history. With Load it is
// state-stored: Load returns the state persisted by earlier batches (found
// false: none yet, start from Init) and only the batch's messages are
// evolved on top of it.
//
// A projector's consumer group claims the events it evolves and those it
// reacts to. Reactions run for the batch's messages unless the group is
// replaying; sync work runs once per batch, replays included, so a reset
// rebuilds the read model.
type Projector[S any] struct {
	// Group is the consumer group id (normalised by NormalizeGroup).
	Group string
	// Label is a human name shown by monitoring (defaults to Group).
	Label string
	// PartitionBy are the payload attributes that define a read model.
	PartitionBy []string
	// KeyTypes gives the Go type of partition keys that are not strings.
	KeyTypes map[string]reflect.Type
	// Exclusive marks the projector as the only reactor handling its types.
	Exclusive bool
	// Init builds the state before the first event (nil: the zero S).
	Init func() S
	// Hooks are the group's lifecycle hooks (OnStart, OnStop, OnReset)
	// and error strategy, called and applied by the shell's router.
	Hooks Hooks
	// Load, when set, makes the projector state-stored (see above).
	Load func(ctx context.Context, partition map[string]string) (state S, found bool, err error)

	h *handlers[S]
}

// With returns a copy of p with more handlers. Decide handlers are
// definition errors: projectors do not handle commands.
func (p Projector[S]) With(hs ...Handler[S]) Projector[S] {
	h := p.compiled().with(hs)
	if len(h.decide) > 0 {
		h.errorf("a projector does not decide commands: use a Decider")
	}
	p.h = h
	return p
}

func (p Projector[S]) compiled() *handlers[S] {
	if p.h == nil {
		return emptyHandlers[S]()
	}
	return p.h
}

// Initial returns a fresh initial state.
func (p Projector[S]) Initial() S { return initial(p.Init, p.compiled()) }

// Evolve applies events to s in order.
func (p Projector[S]) Evolve(s S, events ...Message) S { return p.compiled().fold(s, events) }

// Fold evolves a fresh initial state with events (Messages or payloads).
func (p Projector[S]) Fold(events ...any) S { return p.Evolve(p.Initial(), Messages(events...)...) }

// React returns the follow-ups for event in state s.
func (p Projector[S]) React(s S, event Message) ([]Message, error) {
	fn := p.compiled().reactFn(PayloadType(event.Payload))
	if fn == nil {
		return nil, nil
	}
	return dispatch(fn(s, event), event, p.Group)
}

// EvolvedTypes are the event types the projector evolves.
func (p Projector[S]) EvolvedTypes() []reflect.Type { return slices.Clone(p.compiled().evolveOrder) }

// Err returns the errors found while building the projector, if any.
func (p Projector[S]) Err() error { return p.compiled().err() }

func (p Projector[S]) groupSpec() groupSpec {
	return groupSpec{group: p.Group, label: p.Label, partition: p.PartitionBy, keyTypes: p.KeyTypes, exclusive: p.Exclusive, hooks: p.Hooks}
}

// Spec describes the projector's consumer group.
func (p Projector[S]) Spec() Spec {
	h := p.compiled()
	handled := slices.Clone(h.evolveOrder)
	for _, t := range h.reactionTypes() {
		if !slices.Contains(handled, t) {
			handled = append(handled, t)
		}
	}
	spec := p.groupSpec().spec(handled, slices.Clone(h.evolveOrder), p.Load == nil)
	spec.LoadsState = p.Load != nil
	return spec
}

// Check validates the projector against reg.
func (p Projector[S]) Check(reg *codec.Registry) error {
	h := p.compiled()
	all := slices.Clone(h.reactOrder)
	var some []reflect.Type
	for _, t := range h.evolveOrder {
		if !slices.Contains(all, t) {
			some = append(some, t)
		}
	}
	_, err := p.groupSpec().check(reg, h.err(), nil, all, some)
	return err
}

// LoadState implements StateLoader for state-stored projectors (it returns
// found false for event-sourced ones).
func (p Projector[S]) LoadState(ctx context.Context, partition Partition) (any, bool, error) {
	if p.Load == nil {
		return nil, false, nil
	}
	s, found, err := p.Load(ctx, partition)
	return s, found, err
}

// Step projects a claimed batch: the state is the loaded one plus the batch
// (state-stored) or the fold of the full history (event-sourced); each
// message may react; the sync work is attached to the last message.
func (p Projector[S]) Step(in StepInput) ([]Outcome, error) {
	var s S
	switch {
	case p.Load != nil:
		s = p.Initial()
		if in.Loaded {
			if ls, ok := in.State.(S); ok {
				s = ls
			}
		}
		s = p.Evolve(s, MessagesOf(in.Batch)...)
	default:
		s = p.Evolve(p.Initial(), MessagesOf(in.History)...)
	}
	return p.stepOn(in, s)
}

// StateType is the Go type of the projector's state (Folder).
func (p Projector[S]) StateType() reflect.Type { return reflect.TypeFor[S]() }

// InitialState returns a fresh initial state (Folder).
func (p Projector[S]) InitialState() any { return p.Initial() }

// FoldState evolves s, an S, with history (Folder).
func (p Projector[S]) FoldState(s any, history []PositionedMessage) any {
	return p.Evolve(s.(S), MessagesOf(history)...)
}

// StepFolded is Step on s, an S folded from the partition's whole history
// (Folder). A state-stored projector (Load) folds nothing from the
// history: it steps as Step does, on the state it loads.
func (p Projector[S]) StepFolded(in StepInput, s any) ([]Outcome, error) {
	if p.Load != nil {
		return p.Step(in)
	}
	return p.stepOn(in, s.(S))
}

// stepOn is Step on s, the state the batch is projected onto.
func (p Projector[S]) stepOn(in StepInput, s S) ([]Outcome, error) {
	h := p.compiled()
	outs := make([]Outcome, 0, len(in.Batch))
	for i, m := range in.Batch {
		out := Outcome{Source: m}
		if !in.Replayed(m) {
			r, err := p.React(s, m.Message)
			if err != nil {
				return outs, &BatchError{Message: m, Index: i, Err: err}
			}
			out.Reactions = r
		}
		outs = append(outs, out)
	}
	if n := len(outs); n > 0 {
		b := Batch[S]{State: s, Partition: in.Partition, Messages: in.Batch, Replaying: in.Replaying}
		outs[n-1].Sync, outs[n-1].AfterSync = bindSync(h, b)
	}
	return outs, nil
}
