package core

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
)

// Query is what one decision reads: the parts of its state, each a
// projection with the filters that select its events. A decider declares a
// query per command type with Reads, as a pure function of the command, so
// each command reads exactly the facts it needs, across as many
// boundaries as it names:
//
//	core.Reads(func(c LendBook) core.Query[lending] {
//		return core.Query[lending]{
//			core.Read(loansOfMember, setLoans, core.Where("member_id", c.MemberID)),
//			core.Read(bookOnLoan, setOnLoan, core.Where("book_id", c.BookID)),
//		}
//	})
//
// The shell reads the union of every part's conditions in one read, folds
// each part's projection over the events its own filters match (an event
// two parts match is folded by both), sets each result into the state in
// part order, and appends the decision's events with a guard on exactly
// that union after the last position read.
type Query[S any] []Part[S]

// Part is one part of a decision's state: a projection, the filters that
// select the events it folds, and where its result goes in the state.
// Build parts with Read and ReadEach.
type Part[S any] struct {
	types   []reflect.Type
	filters []Filter
	start   func() partRun[S]
	err     error
}

// partRun is one part being folded: its projection's state so far.
type partRun[S any] interface {
	evolve(m Message)
	set(s S) S
	// fold identifies what the part folds (see QueryFolding.PartKey);
	// value and load give and replace its state; stateType is its type.
	fold() any
	value() any
	load(v any) bool
	stateType() reflect.Type
}

type projectionRun[S, P any] struct {
	h     *handlers[P]
	init  uintptr // the code of the projection's Init (0: none)
	state P
	put   func(S, P) S
}

// projectionFold identifies a projection's fold: its handlers (built once
// by With) and the code of its Init.
type projectionFold struct {
	h    any
	init uintptr
}

func (r *projectionRun[S, P]) evolve(m Message)        { r.state, _ = r.h.evolveOne(r.state, m) }
func (r *projectionRun[S, P]) set(s S) S               { return r.put(s, r.state) }
func (r *projectionRun[S, P]) fold() any               { return projectionFold{r.h, r.init} }
func (r *projectionRun[S, P]) value() any              { return r.state }
func (r *projectionRun[S, P]) stateType() reflect.Type { return reflect.TypeFor[P]() }
func (r *projectionRun[S, P]) load(v any) bool {
	s, ok := v.(P)
	if ok {
		r.state = s
	}
	return ok
}

// Read is a part of a decision's state: projection p folded over the events
// that match any of filters (OR), from p's initial state, and set into the
// state by set. Each filter applies to every event type p evolves unless
// restricted with Only, and every type p evolves must be selected by some
// filter (a filter selects the types that index all its attributes): a
// type none selects would be missing from the read and from the guard,
// so Plan (and Decider.Check) refuses the part, naming the type.
func Read[S, P any](p Projection[P], set func(S, P) S, filters ...Filter) Part[S] {
	part := Part[S]{types: p.EvolvedTypes(), filters: filters, err: p.Err()}
	h := p.compiled()
	var init uintptr
	if p.Init != nil {
		init = reflect.ValueOf(p.Init).Pointer()
	}
	part.start = func() partRun[S] { return &projectionRun[S, P]{h: h, init: init, state: p.Initial(), put: set} }
	if set == nil {
		part.err = errors.Join(part.err, errors.New("core.Read: a nil set function"))
	}
	if len(filters) == 0 {
		part.err = errors.Join(part.err, errors.New("core.Read: no filter: give Where(...) for a boundary, or AllEvents() to read every event of the projection's types"))
	}
	return part
}

// ReadEach is one part per element of items (a list in the command): for
// each item, p folded over the events filter(item) selects, set into the
// state by set with its item. A cart's order reads the price of each of
// its products this way.
func ReadEach[S, P, T any](items []T, p Projection[P], set func(S, T, P) S, filter func(T) Filter) []Part[S] {
	parts := make([]Part[S], 0, len(items))
	for _, it := range items {
		parts = append(parts, Read(p, func(s S, v P) S { return set(s, it, v) }, filter(it)))
	}
	return parts
}

