package core

import (
	"reflect"
	"slices"
)

// DefinitionKind says what kind of reactor a definition is, for a
// topology: it decides which nodes the definition's handlers become.
type DefinitionKind string

// The kinds of definition a topology knows.
const (
	KindDecider   DefinitionKind = "decider"
	KindProjector DefinitionKind = "projector"
	KindMachine   DefinitionKind = "machine"
	KindWorkflow  DefinitionKind = "workflow"
)

// FlowKind says what a handler does with the message it consumes.
type FlowKind string

// The kinds of handler a Flow describes. A machine's transitions are
// FlowDecide (commands) and FlowReact (events it reacts to); its actions
// are FlowEntry, FlowExit and FlowAfter, its eventless transitions
// FlowAlways.
const (
	FlowDecide FlowKind = "decide"
	FlowReact  FlowKind = "react"
	FlowEvolve FlowKind = "evolve"
	FlowEntry  FlowKind = "entry"
	FlowExit   FlowKind = "exit"
	FlowAfter  FlowKind = "after"
	FlowAlways FlowKind = "always"
	FlowStep   FlowKind = "step"
)

// Flow is one handler of a definition as a topology sees it: the message
// type it consumes and the types it may produce.
type Flow struct {
	Kind FlowKind
	// Consumes is the handled message type (nil for a machine's eventless
	// transitions and actions, whose trigger is a move: see Name).
	Consumes reflect.Type
	// Produces are the types the handler may produce: declared with Emits,
	// or taken from a chart.
	Produces []reflect.Type
	// Known is true when Produces is complete (declared, or all from the
	// chart); false when the handler may produce types nobody declared.
	Known bool
	// Name labels the handler when the type alone does not (a machine
	// state's path, a timer's delay).
	Name string
}

// Description is what a definition tells a topology about itself.
type Description struct {
	Kind  DefinitionKind
	Flows []Flow
}

// Describer is implemented by definitions that describe their handlers for
// a topology (Decider, Projector, statechart.Machine, workflows). Package
// shell/topology draws a definition's node from it, and the dashboard's
// time travel reads its Kind (a machine has a state to fold). Without it,
// a topology draws the definition as one opaque reactor consuming its
// handled types, and time travel does not take it for a machine.
type Describer interface {
	Describe() Description
}

var (
	_ Describer = Decider[struct{}]{}
	_ Describer = Projector[struct{}]{}
)

// Describe lists the decider's handlers: its decide handlers (with the
// types their Emits declares), its evolve handlers and its reactions.
func (d Decider[S]) Describe() Description {
	h := d.compiled()
	var flows []Flow
	for _, t := range h.decideOrder {
		em, ok := h.decideEmits[t]
		flows = append(flows, Flow{Kind: FlowDecide, Consumes: t, Produces: slices.Clone(em), Known: ok})
	}
	flows = append(flows, h.describeEvolveReact()...)
	return Description{Kind: KindDecider, Flows: flows}
}

// Describe lists the projector's evolve handlers and reactions.
func (p Projector[S]) Describe() Description {
	return Description{Kind: KindProjector, Flows: p.compiled().describeEvolveReact()}
}

func (h *handlers[S]) describeEvolveReact() []Flow {
	var flows []Flow
	for _, t := range h.evolveOrder {
		flows = append(flows, Flow{Kind: FlowEvolve, Consumes: t, Known: true})
	}
	for _, t := range h.reactionTypes() {
		if _, own := h.react[t]; own {
			em, ok := h.reactEmits[t]
			flows = append(flows, Flow{Kind: FlowReact, Consumes: t, Produces: slices.Clone(em), Known: ok})
			continue
		}
		flows = append(flows, Flow{Kind: FlowReact, Consumes: t, Produces: slices.Clone(h.reactAnyEmits), Known: h.reactAnyDeclared, Name: "ReactAny"})
	}
	return flows
}
