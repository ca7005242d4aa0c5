package statechart

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

// TimerMetadata is the metadata key of a command scheduled by After: its
// value, "<state path>#<entry>", names the entry of the state that armed
// the timer (the n-th time the state was entered). A command carrying it is
// ignored unless that entry is still the state's current one.
const TimerMetadata = "statechart_timer"

// Decision is everything one decided message produced, in the order it is
// to be appended (Messages), and the same messages sorted by what they are.
// The order of Messages is a contract: for each move, the data events the
// handlers appended, the commands exit actions dispatched (innermost state
// first), the state events (one per transition), then what entering states
// produced (outermost first: entry dispatches, timers, children started);
// then each eventless move in turn, the same way.
type Decision struct {
	// Messages are every message of the decision, in append order, each
	// correlated with the decided message and with the partition keys
	// filled in.
	Messages []core.Message
	// Events are the data events handlers appended.
	Events []core.Message
	// States are the state events, one per move.
	States []core.Message
	// Dispatched are the commands entry and exit actions dispatched.
	Dispatched []core.Message
	// Timers are the commands After scheduled, dated in the future and
	// tagged with TimerMetadata.
	Timers []core.Message
	// Started are the Started messages of child machines the decision
	// starts; Stopped the Stop commands it sends to children.
	Started []core.Message
	Stopped []core.Message
	// Ignored is true when the message changed nothing and needs no answer:
	// an event no active state reacts to, a timer of an entry that is
	// over, a child's Finished that completes nothing.
	Ignored bool
}

type outKind uint8

const (
	outEvent outKind = iota
	outState
	outDispatch
	outTimer
	outStart
	outStop
)

// out collects a decision's messages and their kinds; finish builds the
// Decision with one allocation for all its slices.
type out struct {
	msgs  []core.Message
	kinds []outKind
}

func (o *out) add(k outKind, m core.Message) {
	o.msgs = append(o.msgs, m)
	o.kinds = append(o.kinds, k)
}

// finish returns the Decision, every message correlated with source.
func (o *out) finish(source core.Message) Decision {
	n := len(o.msgs)
	if n == 0 {
		return Decision{}
	}
	all := make([]core.Message, 2*n)
	var d Decision
	d.Messages = all[:n:n]
	var counts [outStop + 1]int
	for i, m := range o.msgs {
		d.Messages[i] = m.Correlate(source)
		counts[o.kinds[i]]++
	}
	rest := all[n:]
	slots := [outStop + 1]*[]core.Message{&d.Events, &d.States, &d.Dispatched, &d.Timers, &d.Started, &d.Stopped}
	for k, c := range counts {
		if c > 0 {
			*slots[k] = rest[:0:c]
			rest = rest[c:]
		}
	}
	for i, m := range d.Messages {
		*slots[o.kinds[i]] = append(*slots[o.kinds[i]], m)
	}
	return d
}

// Do is what a command or event handler uses to act: append data events,
// pick a target, read the configuration, start children. It is valid only
// during the handler call.
type Do struct {
	r      *run
	t      *transition
	events []any
	to     *targetSpec
	starts []any
	err    error
}

// Event appends data events (payloads or Messages); partition keys are
// filled in, and they are evolved into the context before any guard or
// later handler of the decision sees it. State events cannot be appended as
// data: moving is To's job.
func (d *Do) Event(payloads ...any) {
	for _, p := range payloads {
		pl := p
		if m, ok := p.(core.Message); ok {
			pl = m.Payload
		}
		if _, isState := pl.(mover); isState || pl == nil {
			d.fail("Event(%T): state events are appended by moving (To), and an event needs a payload", p)
			continue
		}
		d.events = append(d.events, p)
	}
}

