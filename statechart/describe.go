package statechart

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/sourced-go/sourced/core"
)

// Describe lists the machine's handlers for a topology, taken from the
// chart without running anything: each command and event handler
// (core.FlowDecide, core.FlowReact) with the state events of its declared
// targets and the Started messages of the children it starts; eventless
// transitions (core.FlowAlways); entry, exit and after actions. A flow's
// Produces is Known when the chart says everything it produces: a handler
// without a function (Command, On) and a timer are known; a handler
// function (CommandFunc, OnFunc) may add data events with Do.Event, and an
// entry or exit action dispatches what its function returns, so those are
// not. A flow's Name is the path of the state it belongs to. The machine's
// own reactions (React, ReactAny) dispatch what their functions return:
// they are not known.
func (m Machine[C]) Describe() core.Description {
	mc := m.core()
	ch := mc.ch
	var flows []core.Flow
	for _, n := range ch.nodes {
		if n.kind != kState && n.kind != kInitial {
			continue
		}
		for _, t := range n.handlers {
			kind := core.FlowDecide
			if t.kind == eOn {
				kind = core.FlowReact
			}
			flows = append(flows, core.Flow{Kind: kind, Consumes: t.msgType, Produces: targetTypes(t), Known: t.handle == nil, Name: n.path})
		}
		for _, t := range n.eventless {
			flows = append(flows, core.Flow{Kind: core.FlowAlways, Produces: targetTypes(t), Known: t.handle == nil, Name: n.path})
		}
		if n.kind != kState {
			continue
		}
		if len(n.entry) > 0 {
			flows = append(flows, core.Flow{Kind: core.FlowEntry, Consumes: n.state.d.typ, Name: n.path})
		}
		if len(n.exit) > 0 {
			flows = append(flows, core.Flow{Kind: core.FlowExit, Name: n.path})
		}
		for _, tm := range n.timers {
			var produces []reflect.Type
			if pt := core.PayloadType(tm.payload); pt != nil {
				produces = []reflect.Type{pt}
			}
			flows = append(flows, core.Flow{Kind: core.FlowAfter, Consumes: n.state.d.typ, Produces: produces, Known: true, Name: fmt.Sprintf("%s after %v", n.path, tm.delay)})
		}
	}
	for _, r := range m.Reactions {
		if r.t != nil {
			flows = append(flows, core.Flow{Kind: core.FlowReact, Consumes: r.t, Name: "reaction"})
		}
	}
	return core.Description{Kind: core.KindMachine, Flows: flows}
}

// targetTypes are the state event types a transition may append and the
// Started messages of the children it starts.
func targetTypes(t *transition) []reflect.Type {
	var out []reflect.Type
	add := func(rt reflect.Type) {
		if rt != nil && !slices.Contains(out, rt) {
			out = append(out, rt)
		}
	}
	for _, o := range t.options {
		for _, p := range o.spec.parts {
			if p.state.d != nil {
				add(p.state.d.typ)
			}
		}
	}
	for _, d := range t.starts {
		if d.lc != nil {
			add(d.lc.started)
		}
	}
	if t.start != nil && t.start.child != nil && t.start.child.lc != nil {
		add(t.start.child.lc.started)
	}
	return out
}
