package statechart

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// OwnerMetadata is the metadata key of a Started message appended by a
// state (StartChild): "<state path>#<entry>", the entry of the state the
// child belongs to. It is how a parent that reloads its history knows which
// child to stop when the state is left and whose Finished its OnDone maps.
const OwnerMetadata = "statechart_owner"

// Finished is embedded in a child machine's Finished message type: the path
// of the root final state the child reached.
type Finished struct {
	Final string `json:"final" sourced:"noindex"`
}

func (f *Finished) setFinal(p string) { f.Final = p }
func (f Finished) finishedAt() string { return f.Final }

type finisher interface{ finishedAt() string }

// Lifecycle names a child machine's three lifecycle messages, Go types
// that the user declares with the child's partition keys (every one of
// them, the parent's included):
//
//   - S, the Started event, appended by the parent (Do.Start, or a state's
//     StartChild): it enters the child's Started state (trigger "start").
//     Its attributes beyond the keys are the child's input: evolve S in the
//     child's context to read them.
//   - X, the Stop command, accepted from any started, non-final position:
//     it moves the child to its Stopped state (trigger "stop").
//   - F, the Finished event (embedding Finished), appended by the child
//     when it reaches a root final state. The parent handles it for
//     ChildrenDone and OnDone.
//
// Build one with LifecycleOf and set it as a child Machine's Lifecycle.
type Lifecycle struct{ l *lifecycle }

type lifecycle struct {
	started, stop, finished reflect.Type
	newFinished             func(final string) any
	newStop                 func() any
	fromMessage             func(payload any) (any, error)
	register                func(reg *codec.Registry, group string) error
}

// LifecycleOf declares a child machine's lifecycle message types: S
// (Started), X (Stop) and F (Finished, which embeds Finished). They are
// registered by Machine.Register as "<group>.runtime.child.started",
// "....stop" and "....finished". PF is inferred.
func LifecycleOf[S, X, F any, PF interface {
	*F
	setFinal(string)
}]() Lifecycle {
	return Lifecycle{&lifecycle{
		started:  reflect.TypeFor[S](),
		stop:     reflect.TypeFor[X](),
		finished: reflect.TypeFor[F](),
		newFinished: func(final string) any {
			var f F
			PF(&f).setFinal(final)
			return f
		},
		newStop: func() any { var x X; return x },
		fromMessage: func(payload any) (any, error) {
			data, err := json.Marshal(payload)
			if err != nil {
				return nil, err
			}
			var s S
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, err
			}
			return s, nil
		},
		register: func(reg *codec.Registry, group string) error {
			p := group + ".runtime.child."
			for _, err := range []error{
				registerOnce[S](reg, p+"started"),
				registerOnce[X](reg, p+"stop"),
				registerOnce[F](reg, p+"finished"),
			} {
				if err != nil {
					return err
				}
			}
			return nil
		},
	}}
}

// registerOnce registers T as name unless it already is.
func registerOnce[T any](reg *codec.Registry, name string) error {
	if t, err := reg.ByGoType(reflect.TypeFor[T]()); err == nil && t.Name == name {
		return nil
	}
	return codec.Register[T](reg, name)
}

// Child is the handle of a child machine, from Machine.Child: what a parent
// starts (Starts, StartChild), stops (Stops) and joins (ChildrenDone).
type Child struct{ d *childDecl }

type childDecl struct {
	group string
	keys  []string
	lc    *lifecycle
	mc    *machineCore
	def   core.Definition // the child machine itself, to register it as a reactor
}

// ChildRef is a child machine as its parent knows it, from the Started and
// Finished messages in the parent's history.
type ChildRef struct {
	// Group is the child machine's consumer group.
	Group string
	// Keys are the child's partition values.
	Keys map[string]string
	// Final is the path of the root final state the child reached, empty
	// while it runs.
	Final string
	// Owner is "<state path>#<entry>" for a child started by a state,
	// empty for one started by a handler.
	Owner string
	// Paths are the child's active states, outermost first, kept from the
	// child's state events in the parent's history (their exited and
	// entered paths); empty until the child's first move is read.
	Paths []string
}

