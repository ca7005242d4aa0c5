package topology

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
)

// NodeType is the kind of a topology node.
type NodeType string

// The node types of a topology, as the manual names them (plus machines,
// workflows and plain reactors).
const (
	Command    NodeType = "command"
	Event      NodeType = "event"
	Automation NodeType = "automation"
	ReadModel  NodeType = "readmodel"
	Machine    NodeType = "machine"
	Workflow   NodeType = "workflow"
	Reactor    NodeType = "reactor"
)

// Node is one node of the message-flow graph.
type Node struct {
	Type NodeType `json:"type"`
	// ID is unique in the graph: "<type>:<group>:<name>" ("event:<name>"
	// for events, which belong to no one group).
	ID string `json:"id"`
	// Name is the message type name for commands and events, a
	// description of the handler for automations ("reaction(<type>)"),
	// the group's label for read models, machines, workflows and reactors.
	Name string `json:"name"`
	// GroupID and GroupLabel are the consumer group the node belongs to
	// (for an event: the group that produces it, "" when no reactor of the
	// graph does).
	GroupID    string `json:"group_id"`
	GroupLabel string `json:"group_label"`
	// Consumes and Produces are message type names.
	Consumes []string `json:"consumes,omitempty"`
	Produces []string `json:"produces,omitempty"`
	// Complete is false when the node may produce types the graph does not
	// know: a handler without an Emits declaration, a machine's handler
	// function or action, a plain reactor.
	Complete bool `json:"complete"`
	// Handler says which handler of the group the node is (decide, react,
	// entry, exit, after, always), with State the machine state's path.
	Handler core.FlowKind `json:"handler,omitempty"`
	State   string        `json:"state,omitempty"`
	// Chart is a machine's definition in XState's vocabulary
	// (statechart.Machine.JSON) and Mermaid its state diagram.
	Chart   json.RawMessage `json:"chart,omitempty"`
	Mermaid string          `json:"mermaid,omitempty"`
}

// Graph is the message-flow graph of a set of reactors.
type Graph struct {
	Nodes []Node `json:"nodes"`
	// Observed is the window of the log the graph was compared with, and
	// Flows the declared and observed edges of its handlers; both set by
	// WithObservation (nil without it).
	Observed *Observation `json:"observed,omitempty"`
	Flows    []Flow       `json:"flows,omitempty"`
}

