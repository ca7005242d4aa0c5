package statechart

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Machine is a statechart run as a reactor: one consumer group, partitioned
// by PartitionBy, whose every message for a partition is decided one at a
// time, under one consistency guard, against the configuration rebuilt by
// replaying the partition's state events. C is the domain context type,
// evolved from data events by Context.
//
// Build a machine as a value, then give it its chart:
//
//	var orders = statechart.Machine[order]{
//		Group: "orders", PartitionBy: []string{"order_id"},
//		Context: core.Projection[order]{}.With(core.Evolve(...)),
//	}.Chart(
//		statechart.Initial(statechart.Command[PlaceOrder](placed)),
//		statechart.Place(placed, ...),
//		statechart.Final(completed),
//	)
//
// Definition mistakes are found by Chart and reported by Err and Check.
// Machine implements core.Definition: effects.FromDefinition runs it as a
// reactor.
type Machine[C any] struct {
	// Group is the consumer group id; state events are registered as
	// "<group>.runtime.<state>" (see Register).
	Group string
	// Label is a human name for the group (defaults to Group).
	Label string
	// PartitionBy are the partition keys: every command, event and state
	// event of the machine carries them, and the machine fills them in on
	// everything it emits.
	PartitionBy []string
	// KeyTypes gives the Go type of partition keys that are not strings.
	KeyTypes map[string]reflect.Type
	// Context builds the domain context and evolves it from data events
	// (its Init, Evolve and BeforeEvolve handlers).
	Context core.Projection[C]
	// Hooks are the machine's group's lifecycle hooks (OnStart, OnStop,
	// OnReset) and error strategy, called and applied by the shell's
	// router.
	Hooks core.Hooks
	// Lifecycle, for a child machine, names its Started, Stop and Finished
	// messages (LifecycleOf). Set it before Chart.
	Lifecycle Lifecycle
	// Registry, when set, names the trigger of messages built in memory
	// (with no Type) in the state events; without it such a trigger is the
	// payload's Go type name. Messages read from a store always have a Type.
	Registry *codec.Registry
	// Reactions react to events the machine does not decide (React,
	// ReactAny): its group claims them, and their follow-ups are appended
	// with no guard. The context's Projection cannot hold reactions; these
	// are a machine's.
	Reactions []Reaction[C]
	// Sync is work run inside the transaction of each message the machine
	// decides (in a worker's batch or in shell.HandleCommand), with the
	// instance after the decision as the batch's State and the decision's
	// messages as its Events; if it fails nothing of the decision is kept.
	Sync []core.SyncFunc[Instance[C]]
	// AfterSync is work run after that transaction committed.
	AfterSync []core.AfterSyncFunc[Instance[C]]

	c *machineCore
}

// machineCore is the compiled, type-erased machine.
type machineCore struct {
	ch         *chart
	fill       *keyFiller
	lc         *lifecycle
	keys       []string
	stateTypes map[reflect.Type]bool
	started    map[reflect.Type]*childDecl
	finished   map[reflect.Type]*childDecl
	// childMoves are the children's state event types.
	childMoves map[reflect.Type]*childDecl
	errs       []error
}

func (mc *machineCore) childByStarted(t reflect.Type) *childDecl {
	if mc == nil {
		return nil
	}
	return mc.started[t]
}