// State returns the child's innermost active state's path (the last of
// Paths), or "" before its first move.
func (c ChildRef) State() string {
	if len(c.Paths) == 0 {
		return ""
	}
	return c.Paths[len(c.Paths)-1]
}

// Done reports whether the child finished.
func (c ChildRef) Done() bool { return c.Final != "" }

func (c *chart) addChild(d *childDecl) {
	if d == nil {
		return
	}
	for _, o := range c.children {
		if o.group == d.group {
			return
		}
	}
	c.children = append(c.children, d)
}

type stateStart struct {
	child   *childDecl
	payload func(ctx any, mv Move) any
}

// Starts declares the children a handler (Command, CommandFunc, On,
// OnFunc) starts: at least one of them, with Do.Start in the handler;
// without a handler, exactly one, whose Started message is made from the
// command's attributes (the child's keys and its input, by JSON name).
// A machine a handler starts is a child in that role: no state may start
// it (StartChild). Only handlers start children: Starts on anything else,
// ChildrenDone included, is a definition error.
func (e Elem) Starts(children ...Child) Elem {
	if e.e == nil {
		return e
	}
	c := *e.e
	for _, ch := range children {
		c.starts = append(c.starts, ch.d)
	}
	return Elem{&c}
}

// MayStart is Starts where starting none is fine (the manual's A | nil):
// the handler starts any number of the children, with Do.Start.
func (e Elem) MayStart(children ...Child) Elem {
	x := e.Starts(children...)
	if x.e != nil {
		x.e.startNil = true
	}
	return x
}

// StartChild starts one child per entry of the state it is placed in: its
// Started message is payload's result (the child's own keys and input;
// the parent's keys are filled in), appended in the decision that enters
// the state, and the child is sent Stop when the state is left before it
// finished. OnDone elements map the child's root finals onto the state's
// transitions. There is no guard: route through a transient state (Always)
// to start a child only sometimes. A machine is a child in one role: one
// state starts it, once (a part's state, however often the part is placed,
// is one state), and no handler does.
func StartChild[C any](child Child, payload func(ctx C, entered Move) any, onDone ...Elem) Elem {
	return Elem{&elem{kind: eStart, child: child.d, ctxType: reflect.TypeFor[C](), elems: onDone,
		startFn: func(ctx any, mv Move) any { return payload(ctxAs[C](ctx), mv) }}}
}

// OnDone, inside StartChild, moves the parent to target when the child
// reaches its root final state final; the move's trigger is the child's
// Finished type.
func OnDone(final State, target Target) Elem {
	return Elem{&elem{kind: eOnDone, final: final, targets: []Target{target}}}
}

// Stops sends Stop to every running child of child's machine when the
// state it is placed in is entered. Some handler must declare that machine
// in Starts or MayStart: a child a state starts is stopped when the state is
// left.
func Stops(child Child) Elem {
	return Elem{&elem{kind: eStops, child: child.d}}
}

// ChildrenDone moves the machine to target once every child of child's
// machine it started is final (trigger "children_done <group>"). It takes
// no function, so unlike the manual's children_done it cannot start
// children: Starts and MayStart on it are definition errors.
func ChildrenDone(child Child, target Target) Elem {
	return Elem{&elem{kind: eChildrenDone, child: child.d, targets: []Target{target}}}
}

// StartError is a handler that started children its declaration does not
// allow.
type StartError struct {
	Source  string
	Trigger string
	Problem string
}

func (e *StartError) Error() string {
	return fmt.Sprintf("statechart: starting children from %s on %s: %s", e.Source, e.Trigger, e.Problem)
}

// Is makes errors.Is(err, ErrStart) true.
func (e *StartError) Is(target error) bool { return target == ErrStart }

