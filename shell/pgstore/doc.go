// Package pgstore is the PostgreSQL message store of Sourced: a
// shell.Store and shell.Groups on github.com/jackc/pgx/v5, for apps that
// outgrow one SQLite file (several application servers, workers on other
// hosts, a managed database). It passes the same conformance suite as the
// SQLite store (package storetest).
//
//	s, err := pgstore.Install(ctx, "postgres://app@db/app", pgstore.Options{Registry: reg})
//	...
//	defer s.Close()
//	l, err := s.Listen(ctx) // wake this process's workers on other processes' appends
//	...
//	defer l.Close()
//
// # Module
//
// The package is a Go module of its own (github.com/sourced-go/sourced/
// shell/pgstore), so that pgx and its dependencies never enter the build
// or the go.sum of an app that only uses SQLite. Its go.mod requires the
// root module at the version the two are released at, with no replace
// directive, so it installs outside the repository (the README's
// "Modules"; .ci/release-check proves it); inside the repository the
// committed go.work points it at the checkout, so the two are developed
// and tested together.
//
// # Schema
//
// Install applies the versioned migrations (Migrations, SchemaVersion)
// that the database lacks, recording each in <prefix>_schema_migrations
// under the store's advisory lock (so concurrent installs apply each
// once); Open checks the recorded version and fails with
// shell.ErrNotInstalled, ErrSchemaOutdated or ErrSchemaNewer. Tables carry
// Options.Prefix, so several stores share one schema: <prefix>_head (the
// last position handed out, the group configuration version),
// <prefix>_messages (the log; each message's key pairs in a GIN-indexed
// keys array, which stands for SQLite's key-pair dictionary and link
// table), <prefix>_scheduled_messages, <prefix>_consumer_groups,
// <prefix>_offsets (one per partition, with its pending marker),
// <prefix>_workers.
//
// # Ordering and locking
//
// The classic PostgreSQL event-store bug is positions handed out by a
// sequence at insert time while transactions commit in another order: a
// reader sees 12 before 11 commits, moves its cursor past 11 and skips it
// for ever. This store cannot do that: every transaction that appends
// (Update, Append, PromoteScheduled, a claim that appends in ClaimUpdate)
// takes the store's exclusive transaction-level advisory lock
// (pg_advisory_xact_lock, one key per schema and prefix) before it
// appends (at BEGIN, or at an Update's first operation, see below), reads
// the last position from <prefix>_head under it, hands out the next positions itself
// and writes the head back just before COMMIT. PostgreSQL releases a
// transaction's locks only after its commit is visible to every new
// snapshot, so the next appender starts after the previous one's
// positions are visible: positions become visible in order, without gaps
// (a rolled back append's positions are handed out again, as on SQLite),
// and a reader (Read, ReadAll, a claim's fetch, a catch-up) that sees a
// position sees every smaller one. TestPositionsVisibleInOrder tails the
// log from several pools while others append; on stores broken on purpose
// (no lock, positions handed out outside the transaction, as a sequence
// does) it reports the skip (TestPositionsVisibleInOrderCatchesASkip).
//
// The same lock serialises guards: an append checks its guard inside its
// transaction, under the lock, so no conflicting append can commit between
// the check and the commit (TestGuardsAcrossStores is the dcb.events
// consistency check). Everything an append can be refused for (unknown
// type, invalid payload, duplicate id in the log or the schedule, guard)
// is checked before it writes, because PostgreSQL aborts a transaction at
// its first failed statement: a refused append leaves the transaction
// usable and writes nothing.
//
// Claims, acks, releases and deletes take the same lock in shared mode
// (pg_advisory_xact_lock_shared): workers of every process claim and
// settle side by side, each picking the claimable offset furthest behind
// with FOR UPDATE SKIP LOCKED, so two workers never wait on each other,
// while an append waits for them and they for it (no append ever changes
// an offset under a claim or an ack being made, so pending markers stay
// exact). A delete needs no more: removing messages adds no position, so
// no reader can see one before a smaller one, and a pending marker it
// leaves on a deleted message is stale in the safe direction (the next
// claim finds the fetch empty and repairs it); it never hides work. Other
// group operations (registration, lifecycle, reset, reaping, drained
// offsets) take the exclusive lock. Reads take no lock: each is one
// statement (the log's newest position is read in the same statement as
// the messages, for the guard), or one REPEATABLE READ snapshot.
//
// Appends hold the lock only while the server works. A standalone
// append (Store.Append) is one pipeline, which PostgreSQL runs as one
// implicit transaction: the lock, the head, the checks, the inserts, the
// offsets and the head's advance, committed at the pipeline's end. Its
// checks are statements that raise (<prefix>_refuse, schema version 6)
// before anything is written, so a refused append rolls back whole and
// the raising statement says which check refused it; the group
// configuration the client built the offsets from is one of them (a
// process whose cache is stale sends the append again with the
// configuration read anew). TestAppendNeverHoldsTheLockIdle samples
// pg_locks while writers append: the lock's holder is never "idle in
// transaction". A context that ends while the pipeline runs sends a
// cancel request: the append then fails at the statement it was waiting
// in and writes nothing, or, had it committed, returns its result.
//
// Update takes its lock lazily, at fn's first operation that needs one. A
// whole read (Read, ReadPartition without Upto or Limit) before any lock
// takes none: the transaction keeps its guard, and whatever takes the
// exclusive lock next (the append, in its own round trip; sync work; a
// locking read) checks under it that nothing the read would have returned
// was appended since (else fn runs again, under the exclusive lock from
// its start: TestUpdateReadsWithoutTheLock,
// TestUpdateChecksItsReadsWhenSyncWorkTakesTheLock).
// So a decision (Handle) reads and decides holding nothing, and holds the
// lock from its append to its commit only: one client round trip. Other
// reads, an append, an advance or sync work (tx.Context, Conn) take the
// exclusive lock; a claim, an ack, a release or a delete takes the shared
// one, so that a transaction which only settles claims (a delete-on-ack
// queue's delete and ack, and the next claim) runs beside other workers.
// Two transactions holding the shared lock cannot both upgrade to the
// exclusive one (they would deadlock), so a transaction that needs the
// exclusive lock after the shared one is rolled back and fn runs again
// holding the exclusive lock from its start
// (TestUpdateUpgradesByRunningAgain). LastPosition first takes no lock;
// an append after it checks, under the exclusive lock, that the head has
// not moved, else fn runs again too (TestUpdateLastPositionOvertaken):
// what fn was told is the newest position stays true under the lock, as
// on SQLite. fn therefore may run twice; its writes through the
// transaction are rolled back in between, anything else it does is not.
//
// What is left serialised: one append at a time per prefix, for as long
// as the server takes to check and write it (a standalone append), or
// from its append to its commit (an Update). Positions are handed out
// under that lock, which is how they become visible in order; locks on
// what an append touches, with a gap-safe read horizon, are the way past
// it, not built yet. The alternatives, as measured and reasoned so far
// (bench: BenchmarkPostgresAppendParallel, whose impl=floor is a bare pgx
// program of the same rows, positions from a sequence and no lock):
//
//   - The lock held across client round trips (before schema version 6):
//     throughput was 1 / (four round trips + the server's work), whatever
//     the number of writers or machines. Gone: the lock is now held only
//     while the server works, which doubled single appends and made
//     writers 500 µs from the server nearly as fast as local ones.
//   - No lock, positions from a sequence (the floor): 2-3x faster at 16
//     writers, and wrong: 12 can commit before 11, a reader moves past 11
//     and skips it (TestPositionsVisibleInOrderCatchesASkip runs exactly
//     this store and sees the skip).
//   - Reading below pg_snapshot_xmin(pg_current_snapshot()) with a
//     transaction id column: gap-safe only for readers that order by
//     (transaction id, position). Ordered by position it still skips: a
//     transaction with the smaller xid can draw the larger position and
//     commit first, so position 10 is visible below the horizon while 9
//     (the other transaction's) is not. Every cursor of this store (offsets,
//     guards, ReadAll's From) is a position, so this horizon would change
//     every reader's order.
//   - A high-water mark that never passes a hole: positions from a
//     sequence, readers stop at the first missing position and fill a hole
//     older than a short wait with a tombstone row inserted under a lock
//     timeout, so that the primary key arbitrates between the tombstone and
//     an append still in flight (the append then fails and is sent again
//     with a new position). Gap-safe, and it lets appends to disjoint
//     boundaries (locked by the key pairs they write and their guards read,
//     in sorted order) run in parallel; it changes every read path (the
//     guard's position becomes the read's horizon, not the newest position
//     seen) and the offsets' pending markers, which are exact today because
//     claims and acks hold the shared lock against appends.
//
// The last is the design the next step builds; the tests that will hold
// it are in place: TestPositionsVisibleInOrder and its negative twin,
// TestGuardsAcrossStores, TestGuardsAcrossProcesses (16 writers in 4
// processes on overlapping and disjoint boundaries: 0 violations, 0 false
// conflicts), TestTailingAcrossServerRestart (readers never skip across
// pg_ctl restart -m fast) and TestWriterKilledHoldingTheLock (a SIGKILLed
// writer frees the lock as soon as the server sees its session end; what
// it had not committed never shows).
//
// # Consumer groups
//
// As on SQLite: each offset carries a pending marker (next_position, the
// first message after its position that wakes the partition), kept exact
// by appends (which create and wake offsets in their transaction: the
// configuration is stored and cached per version, so every process's
// appends create offsets for every group), acks, advances, deletes and
// the discovery at registration and reset. The claim scan is a range of a
// partial index of the claimable offsets, so an idle group answers from an
// empty range whatever its number of caught-up partitions; ClaimNext and
// ClaimUpdate first ask it with one statement outside any transaction
// (status, retry time, EXISTS on that index) and take no lock when the
// group is idle. Stale claims are released by ReleaseStaleClaims (workers
// not heartbeating, or with no heartbeat, claims older than the TTL);
// delete-on-ack queues delete their messages through GroupTx.Delete and
// ReleaseDrainedOffsets drops their drained offsets; scheduled messages
// are promoted in transactions under the exclusive lock that delete what
// they promote, so each is promoted exactly once across processes
// (TestPromotionExactlyOnce).
//
// # Notifications
//
// After each commit that appends, the store sends NOTIFY on its channel
// (Store.Channel), on a statement of its own, a millisecond later,
// coalescing the commits that follow until it goes: inside the appending transaction,
// NOTIFY would take PostgreSQL's cluster-wide notification lock from the
// commit's start to its end and serialise every append's commit. A
// Listener (Store.Listen) turns the notifications of other processes into
// calls of Options.Notifier, so workers anywhere wake within
// milliseconds; its own store's appends it skips (the notifier hears of
// those directly). When its connection breaks it reconnects with backoff
// and announces the types of everything appended since the last position
// it heard of. The runtime's catch-up poll stays the safety net, for a
// notification lost with its process too.
//
// Costs, in round trips to the server: a standalone append one, guarded
// or not (TestAppendIsOneRoundTrip), plus the coalesced notification
// after it; a decision in an Update three (the read, with BEGIN queued;
// the lock, the read's check, the append's checks and writes; COMMIT);
// a claim three (the idle probe;
// BEGIN, the shared lock, the group row and the claim statement in one
// batch; COMMIT): one statement picks the claimable offsets with FOR
// UPDATE SKIP LOCKED, fetches their messages and claims them (ClaimMany
// claims several partitions so). A queue's claim (a group partitioned by
// message id) is a small UPDATE of its own: the pick, the job's join and
// the claim in one plan without subplans. With two workers draining
// 100,000 jobs the keyed claim's CTE took about 100 ms per call, nearly
// all of it in the locking pick (rows a concurrent claim or settlement
// changed are rechecked, EvalPlanQual, which initialises every subplan of
// the statement again); the small statement stays near a millisecond. An
// ack is one round trip (BEGIN, the
// shared lock, the ack and COMMIT in one batch): deletes and acks made in
// a transaction are deferred, each kind sent as one statement with the
// transaction's next statement or its COMMIT; an ack of a claim its
// worker no longer holds then fails that statement, and the transaction
// with it (shell.ErrNotClaimant). A queue's settlement in the router, K
// claims at a time, is four round trips whatever K: BEGIN and
// LastPosition; LastPosition again under the shared lock (then kept for
// the transaction); the deletes, the acks and the next K claims; COMMIT
// (TestQueueRoundTrips counts them: under 0.1 per job). An idle poll is
// the probe alone. Appends are serialised per store prefix (see
// "Ordering and locking"); several messages per append amortise that.
//
// Lookups by key pairs go through the GIN index of messages.keys, built
// without a pending list (fastupdate off, schema version 3), and are
// written so that the planner, whose generic plans cannot tell how few
// messages a key pair has, neither intersects them with the type index
// nor walks the primary key from the cursor: a partition read or a
// claim's fetch costs O(the partition), not O(the log).
//
// # Sync work
//
// Conn(tx) returns the connection of the open transaction (from the
// shell.Tx of Update or the core.Tx of a Sync effect; ErrNotPostgres on
// another store): sync work writes its own tables there, committed or
// rolled back with the append. Store.View reads them in a read-only
// snapshot that takes none of the store's locks.
//
// # Operator's side
//
// For tools such as the sourced CLI (package pgcli, and the binary
// shell/pgstore/cmd/sourced): Lag (pending messages per partition),
// GroupLag and ReadParked (a group's pending work and its parked
// partitions at a bounded cost, for the dashboard: shell.Lagger,
// shell.ParkedReader), Workers (heartbeat records, with the claims each
// holds), CancelScheduled (delete a scheduled message
// before it is promoted) and AppliedMigrations (the schema versions a
// database records, whatever its version).
//
// # Tests
//
// Clear empties a store (positions start at 1 again), ReadScheduled lists
// the schedule, and Uninstall drops the store's tables: each touches only
// its prefix.
//
// The tests need a server: SOURCED_TEST_POSTGRES_URL (see package
// internal/pgtest); each test installs the store under a fresh prefix and
// drops it at the end. Without the variable they skip, saying how to start
// a server; under CI (CI=true) they fail.
package pgstore