// Chart returns a copy of m with its chart built from elems and checked.
// Errors are reported by Err.
func (m Machine[C]) Chart(elems ...Elem) Machine[C] {
	ch := compile(reflect.TypeFor[C](), elems)
	mc := &machineCore{ch: ch, fill: &keyFiller{}, lc: m.Lifecycle.l, keys: slices.Clone(m.PartitionBy),
		stateTypes: map[reflect.Type]bool{}, started: map[reflect.Type]*childDecl{}, finished: map[reflect.Type]*childDecl{}}
	for _, s := range ch.states {
		if s.d.typ != nil {
			mc.stateTypes[s.d.typ] = true
		} else {
			mc.stateTypes[reflect.TypeFor[Move]()] = true
		}
	}
	ch.eventNames = make([]string, len(ch.nodes)) // before the chart is shared
	for _, n := range ch.nodes {
		if n.kind == kState && n.state.d != nil {
			ch.eventNames[n.id] = ch.stateTypeName(m.group(), n.state)
		}
	}
	for _, d := range ch.children {
		if d.lc == nil {
			mc.errs = append(mc.errs, fmt.Errorf("child machine %q has no Lifecycle: set its Lifecycle (LifecycleOf) before Chart", d.group))
			continue
		}
		mc.started[d.lc.started] = d
		mc.finished[d.lc.finished] = d
		if d.mc != nil {
			for _, t := range childStateTypes(d) {
				if !mc.stateTypes[t] {
					if mc.childMoves == nil {
						mc.childMoves = map[reflect.Type]*childDecl{}
					}
					mc.childMoves[t] = d
				}
			}
		}
	}
	if mc.lc != nil && !ch.hasStart {
		mc.errs = append(mc.errs, errors.New("a machine with a Lifecycle is a child: its root region starts at a Started state"))
	}
	if ch.hasStart && mc.lc == nil {
		mc.errs = append(mc.errs, errors.New("the root region starts at a Started state, entered by a parent's Started message: set the machine's Lifecycle (LifecycleOf)"))
	}
	if ch.stopped != nil && mc.lc == nil {
		mc.errs = append(mc.errs, errors.New("Stopped is for child machines: set the machine's Lifecycle (LifecycleOf)"))
	}
	m.c = mc
	return m
}

func (m Machine[C]) core() *machineCore {
	if m.c == nil {
		return m.Chart().c
	}
	return m.c
}

// Err returns the machine's definition errors (each a *core.DefinitionError
// matching core.ErrDefinition), or nil.
func (m Machine[C]) Err() error {
	mc := m.core()
	var errs []error
	_, rerrs := m.reactionTypes()
	for _, e := range slices.Concat(mc.ch.errs, mc.errs, rerrs) {
		errs = append(errs, &core.DefinitionError{Group: m.Group, Problem: e.Error()})
	}
	if err := m.Context.Err(); err != nil {
		errs = append(errs, &core.DefinitionError{Group: m.Group, Problem: err.Error()})
	}
	return errors.Join(errs...)
}

// States returns the states placed in the chart, each once, in document
// order.
func (m Machine[C]) States() []State { return slices.Clone(m.core().ch.states) }

// StateTypes returns the Go types of the machine's state events, for
// projections that follow its configuration (evolve each, applying Exited
// and Entered).
func (m Machine[C]) StateTypes() []reflect.Type {
	var out []reflect.Type
	for _, s := range m.core().ch.states {
		if s.d.typ != nil {
			out = append(out, s.d.typ)
		}
	}
	return out
}

// HandledCommands returns every command type the machine accepts in some
// state.
func (m Machine[C]) HandledCommands() []reflect.Type { return slices.Clone(m.core().ch.commands) }

// childStateTypes are a child machine's state event types, in document
// order.
func childStateTypes(d *childDecl) []reflect.Type {
	var out []reflect.Type
	for _, s := range d.mc.ch.states {
		if s.d.typ != nil {
			out = append(out, s.d.typ)
		}
	}
	return out
}

// Child returns the handle a parent uses to start, stop and join this
// machine as a child. The machine needs a Lifecycle.
func (m Machine[C]) Child() Child {
	group, err := core.NormalizeGroup(m.Group)
	if err != nil {
		group = m.Group
	}
	mc := m.core()
	return Child{&childDecl{group: group, keys: slices.Clone(m.PartitionBy), lc: mc.lc, mc: mc, def: m}}
}

