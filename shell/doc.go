// Package shell is the imperative shell of Sourced: everything that touches
// the world, around the pure core.
//
//   - Store is the interface every store implements: the message log
//     (appends with consistency guards, condition and partition reads,
//     paging, scheduled messages) and the consumer groups (claims, acks,
//     the status chart, heartbeats, housekeeping, monitoring). The SQLite
//     store is in sqlitestore, its in-memory twin in memstore, and the
//     conformance suite that proves them alike in storetest.
//   - Router runs reactors on a store: it claims a partition, hands the
//     batch to the reactor, and executes the signals it returns in one
//     transaction that also acknowledges the batch; ErrorStrategy decides
//     what a failure does to the group. Pure reactors (deciders,
//     event-sourced projectors, projections: see effects.Pure) are claimed,
//     handled and acknowledged inside one write transaction, up to
//     BatchesPerHandle partitions per commit. A busy store (ErrBusy), a
//     cancelled context and a claim lost to the reaper are never a
//     reactor's failure: the batch is released (or abandoned) and tried
//     again. A failure that is the reactor's goes to the error strategy,
//     which reads and writes the group in one transaction
//     (Groups.ChangeGroup); Drain reports it as a *GroupFailedError naming
//     the group, partition and message.
//   - Runtime runs workers and the periodic tasks (catch-up poll,
//     stale-claim reaper, which also releases claims older than
//     MaxClaimAge, scheduled-message promotion, statistics) in the
//     background; Supervise runs it until SIGINT/SIGTERM. A zero Config
//     field takes its default. WaitIdle reports failed groups as Drain
//     does. Every component takes its time from a Clock, and SimClock lets
//     tests advance time without sleeping.
//   - Handle and HandleCommand decide a command synchronously (for web
//     handlers); Load reads a state straight from the log.
//
// Every call that may block takes a context.Context first. Every
// transaction that reads and then writes is a write transaction from its
// start (BEGIN IMMEDIATE on SQLite), so a decision's read and its guarded
// append can never be separated by another writer's commit.
package shell
