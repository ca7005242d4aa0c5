// Package effects holds the inert signals a reactor returns and the reactor
// protocol, the few methods anything must implement to run on Sourced.
//
// A reactor handles a claimed batch of messages and returns, for each
// message, a Pair: the signals it produced and the message they came from.
// Signals are plain values (Append, Sync, AfterSync, Ack, Unschedule) that
// a third party can build without importing anything else of Sourced; the
// shell is the only code that executes them, in one transaction per batch:
//
//	Append     append messages (future-dated ones are scheduled), optionally under a guard
//	Sync       work inside the batch's transaction (write a read model)
//	AfterSync  work after the transaction committed (send an e-mail)
//	Ack        acknowledge the source message; Delete removes it (delete-on-ack queues)
//	Unschedule withdraw scheduled messages by id before they are due (a timeout no longer needed)
//
// The minimum a reactor implements is Reactor: HandledTypes and
// HandleClaim. Everything else (group id, label, partition keys,
// exclusivity, history) has a default, which a reactor overrides by
// implementing the matching optional interface (Grouper, Labeler,
// Partitioner, Exclusiver, Historian). Describe resolves them.
//
// Definitions from package core (Decider, Projector) become reactors with
// FromDefinition; Step is the pure function from a claimed batch to pairs
// that they run on, with causation and correlation applied so that
// command -> event -> reaction carry the right ids at every link, and
// reactions skipped when the claim is a replay.
//
// Queue is a ready-made reactor: a work queue of jobs of one message type,
// each done once by a Work function, deleted when done, and retried on its
// own after a failure (the signals it returns: Ack{Delete: true}, and an
// Append of the job's next attempt dated after its back-off).
package effects