func (b *builder) stateStart(n *node, x *elem) {
	if x.child == nil || x.startFn == nil {
		b.errorf("state %q: StartChild needs a child (Machine.Child) and a payload function", n.path)
		return
	}
	st := &stateStart{child: x.child, payload: x.startFn}
	n.starts = append(n.starts, st)
	b.c.addChild(x.child)
	for _, od := range x.elems {
		if od.e == nil || od.e.kind != eOnDone {
			b.errorf("state %q: StartChild takes OnDone elements, not %s", n.path, od.describe())
			continue
		}
		t := b.eventless(n, od.e)
		if t == nil {
			continue
		}
		t.start = st
		t.child = x.child
		var final *node
		if x.child.mc != nil && od.e.final.d != nil {
			for _, fn := range x.child.mc.ch.placed[od.e.final.d] {
				if fn.final && fn.parent == x.child.mc.ch.root {
					final = fn
				}
			}
		}
		if final == nil {
			b.errorf("state %q: OnDone maps %q, which is not a root final state of %s", n.path, od.e.final.Name(), x.child.group)
			continue
		}
		t.childFinal = final.path
	}
}

// startsOnNonHandler reports Starts or MayStart on an element that is not a
// handler. The manual's children_done is a handler that may declare
// starts:, starting them in its block; ChildrenDone has no function, so
// it cannot start any.
func (b *builder) startsOnNonHandler(n *node, x *elem, e Elem) {
	if x.kind != eChildrenDone {
		b.errorf("state %q: Starts and MayStart belong on handlers (Command, CommandFunc, On, OnFunc), not %s", n.path, e.describe())
		return
	}
	decl := "Starts"
	if x.startNil {
		decl = "MayStart"
	}
	b.errorf("state %q: ChildrenDone(%s) cannot start children (%s(%s)): it has no handler to call Do.Start in (the manual's children_done ... starts: starts them in a block, which ChildrenDone does not take); start them from a handler (CommandFunc, OnFunc)",
		n.path, groupName(x.child), decl, startNames(x.starts))
}

// childRoles is how a chart starts one child machine.
type childRoles struct {
	group    string
	handlers []string // the handlers declaring it in Starts or MayStart
	states   []*node  // the states starting it (StartChild), one per declared state
}

// checkChildRoles enforces the manual's rules on the roles of a child
// machine in its parent (the parent's parts included): "A machine is a
// child in one role: started by handlers (any number of them), or by one
// state"; a state runs one child per entry, so it starts a machine once;
// and Stops needs Starts: "some handler must declare starts: Child". A
// part mounted several times is one state: its placements share the
// declaration.
func (b *builder) checkChildRoles() {
	var all []*childRoles
	by := map[string]*childRoles{}
	get := func(group string) *childRoles {
		r, ok := by[group]
		if !ok {
			r = &childRoles{group: group}
			by[group] = r
			all = append(all, r)
		}
		return r
	}
	for _, n := range b.c.nodes {
		for _, t := range n.handlers {
			for _, d := range t.starts {
				if d == nil {
					b.errorf("%s: %s: Starts and MayStart take children from Machine.Child, not a zero Child", where(n), describeTrans(t))
					continue
				}
				r := get(d.group)
				h := describeTrans(t) + " in " + where(n)
				if !slices.Contains(r.handlers, h) {
					r.handlers = append(r.handlers, h)
				}
			}
		}
		var own []string
		for _, st := range n.starts {
			g := st.child.group
			if slices.Contains(own, g) {
				b.errorf("state %q starts child machine %q twice (StartChild): a state runs one child per entry; start more from handlers (Starts, MayStart)", n.path, g)
				continue
			}
			own = append(own, g)
			r := get(g)
			if !slices.ContainsFunc(r.states, func(o *node) bool { return o.state.d == n.state.d }) {
				r.states = append(r.states, n)
			}
		}
	}
	const oneRole = "a machine is a child in one role, started by handlers (any number of them) or by one state"
	for _, r := range all {
		switch {
		case len(r.handlers) > 0 && len(r.states) > 0:
			b.errorf("child machine %q is started both by handlers (%s) and by %s (StartChild): %s", r.group, strings.Join(r.handlers, ", "), statesNamed(r.states), oneRole)
		case len(r.states) > 1:
			b.errorf("child machine %q is started by %s (StartChild): %s", r.group, statesNamed(r.states), oneRole)
		}
	}
	for _, n := range b.c.nodes {
		for _, d := range n.stops {
			r := by[d.group]
			if r != nil && len(r.handlers) > 0 {
				continue
			}
			also := ""
			if r != nil && len(r.states) > 0 {
				also = fmt.Sprintf(" (it is started by %s, which sends it Stop when left)", statesNamed(r.states))
			}
			b.errorf("state %q: Stops(%s), but no handler declares Starts or MayStart(%s)%s: Stops stops the children handlers start, so some handler must declare it", n.path, d.group, d.group, also)
		}
	}
}