// Filter selects events by their indexed attributes: all the attributes
// given must have the given values (AND). Build filters with Where (and
// And), AllEvents, and restrict them to one event type with Only.
type Filter struct {
	only  reflect.Type
	attrs []filterAttr
}

type filterAttr struct {
	name  string
	value any
}

// Where selects the events whose attribute name has value (a string, or
// any key value codec.Canonical accepts: numbers, times, UUIDs...).
func Where(name string, value any) Filter {
	return Filter{attrs: []filterAttr{{name, value}}}
}

// And narrows f: the events must also have value under name.
func (f Filter) And(name string, value any) Filter {
	f.attrs = append(slices.Clone(f.attrs), filterAttr{name, value})
	return f
}

// AllEvents selects every event of the part's types, whatever its
// attributes: a type-only boundary, such as "the last invoice created".
func AllEvents() Filter { return Filter{} }

// Only restricts f to events of type E, so that one value can be read under
// a different attribute name per event type:
//
//	core.Only[AccountRegistered](core.Where("username", u)),
//	core.Only[UsernameChanged](core.Where("new_username", u)),
func Only[E any](f Filter) Filter {
	f.only = reflect.TypeFor[E]()
	return f
}

// Plan is a query resolved against a registry: the conditions of each
// part and their union, which is what the store reads and guards.
type Plan struct {
	// Parts holds the conditions of each part of the query, in order.
	Parts [][]Condition
	// Union is every part's conditions, duplicates removed, in order.
	Union []Condition
}

// Plan resolves the query's filters into store conditions with reg: each
// filter becomes one condition per event type it applies to (a filter not
// restricted by Only skips the types that declare none of its attributes, as
// a partition does, but must apply to at least one). Errors match
// ErrDefinition and name what to change.
//
// Two queries are refused because they would guard less than they seem
// to: a query with no parts (it reads nothing, so its guard passes
// whatever is appended: a decision that truly needs no facts is decided
// without core.Reads, on its partition), and a part whose projection
// evolves a type none of its filters selects (the type would be left out
// of the read and of the guard without a word: a filter on "username"
// does not select UsernameChanged, whose attribute is "new_username";
// give that type a filter of its own with Only). The error names the type.
func (q Query[S]) Plan(reg *codec.Registry) (Plan, error) {
	if len(q) == 0 {
		return Plan{}, &DefinitionError{Problem: "query: " + errNoParts}
	}
	return q.plan(reg)
}

// errNoParts is why a query with no parts is refused.
const errNoParts = "no parts: a query that reads nothing guards nothing (any concurrent append passes its guard); give it a part (core.Read), refuse a command with nothing to read (an empty list of items) before deciding it, or decide the command without core.Reads, on its partition"

// plan is Plan without the check that the query has parts (a zero
// command's query, checked by Decider.Check, may have none).
func (q Query[S]) plan(reg *codec.Registry) (Plan, error) {
	var plan Plan
	var errs []error
	for i, part := range q {
		if part.start == nil {
			errs = append(errs, fmt.Errorf("part %d is a zero Part: build parts with core.Read or core.ReadEach", i))
			plan.Parts = append(plan.Parts, nil)
			continue
		}
		if part.err != nil {
			errs = append(errs, fmt.Errorf("part %d: %w", i, part.err))
		}
		conds, err := part.conditions(reg)
		if err != nil {
			errs = append(errs, fmt.Errorf("part %d: %w", i, err))
		}
		plan.Parts = append(plan.Parts, conds)
		for _, c := range conds {
			if !slices.ContainsFunc(plan.Union, c.equal) {
				plan.Union = append(plan.Union, c)
			}
		}
	}
	if len(errs) > 0 {
		return Plan{}, &DefinitionError{Problem: "query: " + errors.Join(errs...).Error()}
	}
	return plan, nil
}

