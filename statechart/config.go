package statechart

import (
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"
)

// bitset is a set of node ids.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) unset(i int)    { b[i>>6] &^= 1 << (uint(i) & 63) }
func (b bitset) clone() bitset  { return slices.Clone(b) }
func (b bitset) clear() {
	for i := range b {
		b[i] = 0
	}
}

func (b bitset) intersects(o bitset) bool {
	for i := range b {
		if b[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

func (b bitset) andNot(o bitset) {
	for i := range b {
		b[i] &^= o[i]
	}
}

func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// anyIn reports whether some id in [lo, hi) is set.
func (b bitset) anyIn(lo, hi int) bool {
	for i := lo; i < hi; {
		w := b[i>>6] >> (uint(i) & 63)
		if w != 0 {
			return i+bits.TrailingZeros64(w) < hi
		}
		i = (i | 63) + 1
	}
	return false
}

// next returns the smallest set id >= i, or -1.
func (b bitset) next(i int) int {
	for i < len(b)*64 {
		w := b[i>>6] >> (uint(i) & 63)
		if w != 0 {
			return i + bits.TrailingZeros64(w)
		}
		i = (i | 63) + 1
	}
	return -1
}

// prev returns the largest set id <= i, or -1.
func (b bitset) prev(i int) int {
	for i >= 0 {
		w := b[i>>6] << (63 - uint(i)&63)
		if w != 0 {
			return i - bits.LeadingZeros64(w)
		}
		i = (i &^ 63) - 1
	}
	return -1
}

// ActiveStates is a machine's set of active states (its configuration, in
// SCXML's word), read-only: stored as paths (JSON-native strings,
// outermost first) and read back later against the machine's definition
// (Machine.ActiveStates). It has no domain context, history or children:
// it tells what the active states accept, not whether a command would
// succeed. (The runtime's settings are shell.Config, another thing.)
type ActiveStates struct {
	ch  *chart
	act bitset
	// entries are an instance's (nil for a configuration read from paths
	// or an instance built from them).
	entries []entry
}

// EnteredBy is the state event that entered a state: its id, stored type
// and time (UTC). An instance loaded from the store
// (Load, shell.LoadMachine) has the stored events'; one that Decide
// returned has, for the states the decision entered, the event's type, the
// decided message's time and no id (the shell stamps events when it
// appends them).
type EnteredBy struct {
	ID   uuid.UUID `json:"id"`
	Type string    `json:"type"`
	At   time.Time `json:"time"`
}

// EnteredBy returns the state event that entered active state s (for a
// state placed several times, its first active placement). A configuration
// read from paths has none.
func (c ActiveStates) EnteredBy(s State) (EnteredBy, bool) {
	if c.ch == nil || s.d == nil || c.entries == nil {
		return EnteredBy{}, false
	}
	for _, n := range c.ch.placed[s.d] {
		if c.act.has(n.id) {
			return c.entries[n.id].by(c.ch), true
		}
	}
	return EnteredBy{}, false
}

// Visited reports whether state s was ever entered (it is active, or was
// active before). A configuration read from paths knows only the active
// states.
func (c ActiveStates) Visited(s State) bool {
	if c.ch == nil || s.d == nil {
		return false
	}
	for _, n := range c.ch.placed[s.d] {
		if c.visited(n) {
			return true
		}
	}
	return false
}

func (c ActiveStates) visited(n *node) bool {
	return c.act.has(n.id) || (c.entries != nil && c.entries[n.id].n > 0)
}

// Paths returns the paths of the active states, outermost first (document
// order). A region at its initial position contributes nothing.
func (c ActiveStates) Paths() []string {
	if c.ch == nil {
		return nil
	}
	var out []string
	for i := c.act.next(0); i >= 0; i = c.act.next(i + 1) {
		if n := c.ch.nodes[i]; n.kind == kState {
			out = append(out, n.path)
		}
	}
	return out
}

// In reports whether state s is active (anywhere it is placed; a state is
// active when it or a sub-state is).
func (c ActiveStates) In(s State) bool {
	if c.ch == nil || s.d == nil {
		return false
	}
	for _, n := range c.ch.placed[s.d] {
		if c.act.has(n.id) {
			return true
		}
	}
	return false
}

// InPath reports whether the state at path is active.
func (c ActiveStates) InPath(path string) bool {
	if c.ch == nil {
		return false
	}
	n, ok := c.ch.byPath[path]
	return ok && c.act.has(n.id)
}

// Current returns the innermost active states (one per active region that
// is not at its initial position), in document order.
func (c ActiveStates) Current() []State {
	if c.ch == nil {
		return nil
	}
	var out []State
	for i := c.act.next(0); i >= 0; i = c.act.next(i + 1) {
		if n := c.ch.nodes[i]; n.kind == kState && n.atomic() {
			out = append(out, n.state)
		}
	}
	return out
}

// Final reports whether the machine is finished: its root region is at a
// final state.
func (c ActiveStates) Final() bool {
	if c.ch == nil {
		return false
	}
	return c.ch.inFinal(c.ch.root, c.act)
}

// Value returns the configuration as a nested value, as XState writes it:
// the root's active state name, or a map from a state with sub-states or
// regions to its value (regions by name, "initial" for a region at its
// initial position):
//
//	map[string]any{"placed": map[string]any{"payment": "paying", "shipping": "initial"}}
func (c ActiveStates) Value() any {
	if c.ch == nil {
		return nil
	}
	return c.ch.value(c.ch.root, c.act)
}

// AvailableCommands returns the command types some active state accepts,
// in the order the chart declares them. Handlers' guards (When) are not
// evaluated: a configuration has no context.
func (c ActiveStates) AvailableCommands() []reflect.Type {
	if c.ch == nil {
		return nil
	}
	var out []reflect.Type
	for _, t := range c.ch.commands {
		if c.accepts(t) {
			out = append(out, t)
		}
	}
	return out
}

// HandledCommands returns every command type the machine accepts in any
// state, to tell commands that are not available now from ones the machine
// never takes.
func (c ActiveStates) HandledCommands() []reflect.Type {
	if c.ch == nil {
		return nil
	}
	return slices.Clone(c.ch.commands)
}

// Accepts reports whether some active state accepts the command (a payload
// value or a Go type).
func (c ActiveStates) Accepts(command any) bool {
	if c.ch == nil {
		return false
	}
	t, ok := command.(reflect.Type)
	if !ok {
		t = reflect.TypeOf(command)
	}
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return c.accepts(t)
}

func (c ActiveStates) accepts(t reflect.Type) bool {
	for _, tr := range c.ch.byType[t] {
		if tr.kind == eCommand && c.act.has(tr.src.id) {
			return true
		}
	}
	return false
}

// String renders the paths.
func (c ActiveStates) String() string { return fmt.Sprint(c.Paths()) }

func (ch *chart) value(r *node, act bitset) any {
	for _, n := range r.children {
		if !act.has(n.id) {
			continue
		}
		if n.kind != kState || len(n.children) == 0 {
			return n.name
		}
		if !n.parallel {
			return map[string]any{n.name: ch.value(n.children[0], act)}
		}
		regions := make(map[string]any, len(n.children))
		for _, sub := range n.children {
			if head := sub.children[0]; sub.headed && !head.parallel && len(head.children) > 0 {
				regions[sub.name] = ch.value(head.children[0], act) // the region is its head's contents
				continue
			}
			regions[sub.name] = ch.value(sub, act)
		}
		return map[string]any{n.name: regions}
	}
	return nil
}

// activeChild returns the active child of region r.
func (ch *chart) activeChild(r *node, act bitset) *node {
	for _, n := range r.children {
		if act.has(n.id) {
			return n
		}
	}
	return nil
}

// inFinal reports whether a region is at a final state, or every region of
// a state is.
func (ch *chart) inFinal(n *node, act bitset) bool {
	if n.kind == kRegion && n.headed {
		return ch.inFinal(n.children[0], act)
	}
	if n.kind == kRegion {
		c := ch.activeChild(n, act)
		return c != nil && c.kind == kState && c.final
	}
	if len(n.children) == 0 {
		return false
	}
	for _, r := range n.children {
		if !ch.inFinal(r, act) {
			return false
		}
	}
	return true
}

// complete rebuilds the full configuration (regions and initial positions)
// from the active states in act, checking that they form one.
func (ch *chart) complete(act bitset) error {
	states := newBitset(len(ch.nodes))
	for i := act.next(0); i >= 0; i = act.next(i + 1) {
		if ch.nodes[i].kind == kState {
			states.set(i)
		}
	}
	act.clear()
	if states.empty() && ch.hasStart {
		return nil // a child machine its parent has not started yet
	}
	var walk func(r *node) error
	walk = func(r *node) error {
		act.set(r.id)
		var found *node
		for _, n := range r.children {
			if n.kind == kState && states.has(n.id) {
				if found != nil {
					return &configError{fmt.Sprintf("%q and %q are two states of one region", found.path, n.path)}
				}
				found = n
			}
		}
		if found == nil {
			if r.start == nil || r.start.kind != kInitial {
				return &configError{fmt.Sprintf("%s has no active state and no initial position", where(r))}
			}
			act.set(r.start.id)
			return nil
		}
		act.set(found.id)
		for _, sub := range found.children {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(ch.root); err != nil {
		return err
	}
	for i := states.next(0); i >= 0; i = states.next(i + 1) {
		if !act.has(i) {
			return &configError{fmt.Sprintf("%q is in a region that is not active", ch.nodes[i].path)}
		}
	}
	return nil
}

// configuration reads stored paths into a full configuration.
func (ch *chart) configuration(paths []string) (bitset, error) {
	act := newBitset(len(ch.nodes))
	for _, p := range paths {
		n, ok := ch.byPath[p]
		if !ok {
			if r, isInitial := ch.initialPath(p); isInitial {
				return nil, &configError{fmt.Sprintf("%q is the initial position of %s: leave it out of the paths", p, where(r))}
			}
			return nil, &UnresolvablePathError{Path: p}
		}
		act.set(n.id)
	}
	if err := ch.complete(act); err != nil {
		return nil, err
	}
	return act, nil
}

func (ch *chart) initialPath(p string) (*node, bool) {
	for _, n := range ch.nodes {
		if n.kind == kInitial && n.path == p {
			return n.parent, true
		}
	}
	return nil, false
}