// statesNamed lists states: `state "a"`, `states "a" and "b"`.
func statesNamed(ns []*node) string {
	if len(ns) == 1 {
		return fmt.Sprintf("state %q", ns[0].path)
	}
	qs := make([]string, len(ns))
	for i, n := range ns {
		qs[i] = strconv.Quote(n.path)
	}
	return "states " + strings.Join(qs[:len(qs)-1], ", ") + " and " + qs[len(qs)-1]
}

func groupName(d *childDecl) string {
	if d == nil {
		return "a zero Child"
	}
	return d.group
}

func childKey(group string, keys map[string]string) string {
	ks := make([]string, 0, len(keys))
	for k, v := range keys {
		ks = append(ks, k+"="+v)
	}
	slices.Sort(ks)
	return group + "|" + strings.Join(ks, ",")
}

// childKeys reads a lifecycle message's partition values.
func (r *run) childKeys(d *childDecl, payload any) map[string]string {
	keys := make(map[string]string, len(d.keys))
	for _, k := range d.keys {
		if v, ok := r.fill.field(payload, k); ok {
			keys[k] = v
		} else if v, ok := r.keys[k]; ok {
			keys[k] = v
		}
	}
	return keys
}

func (r *run) setChild(ref *ChildRef) {
	if r.st.children == nil {
		r.st.children = map[string]*ChildRef{}
	}
	r.st.children[childKey(ref.Group, ref.Keys)] = ref
}

// trackStarted records a child started (from the parent's own Started
// message).
func (r *run) trackStarted(d *childDecl, m core.Message) {
	owner, _ := m.Metadata[OwnerMetadata].(string)
	r.setChild(&ChildRef{Group: d.group, Keys: r.childKeys(d, m.Payload), Owner: owner})
}

// trackFinished records a child's Finished.
func (r *run) trackFinished(d *childDecl, m core.Message) {
	keys := r.childKeys(d, m.Payload)
	final := ""
	if f, ok := m.Payload.(finisher); ok {
		final = f.finishedAt()
	}
	ref := &ChildRef{Group: d.group, Keys: keys}
	if old, ok := r.st.children[childKey(d.group, keys)]; ok {
		c := *old
		ref = &c
	}
	ref.Final = final
	r.setChild(ref)
}

// trackChildMove records a child's move (one of its state events, read in
// the parent's history): its paths minus those exited, plus those entered.
func (r *run) trackChildMove(d *childDecl, m core.Message) {
	mv, ok := MoveOf(m.Payload)
	if !ok {
		return
	}
	keys := r.childKeys(d, m.Payload)
	old, ok := r.st.children[childKey(d.group, keys)]
	if !ok {
		return // not a child this instance started
	}
	c := *old
	paths := slices.DeleteFunc(slices.Clone(c.Paths), func(p string) bool { return slices.Contains(mv.Exited, p) })
	for _, p := range mv.Entered {
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	c.Paths = paths
	r.setChild(&c)
}

func (r *run) sortedChildren() []*ChildRef {
	keys := make([]string, 0, len(r.st.children))
	for k := range r.st.children {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*ChildRef, len(keys))
	for i, k := range keys {
		out[i] = r.st.children[k]
	}
	return out
}

func (r *run) handlerStarts(t *transition, m core.Message, do *Do, tk *take) error {
	fail := func(format string, args ...any) error {
		return &StartError{Source: t.src.path, Trigger: r.triggerName, Problem: fmt.Sprintf(format, args...)}
	}
	if len(t.starts) == 0 {
		if len(do.starts) > 0 {
			return fail("the handler starts children but declares none: add Starts or MayStart")
		}
		return nil
	}
	payloads := do.starts
	if t.handle == nil {
		s, err := t.starts[0].lc.fromMessage(m.Payload)
		if err != nil {
			return fail("building %v from the command: %v", t.starts[0].lc.started, err)
		}
		payloads = []any{s}
	}
	if len(payloads) == 0 && !t.startsNil {
		return fail("it declares Starts(%s) but started none: start at least one, or declare MayStart", startNames(t.starts))
	}
	for _, p := range payloads {
		pt := core.PayloadType(p)
		if m, ok := p.(core.Message); ok {
			pt = core.PayloadType(m.Payload)
		}
		var decl *childDecl
		for _, d := range t.starts {
			if d.lc != nil && d.lc.started == pt {
				decl = d
			}
		}
		if decl == nil {
			return fail("started a %v, which is not the Started message of a declared child (%s)", pt, startNames(t.starts))
		}
		msg := r.fill.fillMessage(core.NewMessage(p), r.keys)
		tk.starts = append(tk.starts, msg)
	}
	return nil
}

func startNames(ds []*childDecl) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = groupName(d)
	}
	return strings.Join(names, " | ")
}

