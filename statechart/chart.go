package statechart

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

type nodeKind uint8

const (
	kRegion  nodeKind = iota // the root, a named region, or a compound state's anonymous region
	kState                   // a placed state
	kInitial                 // a region's initial position (a pseudo-state that waits)
)

// node is one node of the compiled chart, numbered in document order
// (pre-order): a node's descendants are the ids in (id, end).
type node struct {
	id, end  int
	kind     nodeKind
	name     string // state or region name ("" for an anonymous region, "root" for the root)
	path     string // state path; region path; initial position path
	prefix   string // region: what its children's paths start with
	parent   *node
	children []*node
	mount    int // 0: the machine's own chart; >0: one mounting of a part
	part     *Part

	// regions and states
	start     *node // region: its Started state or its initial position
	state     State
	final     bool
	parallel  bool // state with named regions
	anonymous bool // region of a compound state
	headed    bool // region of a parallel state headed by a state (RegionState)
	transient bool

	// unguarded is set for the message types the state has an unguarded
	// handler for (a later one of the type is unreachable).
	unguarded map[reflect.Type]bool
	handlers  []*transition // commands and events, in declaration order
	eventless []*transition // Always, Done, OnFinal, ChildrenDone, on-done, in declaration order
	entry     []actionFunc
	exit      []actionFunc
	timers    []timer
	starts    []*stateStart // children started by the state
	stops     []*childDecl
	// startAt is the state's StartsAt: where it starts when entered by
	// default, instead of its regions' starts.
	startAt *transition
	history bool // some transition targets its shallow history
	deep    bool // some transition targets its deep history
}

type timer struct {
	delay   time.Duration
	payload any
}

// atomic reports a leaf of the configuration: a state without regions or an
// initial position.
func (n *node) atomic() bool { return len(n.children) == 0 }

// contains reports whether d is a proper descendant of n.
func (n *node) contains(d *node) bool { return d.id > n.id && d.id < n.end }

// transition is a compiled handler or eventless transition.
type transition struct {
	src     *node
	kind    elemKind
	msgType reflect.Type
	handle  handlerFunc
	options []option
	stay    bool
	guards  []Predicate
	final   *node // OnFinal: the final state it maps; on-done: the child's final path is in childFinal
	child   *childDecl
	start   *stateStart
	// childFinal is the child's root final an on-done mapping takes.
	childFinal string
	starts     []*childDecl
	startsNil  bool
	order      int
	// external is set by External: a handler targeting its own state's
	// descendants exits and re-enters its state (SCXML's default).
	external bool
}

// option is one declared target, resolved.
type option struct {
	spec  targetSpec
	nodes []*node // one per target part
	// defaults are, per target part, its history's default nodes.
	defaults [][]*node
	// domain is the transition domain, computed once (transitionDomain).
	domain *node
}

// chart is a compiled, checked statechart: the tree, every transition, and
// the indexes the interpreter uses. It is immutable once built.
type chart struct {
	nodes    []*node
	root     *node
	ctxType  reflect.Type
	byPath   map[string]*node
	byType   map[reflect.Type][]*transition // commands and events, all states
	commands []reflect.Type                 // accepted command types, in declaration order
	events   []reflect.Type                 // reacted-to event types
	states   []State                        // declared states, in placement order (each once)
	placed   map[*stateDecl][]*node         // where each state is placed (once per mount)
	parts    []*Part
	compound map[*stateDecl]*Part // parts' compound states
	children []*childDecl
	// hasEventless is set when some state has an eventless transition.
	hasEventless bool
	// start and stop are the synthetic transitions of a child machine: the
	// parent's Started enters the root's Started state, Stop moves to the
	// Stopped state.
	start, stop *transition
	errs        []error
	hasStart    bool // the root starts at a Started state (a child machine)
	// eventNames are, by node id, the stored type of each state's events
	// (set by Machine.Chart).
	eventNames []string
	stopped    *node
}