// To moves the machine to target, which must be one of the handler's
// declared targets (Stay included when declared). A handler moves at most
// once.
func (d *Do) To(target Target) {
	if target == nil {
		d.fail("To(nil): use statechart.Stay to stay put")
		return
	}
	if d.to != nil {
		d.fail("To called twice (%s, then %s): a handler moves the machine at most once", *d.to, target.target())
		return
	}
	spec := target.target()
	d.to = &spec
}

// In reports whether state s is active, as the configuration is when the
// handler runs.
func (d *Do) In(s State) bool { return ActiveStates{ch: d.r.ch, act: d.r.st.act}.In(s) }

// Start starts a child machine: started is the child's Started message
// (its keys beyond the parent's, and its input), with the parent's keys
// filled in. The handler must declare the child with Starts.
func (d *Do) Start(started any) {
	if started == nil {
		d.fail("Start(nil)")
		return
	}
	d.starts = append(d.starts, started)
}

func (d *Do) fail(format string, args ...any) {
	if d.err == nil {
		d.err = &TransitionError{Source: d.t.src.path, Trigger: d.r.triggerName, Problem: fmt.Sprintf(format, args...)}
	}
}

// entry is what an instance knows of a node's entries: how many times it
// was entered (timer identity, visited) and the state event that entered it
// last (its id, the node its move targeted, which names its type, and its
// time). It holds no pointers, so cloning an instance's entries is a plain
// copy the garbage collector need not scan.
type entry struct {
	n      uint32
	target int32 // -1: unknown
	sec    int64
	nsec   int32
	id     uuid.UUID
}

var zeroUnix = time.Time{}.Unix()

func (e *entry) enteredBy(target *node, id uuid.UUID, at time.Time) {
	e.target, e.id = -1, id
	if target != nil {
		e.target = int32(target.id)
	}
	e.sec, e.nsec = at.Unix(), int32(at.Nanosecond())
}

// by returns the entry's state event.
func (e entry) by(ch *chart) EnteredBy {
	b := EnteredBy{ID: e.id}
	if e.target >= 0 && int(e.target) < len(ch.eventNames) {
		b.Type = ch.eventNames[e.target]
	}
	if e.sec != zeroUnix || e.nsec != 0 {
		b.At = time.Unix(e.sec, int64(e.nsec)).UTC()
	}
	return b
}

// instState is everything about an instance the interpreter reads besides
// its context: the configuration, history memory, entry counts (timer
// identity) and children. A run works on its own copy.
type instState struct {
	act      bitset
	memory   map[int][]int // history: node id*2 (+1 for deep) -> remembered nodes
	entries  []entry       // each node's entries: how many, and the last's state event
	children map[string]*ChildRef
	// detached is set for instances built from stored paths: no history
	// memory, entry counts or children.
	detached bool
}

func (s instState) clone() instState {
	c := s
	c.act = s.act.clone()
	c.entries = slices.Clone(s.entries)
	if s.memory != nil {
		c.memory = maps.Clone(s.memory)
	}
	if s.children != nil {
		c.children = maps.Clone(s.children)
	}
	return c
}

func memKey(n *node, deep bool) int {
	if deep {
		return n.id*2 + 1
	}
	return n.id * 2
}

// remember records the history of state s from the active configuration,
// as SCXML does when s is exited.
func (ch *chart) remember(st *instState, s *node) {
	if !s.history && !s.deep {
		return
	}
	if st.memory == nil {
		st.memory = map[int][]int{}
	}
	if s.history {
		var ids []int
		for _, r := range s.children {
			if c := ch.activeChild(r, st.act); c != nil {
				ids = append(ids, c.id)
			}
		}
		st.memory[memKey(s, false)] = ids
	}
	if s.deep {
		var ids []int
		for i := st.act.next(s.id + 1); i >= 0 && i < s.end; i = st.act.next(i + 1) {
			if ch.nodes[i].atomic() {
				ids = append(ids, i)
			}
		}
		st.memory[memKey(s, true)] = ids
	}
}

