package statechart

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sourced-go/sourced/core"
)

// Elem is one piece of a chart: a placed state or region, a handler, an
// eventless transition, an action or a timer. Build elements with the
// functions of this package (Initial, Place, Final, Region, Command,
// CommandFunc, On, Always, Done, Entry, After, ...) and give them to
// Machine.Chart, nested as the diagram is. A misplaced element (a command
// directly in a region, a region in a final state) is a definition error
// reported by Machine.Err.
type Elem struct{ e *elem }

type elemKind uint8

const (
	eInitial elemKind = iota + 1
	ePlace
	eRegion
	eCommand
	eOn
	eAlways
	eDone
	eOnFinal
	eChildrenDone
	eEntry
	eExit
	eAfter
	eStart
	eStops
	ePart
	eOnDone
	eStartsAt
	eWhen
)

var elemNames = map[elemKind]string{
	eInitial: "Initial", ePlace: "a placed state", eRegion: "Region", eCommand: "Command", eOn: "On",
	eAlways: "Always", eDone: "Done", eOnFinal: "OnFinal", eChildrenDone: "ChildrenDone",
	eEntry: "Entry", eExit: "Exit", eAfter: "After", eStart: "Start", eStops: "Stops", ePart: "a part", eOnDone: "OnDone", eStartsAt: "StartsAt",
}

type placement uint8

const (
	plState placement = iota
	plStarted
	plFinal
	plStopped
)

// handlerFunc is a type-erased command or event handler.
type handlerFunc func(ctx any, m core.Message, do *Do) error

// actionFunc is a type-erased entry or exit action.
type actionFunc func(ctx any, mv Move) []any

type elem struct {
	kind     elemKind
	state    State
	place    placement
	name     string // region name
	elems    []Elem
	msgType  reflect.Type
	ctxType  reflect.Type // the context type a typed function expects (nil: any)
	handle   handlerFunc
	targets  []Target
	guards   []Predicate
	action   actionFunc
	delay    time.Duration
	payload  any
	part     *Part
	final    State // OnFinal: the part's final state; Start: on-done child final
	child    *childDecl
	starts   []*childDecl
	startNil bool
	startFn  func(ctx any, mv Move) any
	// reach is set by Internal and External.
	reach reach
	// when is set by When: the guards were given to an element that may
	// not have any, checked when the chart is built.
	when bool
}

type reach uint8

const (
	reachDefault reach = iota
	reachInternal
	reachExternal
)

// When guards a handler (Command, CommandFunc, On, OnFunc) with predicates
// or adds predicates to an eventless transition: the handler is selected
// only while every predicate passes, evaluated on the context and the
// active states as they are before the decision's handlers run (SCXML's
// cond, evaluated in selectTransitions). A state may accept one message
// type with several handlers: the first in document order whose predicates
// pass is taken (SCXML's document order); when none passes, the state does not accept the message
// and an ancestor's handler may. A handler after an unguarded one of the
// same type in the same state is unreachable, a definition error.
func (e Elem) When(preds ...Predicate) Elem {
	if e.e == nil {
		return e
	}
	c := *e.e
	c.guards = append(slices.Clone(c.guards), preds...)
	c.when = true
	return Elem{&c}
}

// External makes a transition to its own state's descendants external, as
// SCXML's default type="external": the state (a parallel state too) is
// exited and re-entered, its exit and entry actions run and its regions
// restart. Without it such a transition is internal (the manual's and
// XState v5's default): the state stays active. A transition to any other
// target is external either way.
func (e Elem) External() Elem {
	if e.e == nil {
		return e
	}
	c := *e.e
	c.reach = reachExternal
	return Elem{&c}
}

// Internal states the default explicitly: a transition to its own state's
// descendants leaves the state active (SCXML's type="internal"); only what
// is active below the state (for a parallel state, below its region holding
// the targets) is exited. It changes nothing for other targets, as in
// SCXML.
func (e Elem) Internal() Elem {
	if e.e == nil {
		return e
	}
	c := *e.e
	c.reach = reachInternal
	return Elem{&c}
}

// Initial places a region's initial position: where the region waits when
// it is entered, accepting the commands and events of its elements
// (Command, CommandFunc, On, OnFunc). The initial position is not a state:
// it has no event type, it is never listed in paths, and moves from it have
// the source "<region path>.initial". A region starts either at Initial or
// at a Started state.
func Initial(elems ...Elem) Elem {
	return Elem{&elem{kind: eInitial, elems: elems}}
}

// StartsAt sets where a compound or parallel state starts when it is
// entered by default (SCXML's <initial> element, whose transition may name
// any states below its state): a state at any depth below it, several
// states at once (All, each in a different region of a parallel
// descendant), or the state's own history (History(s, defaults...),
// DeepHistory(s, defaults...): entered as it was when last left, else at
// the history's defaults, else at its regions' starts). The regions it
// enters need no Initial or Started of their own; every other region does.
func StartsAt(target Target) Elem {
	return Elem{&elem{kind: eStartsAt, targets: []Target{target}}}
}