func (p Part[S]) conditions(reg *codec.Registry) ([]Condition, error) {
	var out []Condition
	for _, f := range p.filters {
		types := p.types
		if f.only != nil {
			if !slices.Contains(p.types, f.only) {
				return nil, fmt.Errorf("core.Only[%v]: the projection does not evolve %v", f.only, f.only)
			}
			types = []reflect.Type{f.only}
		}
		attrs := make(map[string]string, len(f.attrs))
		for _, a := range f.attrs {
			v, err := codec.Canonical(a.value)
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", a.name, err)
			}
			attrs[a.name] = v
		}
		n := 0
		for _, t := range types {
			ct, err := reg.ByGoType(t)
			if err != nil {
				return nil, err
			}
			declares := true
			for name := range attrs {
				if fl, ok := ct.Field(name); !ok || !fl.Indexed {
					declares = false
					if f.only != nil {
						return nil, fmt.Errorf("%s has no indexed attribute %q", ct.Name, name)
					}
				}
			}
			if !declares {
				continue
			}
			n++
			out = append(out, Condition{Type: ct.Name, Attrs: attrs})
		}
		if n == 0 {
			names := make([]string, len(f.attrs))
			for i, a := range f.attrs {
				names[i] = a.name
			}
			return nil, fmt.Errorf("no event type the projection evolves (%v) has the indexed attributes %v", types, names)
		}
	}
	// Every type the projection evolves must be read: a type no filter
	// selects would be missing from the state and from the guard.
	var missed []string
	var first reflect.Type
	for _, t := range p.types {
		ct, err := reg.ByGoType(t)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(out, func(c Condition) bool { return c.Type == ct.Name }) {
			missed = append(missed, fmt.Sprintf("%v (%q)", t, ct.Name))
			if first == nil {
				first = t
			}
		}
	}
	if len(missed) > 0 {
		return nil, fmt.Errorf("the projection evolves %s, which no filter of the part selects (no filter names an attribute it indexes): the part would neither read nor guard it; add a filter for it, e.g. core.Only[%v](core.Where(\"its_attribute\", value)), or fold it in another projection", strings.Join(missed, ", "), first)
	}
	return out, nil
}

