package core

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Pair is the state of two combined definitions.
type Pair[A, B any] struct {
	First  A
	Second B
}

// Combine makes one decider of two: its state is the pair of their states,
// each command goes to the decider that decides it, and each event is
// evolved (and reacted to) by every decider that handles it. A composed
// decider is a decider: everything that runs one runs it, the store
// included.
//
// The combined group is a's (set Group on the result to choose another);
// PartitionBy is the union of both partition keys, and the combination is
// checked like any decider. A command type decided by both is a definition
// error.
func Combine[A, B any](a Decider[A], b Decider[B]) Decider[Pair[A, B]] {
	ha := lift(effective(a.compiled()), func(p Pair[A, B]) A { return p.First }, func(p Pair[A, B], s A) Pair[A, B] { p.First = s; return p })
	hb := lift(effective(b.compiled()), func(p Pair[A, B]) B { return p.Second }, func(p Pair[A, B], s B) Pair[A, B] { p.Second = s; return p })
	keyTypes := maps.Clone(a.KeyTypes)
	if keyTypes == nil && b.KeyTypes != nil {
		keyTypes = map[string]reflect.Type{}
	}
	maps.Copy(keyTypes, b.KeyTypes)
	return Decider[Pair[A, B]]{
		Group:       a.Group,
		Label:       a.Label,
		PartitionBy: union(a.PartitionBy, b.PartitionBy),
		KeyTypes:    keyTypes,
		Exclusive:   a.Exclusive || b.Exclusive,
		Init:        func() Pair[A, B] { return Pair[A, B]{a.Initial(), b.Initial()} },
		h:           merge(ha, hb),
	}
}

// CombineProjections makes one projection of two, whose state is the pair
// of their states; each event is evolved by every projection that handles
// it.
func CombineProjections[A, B any](a Projection[A], b Projection[B]) Projection[Pair[A, B]] {
	ha := lift(effective(a.compiled()), func(p Pair[A, B]) A { return p.First }, func(p Pair[A, B], s A) Pair[A, B] { p.First = s; return p })
	hb := lift(effective(b.compiled()), func(p Pair[A, B]) B { return p.Second }, func(p Pair[A, B], s B) Pair[A, B] { p.Second = s; return p })
	return Projection[Pair[A, B]]{
		Init: func() Pair[A, B] { return Pair[A, B]{a.Initial(), b.Initial()} },
		h:    merge(ha, hb),
	}
}

// MapState runs decider d on a part of a larger state T: get reads the part,
// set writes it back, and init builds the initial T (nil: the zero T with
// d's initial part set). The result decides and evolves exactly what d does.
func MapState[S, T any](d Decider[S], init func() T, get func(T) S, set func(T, S) T) Decider[T] {
	if init == nil {
		init = func() T {
			var t T
			return set(t, d.Initial())
		}
	}
	return Decider[T]{
		Group: d.Group, Label: d.Label, PartitionBy: slices.Clone(d.PartitionBy), KeyTypes: maps.Clone(d.KeyTypes), Exclusive: d.Exclusive,
		Init: init,
		h:    lift(effective(d.compiled()), get, set),
	}
}

// MapCommand makes d accept commands of type C2 in place of C1: each C2 is
// turned into a C1 by f and decided by d's C1 handler (the events are
// correlated with the C2 command). d must decide C1.
func MapCommand[S, C1, C2 any](d Decider[S], f func(C2) C1) Decider[S] {
	h := d.compiled().clone()
	t1, t2 := reflect.TypeFor[C1](), reflect.TypeFor[C2]()
	fn, ok := h.decide[t1]
	if !ok {
		h.errorf("MapCommand: the decider has no decide handler for %v", t1)
		d.h = h
		return d
	}
	delete(h.decide, t1)
	h.decideOrder = slices.DeleteFunc(h.decideOrder, func(t reflect.Type) bool { return t == t1 })
	if em, ok := h.decideEmits[t1]; ok {
		delete(h.decideEmits, t1)
		h.decideEmits[t2] = em
	}
	h.addDecide(t2, func(s S, m Message) ([]any, error) {
		m1 := m
		m1.Payload = f(payloadAs[C2](m))
		return fn(s, m1)
	})
	if q, ok := h.query[t1]; ok {
		delete(h.query, t1)
		h.query[t2] = func(m Message) Query[S] {
			m1 := m
			m1.Payload = f(payloadAs[C2](m))
			return q(m1)
		}
	}
	d.h = h
	return d
}

