// Package driver is the contract between Sourced and a store: what a
// store implements (Store, Tx, Groups, GroupTx and the optional
// interfaces below), the types its methods take and return, and the
// dialect-free logic every store shares (argument checks, message
// preparation, group registration, the status chart, paging). The SQL
// stays in each store; shell/storetest proves a store keeps the contract.
//
// An application does not import this package: package shell aliases the
// names an application or an operator writes (Store, Tx, AppendOptions,
// Groups, Parking, the statuses and errors), and shell/sourced the ones of
// a first application. Those aliases are the same types, so a value passes
// between shell and driver freely. The names only a store implements or
// calls live here alone.
//
// The contract is unstable: it changes with the engine, in minor versions,
// until v1. A store outside this repository should pin the version it
// passes storetest with.
//
// # Implementing a store
//
// A store implements Store (the log: appends with consistency guards,
// condition and partition reads, paging, scheduled messages) and, to run
// reactors, Groups (consumer groups: claims, acks, the status chart,
// heartbeats, housekeeping) with Parking, Lagger and ParkedReader for the
// operator's views. Its transaction (Update's Tx) implements GroupTx when
// the store has groups, so that a batch's effects and its ack commit
// together. It validates its input with the shared checks, so that every
// store refuses the same input with the same error:
//
//   - an append: PrepareMessage (validated, named, stamped with an id and
//     the time, encoded), CheckConditions for its guard, and
//     CheckPartitionValues (an empty value a group partitions by);
//   - a read: CheckConditions, CheckReadPartition, CheckReadOptions,
//     CheckReadAll (cursors, page sizes), and PageMessages / PageOffsets to
//     build the iterators (All, Offsets) from the paged reads;
//   - a group: NormalizeGroupSpec and CheckGroupConflict (RegisterGroup's
//     prologue), PartitionWalk (the partitions a message opens or wakes,
//     on append and in discovery), Transition / Accepts / Claimable (the
//     status chart), CheckClaim, CheckAck, CheckTTL, CheckClaimTransition,
//     CheckPartition, CheckLagQuery, CheckParkedQuery, SortParked;
//   - scheduled messages: CheckPromotable, UnpromotedError.
//
// # Optional interfaces
//
// The engine (package shell) asks a store for more through these
// interfaces, each named and documented where it is declared; a store
// implements those it can, and the engine falls back where it does not:
//
//   - of the store: Clocked (its clock, shared with the runtime),
//     LoggerProvider (its logger), Housekeeper (periodic upkeep),
//     ChangeDetector (a cheap "did anyone write?" for the catch-up poll),
//     ScheduleCounter (the commits that scheduled messages), ClaimRenewer
//     (claims a live worker keeps), SkippingPositions and AppendWaiter
//     (positions that may skip, appends in flight), ClaimManyUpdater
//     (several partitions claimed by a ClaimUpdate's first statement),
//     ScheduleReader (listing scheduled messages), SnapshotStore
//     (deciders' snapshots), Warmer (sessions readied before the first
//     claim), and shell.StateCacheKeeper (a state cache
//     kept by the store: declared in shell, because the cache is the
//     engine's);
//   - of its transaction: ContextProvider (the core.SyncTx sync work
//     receives; every Tx has it, a wrapper of one may), GroupTx,
//     ClaimManyTx (several partitions claimed in one transaction),
//     PartitionsReader (several partitions read in one round trip),
//     DeferredAdvancer and DeferredCommandAppender (writes settled at
//     commit), UnscheduleTx (withdrawing a scheduled message), SnapshotTx
//     (snapshots in the transaction).
//
// InlineNotifier is the in-process Notifier (subscribers called in the
// committing goroutine); SimClock and SystemClock are the clocks a store
// is given.
package driver