// Place places state s with its elements: handlers, eventless transitions,
// actions, timers, and either sub-states (which make s a compound state)
// or Regions (which make it a parallel state).
func Place(s State, elems ...Elem) Elem {
	return Elem{&elem{kind: ePlace, state: s, place: plState, elems: elems}}
}

// Started places state s as its region's start: entering the region enters
// s at once (in the same move). A child machine's root starts at its
// Started state, entered by the Started message its parent appends; a
// part's compound state starts at the part's Started state.
func Started(s State, elems ...Elem) Elem {
	return Elem{&elem{kind: ePlace, state: s, place: plStarted, elems: elems}}
}

// Final places a final state: reaching it completes its region. A final
// state may have Entry and Exit actions and Stops, nothing else. When every
// region of a state is final, its Done transitions apply; a machine whose
// root region is final is finished.
func Final(s State, elems ...Elem) Elem {
	return Elem{&elem{kind: ePlace, state: s, place: plFinal, elems: elems}}
}

// Stopped places a child machine's stopped state: a root final state that
// its parent's Stop command moves it to from any started, non-final
// position (trigger "stop"). Like Final, it may have Entry, Exit and Stops.
func Stopped(s State, elems ...Elem) Elem {
	return Elem{&elem{kind: ePlace, state: s, place: plStopped, elems: elems}}
}

// Region places a named region of a parallel state: an independent
// sub-chart, active (at its start) whenever the state is. Region names are
// part of paths ("placed.payment.paying") and unique within a machine.
func Region(name string, elems ...Elem) Elem {
	return Elem{&elem{kind: eRegion, name: name, elems: elems}}
}

// RegionState places a region of a parallel state headed by state s: the
// region is named after s, and s is a full state that is always active
// while the region is (SCXML's child of a <parallel>): it holds handlers,
// eventless transitions, actions and timers, its sub-states or regions are
// the region's contents, and transitions may target it. Its path is the
// region's ("placed.payment", its sub-states "placed.payment.paying"); it
// is final when its own contents are, for its parallel state's Done. An
// External transition declared on it (or on a state below it whose domain
// would be the region) leaves and re-enters the parallel state, as SCXML's
// findLCCA skips parallel states; Region remains for regions that are not
// states.
func RegionState(s State, elems ...Elem) Elem {
	return Elem{&elem{kind: eRegion, name: s.Name(), state: s, elems: elems}}
}

// Command accepts commands of type M in the state it is placed in, moving
// to the single declared target, or staying put with no target. A command
// with several targets needs a handler: use CommandFunc.
func Command[M any](targets ...Target) Elem {
	return Elem{&elem{kind: eCommand, msgType: reflect.TypeFor[M](), targets: targets}}
}

// CommandFunc accepts commands of type M with a handler that may append
// data events (Do.Event), pick one of the declared targets (Do.To) or
// reject the command by returning an error (nothing is appended). With one
// declared target and no call to To the machine moves there; with Stay
// among the targets it may stay put; with no targets it only appends data.
// C is the machine's context type, M the command's; both are inferred.
func CommandFunc[C, M any](fn func(ctx C, cmd M, do *Do) error, targets ...Target) Elem {
	return Elem{&elem{
		kind: eCommand, msgType: reflect.TypeFor[M](), ctxType: reflect.TypeFor[C](), targets: targets,
		handle: func(ctx any, m core.Message, do *Do) error {
			return fn(ctxAs[C](ctx), payloadAs[M](m.Payload), do)
		},
	}}
}

// On moves the machine to the declared target when it claims an event of
// type E that another reactor appended, while the state it is placed in is
// active. Events are never decided while a group replays, and an event no
// active state reacts to is ignored. E must carry the partition keys.
func On[E any](targets ...Target) Elem {
	return Elem{&elem{kind: eOn, msgType: reflect.TypeFor[E](), targets: targets}}
}

// OnFunc is On with a handler, decided like CommandFunc.
func OnFunc[C, E any](fn func(ctx C, event E, do *Do) error, targets ...Target) Elem {
	return Elem{&elem{
		kind: eOn, msgType: reflect.TypeFor[E](), ctxType: reflect.TypeFor[C](), targets: targets,
		handle: func(ctx any, m core.Message, do *Do) error {
			return fn(ctxAs[C](ctx), payloadAs[E](m.Payload), do)
		},
	}}
}

// Always is an eventless transition: while its state is active, after every
// decision, the first Always whose predicates all pass moves the machine to
// target (recorded with the trigger "always"). A state with an unguarded
// Always is transient: it is left in the decision that enters it, so it may
// not accept commands or events, nor have timers, regions, joins or
// children; an Always after an unguarded one is unreachable.
func Always(target Target, preds ...Predicate) Elem {
	return Elem{&elem{kind: eAlways, targets: []Target{target}, guards: preds}}
}

