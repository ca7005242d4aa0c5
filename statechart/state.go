package statechart

import (
	"reflect"
	"slices"
	"strings"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Move is what every state event records: the message that moved the
// machine and where it went. A state's event type embeds Move next to the
// machine's partition keys:
//
//	type OrderRef struct {
//		OrderID string `json:"order_id"`
//	}
//	type Paying struct {
//		OrderRef
//		statechart.Move
//	}
//
// The stored payload is then
//
//	{"order_id": "o1", "trigger": "orders.start_payment", "source": "placed.payment.initial",
//	 "target": "placed.payment.paying", "exited": [], "entered": ["placed.payment.paying"]}
//
// Paths are state and region names joined with dots from the root; a
// compound state's sub-states sit directly under it ("working.progressed").
// Exited lists every state the move left, innermost first (parallel
// siblings in reverse document order); Entered every state it entered,
// outermost first (siblings in document order). Loading a machine replays
// Exited and Entered: the transition rules are not run again.
type Move struct {
	// Trigger is the stored type of the message that moved the machine, or
	// "always", "done", "on_final", "start", "stop", "children_done <group>".
	Trigger string `json:"trigger" sourced:"noindex"`
	// Source is the path of the state the transition was declared on (a
	// region's initial position is "<region path>.initial").
	Source string `json:"source" sourced:"noindex"`
	// Target is the path of the transition's target (the first one for a
	// multi-target transition).
	Target string `json:"target" sourced:"noindex"`
	// Exited are the paths of the states left, innermost first.
	Exited []string `json:"exited" sourced:"noindex"`
	// Entered are the paths of the states entered, outermost first.
	Entered []string `json:"entered" sourced:"noindex"`
}

// setMove and move are promoted to every state event type that embeds Move:
// they are how the interpreter writes and reads the record without
// reflection.
func (m *Move) setMove(v Move) { *m = v }
func (m Move) move() Move      { return m }

// valueFiller fills partition keys into an addressable struct value.
type valueFiller interface {
	fillValue(v reflect.Value, partition core.Partition)
}

// mover is implemented by every state event payload (through the embedded
// Move).
type mover interface{ move() Move }

// MoveOf returns the Move recorded in a state event payload (a value or
// pointer of a type embedding Move, or a Message carrying one).
func MoveOf(payload any) (Move, bool) {
	switch m := payload.(type) {
	case core.Message:
		payload = m.Payload
	case core.PositionedMessage:
		payload = m.Payload
	}
	mv, ok := payload.(mover)
	if !ok {
		return Move{}, false
	}
	if rv := reflect.ValueOf(payload); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return Move{}, false
	}
	return mv.move(), true
}

// State is the handle of a declared state: its name (what paths and stored
// types use) and the Go type of the event that records moves to it. Declare
// states once, with Declare, and place them in a chart with Initial, Place,
// Final, Started and Stopped. The handle is what transitions target and what
// In tests; renaming the Go variable or type changes nothing stored, renaming
// the state does.
//
// State values are comparable: two handles are equal when they come from the
// same Declare call.
type State struct{ d *stateDecl }

type stateDecl struct {
	name     string
	typ      reflect.Type                                                // nil for a state declared with Named
	make     func(mv Move, fill valueFiller, keys map[string]string) any // the event recording mv, keys filled
	register func(reg *codec.Registry, name string) error
}

// Declare declares a state named name whose moves are recorded as events of
// type T, a struct that embeds Move (and the machine's partition keys):
//
//	type Paying struct {
//		OrderRef
//		statechart.Move
//	}
//	var paying = statechart.Declare[Paying]("paying")
//
// The name is stored in every path and in the registered type
// ("<group>.runtime.paying"): lower-case letters, digits and underscores.
// PT is inferred.
func Declare[T any, PT interface {
	*T
	setMove(Move)
}](name string) State {
	return State{&stateDecl{
		name: name,
		typ:  reflect.TypeFor[T](),
		make: func(mv Move, fill valueFiller, keys map[string]string) any {
			p := new(T)
			PT(p).setMove(mv)
			if fill != nil && len(keys) > 0 {
				fill.fillValue(reflect.ValueOf(p).Elem(), keys)
			}
			return *p
		},
		register: func(reg *codec.Registry, name string) error { return codec.Register[T](reg, name) },
	}}
}

