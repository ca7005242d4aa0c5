package core

import (
	"errors"
	"reflect"
	"slices"
)

// Projection builds a state from events and knows nothing else: no store,
// partition, command or side effect. It can be unit-tested on its own and
// shared between reactors, which take it over with Adopt.
//
//	var Cart = core.Projection[cart]{Init: newCart}.With(
//		core.Evolve(func(c cart, e ItemAdded) cart { c.Items = append(c.Items, e.ItemID); return c }),
//	)
//	c := Cart.Fold(history...)
type Projection[S any] struct {
	// Init builds the state before the first event; nil means the zero S.
	Init func() S

	h *handlers[S]
}

// With returns a copy of p with more handlers. Only Evolve, BeforeEvolve
// and Adopt make sense on a projection; others are definition errors
// reported by Err.
func (p Projection[S]) With(hs ...Handler[S]) Projection[S] {
	h := p.compiled().with(hs)
	if len(h.decide) > 0 || len(h.react) > 0 || h.reactAny != nil || len(h.sync) > 0 || len(h.after) > 0 {
		h.errorf("a projection only evolves: decide, react and sync handlers belong to deciders and projectors")
	}
	p.h = h
	return p
}

func (p Projection[S]) compiled() *handlers[S] {
	if p.h == nil {
		return emptyHandlers[S]()
	}
	return p.h
}

// Initial returns a fresh initial state.
func (p Projection[S]) Initial() S {
	return initial(p.Init, p.compiled())
}

// Evolve applies events to s in order; events the projection has no
// handler for are skipped.
func (p Projection[S]) Evolve(s S, events ...Message) S {
	return p.compiled().fold(s, events)
}

// Fold evolves a fresh initial state with events. Each argument may be a
// Message or a bare payload.
func (p Projection[S]) Fold(events ...any) S {
	return p.Evolve(p.Initial(), Messages(events...)...)
}

// Handles reports whether the projection evolves payloads of type t.
func (p Projection[S]) Handles(t reflect.Type) bool {
	_, ok := p.compiled().evolve[t]
	return ok
}

// EvolvedTypes returns the event types the projection evolves, in the order
// their handlers were given.
func (p Projection[S]) EvolvedTypes() []reflect.Type {
	return slices.Clone(p.compiled().evolveOrder)
}

// Err returns the projection's definition errors, if any.
func (p Projection[S]) Err() error { return p.compiled().err() }

// Messages wraps each payload in a Message (Messages are kept as they are).
func Messages(payloads ...any) []Message {
	out := make([]Message, len(payloads))
	for i, p := range payloads {
		out[i] = NewMessage(p)
	}
	return out
}

func joinErrs(errs []error) error { return errors.Join(errs...) }