// run is one decision in progress.
type run struct {
	ch          *chart
	st          instState
	ctx         any
	evolve      func(ctx any, m core.Message) any
	keys        map[string]string
	fill        *keyFiller
	trigger     core.Message
	triggerName string
	out         out
	mc          *machineCore
	err         error // a failure found while entering states
	buf         []uint64
	bufs        [32]uint64
	msgBuf      [4]core.Message
	kindBuf     [8]outKind
}

// bits returns an empty bitset for the chart, carved from the run's buffer.
func (r *run) bits() bitset {
	n := (len(r.ch.nodes) + 63) / 64
	if len(r.buf) < n {
		r.buf = make([]uint64, 8*n)
	}
	b := bitset(r.buf[:n:n])
	r.buf = r.buf[n:]
	return b
}

// take is a transition being taken: the chosen target and what it does.
type take struct {
	t       *transition
	opt     *option
	trigger string
	events  []core.Message
	starts  []core.Message
	domain  *node
	exit    bitset
	entry   bitset
	mv      Move
}

func (r *run) config() ActiveStates { return ActiveStates{ch: r.ch, act: r.st.act} }

// errIgnored marks a message that changes nothing.
var errIgnored = errors.New("ignored")

// decide decides a command or an event (isEvent), then runs the eventless
// transitions.
func (r *run) decide(m core.Message, isEvent bool) error {
	if ignored := r.staleTimer(m); ignored {
		return errIgnored
	}
	typ := core.PayloadType(m.Payload)
	var sel []*transition
	var cfg ActiveStates
	for _, t := range r.ch.byType[typ] {
		if !r.st.act.has(t.src.id) || (t.kind == eOn) != isEvent {
			continue
		}
		if len(t.guards) > 0 {
			if cfg.ch == nil {
				cfg = ActiveStates{ch: r.ch, act: r.st.act.clone()} // as before any handler runs
			}
			if !guardsPass(t, r.ctx, cfg) {
				continue
			}
		}
		if slices.ContainsFunc(sel, func(o *transition) bool { return o.src == t.src }) {
			continue // the state's earlier handler of the type is taken (document order)
		}
		sel = append(sel, t)
	}
	// Commands go to the deepest active states that accept them: a state's
	// handler runs only when none of its active descendants accepts it.
	sel = slices.DeleteFunc(sel, func(t *transition) bool {
		for _, o := range sel {
			if t.src.contains(o.src) {
				return true
			}
		}
		return false
	})
	slices.SortFunc(sel, func(a, b *transition) int { return a.src.id - b.src.id })
	if len(sel) == 0 {
		if isEvent {
			return errIgnored
		}
		return &CommandNotHandledError{Command: r.triggerName, Paths: r.config().Paths()}
	}
	union := r.bits()
	var takes []*take
	for _, t := range sel {
		if union.has(t.src.id) {
			continue // an earlier move in document order leaves this state
		}
		saved := r.ctx
		tk, err := r.runHandler(t, m)
		if err != nil {
			return err
		}
		if tk.opt != nil {
			tk.domain = r.domain(t, tk.opt)
			tk.exit = r.exitSet(tk.domain)
			if tk.exit.intersects(union) {
				r.ctx = saved // conflicts with an earlier move: dropped
				continue
			}
			union.or(tk.exit)
		}
		takes = append(takes, tk)
	}
	if err := r.microstep(takes); err != nil {
		return err
	}
	return r.settle()
}

// staleTimer reports a timer command whose arming entry is over.
func (r *run) staleTimer(m core.Message) bool {
	v, ok := m.Metadata[TimerMetadata].(string)
	if !ok {
		return false
	}
	path, num, _ := strings.Cut(v, "#")
	n, ok := r.ch.byPath[path]
	if !ok || !r.st.act.has(n.id) {
		return true
	}
	if r.st.detached {
		return false
	}
	cnt, err := strconv.ParseUint(num, 10, 32)
	return err != nil || uint32(cnt) != r.st.entries[n.id].n
}