// Named declares a state with no event type of its own, for charts used as
// rules and never stored (ConsumerGroupStatus): its moves are recorded as a
// bare Move. A Machine that appends events refuses such states (Check).
func Named(name string) State {
	return State{&stateDecl{name: name}}
}

// Name returns the state's name.
func (s State) Name() string {
	if s.d == nil {
		return ""
	}
	return s.d.name
}

// EventType returns the Go type of the state's events (nil for Named
// states).
func (s State) EventType() reflect.Type {
	if s.d == nil {
		return nil
	}
	return s.d.typ
}

// String returns the state's name.
func (s State) String() string { return s.Name() }

// IsZero reports whether s is the zero State (no declaration).
func (s State) IsZero() bool { return s.d == nil }

func (s State) target() targetSpec { return targetSpec{parts: []targetPart{{state: s}}} }

// Target is what a transition moves to: a State, a multi-target set (All),
// a history (History, DeepHistory), or Stay ("may stay put" in a handler's
// declared targets).
type Target interface{ target() targetSpec }

type histKind uint8

const (
	histNone histKind = iota
	histShallow
	histDeep
)

// targetPart is one target of a transition: a state, or its history with
// the history's default states.
type targetPart struct {
	state    State
	hist     histKind
	defaults []State
}

func (p targetPart) String() string {
	name := p.state.Name()
	switch p.hist {
	case histShallow:
		name += ".history"
	case histDeep:
		name += ".history(deep)"
	}
	if len(p.defaults) > 0 {
		ds := make([]string, len(p.defaults))
		for i, d := range p.defaults {
			ds[i] = d.Name()
		}
		name += "[" + strings.Join(ds, ",") + "]"
	}
	return name
}

func (p targetPart) equal(o targetPart) bool {
	return p.state == o.state && p.hist == o.hist && slices.Equal(p.defaults, o.defaults)
}

type targetSpec struct {
	parts []targetPart
	stay  bool
}

func (t targetSpec) String() string {
	if t.stay {
		return "stay"
	}
	names := make([]string, len(t.parts))
	for i, p := range t.parts {
		names[i] = p.String()
	}
	return strings.Join(names, "+")
}

func (t targetSpec) equal(o targetSpec) bool {
	return t.stay == o.stay && slices.EqualFunc(t.parts, o.parts, targetPart.equal)
}

type stayTarget struct{}

func (stayTarget) target() targetSpec { return targetSpec{stay: true} }

// Stay, among a handler's declared targets, lets the handler leave the
// machine where it is by not calling To ("may stay put"). It is the Go
// spelling of the manual's trailing nil in A | B | nil.
var Stay Target = stayTarget{}

type multiTarget []Target

func (m multiTarget) target() targetSpec {
	var spec targetSpec
	for _, t := range m {
		if t == nil {
			spec.parts = append(spec.parts, targetPart{})
			continue
		}
		sub := t.target()
		if sub.stay {
			spec.parts = append(spec.parts, targetPart{}) // refused when resolved
			continue
		}
		spec.parts = append(spec.parts, sub.parts...)
	}
	return spec
}

// All is a multi-target: one move entering several states at once, each in
// a different region of one parallel state (SCXML's target="a b"). Each
// target is a State or a history (All(History(a), DeepHistory(b))). The
// move is recorded as an event of the first target's state type, with
// Target its path; Entered lists every state entered.
func All(targets ...Target) Target { return multiTarget(targets) }

type historyTarget struct {
	s        State
	deep     bool
	defaults []State
}

func (h historyTarget) target() targetSpec {
	k := histShallow
	if h.deep {
		k = histDeep
	}
	return targetSpec{parts: []targetPart{{state: h.s, hist: k, defaults: h.defaults}}}
}

// History targets s's shallow history (SCXML's <history type="shallow">):
// s is entered with each of its regions at the state it was in when s was
// last left (that state entered by default from there). With no memory (s
// never left, or an instance built from stored paths), s is entered at its
// defaults when given (SCXML's history default transition: states below s,
// each in a different region when several), else as if targeted directly.
func History(s State, defaults ...State) Target {
	return historyTarget{s: s, defaults: defaults}
}

// DeepHistory targets s's deep history (SCXML's <history type="deep">): s
// is entered with every state that was active below it when it was last
// left. With no memory it is entered at its defaults, which may name states
// at any depth below s, else as if targeted directly.
func DeepHistory(s State, defaults ...State) Target {
	return historyTarget{s: s, deep: true, defaults: defaults}
}