func (c Condition) equal(o Condition) bool {
	if c.Type != o.Type || len(c.Attrs) != len(o.Attrs) {
		return false
	}
	for k, v := range c.Attrs {
		if w, ok := o.Attrs[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Fold composes a decision's state: starting from s, each part folds its
// projection over the events its own conditions (plan.Parts, from Plan)
// match, and sets the result, in part order. events are what the union
// read returned, in position order (other events are ignored); index
// gives an event's type string and key pairs (IndexWith adapts a
// registry).
func (q Query[S]) Fold(s S, plan Plan, events []Message, index Indexer) S {
	f := q.folding(plan, index)
	for _, e := range events {
		f.add(e)
	}
	return f.state(s)
}

// folding is a query being folded, part by part, so that events decided
// after the read fold on without folding the read again.
type folding[S any] struct {
	plan  Plan
	runs  []partRun[S]
	index Indexer
}

func (q Query[S]) folding(plan Plan, index Indexer) *folding[S] {
	f := &folding[S]{plan: plan, runs: make([]partRun[S], len(q)), index: index}
	for i, part := range q {
		if part.start != nil && i < len(plan.Parts) {
			f.runs[i] = part.start()
		}
	}
	return f
}

// add folds e into every part whose conditions match it.
func (f *folding[S]) add(e Message) {
	typ, keys := f.index(e)
	for i, r := range f.runs {
		if r != nil && MatchAny(f.plan.Parts[i], typ, keys) {
			r.evolve(e)
		}
	}
}

// state sets every part's result into s, in part order.
func (f *folding[S]) state(s S) S {
	for _, r := range f.runs {
		if r != nil {
			s = r.set(s)
		}
	}
	return s
}

// liftPart moves a part onto a larger state.
func liftPart[S, T any](p Part[S], get func(T) S, set func(T, S) T) Part[T] {
	start := p.start
	return Part[T]{types: p.types, filters: p.filters, err: p.err, start: func() partRun[T] {
		return liftedRun[S, T]{r: start(), get: get, put: set}
	}}
}

type liftedRun[S, T any] struct {
	r   partRun[S]
	get func(T) S
	put func(T, S) T
}

func (l liftedRun[S, T]) evolve(m Message)        { l.r.evolve(m) }
func (l liftedRun[S, T]) set(t T) T               { return l.put(t, l.r.set(l.get(t))) }
func (l liftedRun[S, T]) fold() any               { return l.r.fold() }
func (l liftedRun[S, T]) value() any              { return l.r.value() }
func (l liftedRun[S, T]) load(v any) bool         { return l.r.load(v) }
func (l liftedRun[S, T]) stateType() reflect.Type { return l.r.stateType() }

// QueryFolding is a query decision's state being folded part by part, for
// a shell that keeps each part's state between decisions (a state cache,
// as shell.Handle does): it starts parts from states folded earlier, folds
// each message read into the parts whose conditions match it and that
// have not folded it yet, then decides. Deciding on a QueryFolding whose
// parts started from states folded up to their positions, with every
// message after those positions added, is deciding on the full fold
// (DecideQueryState), provided the states are values (the projection's
// Evolve returns new ones).
type QueryFolding[S any] struct {
	d     Decider[S]
	f     *folding[S]
	after []int64 // by part: the position its state was folded up to
}

// StartQuery begins the folding of cmd's query under plan (from Plan or
// QueryPlan), every part at its projection's initial state; false when
// cmd's type has no query.
func (d Decider[S]) StartQuery(plan Plan, index Indexer, cmd Message) (*QueryFolding[S], bool) {
	q, ok := d.Query(cmd)
	if !ok {
		return nil, false
	}
	f := q.folding(plan, index)
	return &QueryFolding[S]{d: d, f: f, after: make([]int64, len(f.runs))}, true
}

// Parts returns the number of parts of the query.
func (q *QueryFolding[S]) Parts() int { return len(q.f.runs) }

// PartKey identifies what part i folds: its projection (as built by
// With, with its Init), comparable with ==. Two parts of equal keys and
// equal conditions (Plan.Parts) fold the same state from the same log.
// nil for a zero part.
func (q *QueryFolding[S]) PartKey(i int) any {
	if r := q.f.runs[i]; r != nil {
		return r.fold()
	}
	return nil
}

// PartState returns part i's state so far (before Decide: what the
// messages added so far fold to) and its Go type.
func (q *QueryFolding[S]) PartState(i int) (any, reflect.Type) {
	r := q.f.runs[i]
	if r == nil {
		return nil, nil
	}
	return r.value(), r.stateType()
}

// StartPart starts part i from state, a PartState of a folding of the
// same PartKey and conditions that folded the log up to position: Add
// folds into it only the messages after position. false (and nothing
// changes) when the state is not of the part's type.
func (q *QueryFolding[S]) StartPart(i int, state any, position int64) bool {
	r := q.f.runs[i]
	if r == nil || !r.load(state) {
		return false
	}
	q.after[i] = position
	return true
}

// Add folds m, the next message of the read in position order, into
// every part whose conditions match it and that started before its
// position.
func (q *QueryFolding[S]) Add(m PositionedMessage) {
	typ, keys := q.f.index(m.Message)
	for i, r := range q.f.runs {
		if r != nil && m.Position > q.after[i] && MatchAny(q.f.plan.Parts[i], typ, keys) {
			r.evolve(m.Message)
		}
	}
}

// Decide decides cmd on the state the parts compose, then folds the
// decision's events into them, as DecideQueryState does after its read.
func (q *QueryFolding[S]) Decide(partition Partition, cmd PositionedMessage) (Outcome, S, error) {
	return q.d.finishQuery(q.f, partition, cmd)
}

// Reads declares the query of the decisions on commands of type C: the
// decider decides such a command on the state its query composes (see
// Query) instead of on its partition's history, and appends under a guard
// on that query. The decider's PartitionBy still orders its background
// work (which commands a worker claims together); its evolve handlers are
// not used for C. One Reads per command type, beside its Decide handler.
func Reads[S, C any](query func(C) Query[S]) Handler[S] {
	t := reflect.TypeFor[C]()
	return Handler[S]{apply: func(h *handlers[S]) {
		if err := checkMessageType(t); err != nil {
			h.errs = append(h.errs, fmt.Errorf("reads: %w", err))
			return
		}
		if _, dup := h.query[t]; dup {
			h.errorf("two Reads for %v", t)
			return
		}
		h.query[t] = func(m Message) Query[S] { return query(payloadAs[C](m)) }
	}}
}

// Envelope is a message's envelope without its payload: what a decide or
// evolve handler needs for rules about time and provenance (a due date,
// an age, who asked), without a clock.
type Envelope struct {
	ID            uuid.UUID
	Type          string
	Metadata      map[string]any
	CausationID   uuid.UUID
	CorrelationID uuid.UUID
	CreatedAt     time.Time
}

// Envelope returns m's envelope.
func (m Message) Envelope() Envelope {
	return Envelope{ID: m.ID, Type: m.Type, Metadata: m.Metadata, CausationID: m.CausationID, CorrelationID: m.CorrelationID, CreatedAt: m.CreatedAt}
}

// DecideEnvelope is Decide for a handler that also needs the command's
// envelope (its id, creation time, metadata): "a username released less
// than 3 days before this command is still reserved" compares an event's
// time (kept by EvolveEnvelope) with env.CreatedAt, with no clock.
func DecideEnvelope[S, C any](fn func(S, C, Envelope) ([]any, error)) Handler[S] {
	t := reflect.TypeFor[C]()
	return Handler[S]{kind: kindDecide, msgType: t, apply: func(h *handlers[S]) {
		h.addDecideAt(t, func(s S, m Message) ([]any, error) { return fn(s, payloadAs[C](m), m.Envelope()) }, fn)
	}}
}

// ReactEnvelope is React for a handler that also needs the event's
// envelope: "remind a day before the check-in" compares the check-in with
// env.CreatedAt (the event's time, the same on every replay) to choose
// between core.At and a reminder now, with no clock.
func ReactEnvelope[S, E any](fn func(S, E, Envelope) []any) Handler[S] {
	t := reflect.TypeFor[E]()
	return Handler[S]{kind: kindReact, msgType: t, apply: func(h *handlers[S]) {
		h.addReact(t, func(s S, m Message) []any { return fn(s, payloadAs[E](m), m.Envelope()) })
	}}
}

// EvolveEnvelope is Evolve for a handler that also needs each event's
// envelope, such as the time it happened.
func EvolveEnvelope[S, E any](fn func(S, E, Envelope) S) Handler[S] {
	t := reflect.TypeFor[E]()
	return Handler[S]{apply: func(h *handlers[S]) {
		h.addEvolve(t, func(s S, m Message) S { return fn(s, payloadAs[E](m), m.Envelope()) })
	}}
}

// Indexer gives a message's type string and the key pairs it is indexed
// under, as a store indexes it: what Query.Fold matches conditions with.
type Indexer func(Message) (typ string, keys []codec.KeyPair)

// IndexWith is the Indexer of a registry: the type string of m's payload
// (m.Type when set) and its key pairs (unregistered payloads have none).
func IndexWith(reg *codec.Registry) Indexer {
	return func(m Message) (string, []codec.KeyPair) {
		t, err := reg.TypeFor(m.Type, m.Payload)
		if err != nil {
			return m.Type, nil
		}
		return t.Name, t.Keys(m.Payload, nil)
	}
}