// Reactors returns the machine and every child machine it (or its parts,
// or its children) may start, each once: what registering the machine
// with a router registers.
func (m Machine[C]) Reactors() []core.Definition {
	out := []core.Definition{m}
	seen := map[*machineCore]bool{m.core(): true}
	var walk func(mc *machineCore)
	walk = func(mc *machineCore) {
		for _, d := range mc.ch.children {
			if d.mc == nil || seen[d.mc] || d.def == nil {
				continue
			}
			seen[d.mc] = true
			out = append(out, d.def)
			walk(d.mc)
		}
	}
	walk(m.core())
	return out
}

// Instance is a machine's state for one partition: its configuration, its
// domain context and, when loaded from history, the history memory, entry
// counts and children that history implies. Instances are values: Decide
// returns a new one and leaves the one given unchanged.
type Instance[C any] struct {
	// Context is the domain context.
	Context C
	// Partition holds the partition's key values.
	Partition core.Partition

	ch *chart
	st instState
}

// ActiveStates returns the instance's active states.
func (i Instance[C]) ActiveStates() ActiveStates {
	c := ActiveStates{ch: i.ch, act: i.st.act}
	if !i.st.detached {
		c.entries = i.st.entries
	}
	return c
}

// Paths returns the active states' paths, outermost first.
func (i Instance[C]) Paths() []string { return i.ActiveStates().Paths() }

// In reports whether state s is active.
func (i Instance[C]) In(s State) bool { return i.ActiveStates().In(s) }

// Final reports whether the machine finished (its root region is final).
func (i Instance[C]) Final() bool { return i.ActiveStates().Final() }

// Children returns the child machines the instance started (of child's
// machine, or all with a zero Child), by group and keys.
func (i Instance[C]) Children(child Child) []ChildRef {
	r := run{st: i.st}
	var out []ChildRef
	for _, ref := range r.sortedChildren() {
		if child.d == nil || child.d.group == ref.Group {
			out = append(out, *ref)
		}
	}
	return out
}

// New returns a fresh instance for partition: the context's initial value,
// at the root's initial position (or, for a child machine, not started).
func (m Machine[C]) New(partition core.Partition) Instance[C] {
	mc := m.core()
	in := Instance[C]{Context: m.Context.Initial(), Partition: partition, ch: mc.ch}
	in.st.act = newBitset(len(mc.ch.nodes))
	in.st.entries = make([]entry, len(mc.ch.nodes))
	_ = mc.ch.complete(in.st.act)
	return in
}

// ActiveStates reads stored paths back against the machine's definition:
// read-only active states. Paths that name no state are an
// *UnresolvablePathError; paths that form no configuration (an initial
// position, a state in an inactive region, two states of one region) an
// error matching ErrInvalidActiveStates.
func (m Machine[C]) ActiveStates(paths []string) (ActiveStates, error) {
	mc := m.core()
	act, err := mc.ch.configuration(paths)
	if err != nil {
		return ActiveStates{}, err
	}
	return ActiveStates{ch: mc.ch, act: act}, nil
}

// At returns an instance at stored paths, on ctx, to decide commands
// without loading the machine's history. It has no history memory (a
// History target enters its state as if targeted directly), no entry counts
// (a timer is accepted while its state is active) and no children. Every
// partition key needs a value.
func (m Machine[C]) At(paths []string, ctx C, partition core.Partition) (Instance[C], error) {
	for _, k := range m.PartitionBy {
		if _, ok := partition[k]; !ok {
			return Instance[C]{}, fmt.Errorf("%w: %q (the machine is partitioned by %v)", ErrMissingPartitionKey, k, m.PartitionBy)
		}
	}
	mc := m.core()
	act, err := mc.ch.configuration(paths)
	if err != nil {
		return Instance[C]{}, err
	}
	return Instance[C]{Context: ctx, Partition: partition, ch: mc.ch,
		st: instState{act: act, entries: make([]entry, len(mc.ch.nodes)), detached: true}}, nil
}

// Load rebuilds an instance from the partition's history, in order: state
// events move the configuration by their Exited and Entered paths (the
// transition rules are not run again), data events evolve the context, a
// parent's Started and its children's Finished update its children. A path
// that no longer names a state is an *UnresolvablePathError naming the
// event.
func (m Machine[C]) Load(partition core.Partition, history []core.Message) (Instance[C], error) {
	in := m.New(partition)
	for _, msg := range history {
		if err := m.apply(&in, msg); err != nil {
			return in, err
		}
	}
	return in, nil
}

