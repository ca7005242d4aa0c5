// Package statechart is Sourced's pure statechart interpreter and the
// event-sourced Machine reactor built on it: states, compound states and
// parallel regions, final states and done joins, guarded eventless
// transitions, events from other reactors, entry/exit actions and timers,
// shallow and deep history, child machines and parts.
//
// It sits between effects and shell (codec <- core <- effects <- statechart
// <- shell) and performs no I/O: given a definition, an instance (the
// active configuration, the domain context, history memory, entry counts
// and children), and a message, Machine.Decide returns the next instance and
// everything the decision produced. Times come from the decided message.
//
// # A chart is built from values
//
// States are declared once, each with the Go type of the event that records
// moves to it (a struct embedding Move and the partition keys), and placed
// in a chart with Initial, Place, Started, Final and Stopped; regions with
// Region or RegionState; starts elsewhere with StartsAt; handlers with
// Command, CommandFunc, On, OnFunc (guarded with When, External or
// Internal); eventless transitions with Always, Done, OnFinal,
// ChildrenDone; actions with Entry, Exit, After:
//
//	type Paying struct {
//		OrderRef
//		statechart.Move
//	}
//	var paying = statechart.Declare[Paying]("paying")
//
//	var orders = statechart.Machine[order]{Group: "order_machine", PartitionBy: []string{"order_id"}, Context: orderContext}.Chart(
//		statechart.Initial(statechart.Command[PlaceOrder](placed)),
//		statechart.Place(placed,
//			statechart.Command[CancelOrder](cancelled),
//			statechart.Region("payment",
//				statechart.Initial(statechart.CommandFunc(func(o order, c StartPayment, do *statechart.Do) error {
//					if o.Total <= 0 {
//						do.To(rejected)
//						return nil
//					}
//					do.Event(PaymentInfoAdded{Card: c.Card})
//					do.To(paying)
//					return nil
//				}, paying, rejected)),
//				statechart.Place(paying,
//					statechart.Entry(func(o order, _ statechart.Move) []any { return []any{ChargeCard{Card: o.Card}} }),
//					statechart.After(time.Hour, ExpirePayment{}),
//					statechart.On[PaymentCaptured](paid),
//					statechart.Command[ExpirePayment](cancelled)),
//				statechart.Place(rejected),
//				statechart.Final(paid)),
//			statechart.Region("shipping", ...),
//			statechart.Done(completed)),
//		statechart.Final(completed),
//		statechart.Final(cancelled),
//	)
//
// Typed functions (CommandFunc, Entry, If, ...) infer the context and
// message types; no reflection finds handlers. The chart is checked when
// built (Machine.Err, and Machine.Check against a registry): targets that
// are not placed or sit in a sibling region, states placed twice, regions
// without a start (unless a StartsAt enters them), StartsAt targets that
// are not below their state, history defaults that are not below their
// state (a shallow history's not its sub-states), a handler after an
// unguarded one of the same type in one state, When, Internal or External
// on what is not a transition, reactions to what the machine decides,
// transient states with commands, timers, regions, joins or
// children, unreachable guards, handlers with several targets and no
// function to pick one, parts whose prefixes clash, a context type that is
// not the machine's, the manual's rules for children (a machine is a child
// in one role: started by handlers, any number of them, or by one state,
// once per entry; Stops needs some handler to declare Starts or MayStart of
// that machine; ChildrenDone cannot start children), and, with the
// registry, missing partition keys.
// Mermaid draws the chart exactly in the manual's layout; JSON exports it in
// XState's vocabulary, and Instance.JSON fills that with an instance's
// status.
//
// # State events are typed messages
//
// Every move is appended as an event of the target state's type, carrying
// the partition keys and a Move (trigger, source, target, exited, entered).
// The codec registry maps one type string to one Go type, and partition keys
// are only indexed when they are top-level attributes of the payload, so a
// single generic payload registered under every state's name is impossible
// (and a generic struct cannot embed its key type). Each state therefore has
// its own Go type, declared by the user in one line, embedding Move and the
// machine's key struct; Machine.Register registers each as
// "<group>.runtime.<state name>" (a part's states as
// "<group>.runtime.<part prefix>.<name>"). Projections evolve these types
// like any event (Machine.StateTypes lists them), and the Move's Exited and
// Entered keep a stored configuration current without loading the machine.
// States declared with Named have no type: their moves are bare Moves, for
// charts used only as rules (see package groupstatus).
//
// # Machines are reactors
//
// Machine implements core.Definition (Spec, Check, Step), so
// effects.FromDefinition runs it: one consumer group, every message of a
// partition decided one at a time under the claim's guard. Step rebuilds the
// instance from the history by replaying state events (the transition rules
// are not run again), evolving data events into the context, and folding a
// parent's Started and its children's Finished; it interleaves history and
// batch by position. A command no active state accepts is acknowledged with
// no events (Decide returns a *CommandNotHandledError, matching
// ErrCommandNotHandled and core.ErrNotHandled); a handler's error fails the
// batch at that message. Events (On) are never decided while a group
// replays: a replayed batch is only acknowledged. Partition keys are filled
// in on every message a machine emits.
//
// Like every reactor, a machine has Reactions (React, ReactAny: to events it
// does not decide, its own state events included, which its group then
// claims), Sync work run in the transaction of each decided message and
// AfterSync work run after it commits, both given the instance after the
// decision. A parent also reads its children's state events, so each
// ChildRef knows the child's current state. shell.LoadMachine reads an
// instance from a store in one call and shell.HandleMachine decides a
// command synchronously and returns the new instance; an instance's
// read-only active states (Instance.ActiveStates, SCXML's configuration)
// know which state event entered each (ActiveStates.EnteredBy) and which
// states were ever visited.
//
// Active states are stored and read back as paths (ActiveStates.Paths,
// Machine.ActiveStates): stale paths are an *UnresolvablePathError, paths
// that form no configuration an error matching ErrInvalidActiveStates.
// Machine.At decides against stored paths and a context without history.
//
// A configuration is matched by state (In: a state is active, ancestors
// included), by path (InPath), or by region name, as the manual's Hash
// patterns: ActiveStates.RegionAt tells where the active region of a name
// is (its state, or InitialPosition), and ActiveStates.MatchRegions matches
// several at once (map[string]State{"payment": paid, "shipping": InitialPosition};
// the root region is "root"). A region that is not active does not match.
// A part mounted twice brings two regions of one name: naming one is an
// *AmbiguousRegionError (match those by path).
//
// # Semantics: W3C SCXML, and where they differ
//
// The reference semantics are SCXML 1.0's algorithm (Appendix D). Each
// decided message is one macrostep: its transitions are one microstep, then
// eventless transitions run, one microstep at a time, until none is
// enabled; ErrEventlessLoop stops a chart whose predicates never settle. The
// differences, all tested:
//
//   - Configuration. A parallel state's regions are SCXML compound states
//     that are not stored: paths list states only. A region's Initial is
//     not SCXML's transient <initial> but a waiting position: an atomic
//     pseudo-state with handlers and no event type, never in paths, named
//     "<region>.initial" as a move's source. Started is SCXML's <initial>:
//     entering the region enters it in the same move.
//   - Selecting handlers. A command goes to the deepest active states that
//     accept it: a state's handler runs only when none of its active
//     descendants accepts the command. SCXML would also take an ancestor's
//     transition reached from another region when it does not conflict;
//     here the regions win outright.
//   - Conflicts between regions. One transition per active leaf, in document
//     order, as SCXML; but handlers pick their targets at run time, so they
//     run before conflicts are known: handlers run in document order, on the
//     context with the earlier handlers' data events applied; a handler whose
//     state an earlier move leaves is not run; a move whose exit set
//     intersects an earlier one's is dropped with its data events. The rest
//     are taken together in one microstep (one state event each). Eventless
//     transitions use SCXML's rule exactly (a descendant's transition
//     preempts its ancestor's; otherwise the earlier wins).
//   - Transition domains (SCXML's getTransitionDomain and findLCCA), fixed
//     when the chart is built: a transition exits everything active below
//     its domain and enters the full path down to each target. A handler
//     targeting its own state's descendants is internal by default (the
//     manual's and XState v5's default; SCXML's type="internal"): a
//     compound source is its own domain, a parallel source's domain is its
//     region holding every target (all its regions when the targets are in
//     several: SCXML would leave the parallel state). External() makes it
//     SCXML's default external transition: the source is exited and
//     re-entered. Internal() states the default. Any other transition is
//     external: its domain is the innermost region holding the source and
//     every target that is neither of them (a region is SCXML's compound
//     state; a RegionState's region and its parallel state are skipped, as
//     findLCCA skips parallel states), so a self-transition exits and
//     re-enters its state. A targetless handler (data only, or Stay) exits,
//     enters and records nothing.
//   - Parallel children. Region is a region that is not a state (never in
//     paths, no handlers, never a target: a modelling convenience SCXML
//     lacks). RegionState is SCXML's child of a <parallel>: a state heading
//     its region, with handlers, actions and contents, targetable, final
//     when its contents are; its path is the region's.
//   - Starts. A compound state starts at its Started sub-state or its
//     region's Initial position; StartsAt is SCXML's <initial> with a
//     transition to any states below the state: a nested state, several
//     states at once in a parallel descendant (All), or a history, shallow
//     or deep, of the state or of a state below it (entered as when last
//     left, else at the history's defaults, else at the regions' own
//     starts).
//   - History (SCXML's <history>): History(s, defaults...) and
//     DeepHistory(s, defaults...) target s's memory; with none yet, the
//     defaults are entered (SCXML's history default transition: a shallow
//     history's are sub-states of s, a deep history's any states below s;
//     several must be in different regions), and with no defaults s is
//     entered by default. Histories are targets, not placed states: they
//     have no name or path of their own. Deliberately unlike SCXML, a
//     transition to the history of a state holding its source, or of its
//     source, exits the state and enters it again (exit and entry actions
//     run, timers restart), and the history recorded at that exit is the
//     configuration just left: the state comes back as it was. (SCXML's
//     history is a child of its state, so there the state stays active and
//     the memory of its last exit is entered.)
//   - Several handlers of one message type in one state are tried in
//     document order, each guarded with When (a Predicate, SCXML's cond):
//     the first whose predicates pass is taken; they are evaluated on the
//     context and configuration before any handler of the decision runs, as
//     SCXML's selectTransitions does. A state none of whose handlers passes does not
//     accept the message, and an ancestor's handler may.
//   - Exit and entry order, a wire contract stored in every state event:
//     Exited in SCXML's exit order (reverse document order: innermost first,
//     parallel siblings in reverse), Entered in document order (outermost
//     first, siblings in order), then each entered compound state's start
//     and region's initial position.
//   - Emission order, the order of the append: for each microstep, the
//     handlers' data events, the Started messages of children they start,
//     the commands exit actions dispatch (exit order), the state events (one
//     per transition, document order), then what entering states produces
//     (entry order: entry dispatches, timers, children started); then each
//     eventless microstep the same way; a child machine's Finished last.
//     SCXML runs transition content after exits; here handlers decide before
//     anything moves, and their data events come first.
//   - Predicates see the context with the decision's data events applied, and
//     the configuration as it is when they run (In, SCXML's In()).
//   - Done joins are eventless transitions enabled while every region of the
//     state is final, not a done.state event raised once: guarded Dones are
//     tried in order after every decision until one passes. Root finals
//     finish the machine (a child then appends its Finished). OnFinal (a
//     part's mapped final) is a transition of the region, so it wins over
//     its parent's Done in the same decision.
//   - Multi-target transitions (All) enter states in several regions of a
//     parallel state at once, each target a state or a history
//     (All(History(a), DeepHistory(b))), recorded as one event of the first
//     target's type; starts may be compound to any depth. As in every
//     transition here, a target in a sibling region of the source is a
//     definition error (SCXML would leave and re-enter the parallel state).
//   - No internal events (raise, send to self): entry and exit actions
//     dispatch commands to the log, decided later as their own messages.
//   - Timers. SCXML cancels a delayed send when its state is left; an
//     appended scheduled command cannot be cancelled, so it carries its
//     entry ("<path>#<n>" under TimerMetadata, n counting entries of the
//     state) and is ignored unless that entry is still current: a timer from
//     an earlier visit does nothing after the state was left and re-entered.
//   - History is recorded on exit, as SCXML, from the configuration before
//     the move; it is derived from the recorded state events on replay, so
//     nothing extra is stored. An instance built from paths (At) has no
//     memory: a history target enters its defaults, or its state by
//     default.
//   - Child machines stand for SCXML's invoke, in their own partitions:
//     StartChild is an invocation per entry (its child is sent Stop when the
//     state is left, as SCXML cancels invocations on exit), OnDone maps the
//     child's finals like done.invoke; handlers may start any number
//     (Starts, MayStart); ChildrenDone joins them. A machine is a child in
//     one role, as the Ruby manual says: started by handlers or by one
//     state. Unlike the manual's children_done, which is a handler that
//     may declare starts: and start children in its block, ChildrenDone
//     takes no function, so it starts none (Starts on it is a definition
//     error). Parts (reusable sub-charts of one owner, escalating through
//     mapped finals) have no SCXML counterpart.
//   - A handler error or a TransitionError rejects the whole decision:
//     nothing is appended (SCXML would raise error.execution and go on).
package statechart
