// Package sourcedtest is Given / When / Then testing for deciders,
// projectors, projections and statechart machines (Machine: given history
// or stored paths, when a command or event, then the state events, data
// events, dispatches, timers and configuration), with no store, router or
// consumer group: the helpers call the definitions' pure functions
// directly.
//
//	func TestDuplicateName(t *testing.T) {
//		sourcedtest.Decider(t, CourseDecider).
//			Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
//			When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
//			ThenError(`course "Algebra" already exists`)
//	}
//
// Messages are compared by Go type and payload only: ids, times,
// causation, correlation and metadata are ignored, so tests need not match
// generated values. Expected messages may be given as payloads or as
// core.Messages.
//
// A test sees what a store would show the definition. A command decides in
// the partition of its key values (core.PartitionOf: a key missing or empty
// rejects it with a *codec.ValidationError, as shell.Handle does), and the
// history is the given events in that partition (core.InPartition, the
// store's own rule). A given event outside the partition fails the test,
// saying why: a decision cannot depend on an event its consistency boundary
// never reads, so such a test would pass for a decider that enforces
// nothing. AllowOutsidePartition drops such events instead. A projector
// test projects the partition of the first given event that carries every
// key (or WithPartition's).
//
// A command whose decision has a query of its own (core.Reads) needs
// WithRegistry: its history is the given events matching the union of its
// query, the one read a store makes, and each part folds only what its own
// filters match; given events outside every part are dropped, not refused,
// as they are simply not read. ThenRead asserts which boundaries a decision
// read (its guard's conditions). Reactions to a queried decision's events
// run as for any decision, on the command partition's given events.
//
// Delayed reactions are expected as core.After(delay, payload), the delay
// counted from the command (WithTime), or core.At(time, payload); they
// match on payload and due time. ThenScheduled compares the delayed
// messages alone.
//
// With WithRegistry the definition is checked against the registry
// (partition schema and all) before the test runs, as the router would at
// registration, every given and expected payload is validated (an invalid
// one fails the test), and key pairs are the registry's (without it, they
// are read from the payloads' JSON attributes). When's command is
// validated too, and an invalid one is the test's rejection, as
// shell.Handle answers it: ThenError(codec.ErrInvalid) or a
// *codec.ValidationError asserts it.
//
// Whens chain: a When after another decides the earlier one first (which
// must be accepted) and adds what it appended in the partition to the
// history (a machine goes on from the configuration it reached), so a
// sequence of commands reads as it runs on a store; the Then that follows
// a When is about that When.
//
// The kit sits beside package sourced, the application's front door, as
// httptest sits beside net/http; it imports no store and nothing of the
// shell (codec, core, effects and statechart only). It was
// effects/sourcedtest before v0.4.
package sourcedtest