func (r *run) runHandler(t *transition, m core.Message) (*take, error) {
	do := &Do{r: r, t: t}
	if t.handle != nil {
		if err := t.handle(r.ctx, m, do); err != nil {
			return nil, err
		}
	}
	if do.err != nil {
		return nil, do.err
	}
	tk := &take{t: t, trigger: r.triggerName}
	switch {
	case do.to != nil && do.to.stay:
		if !t.stay {
			return nil, &TransitionError{Source: t.src.path, Trigger: r.triggerName, Problem: "To(Stay), but Stay is not among the declared targets"}
		}
	case do.to != nil:
		for i := range t.options {
			if t.options[i].spec.equal(*do.to) {
				tk.opt = &t.options[i]
			}
		}
		if tk.opt == nil {
			return nil, &TransitionError{Source: t.src.path, Trigger: r.triggerName, Problem: fmt.Sprintf("To(%s) is not a declared target (declared: %s)", *do.to, declared(t))}
		}
	case len(t.options) == 1 && !t.stay:
		tk.opt = &t.options[0]
	case len(t.options) > 1 && !t.stay:
		return nil, &TransitionError{Source: t.src.path, Trigger: r.triggerName, Problem: fmt.Sprintf("the handler did not pick a target among %s: call To, or declare Stay", declared(t))}
	}
	for _, e := range do.events {
		msg := r.fill.fillMessage(core.NewMessage(e), r.keys)
		tk.events = append(tk.events, msg)
		r.ctx = r.evolve(r.ctx, msg)
	}
	if err := r.handlerStarts(t, m, do, tk); err != nil {
		return nil, err
	}
	return tk, nil
}

func declared(t *transition) string {
	var parts []string
	for _, o := range t.options {
		parts = append(parts, o.spec.String())
	}
	if t.stay {
		parts = append(parts, "Stay")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " | ")
}

// domain returns the transition domain: the node whose active proper
// descendants the transition exits, and below which it enters the path down
// to each target. It depends only on the transition and its targets, never
// on the configuration (SCXML's getTransitionDomain):
//
//   - internal (a handler's default when every target is below its own
//     state): a compound source is its own domain, as SCXML's
//     type="internal"; a parallel source's domain is its region holding
//     every target, or the parallel state itself when they lie in several
//     of its regions (SCXML would leave the parallel state);
//   - external: the innermost region holding the source and every target
//     that is neither of them (SCXML's findLCCA, parallel states skipped: a
//     region is SCXML's compound state), so a self-transition exits and
//     re-enters its state.
func (r *run) domain(t *transition, o *option) *node {
	if o.domain != nil {
		return o.domain // computed when the chart was built
	}
	return transitionDomain(r.ch, t, o)
}

func transitionDomain(ch *chart, t *transition, o *option) *node {
	src := t.src
	targets := o.nodes
	if src == ch.root {
		return src
	}
	if src.kind == kState && !t.external {
		inside := true
		for _, x := range targets {
			if !src.contains(x) {
				inside = false
				break
			}
		}
		if inside {
			if !src.parallel {
				return src
			}
			x := targets[0]
			for _, y := range targets[1:] {
				x = common(x, y)
			}
			for d := x; d != src; d = d.parent {
				if d.parent == src {
					// src's region holding every target; the state heading
					// it stays active unless it is a target itself.
					if d.headed && !slices.Contains(targets, d.children[0]) {
						return d.children[0]
					}
					return d
				}
			}
			return src
		}
	}
	x := src
	for _, y := range targets {
		x = common(x, y)
	}
	for x.kind != kRegion || x == src || slices.Contains(targets, x) || x.headed {
		x = x.parent // a headed region is no compound state of SCXML's: its parallel state is skipped too
	}
	return x
}

func (r *run) exitSet(domain *node) bitset {
	s := r.bits()
	for i := r.st.act.next(domain.id + 1); i >= 0 && i < domain.end; i = r.st.act.next(i + 1) {
		s.set(i)
	}
	return s
}

