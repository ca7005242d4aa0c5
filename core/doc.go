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
// # State is a value
//
// Evolve handlers have the shape func(S, E) S: they receive the state by
// value and return the next one. Prefer state types whose fields are values;
// when a state holds a map or slice, copy it before changing it in place
// (appending to a slice is fine) so that an earlier state a test kept does
// not change under it. Init (a function, so maps are never shared) builds the
// state before the first event; without it the zero value of S is used.
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
// # Lifecycle hooks and error strategies
//
// Beside its handlers, every definition has a [Hooks] field: OnStart,
// OnStop and OnReset, which the shell's router calls after an operator
// command moved the definition's consumer group (a projector clearing its
// read model on reset), and an [ErrorStrategy] of its own (retries,
// back-off, parking a poisoned partition, listeners). They are copied
// into the [Spec], so the shell treats every kind of definition alike.
//
// # Dating messages
//
// [Message.At] dates a message (a future time schedules it); a message
// cannot be dated before its creation time: it then carries a
// [PastMessageDateError] ([Message.Err]) that fails its append, and a
// reaction's [At] or [After] before its event fails the reaction.
package core