func (m Machine[C]) evolveFn() func(any, core.Message) any {
	p := m.Context // captured alone: the Machine is too big to capture by value
	return func(ctx any, msg core.Message) any {
		c, _ := ctx.(C)
		return p.Evolve(c, msg)
	}
}

// apply replays one history message into in.
func (m Machine[C]) apply(in *Instance[C], msg core.Message) error {
	mc := m.core()
	t := core.PayloadType(msg.Payload)
	if mc.stateTypes[t] {
		if mv, ok := MoveOf(msg.Payload); ok {
			if err := mc.ch.applyMove(&in.st, mv, msg); err != nil {
				var up *UnresolvablePathError
				if errors.As(err, &up) {
					up.Type, up.ID = m.typeName(msg), msg.ID
				}
				return err
			}
			return nil
		}
	}
	if d := mc.started[t]; d != nil {
		r := run{st: in.st, fill: mc.fill, keys: in.Partition}
		r.trackStarted(d, msg)
		in.st = r.st
	}
	if d := mc.finished[t]; d != nil {
		r := run{st: in.st, fill: mc.fill, keys: in.Partition}
		r.trackFinished(d, msg)
		in.st = r.st
	}
	if d := mc.childMoves[t]; d != nil {
		r := run{st: in.st, fill: mc.fill, keys: in.Partition}
		r.trackChildMove(d, msg)
		in.st = r.st
	}
	if m.Context.Handles(t) {
		in.Context = m.Context.Evolve(in.Context, msg)
	}
	return nil
}

// applyMove replays a recorded move: history is remembered from the
// configuration before the move, the exited states are left, the entered
// ones entered (their entry counts incremented), and the result must be a
// configuration.
func (ch *chart) applyMove(st *instState, mv Move, by core.Message) error {
	exited := make([]*node, 0, len(mv.Exited))
	for _, p := range mv.Exited {
		n, ok := ch.byPath[p]
		if !ok {
			return &UnresolvablePathError{Path: p}
		}
		exited = append(exited, n)
	}
	entered := make([]*node, 0, len(mv.Entered))
	for _, p := range mv.Entered {
		n, ok := ch.byPath[p]
		if !ok {
			return &UnresolvablePathError{Path: p}
		}
		entered = append(entered, n)
	}
	if st.entries == nil {
		st.entries = make([]entry, len(ch.nodes))
	} else {
		st.entries = slices.Clone(st.entries)
	}
	st.act = st.act.clone()
	if st.memory != nil {
		st.memory = cloneMemory(st.memory)
	}
	for _, n := range exited {
		ch.remember(st, n)
	}
	for _, n := range exited {
		st.act.unset(n.id)
	}
	for _, n := range entered {
		st.act.set(n.id)
		st.entries[n.id].n++
		st.entries[n.id].enteredBy(ch.byPath[mv.Target], by.ID, by.CreatedAt)
	}
	return ch.complete(st.act)
}

