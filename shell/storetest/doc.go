// Package storetest is the conformance suite of driver.Store: the behaviour
// every store implementation must have, as tests that any implementation
// runs against itself. The SQLite store and the in-memory store both pass
// it; a new store (another database, a wrapper with caching or metrics)
// proves it behaves the same by passing it too.
//
// # Using the suite
//
// Call Run (and RunGroups, for a store with consumer groups) from a test of
// the implementation's package with a Factory that
// opens a fresh, installed, empty store per call. The factory must use the
// registry, clock and notifier it is given (the suite registers its own
// fixture message types, drives the clock to schedule and promote
// messages, and records notifications) and register the store's cleanup
// with t:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, reg *codec.Registry, now func() time.Time, n driver.Notifier) driver.Store {
//			s, err := mystore.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"),
//				mystore.Options{Registry: reg, Now: now, Notifier: n})
//			if err != nil {
//				t.Fatalf("open: %v", err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Every subtest opens its own store, so stores are never shared between
// tests; the factory may be called from a goroutine other than the test's
// (the model-based part opens one store per rapid check in a subtest).
//
// # What it covers
//
//   - Append: consecutive positions, stamping (UUID v7 ids, the store's
//     clock, causation and correlation defaulting to the own id), envelopes
//     and metadata kept, payload round trips, key pairs indexed (canonical
//     ints, bools, times; every element of a slice attribute), empty
//     appends, one notification of the distinct types per commit.
//   - BadInput: unregistered types, invalid payloads (a required attribute,
//     a Validate method) and duplicate ids (in the log, the schedule, the
//     batch) fail with an error matching codec.ErrUnregistered,
//     codec.ErrInvalid or driver.ErrDuplicateID, and write nothing.
//   - Refusals: indexed text that is not valid UTF-8 (a *codec.ValidationError
//     naming the attribute, scheduled messages included, nothing written);
//     conditions that could never match, in reads, pages and guards (an
//     empty or unregistered type, an attribute the type does not declare
//     or does not index, the reserved core.IDKey, a value that is not
//     UTF-8: a *driver.InvalidConditionError, errors.Is
//     driver.ErrInvalidCondition, nothing written); partitions ReadPartition
//     would not read as named (no attributes, an attribute no type read
//     declares and no registered type indexes, one the types read do not
//     index, attributes none of the types read declares, a reserved
//     attribute, core.IDKey beside others or with a value that is no
//     message id, a value that is not UTF-8: a *driver.InvalidPartitionError,
//     errors.Is driver.ErrInvalidPartition, nothing written; a transaction
//     told so, or refused an append, goes on and commits what it did and
//     does next); ReadAll with
//     an order that is neither Ascending nor Descending; the limits on
//     indexed values every store holds to (codec.MaxIndexedValueBytes, no
//     NUL: a *codec.ValidationError before anything is written, an append
//     inside Update failing alone; conditions and partitions naming such a
//     value refused as codec.ErrInvalid too; values at the limit stored
//     and found); read limits (a negative Limit, a ReadAll page over
//     driver.MaxPageSize: driver.ErrInvalidLimit).
//   - TestHelpers: every store also has Clear (Clearer) and ReadScheduled
//     (driver.ScheduleReader), so that tests written against one store run on
//     another.
//   - ValueTypes: codec.Date and codec.Decimal values read back exactly
//     (a decimal's scale included) and indexed under their text.
//   - ClockSteps: an undated message is stamped with the same reading of
//     the clock that decides scheduling, so a clock stepping back never
//     schedules it (shell.Handle relies on it).
//   - Guard: conflicts and non-conflicts, empty reads and new partitions
//     that still guard (hazard H3, concurrently too), stale guards,
//     type-only conditions, the *core.ConflictError and its messages,
//     rejected appends that write nothing, guards that see their own
//     transaction's writes.
//   - WriteSkew: pairs of writers whose guards draw their boundaries
//     differently, each appending what the other's guard matches: exactly
//     one of the two succeeds, in either order and concurrently.
//   - Read, ReadPartition: OR across conditions, AND within, conditional AND
//     for partitions (the table under Conditional AND), After, Upto, Limit
//     and the guard position rules; where a transaction reads several
//     partitions at once (driver.PartitionsReader), each read is
//     ReadPartition's, a refused one refused so among others.
//   - ReadIDPartition: the partition {core.IDKey: id} holds exactly the
//     message with that id if its type is among those read, whatever it
//     was indexed under (a queue's type, appended before the queue was
//     registered, any other type).
//   - HandleQueue: shell.Handle on an Exclusive decider with no
//     PartitionBy decides each command in its own partition {core.IDKey:
//     its id} on an empty history and moves the group's offset past it, so
//     that only commands appended without Handle are claimed.
//   - HandlePartition: shell.Handle of a decider on its partition's
//     history, one after another and concurrently on one partition,
//     reports each command at the position the log holds it, gives the
//     decider's sync work that position too, and decides every command on
//     the state after the one before (however the store sends the command:
//     see driver.DeferredCommandAppender).
//   - ReadAll: paging both ways with and without conditions, the inclusive
//     cursor, Page.Next, All, and that descending pages with conditions end
//     (hazard H12).
//   - Schedule: future-dated messages, NextScheduled, PromoteScheduled in
//     scheduling order, promoted messages indexed and guarded, times compared
//     as instants across zones and below a second (hazard H10); a due
//     message that cannot be appended as it is set aside, reported in a
//     *driver.UnpromotedError and left scheduled, while the rest is
//     promoted.
//   - Update: commits together, reads see own writes, errors and panics
//     roll everything back, subscribers are told after the commit only
//     (hazard H11), other readers never see half a transaction; an
//     append with AppendOptions.Deferred is stamped at once, read by its
//     own transaction, written in order at the commit and rolled back
//     with it; one whose guard conflicts fails the Update with the
//     *core.ConflictError and nothing written.
//   - Concurrency: concurrent appends keep every message once with no gap;
//     concurrent guarded appends are linearizable (each successful append
//     is checked against the final log, and some must have conflicted).
//   - Model: a rapid state-machine test comparing the store with a simple
//     model after every step of random appends (guarded, transactional,
//     rolled back, invalid, duplicate, scheduled), reads, partition reads,
//     pages and promotions.
//
// # Consumer groups
//
// RunGroups is the consumer-group part, for stores that also implement
// driver.Groups (and whose Update hands out a driver.GroupTx); call it
// beside Run with the same factory:
//
//	func TestGroupConformance(t *testing.T) { storetest.RunGroups(t, open) }
//
// It covers:
//
//   - Register: a new group is active with nothing processed, the label
//     defaults to the id, partition keys are sorted; registering again
//     keeps the status, the failure and the offsets; bad specs (see
//     driver.GroupSpec.Validate, a group id that core.NormalizeGroup would
//     change, a handled type the registry does not know) register nothing;
//     an exclusive group owns its types (*driver.GroupConflictError naming
//     the new group, the other one and the shared types); non-exclusive
//     groups sharing a type each get its messages.
//   - Claim: conditional-AND fetch of the handled types (the table under
//     Conditional AND), batch size, order, ack-then-continue, a slice
//     attribute delivering a message once to each partition it spans,
//     AND discovery of partitions from handled types only (hazard H8),
//     the furthest-behind partition first (ties: the oldest offset),
//     discovery of messages appended before the group registered, the
//     claim guard, bad input.
//   - Ack: only the claimant acks or releases (driver.ErrNotClaimant,
//     hazard H4), release does not move the offset, acks never move it
//     back and the highest position is the furthest ack, a partial ack
//     leaves the rest to any worker, an Update appending events and
//     acking together. A store may defer an acknowledgement made in an
//     Update to the transaction's next statement or its commit (pgstore
//     does, to settle many claims per round trip): a claim not held then
//     makes the Update fail with ErrNotClaimant and write nothing (its
//     deletes and other acknowledgements included), instead of failing
//     the call.
//   - AdvanceOffset: skipping a synchronously handled command, never
//     backwards, never over an unprocessed (or claimed) message of the
//     partition, bad input.
//   - Latch: idle groups wake on appends (in transactions and promotions
//     too) and on releases; the burst of the changes file (commands that
//     only emit events, workers polling meanwhile) strands nothing.
//   - Lifecycle: every status against every operator command (the chart
//     of driver.Transition; refused commands return an
//     *InvalidTransitionError and write nothing), unknown groups
//     (*UnknownGroupError naming the registered ones), failures kept as
//     given, stop reasons, worker commands that never fail on a status,
//     retry times, recovery by the failed partition only, reset and
//     replay (Replaying, the highest position surviving the reset, claims
//     held across a reset void), reset leaving a queue alone.
//   - Housekeeping: a worker that stops heartbeating loses its batch to
//     another; a claim of a worker that never heartbeat expires by its age
//     (hazard H5); drained offsets; orphan key pairs.
//   - Offsets: ReadOffsets and Offsets (group filter, inclusive cursor,
//     limits, totals, claims), the figures of driver.GroupInfo.
//   - Queue: an exclusive group without partition keys hands each message
//     alone to concurrent workers, deletes it on ack, reaps its drained
//     offsets; scheduled jobs; synchronously handled jobs.
//   - QueueIndex: the types a queue owns are indexed by payload as well as
//     by message id, before and after the queue registers: reads,
//     partition reads, pages and guards on their attributes see them, and
//     the queue still hands each message out alone.
//   - GroupRefusals: an ack past the claim's last message
//     (driver.ErrAckBeyondClaim, the claim still held, nothing changed), an
//     ack of a claim the worker does not hold (released, another worker's,
//     forged) at any position, past the claim's last message included
//     (driver.ErrNotClaimant: ownership is checked before the position;
//     nothing changed), a
//     negative ttl for ReleaseStaleClaims, a partition key that no handled
//     type indexes (a misspelling, or a `sourced:"noindex"` tag: the error
//     says which).
//   - EmptyPartitionValues: an append (or Tx.Append) of a message holding
//     an empty value for a partition key of a registered group handling
//     its type is refused with a *codec.ValidationError naming the
//     attribute (driver.CheckPartitionValues), scheduled or not, anywhere
//     in the batch, nothing written; empty attributes no such group
//     partitions by, and optional keys left out, are appended.
//   - GroupTx: a failed Update undoes appends, offsets, claims, acks,
//     deletes and advances.
//   - ClaimMany: ClaimManyTx claims distinct partitions in ClaimNext's
//     order, none another worker holds; where a store claims several with
//     a ClaimUpdate's first statement (driver.ClaimManyUpdater), an idle
//     group answers without calling fn, fn's error rolls back the claims
//     with its writes, and bad arguments are refused.
//   - ChangeGroup: a worker command decided on the group's state and
//     applied in one transaction (retry, then fail; a refused or zero
//     command and an error from decide write nothing; an unknown group);
//     concurrent changes each see the others, so no retry count is lost.
//   - ClaimAge: ReleaseClaimsOlderThan releases a live worker's old claim
//     (returning the offset as it was: group, partition, worker, claim
//     time) and leaves younger ones; a claim renewed by its worker
//     (driver.ClaimRenewer, which every store implements) is younger, and
//     a claim another worker holds, or released, is not renewed; a worker removed by RemoveWorkers is
//     stale by its claim's age; GroupTx.Release commits or rolls back with
//     its transaction and only the claimant may release.
//   - Warm: a driver.Warmer's warm-up, twice, changes nothing anyone sees
//     (the log, a claim held and those claimable, a queue's claim, the
//     next append's position), and a cancelled one returns
//     context.Canceled. Skipped for a store that is no Warmer.
//   - GroupConcurrency: four goroutine workers and an appender, 200
//     partitions of commands that emit events and a group projecting the
//     events: everything drains, each message is processed once per group
//     and in order within its partition, every group ends idle. Meant for
//     the race detector; a stall of three seconds is reported as stranded
//     partitions.
//   - GroupModel: a rapid state-machine test of claims, acks (alone or in
//     Updates that commit or roll back), releases, advances, operator and
//     worker commands and the clock, by three workers over two groups,
//     against a model (see testGroupModel for the invariants).
//
// Decisions the suite pins where the contract (shell/groups.go) is silent
// or ambiguous:
//
//   - Pending work: a partition has pending work when a handled message
//     after its offset carries every partition attribute with the
//     partition's values (full AND, as partitions are discovered). A message
//     carrying only some waits: it is delivered, by the conditional-AND
//     fetch, with the next claim of the partition.
//   - Claim order: the claimed partition is furthest behind among the
//     partitions with pending work the store has offsets for. A store may
//     discover the partitions of a late-registered or reset group lazily
//     (when its scan finds nothing), so the model does not count
//     partitions the store has no offset for yet; every such partition
//     must still be found before ClaimNext returns nil.
//   - Replaying is per partition: a claim is a replay when its last
//     position is at or below how far that partition had been
//     acknowledged when the group was last reset. (The original's
//     group-wide high-water mark made a first-time claim of a slow
//     partition report Replaying once a faster partition had acked a
//     later position, so its reactions were skipped.) A group never reset
//     never replays. The model pins the rule. Claim.ReplayUpto is that
//     mark, so that a claim reaching past it replays its messages up to
//     the mark only (the router skips their side effects per message).
//   - AdvanceOffset returns true when the offset is at or past position
//     afterwards (it moved, or was there already) and false only when an
//     unprocessed message holds it back. A claimed message not yet acked
//     is unprocessed. Which messages hold it back: those of the handled
//     types in the partition under conditional AND, strictly between the
//     offset and position. A partition that does not name exactly the
//     group's partition attributes (or, for a queue, a message id), and a
//     position past the newest one, are errors.
//   - ReleaseDrainedOffsets releases an unclaimed offset when no message of
//     the group's handled types belongs to its partition under
//     conditional AND. A composite partition still holding a message that
//     carries some of its attributes is not drained: a fresh offset would
//     deliver that message again.
//   - Claims are identified by group, offset id and worker id: an ack or
//     release of a claim whose offset is gone (reset, reaped) or held by
//     another worker fails with ErrNotClaimant. Claims held across a reset
//     are therefore void.
//   - ClaimNext with a batch size below 1 or no worker id is an error;
//     Heartbeat of a worker with no id is an error; ReadOffsets (and
//     Offsets) of an unknown group return an *UnknownGroupError.
//   - RetryGroup and FailGroup on a status that does not accept them
//     return nil and write nothing (not even the failure). StopGroup keeps
//     the failure's fields, sets its Reason and clears the retry time;
//     StartGroup and recovery clear the failure (retry count 0).
//   - ChangeGroup reads and writes a group's status in one transaction:
//     concurrent changes each see the others (none is lost); a refused or
//     zero command writes nothing, an error from decide is returned.
//   - ReleaseClaimsOlderThan releases claims by their age whoever holds
//     them, returning the offsets as they were; a worker removed by
//     RemoveWorkers has no heartbeat, so its claims are stale by their age;
//     GroupTx.Release commits or rolls back with its transaction.
//   - Reset of an exclusive group is checked against the chart like any
//     other, then changes nothing.
//   - Stale claims: a worker is stale when its last heartbeat, or with no
//     heartbeat its claim's time, is at or before now-ttl (the suite stays
//     clear of the boundary). Delete ignores positions not in the log.
//     Positions of deleted messages are never given again.
//   - GroupInfo.PartitionBy of a queue may be empty or [core.IDKey];
//     PruneOrphanKeyPairs may return any count, and 0 once nothing is
//     left to prune.
//
// With -short the concurrent and model-based parts do less work (rapid's
// own -rapid.checks and -rapid.steps flags tune the model further). When
// the model finds a failure, rapid shrinks it, prints the steps and saves
// them under testdata/rapid of the package running the suite, to replay
// with -rapid.failfile (-rapid.nofailfile turns the saving off).
//
// Where the store contract leaves a choice open the suite accepts either
// answer: a promoted message may keep its due time or take its promotion
// time as CreatedAt (and may carry "scheduled_at" metadata); a read that
// returns exactly Limit messages with no more to find may put its guard at
// the last one or at the bound; a commit that only scheduled messages may
// announce them or not.
//
// # Conditional AND
//
// A partition of a group partitioned by attributes a1..an is one tuple of
// values, and only a message carrying every ai (a non-empty indexed value)
// defines one. Reading a partition (Tx.ReadPartition, a claim's batch,
// core.InPartition in the pure layers) is a conditional AND: a message of
// a type read is in the partition when it carries at least one of the
// partition's key pairs and carries, for every partition attribute it has
// any value for, the partition's value. A message is matched on every
// partition attribute it carries and ignores the ones it lacks; an
// attribute with no indexed value counts as absent. For the partition
// (course_name=Algebra, user_id=joe):
//
//	message                                included
//	CourseCreated(Algebra)                 yes (1 of 1)
//	UserRegistered(joe, name Joe)          yes (name is not a partition attribute)
//	UserJoinedCourse(Algebra, joe)         yes, once (2 of 2)
//	UserJoinedCourse(Algebra, jake)        no (1 of 2)
//	UserJoinedCourse(History, joe)         no (1 of 2)
//	CourseClosed(Algebra)                  yes
//
// A message is returned once, however many of the partition's key pairs it
// carries (an SQL store's join must not duplicate it).
//
// # Hazards
//
// The store of the Ruby original, which Sourced for Go ports, had these
// defects and surprises. The list of the suite's tests above cites them
// by number (hazard H9); each says what every store here does instead,
// and the suite pins it where a store could get it wrong.
//
//   - H1 Commands of one batch share a guard: in one transaction the second
//     command's guard sees the first command's events and conflicts, a
//     livelock whenever two commands of a partition are pending. Here a
//     guard is advanced past each append the transaction made
//     (core.Guard.Advance), and a guard sees its own transaction's writes.
//   - H2 Synchronous handling skipped the decider's own reactions (it moved
//     the offset past the events). shell.Handle moves the offset past the
//     command only, in the same transaction, so the decider's workers
//     claim the events and run the reactions.
//   - H3 The first write to a new partition was unguarded (a read of a
//     partition with an unknown key pair returned a guard with no
//     conditions), so two concurrent creations both succeeded. Here a
//     read always guards its conditions, from the latest position.
//   - H4 An ack could move an offset back and did not check the claimant.
//     Here an offset only moves forward, and only the claimant acks or
//     releases (driver.ErrNotClaimant).
//   - H5 Stale claims leaked: a worker that never heartbeat was never
//     stale. Here workers heartbeat from the start, and a claim of a
//     worker with no heartbeat is stale by its own age.
//   - H6 The legacy watermark stranded work of groups without partition
//     keys after a partial ack. Here a partial ack leaves the rest to any
//     worker, and an idle group wakes on appends and releases (Latch).
//   - H7 The discovery window skipped partitions when it returned its
//     maximum of tuples. Here every partition with pending work is found
//     before ClaimNext returns nil (Claim order above).
//   - H8 Offsets were created for messages of any type carrying the keys.
//     Here only the group's handled types discover partitions.
//   - H9 Partition keys were the values joined with separators that a value
//     could contain, so two partitions could collide. Here a partition is
//     encoded unambiguously by every store (core.Partition's Key: a JSON
//     array of [name, value] pairs) and shown readably (its String).
//   - H10 Times were compared as text with offsets and whole seconds. Here
//     stored times are UTC, fixed width, with microseconds
//     (codec.TimeLayout), so comparing them as text compares instants.
//   - H11 Notifications fired inside transactions, before the commit and
//     on rollback. Here appends are announced after the outermost commit
//     only.
//   - H12 A descending page of the whole log with conditions paged
//     forever. Here every page ends (Page.Next reports the last page).
//   - H13 Durable workflow steps were keyed with a per-process hash, so
//     memoisation did not survive a restart. Here a step's key is its name
//     and canonical JSON arguments (see core/durable).
//   - H14 Key values were stringified by the language's inspect form
//     (arrays and maps included). Here only scalars are indexed, in a
//     canonical form (codec), with documented limits
//     (codec.MaxIndexedValueBytes).
//   - H15 A conflicting append bypassed the error strategy (silent retry
//     for ever). Here the router decides a conflicting batch again on a
//     fresh history up to RouterOptions.MaxConflictRetries times, then
//     hands the conflict to the group's error strategy.
//   - H16 The original's plan promised a claim order and type filter its
//     code did not have. Here the claimed partition is the one furthest
//     behind among those with pending work (see Claim order above).
package storetest
