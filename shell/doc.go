// Package shell is the imperative shell of Sourced: everything that touches
// the world, around the pure core.
//
//   - Store is the interface every store implements: the message log
//     (appends with consistency guards, condition and partition reads,
//     paging, scheduled messages) and the consumer groups (claims, acks,
//     the status chart, heartbeats, housekeeping, monitoring). It is
//     declared, with the rest of the store contract, in package
//     shell/driver; shell aliases the names an application or an operator
//     writes (Store, Tx, AppendOptions, Groups, the statuses and errors).
//     The SQLite store is in sqlitestore, PostgreSQL's in pgstore, the
//     in-memory twin in memstore, and the conformance suite that proves
//     them alike in storetest.
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
//     (Parking: list, retry, skip the failed message, reset). A strategy
//     may decide from the error, the message and the attempt
//     (core.ErrorStrategyFunc: retry at a time, park, fail the group, skip
//     the message); core.Permanent errors are never retried by the fixed
//     policy. A strategy's listeners (OnRetry, OnFail, Report) run in the
//     order they were added. A failure records a stack for a returned
//     error too: where it surfaced and the error's own stack (see
//     Failure.Stack).
//   - Business refusals: an error a decider's Decide returns for a command
//     decided by a background worker is not a failure: it is recorded as
//     a core.CommandRejected message caused by the command, the group goes
//     on, and AwaitCommand gives the sender the command's events or its
//     refusal (a *core.RefusalError matching the decider's sentinel with
//     errors.Is). core.Hooks.RefusalsFail opts a decider out.
//   - Replays: after a reset a claim carries its partition's pre-reset
//     mark (Claim.ReplayUpto), and definitions decide replay per message:
//     what was processed before the reset is neither decided nor reacted
//     to again, even in a batch that reaches past the mark.
//   - Registering: NewRouter takes deciders, projectors, machines,
//     workflows and hand-written effects.Reactor values; a Bundle (a
//     machine with its children: core definitions only) and a
//     ReactorSet (a Module: reactors of any kind, workflows and
//     hand-written reactors included) expand recursively (Expand); the same
//     reactor twice is registered once, two different reactors with one
//     group id are a *DuplicateGroupError, and a machine whose children are
//     not registered a *MissingReactorsError. Every definition's
//     core.Hooks (OnStart, OnStop, OnReset, its own ErrorStrategy) apply
//     whatever its kind.
//   - Lifecycle hooks run whoever moved the group: Router.Stop, Start and
//     Reset, `sourced groups stop|start|reset`, the dashboard without
//     Options.Router, or a store call. A group whose reactor has hooks is
//     registered with driver.GroupSpec.Hooks, and the store then records each
//     operator transition as pending (GroupInfo.HooksPending) and claims
//     none of the group's work until its hooks ran: a reset's replay
//     never lands on a read model its OnReset has not cleared. The router
//     runs the hooks of its own commands before returning; a runtime
//     runs those of the others at its catch-up poll (at once when it
//     starts, then every CatchUpInterval), WaitIdle and Router.Drain
//     before they claim. Each transition is claimed by one process first
//     (Groups.ClaimTransition) and marked run afterwards, in order: a
//     hook runs once per transition across processes. A hook that fails
//     (or panics) is logged, its transition released, and it runs again
//     at the next poll, before later transitions' hooks, while the
//     group's work waits; Router's commands return its error. A hook runs
//     at most the lease (Config.MaxClaimAge; DefaultHookLease for a bare
//     router), its context cancelled past it; a process that dies while a
//     hook runs leaves its claim to expire after the lease, and another
//     process runs the hook again: exactly once, at least once when a
//     process dies in the hook (make hooks idempotent, as clearing a
//     table is). Registering the group without hooks forgets its pending
//     transitions.
//   - Runtime runs workers and the periodic tasks (catch-up poll,
//     stale-claim reaper, scheduled-message promotion, statistics) in the
//     background. Appends wake the workers of the reactors handling their
//     types; under a steady stream a reactor's claims come at most every
//     Config.WakeCooldown (5 ms), each taking what came meanwhile, while
//     the first append after a quiet spell and a backlog are claimed at
//     once. Its Start readies a store that is a driver.Warmer (on
//     PostgreSQL, the sessions its workers will use, their statements
//     planned) before it returns, the statistics refreshed first. On every heartbeat the reaper renews the claims of the
//     batches this process's workers are running (driver.ClaimRenewer), then
//     releases the claims of workers gone silent (ClaimTTL) and the
//     claims nobody renewed for MaxClaimAge (leaked): a batch that runs
//     long keeps its partition, and no other worker runs it again
//     meanwhile. A batch of an impure reactor runs at most its timeout
//     (core.Hooks.Timeout, TimeoutProvider; default Config.MaxClaimAge,
//     10 minutes; negative: none): past it its context is cancelled, and
//     a batch that then fails fails with a *BatchTimeoutError that goes
//     to the group's error strategy, not to another worker. A claim that
//     meets a message the store cannot decode (an unregistered type, a
//     payload that no longer fits its struct) is a *DecodeError that
//     fails the group the same way, naming the type: never an idle
//     group. Types registered after the store opened (a workflow's
//     events, registered by NewRuntime) are known to the store at once; Supervise runs it until SIGINT/SIGTERM (or, with
//     SuperviseOptions.NoSignals, until its context ends). Stop waits for
//     running batches, StopAndCancel cancels them after a grace period,
//     and Start after a stop that timed out returns ErrStillRunning until
//     the stuck workers exited. Starting a group or unparking a partition
//     wakes its workers at once. A zero Config
//     field takes its default. WaitIdle reports failed groups as Drain
//     does. Every component takes its time from a Clock, and SimClock lets
//     tests advance time without sleeping. One clock is enough: give it to
//     the store (memstore.WithSharedClock, sqlitestore's Options.Clock) and
//     leave Config.Clock nil; the runtime takes the store's (driver.Clocked), and
//     with it the router and the workflows (their sleeps and retries are
//     dated by effects.Claim.Now). A Config.Clock other than the store's
//     is refused (ErrClockMismatch).
//   - Handle and HandleCommand decide a command synchronously (for web
//     handlers); Load reads a state straight from the log.
//   - Options: a function that takes options (Handle, HandleCommand,
//     HandleMachine, Load, LoadDecision, LoadMachine, Decide,
//     AwaitCommand, Supervise, Router.Drain) takes a pointer to its
//     options struct last, nil meaning every default, and a zero field
//     keeps its default: shell.Handle(ctx, store, d, cmd, nil), or
//     &HandleOptions{NoCache: true}.
//
// # Long partitions: the state cache and snapshots
//
// A decision folds its partition's history. Two things keep that cheap
// on long partitions, and neither changes a decision: a decision on a
// cached or snapshotted state is exactly the decision on a full fold.
//
//   - StateCache (HandleOptions.Cache) keeps folded states in memory
//     between one process's decisions: a partition's next decision folds
//     only what was appended since its last one (by any process). Handle
//     uses the store's own by default (StateCacheKeeper: sqlitestore) for
//     value states, and for the parts of a decision with a query
//     (core.Reads); HandleOptions.NoCache turns it off.
//   - Persisted snapshots survive a restart and serve partitions the
//     cache never saw. A decider opts in with core.Snapshots: a codec
//     (core.JSONSnapshots for plain-data states; an invalid option or a
//     state JSON would not round-trip is a definition error) with a
//     Version naming the state's shape, and Every, how many events a
//     state folds between two snapshots. On a store that keeps snapshots
//     (SnapshotStore: memstore, sqlitestore, pgstore), Handle starts a
//     partition from its StateCache entry, else from its latest valid
//     snapshot, read in the decision's own transaction, and reads only
//     the history after the snapshot's position; Load and LoadDecision
//     start from the snapshot too (a point-in-time Load before it folds
//     from the log). After the decision commits, when the state folded
//     Every events since its snapshot, Handle saves a new one: best
//     effort, in a transaction of its own, logged at WARN if it fails,
//     never failing the command. Load of a partition without a snapshot
//     saves one the same way.
//
// A snapshot is ignored, and the state rebuilt from the log, when its
// version is not the codec's (change the Version whenever the state type,
// an evolve handler or an upcaster of an evolved type changes), when its
// group was reset since (ResetGroup deletes a group's snapshots), when its
// position is beyond the log's end (a log restored from an older backup:
// the snapshot is deleted when a decision or a Load first meets it, so
// reset the group, or call DeleteSnapshotsOf, after restoring a log
// without its snapshots), and when it does not decode (logged at WARN;
// the next snapshot replaces it). What a snapshot needs from the log is
// what the cache needs: messages are only appended. An id-partitioned
// decider (a delete-on-ack queue) cannot take snapshots (a definition
// error), and no delete-on-ack queue may delete the events a
// snapshotting decider evolves. A decision that commits just before a
// reset may save its snapshot just after it: reset the group after the
// processes that run the old code stopped (which a redeploy does), or
// change the Version.
//
// Every call that may block takes a context.Context first. Every
// transaction that reads and then writes is a write transaction from its
// start (BEGIN IMMEDIATE on SQLite), so a decision's read and its guarded
// append can never be separated by another writer's commit.
package shell
