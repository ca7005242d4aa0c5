package core

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"time"
)

// Handler is one piece of a definition: an evolve, decide or react handler
// for one message type, a wildcard reaction, a before-evolve hook, sync or
// after-sync work, or an adopted projection. Build handlers with Evolve,
// Decide, React, ReactAny, BeforeEvolve, Sync, AfterSync and Adopt, and pass
// them to a definition's With. Their type parameters are inferred from the
// functions, so callers never write them.
type Handler[S any] struct {
	apply func(*handlers[S])
	// kind and msgType say what the handler handles, for Emits.
	kind    handlerKind
	msgType reflect.Type
}

// Batch is what sync and after-sync work receive: the state after the
// decision or projection, the claimed messages it came from, the events a
// decider produced, the partition, and whether the batch is a replay.
type Batch[S any] struct {
	State     S
	Partition Partition
	Messages  []PositionedMessage
	Events    []Message
	Replaying bool
}

// SyncFunc is work that runs inside the store transaction that appends a
// batch's messages and acknowledges it: if it fails, nothing of the batch is
// kept. tx is the store's transaction (see SyncTx).
type SyncFunc[S any] func(ctx context.Context, tx SyncTx, b Batch[S]) error

// AfterSyncFunc is work that runs after the batch's transaction committed:
// e-mails, HTTP calls, pushing to external queues.
type AfterSyncFunc[S any] func(ctx context.Context, b Batch[S]) error

// Evolve handles events of type E: it returns the next state. One evolve
// handler per event type.
func Evolve[S, E any](fn func(S, E) S) Handler[S] {
	t := reflect.TypeFor[E]()
	return Handler[S]{apply: func(h *handlers[S]) {
		h.addEvolve(t, func(s S, m Message) S { return fn(s, payloadAs[E](m)) })
	}}
}

// Decide handles commands of type C: given the state, it returns the events
// to append (payloads or Messages) or an error that rejects the command. One
// decide handler per command type.
func Decide[S, C any](fn func(S, C) ([]any, error)) Handler[S] {
	t := reflect.TypeFor[C]()
	return Handler[S]{kind: kindDecide, msgType: t, apply: func(h *handlers[S]) {
		h.addDecideAt(t, func(s S, m Message) ([]any, error) { return fn(s, payloadAs[C](m)) }, fn)
	}}
}

// React handles events of type E by dispatching follow-up messages:
// payloads, Messages, or Delayed values from After and At. The follow-ups
// are correlated with the event. Reactions never run while a group replays.
func React[S, E any](fn func(S, E) []any) Handler[S] {
	t := reflect.TypeFor[E]()
	return Handler[S]{kind: kindReact, msgType: t, apply: func(h *handlers[S]) {
		h.addReact(t, func(s S, m Message) []any { return fn(s, payloadAs[E](m)) })
	}}
}

// ReactAny reacts to every evolved event type that has no React handler of
// its own: side-channel pipelines such as audit logs and outboxes.
func ReactAny[S any](fn func(S, Message) []any) Handler[S] {
	return Handler[S]{kind: kindReactAny, apply: func(h *handlers[S]) {
		if h.reactAny != nil {
			h.errorf("two ReactAny handlers")
			return
		}
		h.reactAny = fn
	}}
}

// BeforeEvolve runs fn before the handler of every event the definition
// evolves (events without a handler are skipped), for changes common to all
// of them, such as an updated-at time from m.CreatedAt.
func BeforeEvolve[S any](fn func(S, Message) S) Handler[S] {
	return Handler[S]{apply: func(h *handlers[S]) { h.before = append(h.before, fn) }}
}

// Sync adds work that runs inside the transaction of each batch (several
// run in the order given). A decider's batch is each message it handles:
// a command it decides, synchronously (shell.Handle) or by a worker, and
// an event it reacts to; a projector's is each claimed batch. Messages
// skipped (a replay's, a command decided already) run none.
func Sync[S any](fn SyncFunc[S]) Handler[S] {
	return Handler[S]{apply: func(h *handlers[S]) { h.sync = append(h.sync, fn) }}
}

// AfterSync adds work that runs after each batch's transaction committed
// (several run in the order given); batches as for Sync.
func AfterSync[S any](fn AfterSyncFunc[S]) Handler[S] {
	return Handler[S]{apply: func(h *handlers[S]) { h.after = append(h.after, fn) }}
}

// Adopt takes over a shared projection's initial state, before-evolve hooks
// and evolve handlers. Handlers given after it extend the adopting
// definition only, never the shared projection (definitions are values).
func Adopt[S any](p Projection[S]) Handler[S] {
	return Handler[S]{apply: func(h *handlers[S]) {
		src := p.compiled()
		if h.init == nil {
			h.init = p.Init
		}
		if h.init == nil {
			h.init = src.init
		}
		h.before = append(h.before, src.before...)
		for _, t := range src.evolveOrder {
			h.addEvolve(t, src.evolve[t])
		}
		h.errs = append(h.errs, src.errs...)
	}}
}