// addDesc adds n and its default descendants to the entry set: a state's
// StartsAt, then each region not entered yet at its start.
func (r *run) addDesc(set bitset, n *node) {
	set.set(n.id)
	switch n.kind {
	case kState:
		if n.startAt != nil && !set.anyIn(n.id+1, n.end) {
			r.startAt(set, n)
		}
		for _, reg := range n.children {
			if !set.has(reg.id) && !set.anyIn(reg.id+1, reg.end) {
				r.addDesc(set, reg)
			} else {
				set.set(reg.id)
			}
		}
	case kRegion:
		if !set.anyIn(n.id+1, n.end) && n.start != nil {
			r.addDesc(set, n.start)
		}
	}
}

// startAt enters state n's StartsAt target below it: states, or
// histories (n's own, or a state's below n: its memory, else its
// defaults, else the state by default, as a transition to it would).
func (r *run) startAt(set bitset, n *node) {
	o := &n.startAt.options[0]
	for i, x := range o.nodes {
		hist := o.spec.parts[i].hist
		var defaults []*node
		if i < len(o.defaults) {
			defaults = o.defaults[i]
		}
		if x == n {
			if r.hasMemory(n, hist) || len(defaults) > 0 {
				r.enterPart(set, n, hist, defaults)
			}
			continue
		}
		r.enterPart(set, x, hist, defaults)
	}
	for _, x := range o.nodes {
		if x != n {
			r.addAnc(set, x, n)
		}
	}
}

func (r *run) hasMemory(n *node, hist histKind) bool {
	_, ok := r.st.memory[memKey(n, hist == histDeep)]
	return ok
}

// addAnc adds n's ancestors below stop, entering the other regions of
// parallel states on the way at their start.
func (r *run) addAnc(set bitset, n, stop *node) {
	for a := n.parent; a != nil && a != stop; a = a.parent {
		set.set(a.id)
		if a.kind == kState {
			for _, reg := range a.children {
				if !set.has(reg.id) && !set.anyIn(reg.id+1, reg.end) {
					r.addDesc(set, reg)
				}
			}
		}
	}
}

func (r *run) entrySet(tk *take) bitset {
	set := r.bits()
	o := tk.opt
	for i, x := range o.nodes {
		var defaults []*node
		if i < len(o.defaults) {
			defaults = o.defaults[i]
		}
		r.enterPart(set, x, o.spec.parts[i].hist, defaults)
	}
	for _, x := range o.nodes {
		r.addAnc(set, x, tk.domain)
	}
	r.fillDomain(set, tk.domain)
	return set
}

// enterPart adds one target to the entry set: the state and its default
// descendants, or, for a history, the remembered states (SCXML's history
// content), else the history's defaults, else the state by default.
func (r *run) enterPart(set bitset, s *node, hist histKind, defaults []*node) {
	if hist == histNone {
		r.addDesc(set, s)
		return
	}
	var below []*node
	if mem, ok := r.st.memory[memKey(s, hist == histDeep)]; ok {
		for _, id := range mem {
			below = append(below, r.ch.nodes[id])
		}
	} else if len(defaults) > 0 {
		below = defaults
	} else {
		r.addDesc(set, s)
		return
	}
	for _, x := range below {
		r.addDesc(set, x)
	}
	for _, x := range below {
		r.addAnc(set, x, s)
	}
	set.set(s.id)
	for _, reg := range s.children {
		if !set.has(reg.id) {
			r.addDesc(set, reg)
		}
	}
}

// fillDomain re-enters, at their start, the regions of a parallel domain
// (a transition into some regions of its own parallel source) that the
// targets leave out.
func (r *run) fillDomain(set bitset, domain *node) {
	if domain.kind != kState {
		return
	}
	for _, reg := range domain.children {
		if !set.has(reg.id) {
			r.addDesc(set, reg)
		}
	}
}

