// Package core is the pure heart of Sourced: messages, query conditions, the
// consistency guard, partitions, and the generic Decide / Evolve / React
// building blocks (Decider, Projection, Projector) with their composition.
//
// Nothing in core performs I/O, reads a clock or draws randomness that the
// caller did not pass in. A decider is a value of pure functions that a unit
// test calls with a history and a command, with no store anywhere:
//
//	d := core.Decider[course]{Group: "courses.course_decider", PartitionBy: []string{"course_name"}}.With(
//		core.Evolve(func(s course, _ CourseCreated) course { s.NameTaken = true; return s }),
//		core.Decide(func(s course, c CreateCourse) ([]any, error) {
//			if s.NameTaken {
//				return nil, fmt.Errorf("course %q already exists", c.CourseName)
//			}
//			return []any{CourseCreated{CourseID: c.CourseID, CourseName: c.CourseName}}, nil
//		}),
//	)
//	out, err := d.Run(history, core.NewMessage(CreateCourse{...}))
//
// # Messages
//
// A [Message] carries a payload (a plain Go struct registered with a
// [codec.Registry]) and its envelope: id, type, metadata, causation and
// correlation ids, and creation time. Messages built by [NewMessage] have no
// id or time yet: the shell stamps them when it appends ([Message.Stamp]), so
// everything here stays deterministic. [Message.Correlate] links a message to
// the one that caused it, so command -> event -> reaction chains carry the
// right ids at every link.
//
// # Conditions and guards
//
// A decision reads the facts it needs by [Condition] (a message type plus
// attribute values: AND within a condition, OR across conditions). The read
// returns a [Guard]: the conditions plus the last position the reader saw.
// Appending with that guard fails with [ErrConcurrentAppend] if a message
// matching any condition arrived after that position; [Guard.Conflicting] is
// the pure predicate every store uses.
//
// # Partitions
//
// A [Partition] names a consistency boundary or a consumer group's unit of
// work by its attributes' values ({"course_id": "c1"}); it is a map, so a
// map literal is one. [Partition.Key] is its one canonical encoding, which
// every store keys offsets, snapshots and cached states by;
// [Partition.String] shows it (course_id:c1) and [ParsePartition] reads
// either back, whatever the values hold.
//
// # State is a value
//
// Evolve handlers have the shape func(S, E) S: they receive the state by
// value and return the next one. Prefer state types whose fields are values;
// when a state holds a map or slice, copy it before changing it in place
// (appending to a slice is fine) so that an earlier state a test kept does
// not change under it. Init (a function, so maps are never shared) builds the
// state before the first event; without it the zero value of S is used.
//
// # Declaring what handlers produce
//
// Emits declares the types a Decide, React or ReactAny handler may return
// (core.Decide(fn).Emits(CourseCreated{})), so that a topology (package
// shell/topology) knows the message flow without running anything. The
// declaration is checked whenever the handler runs: an undeclared type
// fails the decision with ErrUndeclaredEmit. Describe lists a definition's
// handlers with what they declare.
//
// # Definitions are checked when built
//
// With collects handlers; any mistake (two handlers for one type, a handler
// whose message type is not a struct) is recorded and returned by Err and by
// Check, which also checks the partition schema against a codec registry:
// commands and reactions declare every partition key, evolved events at least
// one, at least one handled type declares all of them, and each key has the
// schema's Go type. The router and the test helpers call Check, so a bad
// definition fails at start, naming the message and the key. A command must
// declare every partition key as a required attribute (`sourced:"required"`),
// and PartitionOf is the rule that refuses, at run time, a command whose key
// is missing or empty: otherwise every such command would be decided in the
// one partition "".
//
// # Decisions across boundaries
//
// PartitionBy is one AND-tuple of attribute values: it orders a decider's
// background work (the commands a worker claims together) and, by
// default, is also what each decision reads. A decision that needs facts
// from several boundaries ("a member holds at most 3 books, and a book is
// lent once") declares its query per command type with Reads: a pure
// function of the command returning a Query, whose parts are typed
// projections (Read, ReadEach), each with its own filters (Where, And,
// AllEvents, Only), composed into the decider's state by set functions:
//
//	core.Reads(func(c LendBook) core.Query[lending] {
//		return core.Query[lending]{
//			core.Read(memberLoans, setLoans, core.Where("member_id", c.MemberID)),
//			core.Read(bookOut, setBookOut, core.Where("book_id", c.BookID)),
//		}
//	})
//
// Query.Plan resolves the filters against a registry into store
// conditions, one list per part, and their union; the shell reads the
// union once, Query.Fold folds each part over the events its own
// conditions match, and the decision's events are appended under a guard
// on exactly the union after the last position read. A filter is exact
// AND over indexed attributes (unlike a partition's conditional AND): an
// event lacking one of the attributes is not selected. Check resolves
// every query on the zero command, so a filter naming an attribute no
// event type indexes fails when the decider is registered. Two queries
// that would guard less than they seem to are refused (ErrDefinition): a
// part whose projection evolves a type none of its filters selects
// (Where("username", u) does not select UsernameChanged, whose attributes
// are old_username and new_username: without a filter of its own for it,
// core.Only[UsernameChanged](...), a rename would be neither read nor
// guarded, and a name could be taken twice), refused by Check naming the
// type; and a query with no parts, which reads nothing and so guards
// nothing, refused when the command comes (a ReadEach over an empty list:
// refuse such a command in its validation, or decide without Reads). A
// command without Reads is decided on its partition's history exactly as
// before.
// A decider with queries still has a PartitionBy, which orders its
// background work: the commands a worker claims together are decided one
// after the other, each on its own read plus the events decided before it
// in the batch. For a type-only boundary (gap-free invoice numbers), let
// PartitionBy be an attribute the command carries (its own id, or a
// ledger): the guard, not the partition, serialises the decisions.
//
// This is the decision model of dcb.events (buildDecisionModel: named
// projections, each with its event types and tags, one read of the
// composed query, an append condition on it), in the style of fmodel's
// composable deciders, with these differences: projections are the same
// Projection values read models use, typed, composed into one state value
// of the user's type by set functions rather than into a record keyed by
// name; events carry no tags: filters name the payload's indexed
// attributes, so one value under different attribute names per event type
// is said with Only; the query is declared on the decider per command
// type, so synchronous handling, background workers, Load and tests all
// run the same one instead of each call site building its model; and the
// guard's position is the store's last position at the read, so an empty
// read guards too.
//
// DecideEnvelope and EvolveEnvelope are Decide and Evolve for handlers that
// need the command's or each event's envelope (id, time, metadata): age
// rules and due dates compare an event's CreatedAt with the command's,
// with no clock.
//
// # Snapshots
//
// A decider whose partitions grow too long to fold on every cold decision
// opts in to persisted snapshots with its Snapshots field: a
// SnapshotCodec, whose Version names the state's shape, and Every, how
// many events a state folds between two snapshots:
//
//	Snapshots: core.Snapshots[account]{Codec: core.JSONSnapshots[account]("account/v1"), Every: 500},
//
// Core only describes the option; the shell saves and loads snapshots
// (see package shell). JSONSnapshots checks, when the decider is built
// (Err) and checked (Check), that the state type round-trips through
// JSON: no unexported or `json:"-"` fields, interfaces, functions or
// channels. Change the Version whenever the state type, an evolve handler
// or an upcaster of an evolved type changes: snapshots of another version
// are ignored. An id-partitioned decider cannot take snapshots.
//
// # Lifecycle hooks and error strategies
//
// Beside its handlers, every definition has a [Hooks] field: OnStart,
// OnStop and OnReset, which the shell calls once after an operator command
// moved the definition's consumer group, whoever gave the command, before
// the group's work goes on (a projector clearing its read model on reset),
// and an [ErrorStrategy] of its own (retries,
// back-off, parking a poisoned partition, listeners). They are copied
// into the [Spec], so the shell treats every kind of definition alike.
//
// An error strategy may decide from the error, the message and the
// attempt ([ErrorStrategyFunc], [ErrorStrategy.Decide]): [RetryAt],
// [ParkPartition], [FailGroup] or [SkipMessage], deferring to the fixed
// policy ([ErrorStrategy.Fixed], [FixedErrorStrategy]) where it has no
// opinion. [Permanent] marks an error not worth retrying, for the fixed
// policy and for workflow steps alike.
//
// # Business refusals
//
// A business refusal is an error a decider's Decide returns for a command
// (a decide handler, or the Decide of a command with a query of its own):
// "course is full". Decide is pure, so such an error is the command's
// outcome, never the store's or the network's. A panic in Decide is not a
// refusal, nor is an error of Evolve, React, sync work, a query the store
// refuses, or a hand-written reactor: those are failures, for the error
// strategy. Handled synchronously, a refusal is returned to the caller;
// decided by a background worker (StepInput.RecordRefusals), it is
// recorded as a [CommandRejected] reaction to the command and the batch
// goes on; the sender reads it back as a [RefusalError], which errors.Is
// matches against the decider's sentinel by its text. A decider whose
// refusals mean a bug sets [Hooks].RefusalsFail.
//
// # Replays
//
// After its group was reset, a partition's messages up to
// [StepInput].ReplayUpto were processed before: [StepInput.Replayed]
// tells them apart per message, and definitions neither decide nor react
// to them again, even in a batch that reaches past the mark.
//
// # Dating messages
//
// [Message.At] dates a message (a future time schedules it); a message
// cannot be dated before its creation time: it then carries a
// [PastMessageDateError] ([Message.Err]) that fails its append. A
// reaction's [At] or [After] whose time falls before its event is due at
// once: dated at the event's time and appended with the reaction's other
// messages (see [Delayed.Dated]).
package core