// Delayed is a follow-up message to be delivered later: either Delay after
// the triggering event's creation time, or at the fixed time At. A reaction
// returns it (see After and At); the dispatch stamps the message's
// CreatedAt, which makes the store schedule it.
type Delayed struct {
	Message Message
	Delay   time.Duration
	At      time.Time
}

// After dispatches payload (or a Message) d after the triggering event's
// creation time. Relative to the event, not to a clock, so reactions stay
// pure and replays produce the same time.
func After(d time.Duration, payload any) Delayed {
	return Delayed{Message: NewMessage(payload), Delay: d}
}

// At dispatches payload (or a Message) at time t.
func At(t time.Time, payload any) Delayed {
	return Delayed{Message: NewMessage(payload), At: t}
}

// Dated returns the delayed message dated from the message that triggered
// it: Delay after the trigger's creation time, or At. A time before the
// trigger's creation time (a negative Delay, an At already past when the
// event happened: "remind a day before check-in" for a check-in less than
// a day away) makes the message due at once: it is dated at the
// trigger's creation time and appended with the reaction's other
// messages, as the manual appends a message dated in the past at once.
// (Message.At on a stamped message refuses such a date instead: there the
// caller re-dates a message, here it asks for "no later than".)
func (d Delayed) Dated(trigger Message) Message {
	m := d.Message
	if m.CreatedAt.IsZero() {
		m.CreatedAt = trigger.CreatedAt
	}
	var due time.Time
	switch {
	case !d.At.IsZero():
		due = d.At
	case d.Delay != 0:
		due = trigger.CreatedAt.Add(d.Delay)
	default:
		return m
	}
	if due.Before(trigger.CreatedAt) {
		due = trigger.CreatedAt
	}
	return m.At(due)
}

// handlers collects a definition's handlers. It is built by With and never
// changed afterwards, so definitions can be copied and shared freely.
type handlers[S any] struct {
	init        func() S
	evolve      map[reflect.Type]func(S, Message) S
	evolveOrder []reflect.Type
	before      []func(S, Message) S
	decide      map[reflect.Type]func(S, Message) ([]any, error)
	// decideAt names each decide handler's function and where it is
	// defined (BatchError.Where).
	decideAt    map[reflect.Type]string
	decideOrder []reflect.Type
	react       map[reflect.Type]func(S, Message) []any
	reactOrder  []reflect.Type
	reactAny    func(S, Message) []any
	query       map[reflect.Type]func(Message) Query[S]
	sync        []SyncFunc[S]
	after       []AfterSyncFunc[S]
	errs        []error
	// decideEmits and reactEmits are the types declared by Emits, by the
	// handled type; reactAnyEmits the wildcard's (when reactAnyDeclared).
	decideEmits      map[reflect.Type][]reflect.Type
	reactEmits       map[reflect.Type][]reflect.Type
	reactAnyEmits    []reflect.Type
	reactAnyDeclared bool
}

func (h *handlers[S]) clone() *handlers[S] {
	c := &handlers[S]{
		init:        h.init,
		evolve:      make(map[reflect.Type]func(S, Message) S, len(h.evolve)),
		evolveOrder: slices.Clone(h.evolveOrder),
		before:      slices.Clone(h.before),
		decide:      make(map[reflect.Type]func(S, Message) ([]any, error), len(h.decide)),
		decideOrder: slices.Clone(h.decideOrder),
		react:       make(map[reflect.Type]func(S, Message) []any, len(h.react)),
		reactOrder:  slices.Clone(h.reactOrder),
		reactAny:    h.reactAny,
		query:       make(map[reflect.Type]func(Message) Query[S], len(h.query)),
		sync:        slices.Clone(h.sync),
		after:       slices.Clone(h.after),
		errs:        slices.Clone(h.errs),

		decideEmits:      maps.Clone(h.decideEmits),
		reactEmits:       maps.Clone(h.reactEmits),
		reactAnyEmits:    h.reactAnyEmits,
		reactAnyDeclared: h.reactAnyDeclared,
	}
	if c.decideEmits == nil {
		c.decideEmits = map[reflect.Type][]reflect.Type{}
	}
	if c.reactEmits == nil {
		c.reactEmits = map[reflect.Type][]reflect.Type{}
	}
	for k, v := range h.evolve {
		c.evolve[k] = v
	}
	for k, v := range h.decide {
		c.decide[k] = v
	}
	for k, v := range h.react {
		c.react[k] = v
	}
	for k, v := range h.query {
		c.query[k] = v
	}
	return c
}

func (h *handlers[S]) with(hs []Handler[S]) *handlers[S] {
	c := h.clone()
	for _, x := range hs {
		if x.apply == nil {
			c.errorf("a zero Handler (build handlers with Evolve, Decide, React, ...)")
			continue
		}
		x.apply(c)
	}
	return c
}