func (r *run) statePaths(set bitset, reverse bool) []string {
	out := []string{}
	if reverse {
		for i := set.prev(len(r.ch.nodes) - 1); i >= 0; i = set.prev(i - 1) {
			if n := r.ch.nodes[i]; n.kind == kState {
				out = append(out, n.path)
			}
		}
		return out
	}
	for i := set.next(0); i >= 0; i = set.next(i + 1) {
		if n := r.ch.nodes[i]; n.kind == kState {
			out = append(out, n.path)
		}
	}
	return out
}

// microstep takes a set of non-conflicting transitions together, as SCXML
// does: data events, exits (innermost first), state events, entries
// (outermost first).
func (r *run) microstep(takes []*take) error {
	for _, tk := range takes {
		for _, e := range tk.events {
			r.out.add(outEvent, e)
		}
		r.emitStarts(tk)
	}
	var moving []*take
	for _, tk := range takes {
		if tk.opt != nil {
			moving = append(moving, tk)
		}
	}
	if len(moving) == 0 {
		return nil
	}
	n := len(r.ch.nodes)
	union := r.bits()
	for _, tk := range moving {
		if tk.exit == nil {
			tk.domain = r.domain(tk.t, tk.opt)
			tk.exit = r.exitSet(tk.domain)
		}
		union.or(tk.exit)
	}
	// History is recorded from the configuration before any state is left.
	for i := union.prev(n - 1); i >= 0; i = union.prev(i - 1) {
		if nd := r.ch.nodes[i]; nd.kind == kState && (nd.history || nd.deep) {
			r.ch.remember(&r.st, nd)
		}
	}
	entered := r.bits()
	for _, tk := range moving {
		tk.entry = r.entrySet(tk)
		entered.or(tk.entry)
		target := tk.opt.nodes[0]
		tk.mv = Move{Trigger: tk.trigger, Source: tk.t.src.path, Target: target.path,
			Exited: r.statePaths(tk.exit, true), Entered: r.statePaths(tk.entry, false)}
	}
	owner := func(i int, entry bool) *take {
		for _, tk := range moving {
			if (entry && tk.entry.has(i)) || (!entry && tk.exit.has(i)) {
				return tk
			}
		}
		return moving[0]
	}
	for i := union.prev(n - 1); i >= 0; i = union.prev(i - 1) {
		nd := r.ch.nodes[i]
		if nd.kind != kState {
			continue
		}
		tk := owner(i, false)
		for _, a := range nd.exit {
			r.dispatch(a(r.ctx, tk.mv), outDispatch)
		}
		r.exitChildren(nd)
	}
	r.st.act.andNot(union)
	for _, tk := range moving {
		r.emitState(tk)
	}
	for i := entered.next(0); i >= 0; i = entered.next(i + 1) {
		r.st.act.set(i)
		nd := r.ch.nodes[i]
		if nd.kind != kState {
			continue
		}
		r.st.entries[i].n++
		tk := owner(i, true)
		r.st.entries[i].enteredBy(tk.opt.nodes[0], uuid.Nil, r.trigger.CreatedAt)
		for _, a := range nd.entry {
			r.dispatch(a(r.ctx, tk.mv), outDispatch)
		}
		for _, tm := range nd.timers {
			m := r.fill.fillMessage(core.NewMessage(tm.payload), r.keys)
			m.CreatedAt = r.trigger.CreatedAt.Add(tm.delay)
			m = m.WithMetadata(map[string]any{TimerMetadata: nd.path + "#" + strconv.FormatUint(uint64(r.st.entries[i].n), 10)})
			r.out.add(outTimer, m)
		}
		r.enterChildren(nd, tk)
	}
	return r.err
}

