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
//     the group, partition and message. The default fails the group;
//     ErrorStrategy.Park parks the failing partition instead once its
//     retries ran out, and the group goes on with its other partitions
//     (Parking: list, retry, skip the failed message, reset). A strategy's
//     listeners (OnRetry, OnFail, Report) run in the order they were added.
//   - Registering: NewRouter takes deciders, projectors, machines,
//     workflows and hand-written effects.Reactor values; a Bundle (a
//     machine with its children, a module) expands recursively; the same
//     reactor twice is registered once, two different reactors with one
//     group id are a *DuplicateGroupError, and a machine whose children are
//     not registered a *MissingReactorsError. Every definition's
//     core.Hooks (OnStart, OnStop, OnReset, its own ErrorStrategy) are
//     called by Router.Start, Stop and Reset, whatever its kind.
//   - Runtime runs workers and the periodic tasks (catch-up poll,
//     stale-claim reaper, which also releases claims older than
//     MaxClaimAge, scheduled-message promotion, statistics) in the
//     background; Supervise runs it until SIGINT/SIGTERM (or, with
//     SuperviseOptions.NoSignals, until its context ends). Stop waits for
//     running batches, StopAndCancel cancels them after a grace period,
//     and Start after a stop that timed out returns ErrStillRunning until
//     the stuck workers exited. Starting a group or unparking a partition
//     wakes its workers at once. A zero Config
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