func cloneMemory(m map[int][]int) map[int][]int {
	c := make(map[int][]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// typeName names a message's type: its Type, else the Registry's name for
// its payload, else the payload's Go type name.
func (m Machine[C]) typeName(msg core.Message) string {
	if msg.Type != "" {
		return msg.Type
	}
	if m.Registry != nil {
		if t, err := m.Registry.TypeOf(msg.Payload); err == nil {
			return t.Name
		}
	}
	if t := core.PayloadType(msg.Payload); t != nil {
		return t.Name()
	}
	return ""
}

// Decide decides one message (a payload or a core.Message) against in: a
// command goes to the deepest active states that accept it; an event (On)
// moves the machine if an active state reacts to it; a child machine's
// Started starts it and Stop stops it; a child's Finished updates the
// parent's children. Then eventless transitions run until none applies.
// It returns the next instance and everything the decision produced; on
// error, in is returned unchanged and nothing is produced. A command no
// active state accepts is a *CommandNotHandledError (ErrCommandNotHandled);
// a handler's error is returned as is.
func (m Machine[C]) Decide(in Instance[C], message any) (Instance[C], Decision, error) {
	mc := m.core()
	if mc.ch != in.ch {
		if in.ch != nil {
			return in, Decision{}, errors.New("statechart: the instance belongs to another machine")
		}
		in = m.New(in.Partition)
	}
	msg := core.NewMessage(message)
	r := &run{ch: mc.ch, st: in.st.clone(), ctx: any(in.Context), evolve: m.evolveFn(), keys: in.Partition,
		fill: mc.fill, trigger: msg, triggerName: m.typeName(msg), mc: mc}
	r.buf = r.bufs[:]
	r.out.msgs, r.out.kinds = r.msgBuf[:0], r.kindBuf[:0]
	err := mc.decide(r, msg, m.Context.Handles)
	if errors.Is(err, errIgnored) {
		next := in
		next.st = r.st
		next.Context, _ = r.ctx.(C)
		return next, Decision{Ignored: true}, nil
	}
	if err != nil {
		return in, Decision{}, err
	}
	next := in
	next.st = r.st
	next.Context, _ = r.ctx.(C)
	return next, r.out.finish(msg), nil
}

func (mc *machineCore) decide(r *run, msg core.Message, evolves func(reflect.Type) bool) error {
	t := core.PayloadType(msg.Payload)
	if t == nil {
		return fmt.Errorf("statechart: a message with no payload")
	}
	ch := mc.ch
	_, isCmd := ch.byType[t]
	isCmd = isCmd && slices.Contains(ch.commands, t)
	if evolves(t) && !isCmd {
		r.ctx = r.evolve(r.ctx, msg)
	}
	wasFinal := ch.inFinal(ch.root, r.st.act)
	var err error
	switch {
	case mc.lc != nil && t == mc.lc.started:
		err = r.startMachine()
	case mc.lc != nil && t == mc.lc.stop:
		err = r.stopMachine()
	case mc.finished[t] != nil:
		r.trackFinished(mc.finished[t], msg)
		err = r.settle()
		if err == nil && len(r.out.msgs) == 0 {
			err = errIgnored
		}
	case isCmd:
		err = r.decide(msg, false)
	case slices.Contains(ch.events, t):
		err = r.decide(msg, true)
	case evolves(t):
		err = errIgnored
	default:
		err = &CommandNotHandledError{Command: r.triggerName, Paths: r.config().Paths()}
	}
	if err != nil {
		return err
	}
	if mc.lc != nil && !wasFinal && ch.inFinal(ch.root, r.st.act) {
		final := ch.activeChild(ch.root, r.st.act)
		r.out.add(outEvent, r.fill.fillMessage(core.NewMessage(mc.lc.newFinished(final.path)), r.keys))
	}
	return nil
}

// startMachine enters a child machine's Started state.
func (r *run) startMachine() error {
	if r.st.act.has(r.ch.root.id) || r.ch.start == nil {
		return errIgnored // started already
	}
	r.st.act.set(r.ch.root.id)
	if err := r.microstep([]*take{{t: r.ch.start, opt: &r.ch.start.options[0], trigger: "start"}}); err != nil {
		return err
	}
	return r.settle()
}

// stopMachine moves a started, unfinished child machine to its Stopped
// state.
func (r *run) stopMachine() error {
	if r.ch.stop == nil {
		return &CommandNotHandledError{Command: r.triggerName, Paths: r.config().Paths()}
	}
	if !r.st.act.has(r.ch.root.id) || r.ch.inFinal(r.ch.root, r.st.act) {
		return errIgnored
	}
	if err := r.microstep([]*take{{t: r.ch.stop, opt: &r.ch.stop.options[0], trigger: "stop"}}); err != nil {
		return err
	}
	return r.settle()
}
