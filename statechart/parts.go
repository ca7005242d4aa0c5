package statechart

import (
	"fmt"
	"strings"
)

// Part is a reusable piece of one machine's chart: states and transitions
// that run as part of the machine that places them (its owner), in the
// owner's partition, decided with it and on its domain context. Unlike a
// child machine a part is not a reactor. Place it as a region (RegionPart)
// or as a compound state (PlacePart), as many times as needed: its states'
// paths tell the placements apart.
//
// A part's handlers target only the part's own states; it reaches the
// owner through its root finals, which OnFinal maps onto the owner's
// states. Its state events are typed "<group>.runtime.<prefix>.<name>"
// when registered (Machine.Register), its compound state
// "<group>.runtime.<prefix>".
type Part struct{ p *partDecl }

type partDecl struct {
	prefix string
	state  State
	elems  []Elem
}

// NewPart builds a part: prefix names it in stored types (lower-case
// segments joined with dots, e.g. "payment" or "billing.card"); compound is
// its compound state, declared with the prefix's last segment as its name,
// used when the part is placed with PlacePart (leave it zero for a part
// only placed as regions); elems are its chart, as a region's: an Initial
// position or a Started state, states and finals.
func NewPart(prefix string, compound State, elems ...Elem) Part {
	return Part{&partDecl{prefix: prefix, state: compound, elems: elems}}
}

// State returns the part's compound state: the target that enters the part
// at its start, and what In tests.
func (p Part) State() State {
	if p.p == nil {
		return State{}
	}
	return p.p.state
}

// Prefix returns the part's prefix.
func (p Part) Prefix() string {
	if p.p == nil {
		return ""
	}
	return p.p.prefix
}

func (p Part) target() targetSpec { return p.State().target() }

// PlacePart places the part's compound state in the enclosing region: its
// sub-states are the part's chart, entered at the part's start. elems are
// the compound state's own: commands and events it accepts (a part's
// commands go first, being deeper), OnFinal mappings, Entry, Exit, After,
// Done.
func PlacePart(p Part, elems ...Elem) Elem {
	return Elem{&elem{kind: ePart, part: &p, elems: elems}}
}

// RegionPart places the part as a named region of the enclosing parallel
// state, entered at the part's start whenever the state is. elems are the
// region's OnFinal mappings.
func RegionPart(name string, p Part, elems ...Elem) Elem {
	return Elem{&elem{kind: eRegion, name: name, part: &p, elems: elems}}
}

// OnFinal maps one of a part's root final states onto a target of the
// owner: when the part's region (or compound state) reaches final, the
// machine moves to target in the same decision (trigger "on_final"). An
// unmapped final leaves the part there. When one decision both brings a
// region to a mapped final and completes the owner's Done join, OnFinal
// wins: it is the deeper transition.
func OnFinal(final State, target Target) Elem {
	return Elem{&elem{kind: eOnFinal, final: final, targets: []Target{target}}}
}

func lastSegment(prefix string) string {
	if i := strings.LastIndexByte(prefix, '.'); i >= 0 {
		return prefix[i+1:]
	}
	return prefix
}

func validPrefix(prefix string) bool {
	for seg := range strings.SplitSeq(prefix, ".") {
		if !validName(seg) {
			return false
		}
	}
	return prefix != ""
}

// usePart records a part's placement and checks its prefix.
func (b *builder) usePart(p *Part) bool {
	if p == nil || p.p == nil {
		b.errorf("a zero Part (build parts with NewPart)")
		return false
	}
	if !validPrefix(p.p.prefix) {
		b.errorf("part %q: a prefix is lower-case segments of letters, digits and underscores joined with dots", p.p.prefix)
		return false
	}
	for _, o := range b.c.parts {
		if o.p == p.p {
			return true
		}
		if lastSegment(o.p.prefix) == lastSegment(p.p.prefix) {
			b.errorf("parts %q and %q: their prefixes end the same way, so their compound states' paths and types would clash", o.p.prefix, p.p.prefix)
			return false
		}
	}
	b.c.parts = append(b.c.parts, p)
	return true
}

// partState places a part's compound state in region r.
func (b *builder) partState(r *node, e *elem, mount int) {
	p := e.part
	if !b.usePart(p) {
		return
	}
	s := p.p.state
	if s.d == nil {
		b.errorf("part %q has no compound state: give NewPart one to place it with PlacePart", p.p.prefix)
		return
	}
	if s.d.name != lastSegment(p.p.prefix) {
		b.errorf("part %q: its compound state is named %q; name it %q, after the prefix's last segment", p.p.prefix, s.d.name, lastSegment(p.p.prefix))
	}
	b.c.compound[s.d] = p
	n := b.add(&node{kind: kState, parent: r, mount: mount, state: s, name: s.d.name, path: r.prefix + s.d.name})
	r.children = append(r.children, n)
	b.place(n, s, mount)
	b.mounts++
	n.children = append(n.children, b.region(n, "", true, p.p.elems, b.mounts, b.mounts, p))
	b.fill(n, e.elems, mount, nil, true)
}

// partRegion places a part as region re of the parallel state n.
func (b *builder) partRegion(n *node, re *elem, mount int) *node {
	p := re.part
	if !b.usePart(p) {
		return b.add(&node{kind: kRegion, name: re.name, parent: n, path: n.path + "." + re.name, end: len(b.c.nodes) + 1})
	}
	b.mounts++
	r := b.region(n, re.name, false, p.p.elems, mount, b.mounts, p)
	for _, e := range re.elems {
		if e.e == nil || e.e.kind != eOnFinal {
			b.errorf("region %q: RegionPart takes OnFinal elements, not %s", r.path, e.describe())
			continue
		}
		b.eventless(r, e.e)
	}
	return r
}

// stateTypeName returns the stored type of a state's events for a machine
// of group: "<group>.runtime.<name>", with a part's prefix before the name.
func (c *chart) stateTypeName(group string, s State) string {
	if p, ok := c.compound[s.d]; ok {
		return group + ".runtime." + p.p.prefix
	}
	for _, n := range c.placed[s.d] {
		if n.part != nil {
			return fmt.Sprintf("%s.runtime.%s.%s", group, n.part.p.prefix, s.d.name)
		}
	}
	return group + ".runtime." + s.d.name
}
