// Package pgstore is the PostgreSQL message store of Sourced: a
// driver.Store and driver.Groups on github.com/jackc/pgx/v5, for apps that
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
// driver.ErrNotInstalled, ErrSchemaOutdated or ErrSchemaNewer. Tables carry
// Options.Prefix, so several stores share one schema: <prefix>_head (the
// last position handed out, the group configuration version),
// <prefix>_messages (the log; each message's key pairs in a keys array),
// <prefix>_message_keys (one row per key pair and message, by key and
// position, kept by triggers on the log's inserts and deletes: it stands
// for SQLite's key-pair dictionary and link table),
// <prefix>_scheduled_messages, <prefix>_consumer_groups,
// <prefix>_offsets (one per partition, with its pending marker),
// <prefix>_workers.
//
// # Ordering and locking
//
// The classic PostgreSQL event-store bug is positions handed out by a
// sequence at insert time while transactions commit in another order: a
// reader sees 12 before 11 commits, moves its cursor past 11 and skips it
// for ever. This store hands positions out from a sequence
// (<prefix>_positions, schema version 8), drawn as each message is
// inserted, and never lets a reader past a position that may still
// commit: every read (Read, ReadPartition, ReadAll, LastPosition, a
// claim's fetch, a catch-up) is bounded by the read horizon, the highest
// position below which every position is settled, committed or filled.
//
//   - <prefix>_head.last_position stores the horizon. An append that is
//     its store's only one in flight moves it inside its own transaction,
//     just before its COMMIT, as far as the positions settled or its own
//     go (<prefix>_raise, which skips the head row when another
//     transaction holds it): the horizon then moves with the commit, in
//     the same round trip. Beside others of its store, an append moves it
//     after its COMMIT, in the same round trip, in a transaction of its
//     own (whose commit does not wait for the disk: the horizon is derived
//     state): of appends in flight together, the last to commit so covers
//     those that committed before it, which stop waiting
//     (TestLastToCommitCoversTheAppendsWaiting). Claims read up to the
//     stored horizon; reads up to the horizon their
//     statement sees (<prefix>_horizon(): the stored one and the run of
//     visible positions after it, so a transaction's own appends, visible
//     to it, are in it).
//   - An append that neither moved it over its positions (the head row
//     held, an append in flight below them) hands its last position to
//     the store's advancer and waits for it: one goroutine per store that
//     leaves it for 2 ms to the appends of the store still in flight
//     (whose advances most likely cover it), then moves the stored horizon for every append waiting on it at once,
//     with one statement (<prefix>_settle). That statement waits in the
//     server for the appends in flight below, on the rows they wrote (the
//     unique index makes the insert of a tombstone at a written position
//     wait for the writer's end, and do nothing if it committed), so the
//     wait ends with their commit, without polling; fills with a
//     tombstone every position that none will write; and stores the
//     horizon. An append's types are announced (notifier, other
//     processes) once the stored horizon covers it, so no worker is woken
//     to claim below it. Every open store also checks once a second that
//     the stored horizon is not behind the committed messages (a process
//     that died between its commit and its advancer's statement) and
//     moves it (TestStoredHorizonHeals).
//   - A tombstone is a row whose type is empty, which no read returns. A
//     hole left by an append that never commits (rolled back, or its
//     session gone: a killed process, a server restart) gets one: at once
//     from a transaction that rolls back its own appends, else from the
//     next settle that meets it. The primary key arbitrates between a
//     tombstone and an append that drew the position but had not written
//     it yet (that append fails and is sent again with a new position).
//     So positions may skip numbers (driver.SkippingPositions): a
//     rolled-back append's positions are never handed out again, and the
//     messages of concurrent appends interleave. Housekeep (a runtime's
//     heartbeat) deletes the tombstones the horizon passed an hour ago,
//     so a log with many rollbacks keeps no row for each.
//   - An append returns once the stored horizon covers it, so a read, a
//     claim or a catch-up after Append returns sees it, as on SQLite; a
//     transaction still open below it (an Update that appended and goes
//     on working) holds it back until it ends, or visibleWait (2 s), after
//     which the append returns and the advancer goes on.
//   - So a transaction should draw its positions as late as it can. An
//     append in a transaction whose caller needs no positions
//     (driver.AppendOptions.Deferred: Handle's events, the router's
//     reactions) is queued, its locks, checks, inserts and wake-ups, and
//     goes with the transaction's COMMIT, or with its next read or append
//     (a claim of more work in the same transaction leaves it queued):
//     its positions are in flight for the COMMIT's round trip only, and
//     the append costs no round trip of its own. Its locks and checks
//     then answer at the commit: a busy lock or an overtaken read runs
//     the transaction again, as it would have at once; a refusal (an id
//     stored already, a guard's conflict) fails the whole transaction,
//     rolled back, with the error Append would have returned. An
//     offset's move that needs no answer goes the same way
//     (driver.DeferredAdvancer, Handle's). TestHandleRoundTrips,
//     TestDeferredAppendOvertakenReadRunsAgain and
//     TestDeferredAdvancePastTheNewestFailsTheCommit pin it.
//
// Measured alternatives (BenchmarkPostgresAppendParallel, 16 writers on
// disjoint boundaries, this 2-core machine): every append advancing the
// stored horizon after its commit, with the head row locked while it
// probed, left 60 of about 200 sampled backends in Lock:tuple; stored
// highest-wins it still queued them on the head row's lock; the advancer
// above removes that queue (about 15 appends share one settle at 16
// writers). Waiting for a hole by polling the horizon (50 us doubling to
// 2 ms) cost a round trip and a probe per poll, on the cores the appends
// below needed; the wait on the written row costs nothing while it
// waits. The writers=16 ratio to the floor of the same run went from
// 0.13-0.33 to 0.34-0.36, its p99 from 101-290 ms to 39-47 ms, on a
// machine loaded by other work (load average 5-12).
//
// TestPositionsVisibleInOrder tails the log from several pools while
// others append; on a store broken on purpose (reads not bounded by the
// horizon) it reports the skip (TestPositionsVisibleInOrderCatchesASkip).
// TestTailingAcrossServerRestart does so across pg_ctl restart -m fast,
// whose rolled-back appends leave holes that are filled.
//
// Appends do not take a store-wide lock. Each takes the store's advisory
// lock (one key per schema and prefix) in shared mode, and
// transaction-level advisory locks on what it touches (boundary.go): in
// shared mode a key per (type, key pair) and per type of each message it
// writes, in exclusive mode a key per condition of its guard (its type
// and first key pair). A message that matches a condition carries its
// type and every key pair of it, so its writer holds in shared mode the
// key that the guard holds exclusively: a guarded append and an append
// that could change what its guard read wait on each other, and nothing
// else does (hash collisions aside: keys are 32-bit hashes, and two
// boundaries that collide only wait for nothing). Keys are taken in
// sorted order in one statement (<prefix>_lock), so first appends never
// wait in a cycle; a transaction that already holds locks (a claim's row
// locks, an earlier append's keys) only tries the keys it lacks, and runs
// again under the exclusive lock when one is held elsewhere. The writes a
// transaction defers to its COMMIT (a Handle's command, its offset's
// advance, its events) lock their keys in the first one's statement, their
// union sorted: one lock statement a Handle, not three (measured: the
// serial BenchmarkPostgresHandle 1.01–1.13x in five alternated pairs;
// TestHandleTakesItsBoundariesInOneStatement). An append
// with more than 64 keys (a batch of hundreds of messages) takes the
// store's lock in exclusive mode instead, so that PostgreSQL's lock table
// never fills. The guard is checked under the keys, so no conflicting
// append can commit between the check and the commit (TestGuardsAcrossStores
// is the dcb.events consistency check; TestGuardsAcrossProcesses runs 16
// writers in 4 processes on overlapping and disjoint boundaries: 0
// violations, 0 false conflicts). Everything an append can be refused for
// (unknown type, invalid payload, duplicate id in the log or the
// schedule, guard) is checked before it writes, because PostgreSQL aborts
// a transaction at its first failed statement: a refused append leaves
// the transaction usable and writes nothing (a deferred one, refused at
// the commit, fails its transaction instead). TestWriterKilledHoldingTheLock
// SIGKILLs a writer holding a boundary's lock: an append to another
// boundary goes through meanwhile, one to the same boundary waits until
// the server sees the session end; what the writer had not committed
// never shows.
//
// The store's lock in exclusive mode is for what must see no append in
// flight: registering a group and a reset (their discovery scans the
// log), promotions, parking operations, Clear, and a transaction that
// appends after LastPosition (LastPosition then stays the newest
// position, with no other transaction's message after it). Taking it,
// a transaction first gives a tombstone to every position below the
// newest row that no row holds: with no append in flight, those are
// rolled-back appends' whose fill has not come yet, and left as holes
// they would stop the read horizon below messages committed past them,
// so that the transaction would read and decide without them (the
// storetest check "concurrent Handle keeps both invariants" lent one
// book twice in about 1 run of 75, when a Handle that had to run again
// under this lock found its boundary's newest loan hidden so). Claims
// (ClaimUpdate's too: the router's transactions), acks, releases and
// deletes take it in shared mode, as appends do, and run beside them: an append wakes the
// offsets it writes to with least(marker, its position), and a
// statement that recomputes a pending marker from its snapshot applies
// only to the row version that snapshot saw (a row an append changed
// meanwhile keeps its marker, or, acknowledged, points just after the
// acknowledgement, for the next claim to repair), so no wake-up is lost.
// Reads take no lock.
//
// Update takes its locks lazily, at fn's first operation that needs
// them. A read before the transaction holds the exclusive lock takes none:
// its guard is kept, and the next append (or sync work, or
// AdvanceOffset) locks the read's boundaries in exclusive mode and checks
// under them that nothing the read would have returned was appended since
// (else fn runs again, under the exclusive lock from its start:
// TestUpdateReadsWithoutTheLock,
// TestUpdateChecksItsReadsWhenSyncWorkTakesTheLock). So a decision
// (Handle) reads and decides holding nothing, and holds its boundaries'
// locks from its append to its commit only. Sync work (tx.Context, Conn)
// takes the store's lock in shared mode and its reads' boundaries; a
// claim, an ack, a release or a delete the shared lock. fn may therefore
// run twice; its writes through the transaction are rolled back in
// between (their positions filled), anything else it does is not
// (TestUpdateUpgradesByRunningAgain, TestUpdateLastPositionOvertaken).
//
// The router's transactions follow the same rules. A decider's batch
// reads its partition holding the claim's row locks and the shared lock,
// and its guarded appends try their boundary locks; a later guarded
// append of the same batch is checked by a read against the messages
// that are not the batch's own, not by reading the newest position first
// (which would make the transaction run again under the exclusive lock),
// and only when no earlier guard of the batch with the same conditions
// covers it (the transaction holds that boundary's lock). And a
// transaction that appended commits at the end of its batch, rather than
// claiming more for up to InlineBudget, when an append of this process
// waits (Store.AppendsWaiting, driver.AppendWaiter): the positions it drew
// are holes that no reader passes while it is open. Its claims go ahead
// of its appends: it claims up to 32 partitions with its first
// statement (shell.RouterOptions.ClaimPartitions; ClaimManyUpdate,
// driver.ClaimManyUpdater: before it, ClaimUpdate claimed one and a
// ClaimMany round trip the others), reads their histories, all in
// one round trip (ReadPartitions, driver.PartitionsReader: a statement
// each, in one batch), and only then decides and appends (deferred to its
// COMMIT's round trip), so that its holes last one round trip; the
// checks of those reads go with the COMMIT as one statement, each read
// checked from its own position (TestTransactionChecksEachOfItsReads,
// TestReadPartitionsAreCheckedAsReads). Reading the histories together
// rather than one round trip each: BenchmarkPostgresDrain 1.19-1.40x;
// with the first claim taking them all, 1.15-1.33x the build before both. Claiming one partition per transaction,
// the two workers of BenchmarkPostgresEndToEnd handled 1.4 messages a
// claim, fell behind its appender and its p99 measured the backlog (2 s);
// claiming ahead, a backlog makes the claims larger, the workers keep up
// and the p99 is 31-66 ms; BenchmarkPostgresDrain 2.0-2.2x.
// Up to schema version 9 ClaimUpdate took the exclusive lock from its
// start; at 1,000 accounts BenchmarkPostgresEndToEnd then spent most of
// its time waiting for it (4.1 ms per statement on average), and every
// append with it (TestRouterDecidesUnderBoundaryLocks,
// TestClaimUpdateBesideAppends).
//
// # Appends sent together
//
// A transaction costs the server more than its inserts: its BEGIN and
// COMMIT, its lock statement, its move of the read horizon. When a
// process appends from many goroutines at once (an application server's
// requests, a benchmark's writers), those costs, not the rows, bound its
// rate. So a store keeps Options.ConcurrentAppends standalone appends
// (Store.Append) in flight, one by default; the ones that come while
// they are busy wait, and when one is done the waiting ones go in one
// transaction: one lock statement for all their keys and ids, one
// statement for all their guards (each from its own position, the
// messages after the oldest read once; its text the same whatever the
// guards, their conditions passed as arrays, so that a session plans it
// once), one insert of all their messages, one COMMIT.
// What an append sees does not change:
//
//   - Only appends that could commit in either order go together: no key
//     that one takes exclusively (a guard's) is taken by another of the
//     group, so no member's guard reads what another writes. An append
//     that conflicts so with a group in flight, or with the next group,
//     is sent alone at once, beside it, and waits for its keys in the
//     server, as with no groups (held back, guarded appends to one
//     boundary would read and append again one behind another).
//   - A transaction in flight never waits for a boundary lock: it tries
//     its keys, and a key held elsewhere refuses it; its appends then go
//     again alone and wait for their keys out of its place (a lone one
//     too). Appends to a boundary another transaction holds do not hold
//     up appends to others.
//   - A group refused by the server (a busy key, a guard's conflict, an
//     id stored already, a changed configuration: anything that rolls
//     it back) wrote nothing; each of its appends goes again alone and
//     meets the refusal that is its own, or commits.
//   - A group whose session ends before it answers (the connection
//     broke once it was sent, a FATAL error: its backend terminated) may
//     have committed: each of its appends returns the error, as a
//     standalone append does (TestAppendsTogetherSessionEnded).
//   - A context that ends while its append waits returns the context's
//     error, and nothing of it is written. Once sent, a group is not
//     cancelled for one of its appends (the others go on): that append
//     returns the group's outcome.
//   - Each append returns its own positions, once the read horizon
//     covers them, as a standalone one does.
//
// Appends with more keys than a group takes (the store's exclusive
// lock), with scheduled messages, and the appends of Update and Handle
// go alone.
//
// Measured (BenchmarkPostgresAppendParallel on this 2-core machine,
// alternated with every append alone, three rounds): 16 writers on
// disjoint boundaries 11.3-15.7k appends/s against 6.2-9.2k (the bare
// floor 26-28k), guarded 9.1-10.0k against 5.6-6.8k, through the 0.5 ms
// proxy 4.4-4.9k against 2.6-3.5k; the server's CPU a guarded append
// 133 us against 258-359 (the client's 69 against 76-97). One writer,
// and guarded writers on one boundary, are even. One transaction in
// flight measured ahead of two and four, whose appends waited for the
// advancer to move the horizon (16 writers through the proxy: 4.3k
// against 3.0-3.2k and 2.2-3.2k). With the horizon moved after the
// COMMIT of the transactions in flight beside others (<p>_raise, schema
// version 13), they no longer wait for it, and still do not win on the
// socket: 16 writers, one in flight 13.7-15.4k appends/s, two
// 11.1-13.7k, three 9.2-12.4k, four 12.0k (the groups smaller, the
// server's work a group about the same); through the proxy 5.7-6.2k
// against 6.5-7.5k, where the machine is half idle (the client and the
// server used 10.5 s of CPU in a run of 10.5 s on two cores) and the
// round trip through the proxy is 0.7 ms: neither the server nor the
// client bounds it, and a second group in flight recovers a seventh of
// it. Nor did a second group that goes only once 4 to 8 appends wait
// (11.5-13.1k on the socket). A group's guards in one statement
// rather than one each: 16 guarded writers 8.5-8.7k against 7.4-8.1k
// appends/s, the server's CPU an append 116-119 us against 119-133.
// With durable commits (fsync and synchronous_commit on), 16 writers
// 10.2k appends/s against the floor's 13.7-15.4k (one writer 2.1-2.5k),
// guarded 7.1-7.8k: a group is one WAL flush for all its appends.
//
// Tried and not kept: a transaction that is not its process's only one
// in flight waiting in the server, before its COMMIT, for the ones in
// flight below its positions (a probe of their rows, as <p>_settle's,
// bounded by a lock timeout of 5 ms, never for positions after its own
// first so that no two wait on each other), then moving the horizon
// itself, so that two or four in flight would not wait for the
// advancer. It made them slower still: with two in flight 4.2-4.8k
// appends/s on the socket and 4.1k through the proxy, with four
// 3.4-4.3k and 3.6k, against 9.4-10.4k and 4.8k with one (16 writers,
// same runs): the later transaction held its backend and its locks
// while the earlier one, on the same two cores, got to its COMMIT
// (pg_stat_activity: most of its time in Lock:transactionid), 1.0-1.3 ms
// a call.
//
// TestAppendsWaitingGoTogether, TestAppendsTogetherRefusedOneByOne,
// TestAppendsTogetherDoNotWaitForABusyBoundary,
// TestAppendWaitingForABoundaryHoldsNoPlace, TestAppendWaitingCancelled,
// TestAppendsTogetherCheckEachGuardFromItsPosition and
// TestAppendsTogetherUnderLoad pin it.
//
// # Plans that stay probes
//
// A session plans each statement once and reuses the plan until the
// planner's knowledge of its tables changes (ANALYZE, VACUUM, DDL). A plan
// made while a table was small and analysed as small (autovacuum analyses
// a new table after 50 rows) is a sequential scan, even for an equality
// probe of a unique index, and stays one as the table grows, until
// autovacuum looks again (a minute apart by default, then every 10 % of
// growth). Measured on BenchmarkPostgresEndToEnd: the newest position,
// read first in every exclusive transaction, took 4.4 ms on average and
// 90 ms at worst, its cached plan scanning the log and calling
// <prefix>_horizon() for every row. So every open store analyses its log,
// offsets and scheduled messages once they outgrow twice what the planner
// knows of them (checked each second with heal, and whenever a commit
// doubles the log's position: a table growing from nothing to millions of
// rows is analysed about a dozen times, and new tables within their first
// second, TestNewLogAnalysedAsItGrows), sampling few rows, as they are for
// the tables' sizes (statistics target 10: 14-18 ms for a log of 20,000
// messages and its key pairs, where the default target took 130-250 ms
// of a core; TestGrowthAnalysesSampleFewRows; BenchmarkPostgresEndToEnd
// 1.09x at the median of five alternated pairs), and the
// newest position is <prefix>_last() (schema version 10): primary-key
// probes down from the horizon, and past a longer run of tombstones or
// deleted messages a statement planned afresh
// (TestNewestPositionNeverScansTheLog, TestIDCheckNeverScansTheLog).
//
// The opposite cost: PostgreSQL plans a prepared statement afresh at each
// call (a custom plan) while it estimates that this pays, and for the
// claims, reads and acknowledgements it always did, at more than they
// cost to run (the partitioned claim 0.52 ms of planning beside 0.16 ms
// of execution). So the store's sessions plan once (plan_cache_mode =
// force_generic_plan, unless the connection URL names one), and every
// LIMIT is written into its statement as a number, which the generic plan
// then knows (a LIMIT parameter it takes to pass a tenth of the table:
// the queue's claim sorted every pending offset). See plan.go for the
// figures (TestClaimsAndReadsArePlannedOnce, TestSessionsUseGenericPlans).
//
// A plan made once must also be kept: pgx deallocates every statement of
// a batch that returned an error, and a refused append (a guard's
// conflict, a duplicate id, a busy boundary) is such a batch. Each made
// the next append on its connection prepare its statements again and
// plan its guard's check afresh, under the boundary's lock: with 16
// writers on one boundary the check was planned at nearly every attempt,
// and guarded appends made 74-108 msgs/s. The statements of a batch that
// once returned an error are now prepared by name on each connection,
// which errors leave alone (prepared.go): 225-305 msgs/s in the same
// runs, TestRefusalsKeepStatementsPrepared.
//
// A new session is slow at its first statements: it reads the catalog
// entries of every table, index and function a statement touches, then
// plans it (the claim: 5.5 ms to parse and 10 ms to plan and run in a
// fresh session, 0.3 ms once planned). A runtime's workers open their
// sessions at their first claims, so its first commands waited for that:
// in BenchmarkPostgresEndToEnd the commands of the first fifth of a
// second were decided 70-180 ms after their append, and made the whole
// p99. So the store is a driver.Warmer: shell.Runtime's Start refreshes
// the statistics, then calls Warm, which opens the sessions the runtime
// will use and runs each hot statement once on each with every parameter
// NULL (a claim of no group, an append of no message), under a savepoint
// rolled back, with short lock and statement timeouts (warm.go;
// TestWarmPlansTheHotStatementsOnEachSession, TestWarmLeavesNoTrace,
// TestWarmDoesNotWaitForLocks, TestWarmDoesNotWaitForTheWholePool,
// TestWarmCancelled). Start pays for it instead, 0.2 s for four
// fresh sessions (BenchmarkWarm); the p99 of BenchmarkPostgresEndToEnd
// went from 18-100 ms to 17-41 ms (22 runs each).
//
// Alternatives measured or reasoned (bench: BenchmarkPostgresAppendParallel,
// whose impl=floor is a bare pgx program of the same rows, positions from
// a sequence and no lock):
//
//   - One exclusive lock per prefix held across client round trips
//     (before schema version 6): throughput was 1 / (four round trips +
//     the server's work), whatever the number of writers or machines.
//   - The same lock held only while the server works (schema versions 6
//     and 7: one pipeline per append): about 1,400-1,700 appends/s on
//     this 2-core machine whatever the number of writers, against 7,000
//     for the floor at 16 writers.
//   - No lock, positions from a sequence, no horizon (the floor): fast and
//     wrong, as above (the negative twin test runs exactly this).
//   - Reading below pg_snapshot_xmin(pg_current_snapshot()) with a
//     transaction id column: gap-safe only for readers that order by
//     (transaction id, position); ordered by position it still skips (a
//     smaller xid can draw the larger position and commit first), and
//     every cursor of this store is a position.
//   - Positions assigned after commit by a sequencer: gap-free and
//     ordered, but every message is written twice and an append would
//     not know its positions when it returns.
//   - The horizon with hole filling (built): positions from a sequence,
//     readers stop at the first hole, holes of abandoned appends filled
//     with tombstones under a short lock timeout, the primary key
//     arbitrating.
//
// # Consumer groups
//
// As on SQLite: each offset carries a pending marker (next_position, the
// first message after its position that wakes the partition), kept by
// appends (which create and wake offsets in their transaction: the
// configuration is stored and cached per version, so every process's
// appends create offsets for every group), acks, advances, deletes and
// the discovery at registration and reset. A keyed partition's marker is
// recomputed (at an acknowledgement, an advance, a release) from the next
// 64 messages after its offset in position order, and through the index
// of key pairs (whose lookup yields every message the partition ever had)
// only when none of those is one of its own and there are 64: an
// acknowledgement of a partition with a long history reads no more of it
// than of a new one (TestPendingMarkerReadsNoHistory; the statement took
// 20 us in BenchmarkPostgresHandle where the index lookup took 67 us,
// pg_stat_statements). The claim scan is a range of a
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
// (Store.Channel), on a statement of its own: a millisecond after the
// first commit of a quiet spell, then at most one each 10 ms while
// commits keep coming, each naming the newest position and the types of
// the commits it gathers (TestWakesCoalesce; one sent every millisecond
// took 15-20 % of a lone writer's Handles). Inside the appending
// transaction, NOTIFY would take PostgreSQL's cluster-wide notification
// lock from the commit's start to its end and serialise every append's
// commit. A
// Listener (Store.Listen) turns the notifications of other processes into
// calls of Options.Notifier, so workers anywhere wake within
// milliseconds; its own store's appends it skips (the notifier hears of
// those directly). When its connection breaks it reconnects with backoff
// and announces the types of everything appended since the last position
// it heard of. The runtime's catch-up poll stays the safety net, for a
// notification lost with its process too. A commit that scheduled
// messages marks its notification, and the store counts such commits,
// its own and those its listeners hear of (Store.ScheduledCommits,
// driver.ScheduleCounter): a runtime's scheduler reads when the next
// message is due after those only, not after every append
// (TestSchedulerWokenByScheduledCommitsOnly).
//
// Costs, in round trips to the server: a standalone append one, guarded
// or not (TestAppendIsOneRoundTrip: BEGIN, the locks, the checks, the
// writes, COMMIT and the horizon's advance), plus the coalesced
// notification after it; a decision in an Update three (the read, with
// BEGIN queued; the locks, the read's check, the append's checks and
// writes; COMMIT and the advance); shell.Handle two (the read; then
// BEGIN, the locks, the read's check, the command's append, the offset's
// move past it at the position its insert drew, the events' append,
// COMMIT and the advance, all deferred to one batch:
// driver.DeferredCommandAppender, TestHandleRoundTrips; five when sent
// one by one, three with the command's append in a round trip of its
// own, its position a hole to every reader while the decision ran; its
// floor, BenchmarkPostgresHandleFloor, writes the same rows in the same
// two round trips from bare pgx, with no lock, no guard and no horizon:
// 1.7k commands a second where Handle gives 0.9k in the same run, the
// difference the boundary locks, the guard's check, the horizon's advance
// and the offset's move, five statements more (0.23 ms of server time
// more, pg_stat_statements), and the client's own work (0.24 ms of CPU a
// command against the floor's 0.09, -cpuprofile));
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
// with it (driver.ErrNotClaimant). A queue's settlement in the router, K
// claims at a time, is four round trips whatever K: BEGIN and
// LastPosition; LastPosition again under the shared lock (then kept for
// the transaction); the deletes, the acks and the next K claims; COMMIT
// (TestQueueRoundTrips counts them: under 0.1 per job). An idle poll is
// the probe alone. Appends wait on each other only where their
// boundaries meet (see "Ordering and locking").
//
// BenchmarkPostgresEndToEnd (one appender, commands one by one; the
// runtime's two workers deciding and projecting them) runs at its
// appender's rate: its workers keep up (the last command is decided and
// projected 11-29 ms after its append), and each append costs
// its round trip of six statements (BEGIN, the locks and checks, the
// insert, the offset's wake-up, the horizon's advance, COMMIT: 0.4 ms of
// server time) beside the workers, plus the wait for the read horizon to
// pass their positions in flight (a third of the appender's time,
// measured inside Append). Its floor, BenchmarkPostgresEndToEndFloor, is
// the same work as a bare pgx program on the same tables (held to the
// store's rows by TestPostgresEndToEndFloorWritesTheStoresRows): an
// append is one statement in an implicit transaction (the command and
// its offset's wake-up), a worker's round two round trips, no advisory
// lock, no guard, no id check, no read horizon, states kept in memory.
// It runs 1.7-2.1k commands a second where the store runs 0.65-0.76k in
// the same runs (0.30-0.44; 1.65 statements a command against 12).
// Transactions of the floor's workers are larger for it: at its rate a
// 5 ms cooldown gathers ten commands a round where the store's gather
// two or three. Where the difference goes, measured by taking one piece
// out of throwaway builds (alternated with the build they came from):
// an Append that did not wait for the read horizon would run 1.23-1.28x;
// one without its lock statement (no boundary lock, no id check)
// 0.98-1.05x; claims that only locked their offsets' rows, without the
// claim's update (the inline path's claim is never seen by another
// session: it commits cleared by its ack) 1.04-1.09x. The rest is the
// workers' statements: 12 a command against the floor's 1.65, each
// cheap, on two cores the appender shares with them. Counting a
// transaction among the appends in flight from the batch that draws its
// positions (not once that batch is back) lets an append held back by it
// wait for its own advance, not settle: 703 settles a run where there
// were 971 (TestTransactionCountsAsAppendingWhileItsInsertRuns), the rate
// 1.06x at the median of six alternated pairs, within the noise.
//
// Both runs are bound mostly by the machine's CPU, not by round trips or
// locks: the two cores are 80-85% busy in each. Per command the store
// costs the server 1.7-2.0 ms of CPU and the client 0.67-0.73 ms, the
// floor 0.61-0.82 and 0.24-0.28 (user and system time of each process,
// three alternated pairs of runs of 10,000 commands); the totals differ
// about as the rates do, 2.5 times. Of the server's samples (perf over
// the whole machine; the parts overlap): 40-43% run plans, 16-17% start
// them (each execution initialises its plan's nodes and subplans, the
// largest statements' most: an ack that updates nothing still takes 0.07
// ms more than a bare SELECT sent the same way, psql's \timing over
// 3,000 of each), 15% run the store's functions (the locks, the
// horizon's advance, the key pairs' trigger), and 43% are the kernel's,
// half of them the VM's interrupt handling: system calls, signals and
// context switches are dear on this VM. Fewer statements do not buy it
// back: an insert that also wrote the offsets it wakes, one statement
// where there are two, cost what the two cost (0.124 ms of execution
// against 0.127; the server's CPU per append the same within its noise),
// and changed neither how many appends wait for the horizon (14-16%) nor
// how long (2.6-2.9 ms): the positions a worker's transaction holds are
// held by two busy cores, not by its statements after the insert. Those
// waits end with a settle (about 830 a run, 2.2-2.4 ms each, nearly all
// of it waiting in the server for the transactions below) or with the
// advance of the transaction that held the hole.
//
// Lookups by key pairs go through <prefix>_message_keys (schema version
// 14): its primary key (key, position) gives the positions of a key
// pair's messages after the one asked for, and the log's rows are then
// fetched by position, an array the statement computes once (keyRange).
// So a claim's fetch, a partition read after a position, a read of
// conditions after one and an offset's move cost what follows the
// position, whatever the partition's history and the log's length
// (TestKeyedLookupsReadNoHistory counts the rows the server reads;
// BenchmarkPartitionHistory: append, claim, ack and read of one message
// 1.3-1.6 ms with 10, 1,000 or 20,000 messages of history, against 1.4,
// 1.8 and 7.5 ms through the GIN index of messages.keys that served them
// until version 13, whose lookups yield every message a key pair ever
// had). The table costs inserts into the log more server time than the
// GIN index did: 51 µs a single insert against 38 (pg_stat_statements in
// BenchmarkPostgresHandle), about 5 µs a message in batched inserts;
// single appends 0.88-0.90 of what they were, guarded appends of 16
// writers 0.62-0.84 of unguarded ones against 0.76-0.82, Handle 0.90-1.00.
// The statements are written so that the planner,
// whose generic plans cannot tell how few messages a key pair has, does
// not walk the primary key from the cursor instead, and so that it
// weighs each key pair's probe against a scan of the table (one lookup
// per pair), never ten probes against one scan: that choice, by a few
// cost units at 16-30 pages, had the benchmark's acknowledgements scan
// the table. The table is left unanalysed below keysStatsFloor pages,
// by the store's own looks and by Optimize (which a shell.Runtime calls
// when it starts): statistics of a nearly empty table plan the lookups
// as scans, and the sessions keep those plans until the next analysis.
//
// # Sync work
//
// Conn(tx) returns the connection of the open transaction (from the
// driver.Tx of Update or the core.SyncTx of a Sync effect; ErrNotPostgres on
// another store): sync work writes its own tables there, committed or
// rolled back with the append. Store.View reads them in a read-only
// snapshot that takes none of the store's locks.
//
// # Operator's side
//
// For tools such as the sourced CLI (package pgcli, and the binary
// shell/pgstore/cmd/sourced): Lag (pending messages per partition),
// GroupLag and ReadParked (a group's pending work and its parked
// partitions at a bounded cost, for the dashboard: driver.Lagger,
// driver.ParkedReader), Workers (heartbeat records, with the claims each
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