type builder struct {
	c      *chart
	order  int
	mounts int
	// placed maps a state declaration to its nodes (one per mount).
	placed map[*stateDecl][]*node
	// names maps (mount, name) to the declaration, to refuse two states of
	// one name.
	names        map[string]*stateDecl
	pending      []pendingTarget
	pendingFinal []pendingFinal
	regions      map[string]bool
	// startless is set while building the regions of a state with StartsAt:
	// they may have no start of their own (checked once targets resolve).
	startless bool
}

type pendingFinal struct {
	t     *transition
	final State
}

type pendingTarget struct {
	t       *transition
	targets []Target
}

func (b *builder) errorf(format string, args ...any) {
	b.c.errs = append(b.c.errs, fmt.Errorf(format, args...))
}

func compile(ctxType reflect.Type, elems []Elem) *chart {
	c := &chart{ctxType: ctxType, byPath: map[string]*node{}, byType: map[reflect.Type][]*transition{}, compound: map[*stateDecl]*Part{}}
	b := &builder{c: c, placed: map[*stateDecl][]*node{}, names: map[string]*stateDecl{}, regions: map[string]bool{}}
	c.root = b.region(nil, "root", false, elems, 0, 0, nil)
	c.placed = b.placed
	b.resolve()
	b.checkStartsAt()
	b.check()
	b.checkChildRoles()
	c.commands, c.events = nil, nil
	for _, n := range c.nodes {
		for _, t := range n.handlers {
			list := &c.commands
			if t.kind == eOn {
				list = &c.events
			}
			if !slices.Contains(*list, t.msgType) {
				*list = append(*list, t.msgType)
			}
		}
		if len(n.eventless) > 0 {
			c.hasEventless = true
		}
	}
	c.hasStart = c.root.start != nil && c.root.start.kind == kState
	if c.hasStart {
		c.start = &transition{src: c.root, kind: eStart, options: []option{{spec: c.root.start.state.target(), nodes: []*node{c.root.start}}}}
	}
	if c.stopped != nil {
		c.stop = &transition{src: c.root, kind: eStops, options: []option{{spec: c.stopped.state.target(), nodes: []*node{c.stopped}}}}
	}
	if len(c.errs) == 0 {
		for _, p := range b.pending {
			for i := range p.t.options {
				p.t.options[i].domain = transitionDomain(c, p.t, &p.t.options[i])
			}
		}
	}
	return c
}