func (r *run) emitState(tk *take) {
	target := tk.opt.nodes[0]
	var payload any = tk.mv
	if target.state.d != nil && target.state.d.make != nil {
		payload = target.state.d.make(tk.mv, r.fill, r.keys)
	}
	r.out.add(outState, core.Message{Payload: payload})
}

// dispatch emits what an action returned: payloads, Messages, or
// core.Delayed dated from the decided message.
func (r *run) dispatch(out []any, k outKind) {
	for _, o := range out {
		var m core.Message
		switch v := o.(type) {
		case nil:
			continue
		case core.Delayed:
			// Dated before its trigger, it is due at once (core.Delayed.Dated).
			m = v.Dated(r.trigger)
		default:
			m = core.NewMessage(v)
		}
		if m.Payload == nil {
			continue
		}
		r.out.add(k, r.fill.fillMessage(m, r.keys))
	}
}

// settle runs eventless transitions until none applies.
func (r *run) settle() error {
	if !r.ch.hasEventless {
		return nil
	}
	limit := 4*len(r.ch.nodes) + 16
	for i := 0; ; i++ {
		takes := r.selectEventless()
		if len(takes) == 0 {
			return nil
		}
		if i >= limit {
			return fmt.Errorf("%w: still moving after %d eventless steps (at %v)", ErrEventlessLoop, i, r.config().Paths())
		}
		if err := r.microstep(takes); err != nil {
			return err
		}
	}
}

// selectEventless picks, for each active leaf in document order, the first
// enabled eventless transition of the leaf or its nearest ancestor, then
// removes conflicting ones as SCXML does (a descendant's transition
// preempts an ancestor's; otherwise the earlier one wins).
func (r *run) selectEventless() []*take {
	var cands []*take
	act := r.st.act
	for i := act.next(0); i >= 0; i = act.next(i + 1) {
		leaf := r.ch.nodes[i]
		if !leaf.atomic() {
			continue
		}
	found:
		for s := leaf; s != nil; s = s.parent {
			for _, t := range s.eventless {
				if r.enabled(t) {
					if !slices.ContainsFunc(cands, func(tk *take) bool { return tk.t == t }) {
						cands = append(cands, &take{t: t, opt: &t.options[0], trigger: r.eventlessTrigger(t)})
					}
					break found
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	var filtered []*take
	for _, t1 := range cands {
		t1.domain = r.domain(t1.t, t1.opt)
		t1.exit = r.exitSet(t1.domain)
		preempted := false
		var keep []*take
		for _, t2 := range filtered {
			if t1.exit.intersects(t2.exit) {
				if t2.t.src.contains(t1.t.src) {
					continue // t1 preempts t2
				}
				preempted = true
			}
			keep = append(keep, t2)
		}
		if preempted {
			continue
		}
		filtered = append(keep, t1)
	}
	return filtered
}

func (r *run) eventlessTrigger(t *transition) string {
	switch t.kind {
	case eAlways:
		return "always"
	case eDone:
		return "done"
	case eOnFinal:
		return "on_final"
	case eChildrenDone:
		return "children_done " + t.child.group
	}
	return r.triggerName
}

func (r *run) enabled(t *transition) bool {
	if len(t.options) == 0 {
		return false
	}
	switch t.kind {
	case eDone:
		if !r.ch.inFinal(t.src, r.st.act) {
			return false
		}
	case eOnFinal:
		reg := t.src
		if reg.kind == kState {
			reg = reg.children[0]
		}
		if t.final == nil || r.ch.activeChild(reg, r.st.act) != t.final {
			return false
		}
	case eChildrenDone:
		if !r.childrenDone(t.child) {
			return false
		}
	case eOnDone:
		if !r.startedChildDone(t) {
			return false
		}
	}
	return guardsPass(t, r.ctx, r.config())
}

func guardsPass(t *transition, ctx any, cfg ActiveStates) bool {
	for _, g := range t.guards {
		if g.fn != nil && !g.fn(ctx, cfg) {
			return false
		}
	}
	return true
}
