package sourced

import (
	"context"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

// Decider handles commands in a consistency boundary: its PartitionBy
// attributes. It evolves a state S from the boundary's events, decides each
// command against that state (events, or an error that stores nothing) and
// reacts to events with follow-up messages. Build it with With and the
// handlers Evolve, Decide, React, Sync and AfterSync:
//
//	var Courses = sourced.Decider[bool]{Group: "courses", PartitionBy: []string{"course_name"}}.With(
//		sourced.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
//		sourced.Decide(func(taken bool, c CreateCourse) ([]any, error) { ... }),
//	)
//
// A decider is a value of pure functions: test it with sourcedtest.Decider,
// no store needed. It is core.Decider; composition (core.Combine,
// core.MapState, ...) and queries across boundaries (core.Reads) are in
// package core.
type Decider[S any] = core.Decider[S]

// Projector folds the events of each partition into a read model S and
// writes it with Sync, in the transaction that acknowledges the events, so
// the read model never misses an event nor sees one twice (core.Projector).
type Projector[S any] = core.Projector[S]

// Handler is one handler of a decider or projector, as Evolve, Decide,
// React, Sync and AfterSync return it.
type Handler[S any] = core.Handler[S]

// Evolve handles the event type E: it returns the state after the event.
func Evolve[S, E any](fn func(S, E) S) Handler[S] { return core.Evolve(fn) }

// Decide handles the command type C: it returns the events to append, or an
// error, in which case nothing is appended.
func Decide[S, C any](fn func(S, C) ([]any, error)) Handler[S] { return core.Decide(fn) }

// React handles the event type E after it is stored: it returns the
// messages to dispatch (commands for other deciders, or After(...) for a
// message due later). The runtime's workers run it.
func React[S, E any](fn func(S, E) []any) Handler[S] { return core.React(fn) }

// SyncTx is the store transaction Sync work runs in. Each store gives the
// typed way in (sqlitestore.Conn(tx), pgstore.Conn(tx)), which returns an
// error, never panics, on another store's transaction (core.SyncTx).
type SyncTx = core.SyncTx

// Batch is what Sync and AfterSync work receive: the state after the batch,
// its partition, the claimed messages and the events a decider produced.
type Batch[S any] = core.Batch[S]

// Sync runs fn in the transaction that appends a decision's events or
// acknowledges a projector's batch: write a read model there, and it is
// written if and only if the batch is.
func Sync[S any](fn func(ctx context.Context, tx SyncTx, b Batch[S]) error) Handler[S] {
	return core.Sync(fn)
}

// AfterSync runs fn after the batch's transaction committed: for work
// outside the store (an e-mail, an HTTP call), at least once.
func AfterSync[S any](fn func(ctx context.Context, b Batch[S]) error) Handler[S] {
	return core.AfterSync(fn)
}

// After is a reaction's message due d after the event it reacts to (pure:
// no clock): the store keeps it scheduled and promotes it when it is due.
func After(d time.Duration, payload any) core.Delayed { return core.After(d, payload) }

// Queue is a work queue of jobs of type T (effects.Queue): append a T and
// one of the runtime's workers does it once, with Work, and deletes it.
// A failing job is tried again after a back-off (10 attempts by default),
// without holding up the others, then parked for an operator. Hand it to
// NewRuntime as NewQueue returns it.
type Queue[T any] = effects.Queue[T]

// Job is a job of a Queue as its Work receives it: the payload, the
// message it came in, and which attempt this is.
type Job[T any] = effects.Job[T]

// Snooze is what a queue's Work returns for a job that is not ready yet:
// it is done again after d, the attempt uncounted (effects.Snooze).
func Snooze(d time.Duration) error { return effects.Snooze(d) }

// NewQueue returns a queue of jobs of type T named group, done by work,
// with the default attempts, back-off and parking; set its fields
// (Attempts, Backoff, Keep, Timeout, ErrorStrategy) to change them.
func NewQueue[T any](group string, work func(ctx context.Context, job Job[T]) error) *Queue[T] {
	return effects.NewQueue(group, work)
}