// Node returns the node with the given id.
func (g Graph) Node(id string) (Node, bool) {
	for _, n := range g.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// Filter returns the nodes of the given type, in graph order.
func (g Graph) Filter(t NodeType) []Node {
	var out []Node
	for _, n := range g.Nodes {
		if n.Type == t {
			out = append(out, n)
		}
	}
	return out
}

// JSON returns the graph as indented JSON: {"nodes": [...]}.
func (g Graph) JSON() ([]byte, error) { return json.MarshalIndent(g, "", "  ") }

// TypesProvider is the optional interface of a workflow definition (or a
// reactor running one) that tells the message types of its steps, its
// input and its result: a shell/workflow Definition implements it, and
// the graph draws a workflow node's edges from it (without it, from the
// types the reactor handles).
type TypesProvider interface {
	Types() durable.Types
}

// charted is what a statechart.Machine exports for its node.
type charted interface {
	JSON() ([]byte, error)
	Mermaid() string
}

// ErrNotReactor is matched by the error of Of given something that is
// neither a core.Definition nor an effects.Reactor.
var ErrNotReactor = fmt.Errorf("topology: not a reactor")

// Of builds the message-flow graph of reactors: core definitions
// (core.Decider, core.Projector, statechart.Machine, with the child
// machines a machine starts), workflows (shell/workflow), any
// effects.Reactor, and shell.Bundle and shell.ReactorSet values (a
// shell.Module) holding them, expanded as the router expands them
// (shell.Expand). reg names the Go types of definitions (nil: Go type
// names); register the types first (Machine.Register registers state
// events). Something that is not a reactor is refused with an error
// matching ErrNotReactor, and nothing is returned.
//
// Nodes come in the order of the reactors given, then their handlers'
// order; an event node comes with the first reactor that produces it, or
// after every reactor when none does.
func Of(reg *codec.Registry, reactors ...any) (Graph, error) {
	b := &builder{reg: reg, seen: map[string]bool{}}
	items := shell.Expand(reactors...)
	for i, r := range items {
		switch v := r.(type) {
		case core.Definition:
			b.definition(v)
		case effects.Reactor:
			b.reactor(v)
		default:
			return Graph{}, fmt.Errorf("%w: argument %d is a %T (pass core definitions, workflows or effects.Reactor values)", ErrNotReactor, i, r)
		}
	}
	return Graph{Nodes: b.withEvents()}, nil
}

// withEvents places an event node after the first node that produces it,
// and the events that nothing produces at the end: every message type the
// graph mentions that no reactor decides is an event.
func (b *builder) withEvents() []Node {
	commands := map[string]bool{}
	for _, n := range b.nodes {
		if n.Type == Command {
			commands[n.Name] = true
		}
	}
	done := map[string]bool{}
	var out []Node
	event := func(name, group, label string) {
		if commands[name] || done[name] {
			return
		}
		done[name] = true
		out = append(out, Node{Type: Event, ID: "event:" + name, Name: name, GroupID: group, GroupLabel: label, Complete: true})
	}
	for _, n := range b.nodes {
		out = append(out, n)
		for _, p := range n.Produces {
			event(p, n.GroupID, n.GroupLabel)
		}
	}
	for _, n := range b.nodes {
		for _, c := range n.Consumes {
			event(c, "", "")
		}
	}
	return out
}

type builder struct {
	reg   *codec.Registry
	nodes []Node
	seen  map[string]bool
}

func (b *builder) name(t reflect.Type) string {
	if t == nil {
		return ""
	}
	if b.reg != nil {
		if ct, err := b.reg.ByGoType(t); err == nil {
			return ct.Name
		}
	}
	return t.String()
}

func (b *builder) names(ts []reflect.Type) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if n := b.name(t); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (b *builder) add(n Node) {
	if b.seen[n.ID] {
		// One handler per id: merge what a second one adds.
		for i := range b.nodes {
			if b.nodes[i].ID == n.ID {
				b.nodes[i].Consumes = union(b.nodes[i].Consumes, n.Consumes)
				b.nodes[i].Produces = union(b.nodes[i].Produces, n.Produces)
				b.nodes[i].Complete = b.nodes[i].Complete && n.Complete
			}
		}
		return
	}
	b.seen[n.ID] = true
	b.nodes = append(b.nodes, n)
}

func (b *builder) definition(d core.Definition) {
	spec := d.Spec()
	group, label := spec.Group, cmp.Or(spec.Label, spec.Group)
	desc, ok := d.(core.Describer)
	if !ok {
		// An opaque definition: one reactor node.
		b.add(Node{Type: Reactor, ID: "reactor:" + group, Name: label, GroupID: group, GroupLabel: label, Consumes: b.names(spec.Handled)})
		return
	}
	dd := desc.Describe()
	switch dd.Kind {
	case core.KindProjector:
		var evolved []string
		for _, f := range dd.Flows {
			if f.Kind == core.FlowEvolve {
				evolved = append(evolved, b.name(f.Consumes))
			}
		}
		b.add(Node{Type: ReadModel, ID: "readmodel:" + group, Name: label, GroupID: group, GroupLabel: label, Consumes: evolved, Complete: true})
	case core.KindMachine:
		n := Node{Type: Machine, ID: "machine:" + group, Name: label, GroupID: group, GroupLabel: label, Consumes: b.names(spec.Handled), Complete: true}
		var produces []reflect.Type
		for _, f := range dd.Flows {
			produces = append(produces, f.Produces...)
			n.Complete = n.Complete && f.Known
		}
		n.Produces = b.names(produces)
		if c, ok := d.(charted); ok {
			if js, err := c.JSON(); err == nil {
				n.Chart = js
			}
			n.Mermaid = c.Mermaid()
		}
		b.add(n)
	case core.KindWorkflow:
		n := Node{Type: Workflow, ID: "workflow:" + group, Name: label, GroupID: group, GroupLabel: label, Consumes: b.names(spec.Handled), Complete: true}
		if t, ok := d.(TypesProvider); ok {
			n.Consumes, n.Produces = workflowTypes(t.Types())
		}
		b.add(n)
		return
	}
	for _, f := range dd.Flows {
		consumes := b.name(f.Consumes)
		switch f.Kind {
		case core.FlowEvolve:
			continue
		case core.FlowDecide:
			b.add(Node{Type: Command, ID: "command:" + group + ":" + consumes, Name: consumes, GroupID: group, GroupLabel: label,
				Consumes: []string{consumes}, Produces: b.names(f.Produces), Complete: f.Known, Handler: f.Kind, State: stateOf(dd, f)})
		default:
			name := fmt.Sprintf("%s(%s)", automationVerb(f.Kind), cmp.Or(consumes, f.Name))
			if dd.Kind == core.KindMachine && f.Name != "" && f.Kind != core.FlowReact {
				name = fmt.Sprintf("%s(%s)", automationVerb(f.Kind), f.Name)
			}
			var cons []string
			if consumes != "" {
				cons = []string{consumes}
			}
			b.add(Node{Type: Automation, ID: "automation:" + group + ":" + name, Name: name, GroupID: group, GroupLabel: label,
				Consumes: cons, Produces: b.names(f.Produces), Complete: f.Known, Handler: f.Kind, State: stateOf(dd, f)})
		}
	}
}

func stateOf(dd core.Description, f core.Flow) string {
	if dd.Kind != core.KindMachine {
		return ""
	}
	name, _, _ := strings.Cut(f.Name, " after ")
	return name
}

func automationVerb(k core.FlowKind) string {
	switch k {
	case core.FlowReact:
		return "reaction"
	case core.FlowEntry:
		return "entry"
	case core.FlowExit:
		return "exit"
	case core.FlowAfter:
		return "after"
	case core.FlowAlways:
		return "always"
	}
	return string(k)
}

func (b *builder) reactor(r effects.Reactor) {
	group := ""
	if g, ok := r.(effects.Grouper); ok {
		group = g.GroupID()
	} else {
		t := reflect.TypeOf(r)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		group, _ = core.NormalizeGroup(t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + t.Name())
	}
	label := group
	if l, ok := r.(effects.Labeler); ok && l.Label() != "" {
		label = l.Label()
	}
	if d, ok := r.(core.Describer); ok && d.Describe().Kind == core.KindWorkflow {
		n := Node{Type: Workflow, ID: "workflow:" + group, Name: label, GroupID: group, GroupLabel: label, Consumes: r.HandledTypes(), Complete: true}
		if t, ok := r.(TypesProvider); ok {
			n.Consumes, n.Produces = workflowTypes(t.Types())
		}
		b.add(n)
		return
	}
	b.add(Node{Type: Reactor, ID: "reactor:" + group, Name: label, GroupID: group, GroupLabel: label, Consumes: r.HandledTypes()})
}

// workflowTypes splits a workflow's lifecycle types into what clients
// append (start, signal, cancel) and what the run appends.
func workflowTypes(t durable.Types) (consumes, produces []string) {
	consumes = []string{t.WorkflowStarted, t.SignalSent, t.WorkflowCancelled}
	for _, n := range t.All() {
		if !slices.Contains(consumes, n) {
			produces = append(produces, n)
		}
	}
	return consumes, produces
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
