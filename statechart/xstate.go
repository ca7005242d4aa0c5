package statechart

import (
	"bytes"
	"encoding/json"
	"reflect"
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
// compound, parallel, final, history), "initial", "states", "on" (commands
// and events by type name, each a list of {target, meta}), "always",
// "onDone" (Done joins), "entry" / "exit" (dispatch actions), "after"
// (delays in milliseconds, each dispatching a command) and "invoke"
// (children started by the state). A region's initial position is a state
// named "initial"; history targets are "history" child states named
// "history" or "deep_history". Type names are the Registry's when set.
func (m Machine[C]) JSON() ([]byte, error) {
	return json.Marshal(m.definitionJSON(nil))
}

// JSON returns the instance's definition JSON (Machine.JSON) filled with
// its status: the top level gains "value" (Config.Value), "paths" and
// "status" ("active", or "done" once the machine is final), and every state
// node "active": true or false.
func (i Instance[C]) JSON(m Machine[C]) ([]byte, error) {
	doc := m.definitionJSON(&i.st.act)
	status := "active"
	if i.Final() {
		status = "done"
	}
	paths := i.Paths()
	if paths == nil {
		paths = []string{}
	}
	doc = append(object{{"value", i.Config().Value()}, {"paths", paths}, {"status", status}}, doc...)
	return json.Marshal(doc)
}

func (m Machine[C]) definitionJSON(act *bitset) object {
	ch := m.core().ch
	root := object{{"id", m.group()}}
	root = append(root, m.regionJSON(ch, ch.root, act)...)
	return root
}

func (m Machine[C]) regionJSON(ch *chart, r *node, act *bitset) object {
	var o object
	if r.start != nil {
		o = append(o, field{"initial", r.start.name})
	}
	states := object{}
	for _, n := range r.children {
		states = append(states, field{n.name, m.nodeJSON(ch, n, act)})
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
	var out []object
	for _, o := range t.options {
		tr := object{{"target", target(o)}}
		if len(t.guards) > 0 {
			tr = append(tr, field{"guard", "guarded"})
		}
		out = append(out, tr)
	}
	if t.stay || len(t.options) == 0 {
		out = append(out, object{{"target", nil}})
	}
	return out
}

func (m Machine[C]) nodeJSON(ch *chart, n *node, act *bitset) object {
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
	if act != nil {
		o = append(o, field{"active", act.has(n.id)})
	}
	if len(n.handlers) > 0 {
		on := object{}
		for _, t := range n.handlers {
			on = append(on, field{m.exportName(t.msgType), m.transitionsJSON(t)})
		}
		o = append(o, field{"on", on})
	}
	var always, done []object
	for _, t := range ch.transitionsInOrder(n) {
		switch t.kind {
		case eAlways:
			always = append(always, m.transitionsJSON(t)...)
		case eDone:
			done = append(done, m.transitionsJSON(t)...)
		}
	}
	if always != nil {
		o = append(o, field{"always", always})
	}
	if done != nil {
		o = append(o, field{"onDone", done})
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
		for _, st := range n.starts {
			x := object{{"id", st.child.group}, {"src", st.child.group}}
			var od []object
			for _, t := range n.eventless {
				if t.kind == eOnDone && t.start == st {
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
	if n.kind == kState && len(n.children) > 0 {
		if n.parallel {
			states := object{}
			for _, r := range n.children {
				ro := object{{"id", r.path}, {"type", "compound"}}
				ro = append(ro, m.regionJSON(ch, r, act)...)
				states = append(states, field{r.name, ro})
			}
			o = append(o, field{"states", states})
		} else {
			o = append(o, m.regionJSON(ch, n.children[0], act)...)
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
