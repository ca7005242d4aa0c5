package statechart

import (
	"reflect"
	"slices"
	"strings"
)

// Mermaid draws the machine as a Mermaid state diagram (stateDiagram-v2),
// in the manual's layout: each region lists its states (a state with
// sub-states or regions as a block, regions separated by "--"), then the
// transitions drawn in it, then its final states' edges to [*]. A
// transition is drawn in the innermost region holding both ends, in
// document order of its source. Labels are the command's Go type name,
// "on <Event>" for events, and "always", "done", "on_final",
// "children_done <group>", "on_done <final>" for eventless transitions,
// followed by the guards' labels in brackets ("always [payment_due]") and
// the children a handler starts ("AddLine / starts line_item_machine").
// History targets are the pseudo-states "(H)" and "(H*)" drawn in their
// state; a StartsAt is the state's "[*] -->" edge. Data-only handlers that
// start children, and the children a state stops, are notes on the state.
// A handler's Stay, entry and exit actions and timers are not drawn. A
// flat chart (no compound or parallel state) lists transitions only.
func (m Machine[C]) Mermaid() string { return m.core().ch.mermaid() }

type mermaidEdge struct {
	scope *node
	line  string
}

func mermaidID(n *node) string {
	if n.kind == kInitial {
		return "[*]"
	}
	return strings.ReplaceAll(n.path, ".", "_")
}

func (ch *chart) transitionsInOrder(n *node) []*transition {
	ts := slices.Concat(n.handlers, n.eventless)
	slices.SortStableFunc(ts, func(a, b *transition) int { return a.order - b.order })
	return ts
}

func transitionLabel(t *transition) string {
	var label string
	switch t.kind {
	case eCommand:
		label = t.msgType.Name()
	case eOn:
		label = "on " + t.msgType.Name()
	case eAlways:
		label = "always"
	case eDone:
		label = "done"
	case eOnFinal:
		label = "on_final"
	case eChildrenDone:
		label = "children_done " + t.child.group
	case eOnDone:
		label = "on_done " + t.childFinal
	}
	if g := guardLabel(t.guards); g != "" {
		label += " [" + g + "]"
	}
	if len(t.starts) > 0 {
		label += " / starts " + startNames(t.starts)
	}
	return label
}

func guardLabel(gs []Predicate) string {
	labels := make([]string, 0, len(gs))
	for _, g := range gs {
		labels = append(labels, g.label)
	}
	return strings.Join(labels, " and ")
}

func historyID(n *node, h histKind) string {
	switch h {
	case histShallow:
		return mermaidID(n) + "_history"
	case histDeep:
		return mermaidID(n) + "_history_deep"
	}
	return mermaidID(n)
}

func (ch *chart) mermaid() string {
	nested := false
	for _, n := range ch.nodes {
		if n.kind == kState && len(n.children) > 0 {
			nested = true
		}
	}
	var edges []mermaidEdge
	for _, n := range ch.nodes {
		if n.kind == kRegion && n.start != nil && n.start.kind == kState && (n.parent == nil || n.parent.startAt == nil) {
			edges = append(edges, mermaidEdge{scope: n, line: "[*] --> " + mermaidID(n.start)})
		}
		if n.startAt != nil && len(n.startAt.options) == 1 {
			o := n.startAt.options[0]
			for i, tgt := range o.nodes {
				edges = append(edges, mermaidEdge{scope: n.children[0], line: "[*] --> " + historyID(tgt, o.spec.parts[i].hist)})
			}
		}
		if n.kind == kState {
			scope := n.parent
			for _, t := range n.handlers {
				if len(t.options) == 0 && len(t.starts) > 0 {
					edges = append(edges, mermaidEdge{scope: scope, line: "note right of " + mermaidID(n) + " : " + transitionLabel(t)})
				}
			}
			if len(n.stops) > 0 {
				edges = append(edges, mermaidEdge{scope: scope, line: "note right of " + mermaidID(n) + " : stops " + startNames(n.stops)})
			}
		}
		for _, t := range ch.transitionsInOrder(n) {
			src := t.src
			if t.kind == eOnFinal && t.final != nil {
				src = t.final
			}
			for _, o := range t.options {
				for pi, tgt := range o.nodes {
					id := historyID(tgt, o.spec.parts[pi].hist)
					scope := common(src, tgt)
					for scope.kind != kRegion {
						scope = scope.parent
					}
					if src.kind == kInitial {
						scope = src.parent
					}
					label := transitionLabel(t)
					line := mermaidID(src) + " --> " + id
					if label != "" {
						line += " : " + label
					}
					edges = append(edges, mermaidEdge{scope: scope, line: line})
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	var region func(r *node, indent string)
	region = func(r *node, indent string) {
		if nested {
			for _, s := range r.children {
				if s.kind != kState {
					continue
				}
				if len(s.children) == 0 {
					b.WriteString(indent + `state "` + s.name + `" as ` + mermaidID(s) + "\n")
					continue
				}
				b.WriteString(indent + `state "` + s.name + `" as ` + mermaidID(s) + " {\n")
				for i, sub := range s.children {
					if i > 0 {
						b.WriteString(indent + "  --\n")
					}
					region(sub, indent+"  ")
				}
				if s.history {
					b.WriteString(indent + `  state "(H)" as ` + historyID(s, histShallow) + "\n")
				}
				if s.deep {
					b.WriteString(indent + `  state "(H*)" as ` + historyID(s, histDeep) + "\n")
				}
				b.WriteString(indent + "}\n")
			}
		}
		for _, e := range edges {
			if e.scope == r {
				b.WriteString(indent + e.line + "\n")
			}
		}
		for _, s := range r.children {
			if s.kind == kState && s.final {
				b.WriteString(indent + mermaidID(s) + " --> [*]\n")
			}
		}
	}
	region(ch.root, "  ")
	return b.String()
}

// typeNames names message types for exports: the registry's name when m has
// a Registry and the type is registered, else the Go type name.
func (m Machine[C]) exportName(t reflect.Type) string {
	if m.Registry != nil {
		if ct, err := m.Registry.ByGoType(t); err == nil {
			return ct.Name
		}
	}
	return t.Name()
}
