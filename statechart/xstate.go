package statechart

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"

	"github.com/sourced-go/sourced/core"
)

// object is a JSON object that keeps its keys in insertion order (XState
// reads states and regions in document order).
type object []field

type field struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// JSON returns the machine's definition in XState's vocabulary: state
// nodes with "id" (the path; "#<path>" in targets), "type" (atomic,
// compound, parallel, final, history), "initial" (a region's start, or a
// StartsAt's targets), "states", "on" (commands and events by type name,
// each a list of transitions in document order), "always", "onDone" (Done
// joins), "entry" / "exit" (dispatch actions), "after" (delays in
// milliseconds, each dispatching a command), "invoke" (the child a state
// starts, with its "onDone" mappings), "children_done" (ChildrenDone joins,
// each with its "child" group) and "stops" (the children a state stops, by
// group). A transition is {"target": [...], "kind": "command" or
// "event" for handlers, "guard": its guards' labels, "reenter": true when
// External, "starts": the children a handler starts, by group,
// "starts_optional": true when it may start none}; a targetless handler's
// target is null. A region's initial position is a state node named
// "initial"; a RegionState's region is its state's node; history targets
// are "history" child states named "history" or "deep_history". The top
// level lists the machine's "children", each {"id": group, "kind": "spawn"
// (started by handlers) or "invoke" (started by a state)}. Type names are
// the Registry's when set.
func (m Machine[C]) JSON() ([]byte, error) {
	return json.Marshal(m.definitionJSON(nil))
}

// JSON returns the instance's definition JSON (Machine.JSON) filled with
// its status: the top level gains "value" (ActiveStates.Value), "paths" and
// "status" ("active", or "done" once the machine is final); every state
// node "active", "visited" and, while active, "entered_by" (the state event
// that entered it: id, type, time, as ActiveStates.EnteredBy); every
// region of a parallel state "active", "current" (its active state's name,
// or "initial") and "done"; each of the "children" its "instances", each
// {"keys", "state" (the child's innermost active state's path), "final"
// (the root final it reached, or "")}.
func (i Instance[C]) JSON(m Machine[C]) ([]byte, error) {
	doc := m.definitionJSON(&i.st)
	status := "active"
	if i.Final() {
		status = "done"
	}
	paths := i.Paths()
	if paths == nil {
		paths = []string{}
	}
	doc = append(object{{"value", i.ActiveStates().Value()}, {"paths", paths}, {"status", status}}, doc...)
	return json.Marshal(doc)
}

func (m Machine[C]) definitionJSON(st *instState) object {
	ch := m.core().ch
	root := object{{"id", m.group()}}
	root = append(root, m.regionJSON(ch, ch.root, st)...)
	if children := m.childrenJSON(ch, st); len(children) > 0 {
		root = append(root, field{"children", children})
	}
	return root
}

// childrenJSON lists the machine's children by role, with their instances
// when st is given.
func (m Machine[C]) childrenJSON(ch *chart, st *instState) []object {
	kinds := map[*childDecl]string{}
	for _, n := range ch.nodes {
		for _, t := range n.handlers {
			for _, d := range t.starts {
				kinds[d] = "spawn"
			}
		}
		for _, ss := range n.starts {
			kinds[ss.child] = "invoke"
		}
	}
	var out []object
	for _, d := range ch.children {
		kind, ok := kinds[d]
		if !ok {
			continue // only stopped or joined here; started elsewhere
		}
		c := object{{"id", d.group}, {"kind", kind}}
		if st != nil {
			insts := []object{}
			r := run{st: *st}
			for _, ref := range r.sortedChildren() {
				if ref.Group == d.group {
					insts = append(insts, object{{"keys", ref.Keys}, {"state", ref.State()}, {"final", ref.Final}})
				}
			}
			c = append(c, field{"instances", insts})
		}
		out = append(out, c)
	}
	return out
}

func (m Machine[C]) regionJSON(ch *chart, r *node, st *instState) object {
	var o object
	switch {
	case r.parent != nil && r.parent.startAt != nil && len(r.parent.startAt.options) == 1:
		o = append(o, field{"initial", target(r.parent.startAt.options[0])})
	case r.start != nil:
		o = append(o, field{"initial", r.start.name})
	}
	states := object{}
	for _, n := range r.children {
		states = append(states, field{n.name, m.nodeJSON(ch, n, st)})
	}
	return append(o, field{"states", states})
}

func target(o option) []string {
	var out []string
	for i, n := range o.nodes {
		id := "#" + n.path
		switch o.spec.parts[i].hist {
		case histDeep:
			id += ".deep_history"
		case histShallow:
			id += ".history"
		}
		out = append(out, id)
	}
	return out
}

func (m Machine[C]) transitionsJSON(t *transition) []object {
	var extra object
	switch t.kind {
	case eCommand:
		extra = append(extra, field{"kind", "command"})
	case eOn:
		extra = append(extra, field{"kind", "event"})
	}
	if len(t.guards) > 0 {
		extra = append(extra, field{"guard", guardLabel(t.guards)})
	}
	if t.external {
		extra = append(extra, field{"reenter", true})
	}
	if len(t.starts) > 0 {
		groups := make([]string, len(t.starts))
		for i, d := range t.starts {
			groups[i] = d.group
		}
		extra = append(extra, field{"starts", groups})
		if t.startsNil {
			extra = append(extra, field{"starts_optional", true})
		}
	}
	var out []object
	for _, o := range t.options {
		out = append(out, append(object{{"target", target(o)}}, extra...))
	}
	if t.stay || len(t.options) == 0 {
		out = append(out, append(object{{"target", nil}}, extra...))
	}
	return out
}