// Done is a join: once every region of the state is at a final state (the
// sub-state of a compound state is final), the machine moves to target in
// the same decision (trigger "done"). Several guarded Dones are tried in
// order; with none passing, the machine stays, and they are tried again
// after every later decision.
func Done(target Target, preds ...Predicate) Elem {
	return Elem{&elem{kind: eDone, targets: []Target{target}, guards: preds}}
}

// Entry runs fn each time the state is entered (outermost state first), with
// the move that entered it; the commands fn returns are dispatched in the
// decision (payloads, Messages, or core.Delayed from core.After/At, dated
// from the triggering message). Partition keys are filled in.
func Entry[C any](fn func(ctx C, entered Move) []any) Elem {
	return Elem{&elem{kind: eEntry, ctxType: reflect.TypeFor[C](), action: func(ctx any, mv Move) []any {
		return fn(ctxAs[C](ctx), mv)
	}}}
}

// Exit runs fn each time the state is left (innermost state first), with the
// move that leaves it; the commands it returns are dispatched as Entry's are.
func Exit[C any](fn func(ctx C, exiting Move) []any) Elem {
	return Elem{&elem{kind: eExit, ctxType: reflect.TypeFor[C](), action: func(ctx any, mv Move) []any {
		return fn(ctxAs[C](ctx), mv)
	}}}
}

// After schedules command (a payload, partition keys filled in) d after the
// message that entered the state. The timer belongs to that entry: if the
// command arrives after the state was left, even if it was entered again
// since, it is ignored (acknowledged with no events). The command must be
// accepted by some state (Command) to do anything.
func After(d time.Duration, command any) Elem {
	return Elem{&elem{kind: eAfter, delay: d, payload: command}}
}

// Predicate is the guard of a transition (SCXML's cond): a handler's
// (When) or an eventless transition's (Always, Done). Build predicates with
// If (on the domain context), In (on the active states, SCXML's In()), Not
// and And. (The consistency guard of a decision is core.Guard, another
// thing.)
type Predicate struct {
	fn      func(ctx any, c ActiveStates) bool
	ctxType reflect.Type
	label   string
}

// If is a predicate on the domain context. C is inferred and must be the
// machine's context type. Exports label it "if" unless Named.
func If[C any](fn func(ctx C) bool) Predicate {
	return Predicate{ctxType: reflect.TypeFor[C](), label: "if", fn: func(ctx any, _ ActiveStates) bool { return fn(ctxAs[C](ctx)) }}
}

// In is a predicate on the active states: true when every state given is
// active (SCXML's In()). It sees the active states as they are when the
// predicate is evaluated, in the middle of a decision.
func In(states ...State) Predicate {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = s.Name()
	}
	return Predicate{label: "in " + strings.Join(names, ", "), fn: func(_ any, c ActiveStates) bool {
		for _, s := range states {
			if !c.In(s) {
				return false
			}
		}
		return true
	}}
}

// Not negates a predicate.
func Not(g Predicate) Predicate {
	return Predicate{ctxType: g.ctxType, label: "not " + g.label, fn: func(ctx any, c ActiveStates) bool { return !g.fn(ctx, c) }}
}

// And is true when every predicate is.
func And(preds ...Predicate) Predicate {
	var ct reflect.Type
	labels := make([]string, len(preds))
	for i, g := range preds {
		if g.ctxType != nil {
			ct = g.ctxType
		}
		labels[i] = g.label
	}
	return Predicate{ctxType: ct, label: strings.Join(labels, " and "), fn: func(ctx any, c ActiveStates) bool {
		for _, g := range preds {
			if !g.fn(ctx, c) {
				return false
			}
		}
		return true
	}}
}

// Named returns the predicate labelled name in exports (Mermaid's
// "always [name]", JSON's "guard"), e.g. If(paymentDue).Named("payment_due").
func (g Predicate) Named(name string) Predicate {
	g.label = name
	return g
}

// Label returns the predicate's label in exports.
func (g Predicate) Label() string { return g.label }

func ctxAs[C any](ctx any) C {
	if c, ok := ctx.(C); ok {
		return c
	}
	var zero C
	return zero
}

func payloadAs[M any](p any) M {
	switch v := p.(type) {
	case M:
		return v
	case *M:
		if v != nil {
			return *v
		}
	}
	var zero M
	return zero
}

func (e Elem) describe() string {
	if e.e == nil {
		return "a zero Elem"
	}
	n := elemNames[e.e.kind]
	switch e.e.kind {
	case ePlace:
		return fmt.Sprintf("state %q", e.e.state.Name())
	case eRegion:
		return fmt.Sprintf("region %q", e.e.name)
	case eCommand, eOn:
		return fmt.Sprintf("%s[%v]", n, e.e.msgType)
	}
	return n
}