// MapEvent makes d speak events of type E2 in place of E1: the E1 events its
// commands produce become E2 (by to), and E2 events are evolved and reacted
// to as the E1 they stand for (by from).
func MapEvent[S, E1, E2 any](d Decider[S], to func(E1) E2, from func(E2) E1) Decider[S] {
	h := d.compiled().clone()
	t1, t2 := reflect.TypeFor[E1](), reflect.TypeFor[E2]()
	back := func(m Message) Message {
		m.Payload = from(payloadAs[E2](m))
		return m
	}
	for t, fn := range h.decide {
		h.decide[t] = func(s S, m Message) ([]any, error) {
			out, err := fn(s, m)
			for i, o := range out {
				switch v := o.(type) {
				case E1:
					out[i] = to(v)
				case *E1:
					out[i] = to(*v)
				case Message:
					if PayloadType(v.Payload) == t1 {
						v.Payload = to(payloadAs[E1](v))
						out[i] = v
					}
				}
			}
			return out, err
		}
	}
	swap := func(ts []reflect.Type) []reflect.Type {
		out := slices.Clone(ts)
		for i, t := range out {
			if t == t1 {
				out[i] = t2
			}
		}
		return out
	}
	for t, em := range h.decideEmits {
		h.decideEmits[t] = swap(em)
	}
	for t, em := range h.reactEmits {
		h.reactEmits[t] = swap(em)
	}
	h.reactAnyEmits = swap(h.reactAnyEmits)
	if em, ok := h.reactEmits[t1]; ok {
		delete(h.reactEmits, t1)
		h.reactEmits[t2] = em
	}
	if fn, ok := h.evolve[t1]; ok {
		delete(h.evolve, t1)
		h.evolveOrder = slices.DeleteFunc(h.evolveOrder, func(t reflect.Type) bool { return t == t1 })
		h.addEvolve(t2, func(s S, m Message) S { return fn(s, back(m)) })
	}
	if fn, ok := h.react[t1]; ok {
		delete(h.react, t1)
		h.reactOrder = slices.DeleteFunc(h.reactOrder, func(t reflect.Type) bool { return t == t1 })
		h.addReact(t2, func(s S, m Message) []any { return fn(s, back(m)) })
	}
	d.h = h
	return d
}

// effective folds before-evolve hooks into each evolve handler and expands
// a wildcard reaction into explicit reactions for the evolved types that
// have none, so that a handler set can be lifted or merged without changing
// what it does.
func effective[S any](h *handlers[S]) *handlers[S] {
	e := h.clone()
	e.before = nil
	for _, t := range h.evolveOrder {
		e.evolve[t] = func(s S, m Message) S {
			s, _ = h.evolveOne(s, m)
			return s
		}
	}
	if h.reactAny != nil {
		for _, t := range h.evolveOrder {
			if _, ok := e.react[t]; !ok {
				e.react[t] = h.reactAny
				e.reactOrder = append(e.reactOrder, t)
				if h.reactAnyDeclared {
					e.reactEmits[t] = h.reactAnyEmits
				}
			}
		}
		e.reactAny, e.reactAnyEmits, e.reactAnyDeclared = nil, nil, false
	}
	return e
}

// lift moves a handler set (without before hooks) onto a larger state.
func lift[S, T any](h *handlers[S], get func(T) S, set func(T, S) T) *handlers[T] {
	l := emptyHandlers[T]()
	for _, t := range h.evolveOrder {
		fn := h.evolve[t]
		l.addEvolve(t, func(x T, m Message) T { return set(x, fn(get(x), m)) })
	}
	for _, t := range h.decideOrder {
		fn := h.decide[t]
		l.addDecide(t, func(x T, m Message) ([]any, error) { return fn(get(x), m) })
	}
	for _, t := range h.reactOrder {
		fn := h.react[t]
		l.addReact(t, func(x T, m Message) []any { return fn(get(x), m) })
	}
	for t, q := range h.query {
		l.query[t] = func(m Message) Query[T] {
			parts := q(m)
			out := make(Query[T], len(parts))
			for i, p := range parts {
				out[i] = liftPart(p, get, set)
			}
			return out
		}
	}
	for _, fn := range h.sync {
		l.sync = append(l.sync, func(ctx context.Context, tx SyncTx, b Batch[T]) error { return fn(ctx, tx, narrow(b, get)) })
	}
	for _, fn := range h.after {
		l.after = append(l.after, func(ctx context.Context, b Batch[T]) error { return fn(ctx, narrow(b, get)) })
	}
	l.errs = slices.Clone(h.errs)
	l.decideEmits, l.reactEmits = maps.Clone(h.decideEmits), maps.Clone(h.reactEmits)
	return l
}

func narrow[S, T any](b Batch[T], get func(T) S) Batch[S] {
	return Batch[S]{State: get(b.State), Partition: b.Partition, Messages: b.Messages, Events: b.Events, Replaying: b.Replaying}
}

// merge joins two handler sets over one state: evolve and react handlers of
// a type both handle run one after the other; a command both decide is an
// error.
func merge[S any](a, b *handlers[S]) *handlers[S] {
	m := a.clone()
	for _, t := range b.evolveOrder {
		fb := b.evolve[t]
		if fa, ok := m.evolve[t]; ok {
			m.evolve[t] = func(s S, msg Message) S { return fb(fa(s, msg), msg) }
			continue
		}
		m.addEvolve(t, fb)
	}
	for _, t := range b.decideOrder {
		if _, ok := m.decide[t]; ok {
			m.errs = append(m.errs, fmt.Errorf("combine: both deciders decide %v", t))
			continue
		}
		m.addDecide(t, b.decide[t])
		if q, ok := b.query[t]; ok {
			m.query[t] = q
		}
		if em, ok := b.decideEmits[t]; ok {
			m.decideEmits[t] = em
		}
	}
	for _, t := range b.reactOrder {
		fb := b.react[t]
		if fa, ok := m.react[t]; ok {
			m.react[t] = func(s S, msg Message) []any { return append(fa(s, msg), fb(s, msg)...) }
			ea, aok := m.reactEmits[t]
			eb, bok := b.reactEmits[t]
			if aok && bok {
				m.reactEmits[t] = union2(ea, eb)
			} else {
				delete(m.reactEmits, t) // one side is undeclared: so is the merge
			}
			continue
		}
		m.addReact(t, fb)
		if em, ok := b.reactEmits[t]; ok {
			m.reactEmits[t] = em
		}
	}
	m.sync = append(m.sync, b.sync...)
	m.after = append(m.after, b.after...)
	m.errs = append(m.errs, b.errs...)
	return m
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func union2(a, b []reflect.Type) []reflect.Type {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