func (m Machine[C]) nodeJSON(ch *chart, n *node, st *instState) object {
	o := object{{"id", n.path}}
	switch {
	case n.kind == kInitial:
		o = append(o, field{"type", "atomic"})
	case n.final:
		o = append(o, field{"type", "final"})
	case n.parallel:
		o = append(o, field{"type", "parallel"})
	case len(n.children) > 0:
		o = append(o, field{"type", "compound"})
	default:
		o = append(o, field{"type", "atomic"})
	}
	if st != nil {
		active := st.act.has(n.id)
		o = append(o, field{"active", active})
		if n.kind == kState {
			c := ActiveStates{ch: ch, act: st.act}
			if !st.detached {
				c.entries = st.entries
			}
			o = append(o, field{"visited", c.visited(n)})
			if active && c.entries != nil {
				o = append(o, field{"entered_by", st.entries[n.id].by(ch)})
			}
		}
	}
	if len(n.handlers) > 0 {
		on := object{}
		for _, t := range n.handlers {
			name := m.exportName(t.msgType)
			if len(on) > 0 && slices.ContainsFunc(on, func(f field) bool { return f.key == name }) {
				continue
			}
			var trs []object
			for _, u := range n.handlers {
				if u.msgType == t.msgType {
					trs = append(trs, m.transitionsJSON(u)...)
				}
			}
			on = append(on, field{name, trs})
		}
		o = append(o, field{"on", on})
	}
	var always, done, joins []object
	for _, t := range ch.transitionsInOrder(n) {
		switch t.kind {
		case eAlways:
			always = append(always, m.transitionsJSON(t)...)
		case eDone:
			done = append(done, m.transitionsJSON(t)...)
		case eChildrenDone:
			for _, tr := range m.transitionsJSON(t) {
				joins = append(joins, append(object{{"child", t.child.group}}, tr...))
			}
		}
	}
	if always != nil {
		o = append(o, field{"always", always})
	}
	if done != nil {
		o = append(o, field{"onDone", done})
	}
	if joins != nil {
		o = append(o, field{"children_done", joins})
	}
	if len(n.entry) > 0 {
		o = append(o, field{"entry", actionsJSON(len(n.entry))})
	}
	if len(n.exit) > 0 {
		o = append(o, field{"exit", actionsJSON(len(n.exit))})
	}
	if len(n.timers) > 0 {
		after := object{}
		for _, tm := range n.timers {
			after = append(after, field{strconv.FormatInt(tm.delay.Milliseconds(), 10), object{{"actions", []object{{
				{"type", "dispatch"}, {"command", m.exportName(typeOf(tm.payload))},
			}}}}})
		}
		o = append(o, field{"after", after})
	}
	if len(n.starts) > 0 {
		var inv []object
		for _, ss := range n.starts {
			x := object{{"id", ss.child.group}, {"src", ss.child.group}}
			var od []object
			for _, t := range n.eventless {
				if t.kind == eOnDone && t.start == ss {
					for _, tr := range m.transitionsJSON(t) {
						od = append(od, append(object{{"final", t.childFinal}}, tr...))
					}
				}
			}
			if od != nil {
				x = append(x, field{"onDone", od})
			}
			inv = append(inv, x)
		}
		o = append(o, field{"invoke", inv})
	}
	if len(n.stops) > 0 {
		groups := make([]string, len(n.stops))
		for i, d := range n.stops {
			groups[i] = d.group
		}
		o = append(o, field{"stops", groups})
	}
	if n.kind == kState && len(n.children) > 0 {
		if n.parallel {
			states := object{}
			for _, r := range n.children {
				if r.headed {
					states = append(states, field{r.name, m.nodeJSON(ch, r.children[0], st)})
					continue
				}
				ro := object{{"id", r.path}, {"type", "compound"}}
				if st != nil {
					current := ""
					if c := ch.activeChild(r, st.act); c != nil {
						current = c.name
					}
					ro = append(ro, field{"active", st.act.has(r.id)}, field{"current", current}, field{"done", ch.inFinal(r, st.act)})
				}
				ro = append(ro, m.regionJSON(ch, r, st)...)
				states = append(states, field{r.name, ro})
			}
			o = append(o, field{"states", states})
		} else {
			o = append(o, m.regionJSON(ch, n.children[0], st)...)
		}
		if n.history || n.deep {
			states := o[len(o)-1].value.(object)
			if n.history {
				states = append(states, field{"history", object{{"id", n.path + ".history"}, {"type", "history"}, {"history", "shallow"}}})
			}
			if n.deep {
				states = append(states, field{"deep_history", object{{"id", n.path + ".deep_history"}, {"type", "history"}, {"history", "deep"}}})
			}
			o[len(o)-1].value = states
		}
	}
	return o
}

func actionsJSON(n int) []object {
	out := make([]object, n)
	for i := range out {
		out[i] = object{{"type", "dispatch"}}
	}
	return out
}

func typeOf(payload any) reflect.Type { return core.PayloadType(payload) }