func (b *builder) add(n *node) *node {
	n.id = len(b.c.nodes)
	b.c.nodes = append(b.c.nodes, n)
	return n
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// region builds a region node (the root when parent is nil) and its
// positions.
func (b *builder) region(parent *node, name string, anonymous bool, elems []Elem, mount, childMount int, part *Part) *node {
	r := b.add(&node{kind: kRegion, name: name, parent: parent, anonymous: anonymous, mount: mount, part: part})
	startless := b.startless
	b.startless = false
	switch {
	case parent == nil:
		r.path, r.prefix = "", ""
	case anonymous:
		r.path, r.prefix = parent.path, parent.path+"."
	default:
		r.path = parent.path + "." + name
		r.prefix = r.path + "."
		if !validName(name) {
			b.errorf("region %q: names are lower-case letters, digits and underscores", name)
		}
		key := fmt.Sprintf("%d/%s", mount, name)
		if b.regions[key] {
			b.errorf("two regions named %q: region names are unique within a machine", name)
		}
		b.regions[key] = true
	}
	var initial, started *node
	for _, e := range elems {
		if e.e == nil {
			b.errorf("%s: a zero Elem (build elements with the statechart functions)", where(r))
			continue
		}
		switch e.e.kind {
		case eInitial:
			if initial != nil {
				b.errorf("%s has two Initial positions", where(r))
				continue
			}
			initial = b.add(&node{kind: kInitial, name: "initial", path: r.prefix + "initial", parent: r, mount: childMount, part: part})
			r.children = append(r.children, initial)
			for _, he := range e.e.elems {
				if he.e == nil || (he.e.kind != eCommand && he.e.kind != eOn) {
					b.errorf("%s: an Initial position only accepts commands and events (Command, CommandFunc, On, OnFunc), not %s", where(initial), he.describe())
					continue
				}
				b.handler(initial, he.e)
			}
			initial.end = len(b.c.nodes)
		case ePlace:
			s := b.state(r, e.e, childMount, part)
			if e.e.place == plStarted {
				if started != nil {
					b.errorf("%s has two Started states (%s and %s)", where(r), started.name, s.name)
				}
				started = s
			}
			if e.e.place == plStopped {
				if parent != nil {
					b.errorf("Stopped %q: only a machine's root region has a Stopped state", s.name)
				} else if b.c.stopped != nil {
					b.errorf("two Stopped states")
				} else {
					b.c.stopped = s
				}
			}
		case ePart:
			b.partState(r, e.e, childMount)
		default:
			b.errorf("%s: %s belongs in a state, not directly in a region", where(r), e.describe())
		}
	}
	switch {
	case initial != nil && started != nil:
		b.errorf("%s has both an Initial position and a Started state: it starts at one of them", where(r))
		r.start = started
	case initial != nil:
		r.start = initial
	case started != nil:
		r.start = started
	case !startless:
		b.errorf("%s has no start: give it an Initial position or a Started state", where(r))
	}
	r.end = len(b.c.nodes)
	return r
}

// headedRegion builds a region of parallel state n headed by the state of
// re (RegionState): the region's one child and start, at the region's path.
func (b *builder) headedRegion(n *node, re *elem, mount int, part *Part) *node {
	r := b.add(&node{kind: kRegion, name: re.name, parent: n, mount: mount, part: part, headed: true})
	r.path = n.path + "." + re.name
	r.prefix = r.path + "."
	key := fmt.Sprintf("%d/%s", mount, re.name)
	if b.regions[key] {
		b.errorf("two regions named %q: region names are unique within a machine", re.name)
	}
	b.regions[key] = true
	head := b.add(&node{kind: kState, parent: r, mount: mount, part: part, state: re.state, name: re.name, path: r.path})
	r.children = append(r.children, head)
	r.start = head
	b.place(head, re.state, mount)
	b.fill(head, re.elems, mount, part, false)
	r.end = len(b.c.nodes)
	return r
}

func where(n *node) string {
	switch {
	case n.kind == kRegion && n.parent == nil:
		return "the root region"
	case n.kind == kRegion && n.anonymous:
		return fmt.Sprintf("state %q", n.parent.path)
	case n.kind == kRegion:
		return fmt.Sprintf("region %q", n.path)
	case n.kind == kInitial:
		return fmt.Sprintf("the initial position %q", n.path)
	}
	return fmt.Sprintf("state %q", n.path)
}

// state builds a placed state and everything in it.
func (b *builder) state(r *node, e *elem, mount int, part *Part) *node {
	s := e.state
	n := b.add(&node{kind: kState, parent: r, mount: mount, part: part, state: s,
		final: e.place == plFinal || e.place == plStopped})
	r.children = append(r.children, n)
	if s.d == nil {
		b.errorf("%s: a zero State (declare states with Declare or Named)", where(r))
		n.name, n.path = "?", r.prefix+"?"
		n.end = len(b.c.nodes)
		return n
	}
	n.name = s.d.name
	n.path = r.prefix + s.d.name
	b.place(n, s, mount)
	return b.fill(n, e.elems, mount, part, false)
}

// place records where a state is placed and checks it is placed once.
func (b *builder) place(n *node, s State, mount int) {
	if !validName(s.d.name) || s.d.name == "initial" {
		b.errorf("state %q: names are lower-case letters, digits and underscores, and \"initial\" is reserved", s.d.name)
	}
	for _, o := range b.placed[s.d] {
		if o.mount == mount {
			b.errorf("state %q is placed twice (%s and %s): place a state once, and reuse charts as parts", s.d.name, o.path, n.path)
		}
	}
	key := fmt.Sprintf("%d/%s", mount, s.d.name)
	if prev, ok := b.names[key]; ok && prev != s.d {
		b.errorf("two states are named %q: names are stored in paths and event types, so they are unique within a machine", s.d.name)
	}
	b.names[key] = s.d
	if len(b.placed[s.d]) == 0 {
		b.c.states = append(b.c.states, s)
	}
	b.placed[s.d] = append(b.placed[s.d], n)
	b.c.byPath[n.path] = n
}

// fill builds the contents of a state node n from its elements.
func (b *builder) fill(n *node, elems []Elem, mount int, part *Part, preset bool) *node {
	var direct []Elem
	var regions []*elem
	for _, e := range elems {
		if e.e == nil {
			b.errorf("%s: a zero Elem (build elements with the statechart functions)", where(n))
			continue
		}
		switch e.e.kind {
		case ePlace, eInitial, ePart:
			direct = append(direct, e)
		case eRegion:
			regions = append(regions, e.e)
		}
	}
	startless := slices.ContainsFunc(elems, func(e Elem) bool { return e.e != nil && e.e.kind == eStartsAt })
	if preset && (len(direct) > 0 || len(regions) > 0) {
		b.errorf("state %q: a part's compound state gets its sub-states from the part, not from PlacePart", n.path)
		direct, regions = nil, nil
	}
	if n.final && (len(direct) > 0 || len(regions) > 0) {
		b.errorf("final state %q cannot have sub-states or regions", n.path)
	}
	switch {
	case len(direct) > 0 && len(regions) > 0:
		b.errorf("state %q has both sub-states and regions: put the sub-states in a Region", n.path)
	case len(direct) > 0:
		b.startless = startless
		n.children = append(n.children, b.region(n, "", true, direct, mount, mount, part))
	case len(regions) > 0:
		n.parallel = true
		for _, re := range regions {
			if re.part != nil {
				n.children = append(n.children, b.partRegion(n, re, mount))
				continue
			}
			if re.state.d != nil {
				n.children = append(n.children, b.headedRegion(n, re, mount, part))
				continue
			}
			b.startless = startless
			n.children = append(n.children, b.region(n, re.name, false, re.elems, mount, mount, part))
		}
	}
	n.end = len(b.c.nodes)
	for _, e := range elems {
		if e.e == nil {
			continue
		}
		x := e.e
		b.checkCtx(n, x)
		if x.when && !guardable(x.kind) {
			b.errorf("state %q: When guards handlers and eventless transitions, not %s", n.path, e.describe())
		}
		if x.reach != reachDefault && !guardable(x.kind) {
			b.errorf("state %q: Internal and External qualify transitions, not %s", n.path, e.describe())
		}
		if len(x.starts) > 0 && x.kind != eCommand && x.kind != eOn {
			b.startsOnNonHandler(n, x, e)
		}
		switch x.kind {
		case ePlace, eInitial, eRegion, ePart:
		case eStartsAt:
			switch {
			case n.startAt != nil:
				b.errorf("state %q has two StartsAt", n.path)
			case len(n.children) == 0:
				b.errorf("state %q: StartsAt on a state with no sub-states or regions", n.path)
			case len(x.targets) != 1 || x.targets[0] == nil || x.targets[0].target().stay:
				b.errorf("state %q: StartsAt takes one target: states below the state, or its history", n.path)
			default:
				n.startAt = b.newTransition(n, x)
			}
		case eCommand, eOn:
			b.handler(n, x)
		case eAlways, eDone, eOnFinal, eChildrenDone:
			b.eventless(n, x)
		case eEntry:
			n.entry = append(n.entry, x.action)
		case eExit:
			n.exit = append(n.exit, x.action)
		case eAfter:
			n.timers = append(n.timers, timer{delay: x.delay, payload: x.payload})
			if x.payload == nil {
				b.errorf("state %q: After with no command", n.path)
			}
		case eStart:
			b.stateStart(n, x)
		case eStops:
			if x.child == nil {
				b.errorf("state %q: Stops needs a child (Machine.Child)", n.path)
				continue
			}
			n.stops = append(n.stops, x.child)
			b.c.addChild(x.child)
		}
		if n.final && x.kind != eEntry && x.kind != eExit && x.kind != eStops && x.kind != ePlace && x.kind != eInitial && x.kind != eRegion && x.kind != ePart {
			b.errorf("final state %q: a final state only has Entry, Exit and Stops, not %s", n.path, e.describe())
		}
	}
	return n
}

// guardable reports the elements that are transitions: handlers and
// eventless transitions.
func guardable(k elemKind) bool {
	switch k {
	case eCommand, eOn, eAlways, eDone, eOnFinal, eChildrenDone:
		return true
	}
	return false
}

func (b *builder) checkCtx(n *node, x *elem) {
	check := func(t reflect.Type, what string) {
		if t != nil && b.c.ctxType != nil && t != b.c.ctxType {
			b.errorf("state %q: %s takes a context of type %v, the machine's context is %v", n.path, what, t, b.c.ctxType)
		}
	}
	check(x.ctxType, elemNames[x.kind])
	for _, g := range x.guards {
		check(g.ctxType, "a guard")
	}
}

func (b *builder) newTransition(src *node, x *elem) *transition {
	b.order++
	t := &transition{src: src, kind: x.kind, msgType: x.msgType, handle: x.handle, guards: x.guards, order: b.order, external: x.reach == reachExternal}
	if x.kind == eCommand || x.kind == eOn { // elsewhere Starts is a definition error (fill)
		t.starts, t.startsNil = x.starts, x.startNil
		for _, c := range x.starts {
			b.c.addChild(c)
		}
	}
	b.pending = append(b.pending, pendingTarget{t: t, targets: x.targets})
	return t
}

func (b *builder) handler(n *node, x *elem) {
	b.checkCtx(n, x)
	if x.msgType == nil || x.msgType.Kind() != reflect.Struct {
		b.errorf("%s: %s: message types are structs", where(n), elemNames[x.kind])
		return
	}
	if n.unguarded[x.msgType] {
		b.errorf("%s accepts %v after an unguarded handler of that type: it is unreachable (guard the earlier one with When)", where(n), x.msgType)
		return
	}
	if len(x.guards) == 0 {
		if n.unguarded == nil {
			n.unguarded = map[reflect.Type]bool{}
		}
		n.unguarded[x.msgType] = true
	}
	t := b.newTransition(n, x)
	n.handlers = append(n.handlers, t)
	b.c.byType[x.msgType] = append(b.c.byType[x.msgType], t)
	list := &b.c.commands
	if x.kind == eOn {
		list = &b.c.events
	}
	if !slices.Contains(*list, x.msgType) {
		*list = append(*list, x.msgType)
	}
}

func (b *builder) eventless(n *node, x *elem) *transition {
	if len(x.targets) != 1 || x.targets[0] == nil {
		b.errorf("state %q: %s takes exactly one target", n.path, elemNames[x.kind])
		return nil
	}
	if x.targets[0].target().stay {
		b.errorf("state %q: %s cannot target Stay", n.path, elemNames[x.kind])
		return nil
	}
	t := b.newTransition(n, x)
	t.child = x.child
	if x.child != nil {
		b.c.addChild(x.child)
	}
	if x.kind == eOnFinal {
		t.final = nil // resolved in resolve: x.final in the part below n
		b.pendingFinal = append(b.pendingFinal, pendingFinal{t: t, final: x.final})
	}
	n.eventless = append(n.eventless, t)
	return t
}