func (h *handlers[S]) errorf(format string, args ...any) {
	h.errs = append(h.errs, fmt.Errorf(format, args...))
}

func checkMessageType(t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("message type %v is not a struct", t)
	}
	if t == reflect.TypeFor[Message]() || t == reflect.TypeFor[PositionedMessage]() {
		return fmt.Errorf("handlers take payload types, not %v", t)
	}
	return nil
}

func (h *handlers[S]) addEvolve(t reflect.Type, fn func(S, Message) S) {
	if err := checkMessageType(t); err != nil {
		h.errs = append(h.errs, fmt.Errorf("evolve: %w", err))
		return
	}
	if _, dup := h.evolve[t]; dup {
		h.errorf("two evolve handlers for %v", t)
		return
	}
	h.evolve[t] = fn
	h.evolveOrder = append(h.evolveOrder, t)
}

func (h *handlers[S]) addDecide(t reflect.Type, fn func(S, Message) ([]any, error)) {
	if err := checkMessageType(t); err != nil {
		h.errs = append(h.errs, fmt.Errorf("decide: %w", err))
		return
	}
	if _, dup := h.decide[t]; dup {
		h.errorf("two decide handlers for %v", t)
		return
	}
	h.decide[t] = fn
	h.decideOrder = append(h.decideOrder, t)
}

// addDecideAt is addDecide for the user's function user (whose location
// a failure names).
func (h *handlers[S]) addDecideAt(t reflect.Type, fn func(S, Message) ([]any, error), user any) {
	h.addDecide(t, fn)
	if h.decideAt == nil {
		h.decideAt = map[reflect.Type]string{}
	}
	h.decideAt[t] = FuncLocation(user)
}

// FuncLocation names a function and where it is defined: "pkg.Func
// (file.go:12)"; "" for nil or a value that is not a function.
func FuncLocation(fn any) string {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return ""
	}
	file, line := f.FileLine(v.Pointer())
	return fmt.Sprintf("%s (%s:%d)", f.Name(), file, line)
}

func (h *handlers[S]) addReact(t reflect.Type, fn func(S, Message) []any) {
	if err := checkMessageType(t); err != nil {
		h.errs = append(h.errs, fmt.Errorf("react: %w", err))
		return
	}
	if _, dup := h.react[t]; dup {
		h.errorf("two react handlers for %v", t)
		return
	}
	h.react[t] = fn
	h.reactOrder = append(h.reactOrder, t)
}

// emptyHandlers is the handler set of a definition built without With.
func emptyHandlers[S any]() *handlers[S] {
	return (&handlers[S]{}).clone()
}

// initial returns a fresh initial state: the definition's own Init, else
// the one of an adopted projection, else the zero S.
func initial[S any](own func() S, h *handlers[S]) S {
	if own != nil {
		return own()
	}
	if h.init != nil {
		return h.init()
	}
	var zero S
	return zero
}

// evolveOne applies the before-evolve hooks and the handler for m's type;
// false when no handler evolves m.
func (h *handlers[S]) evolveOne(s S, m Message) (S, bool) {
	fn, ok := h.evolve[PayloadType(m.Payload)]
	if !ok {
		return s, false
	}
	for _, b := range h.before {
		s = b(s, m)
	}
	return fn(s, m), true
}

func (h *handlers[S]) fold(s S, msgs []Message) S {
	for _, m := range msgs {
		s, _ = h.evolveOne(s, m)
	}
	return s
}

// reactFn returns the reaction for m's type: its own, else the wildcard for
// an evolved type.
func (h *handlers[S]) reactFn(t reflect.Type) func(S, Message) []any {
	if fn, ok := h.react[t]; ok {
		return fn
	}
	if _, evolved := h.evolve[t]; evolved && h.reactAny != nil {
		return h.reactAny
	}
	return nil
}

func (h *handlers[S]) reacts(t reflect.Type) bool { return h.reactFn(t) != nil }

// reactionTypes are the types with a reaction: explicit ones, and with a
// wildcard every evolved type.
func (h *handlers[S]) reactionTypes() []reflect.Type {
	out := slices.Clone(h.reactOrder)
	if h.reactAny != nil {
		for _, t := range h.evolveOrder {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

func (h *handlers[S]) err() error {
	errs := h.errs
	for t := range h.query {
		if _, ok := h.decide[t]; !ok {
			errs = append(slices.Clip(errs), fmt.Errorf("Reads for %v, which the decider does not decide: add core.Decide for it", t))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return joinErrs(errs)
}

// PayloadType is the Go struct type of a payload (pointers dereferenced),
// which is what handlers are registered by.
func PayloadType(payload any) reflect.Type {
	t := reflect.TypeOf(payload)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// payloadAs returns m's payload as an E (accepting *E too); the zero E when
// it is neither (the handler was picked by type, so that does not happen).
func payloadAs[E any](m Message) E {
	switch p := m.Payload.(type) {
	case E:
		return p
	case *E:
		if p != nil {
			return *p
		}
	}
	var zero E
	return zero
}
