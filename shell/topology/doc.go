// Package topology builds the message-flow graph of a set of reactors (the
// manual's Sourced.topology) and renders it as JSON, a Mermaid flowchart
// and an Event Modeling board drawn as SVG. It is pure: it reads
// definitions, never a store.
//
//	g, err := topology.Of(reg, courses, enrolments, catalog, orders, greeting)
//	js, _ := g.JSON()                       // {"nodes": [...]}
//	fmt.Print(g.Mermaid())                  // flowchart LR ...
//	os.WriteFile("board.svg", g.SVG(), 0o644)
//
// # Nodes
//
// A command node per decide handler (a decider's, or a machine's command
// handler), with the events it produces; an event node per message type
// the graph mentions that no reactor decides, owned by the group that
// produces it first; an automation node per reaction (a decider's,
// projector's or machine's), machine action (entry, exit, after) and
// machine join (always, done), with what it consumes and dispatches; a
// read-model node per projector, with the events it evolves; a machine
// node per statechart.Machine (and per child machine it starts), carrying
// its chart in XState's vocabulary and its Mermaid state diagram; a
// workflow node per shell/workflow definition; and a reactor node for any
// other effects.Reactor. Every node has its group id and label.
//
// # How complete the graph is
//
// Nothing is run and no source is parsed, so the graph holds what the
// definitions declare:
//
//   - A decider's or projector's handler produces what its Emits
//     declaration lists (core.Decide(fn).Emits(CourseCreated{})). The
//     declaration is checked every time the handler runs: returning an
//     undeclared type fails with core.ErrUndeclaredEmit, so a test that
//     exercises the handler keeps the declaration honest. Without Emits,
//     the node's Produces is empty and Complete is false.
//   - A machine's command and event handlers produce the state events of
//     their declared targets and the Started messages of the children they
//     start, and a timer (After) the command it schedules: all taken from
//     the chart. A handler function (CommandFunc, OnFunc) may add data
//     events with Do.Event, and entry and exit actions and a machine's
//     reactions dispatch what their functions return: those nodes are not
//     Complete.
//   - A workflow consumes its run's client messages (started, signal,
//     cancel) and produces its lifecycle events; the steps a run takes
//     depend on its code and its inputs and are not in the graph (the
//     dashboard shows them per run).
//   - A plain effects.Reactor consumes its HandledTypes; what it produces
//     is unknown.
//
// Edges are derived: from a node to the command and event nodes of what it
// produces, and from an event node to every node that consumes its type.
//
// # Declared and observed
//
// What the definitions declare can be compared with what the log shows:
//
//	obs, err := topology.Observe(ctx, store, topology.ObserveOptions{Last: 10_000})
//	g = g.WithObservation(obs)
//	for _, f := range g.Flagged() { ... } // unobserved and undeclared flows
//
// Observe reads the log's newest Last messages (DefaultObserveLast when 0)
// in descending pages of PageSize, never more, however long the log, and
// pairs every message with the type of the message its causation id
// names (when that message is in the window; an effect whose cause is
// older is counted as Unresolved). The handling group is taken from the
// log where it says: the sourced_decided_by metadata of a command decided
// by Handle, the "producer" metadata of a reaction's dispatch.
//
// WithObservation gives each declared edge of a command or automation node
// a Flow: Confirmed with how often the window shows it, or Unobserved
// (CauseSeen says whether the window held its cause at all: a command never
// sent, or sent and never producing that event); and every observed pair
// that no node consuming the cause declares a Flow of status Undeclared.
// JSON carries the window and the flows ("observed", "flows"); Mermaid
// labels a confirmed edge "N seen", draws an unobserved one dashed and
// grey and an undeclared one as a thick red arrow; the SVG gives the edges
// the classes em-confirmed, em-unobserved and em-undeclared (dashed grey,
// red). 'sourced topology -observe N' and the dashboard's topology page
// (dashboard.Options.ObserveLast) show the same.
package topology