func (r *run) emitStarts(tk *take) {
	for _, m := range tk.starts {
		r.out.add(outStart, m)
		if d := r.mc.childByStarted(core.PayloadType(m.Payload)); d != nil {
			r.trackStarted(d, m)
		}
	}
}

func (r *run) stopChild(d *childDecl, ref *ChildRef) {
	if d.lc == nil {
		return
	}
	keys := make(map[string]string, len(ref.Keys)+len(r.keys))
	for k, v := range r.keys {
		keys[k] = v
	}
	for k, v := range ref.Keys {
		keys[k] = v
	}
	r.out.add(outStop, core.NewMessage(r.fill.fill(d.lc.newStop(), keys)))
}

func (r *run) owner(n *node) string {
	return n.path + "#" + strconv.FormatUint(uint64(r.st.entries[n.id].n), 10)
}

// exitChildren stops the running children the state's current entry started.
func (r *run) exitChildren(n *node) {
	if len(n.starts) == 0 || r.st.detached {
		return
	}
	owner := r.owner(n)
	for _, ref := range r.sortedChildren() {
		if ref.Owner != owner || ref.Done() {
			continue
		}
		for _, st := range n.starts {
			if st.child.group == ref.Group {
				r.stopChild(st.child, ref)
			}
		}
	}
}

// enterChildren runs a state's Stops and StartChild on entry.
func (r *run) enterChildren(n *node, tk *take) {
	for _, d := range n.stops {
		for _, ref := range r.sortedChildren() {
			if ref.Group == d.group && !ref.Done() {
				r.stopChild(d, ref)
			}
		}
	}
	for _, st := range n.starts {
		p := st.payload(r.ctx, tk.mv)
		if p == nil || st.child.lc == nil || core.PayloadType(p) != st.child.lc.started {
			if r.err == nil {
				r.err = &StartError{Source: n.path, Trigger: r.triggerName, Problem: fmt.Sprintf("StartChild's payload returned %T, want %v", p, st.child.lc.started)}
			}
			continue
		}
		m := r.fill.fillMessage(core.NewMessage(p), r.keys).WithMetadata(map[string]any{OwnerMetadata: r.owner(n)})
		r.out.add(outStart, m)
		r.trackStarted(st.child, m)
	}
}

func (r *run) childrenDone(d *childDecl) bool {
	if d == nil {
		return false
	}
	n := 0
	for _, ref := range r.st.children {
		if ref.Group != d.group {
			continue
		}
		if !ref.Done() {
			return false
		}
		n++
	}
	return n > 0
}

func (r *run) startedChildDone(t *transition) bool {
	if t.start == nil || r.st.detached {
		return false
	}
	owner := r.owner(t.src)
	for _, ref := range r.st.children {
		if ref.Owner == owner && ref.Group == t.start.child.group && ref.Final == t.childFinal {
			return true
		}
	}
	return false
}
