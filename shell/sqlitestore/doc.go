// Package sqlitestore is the SQLite message store of Sourced: the
// production driver.Store, on zombiezen.com/go/sqlite (a pure-Go SQLite, no
// cgo).
//
// # Opening and installing
//
// Install opens the database file at a path, creates the store's tables,
// indexes, triggers and version table where missing (restoring any that
// were dropped), switches the file to WAL and refreshes the planner
// statistics; it is idempotent and safe to run from several processes at
// once. Open opens a store whose schema is installed at this program's
// SchemaVersion, and says what to do otherwise: driver.ErrNotInstalled (no
// tables, or some dropped: run Install), driver.ErrSchemaOutdated (an older
// version: run Install or `sourced migrate`), driver.ErrSchemaNewer (a newer
// program migrated it: upgrade), ErrNotDatabase (the file is not a SQLite
// database). A file or directory this process cannot write (a read-only
// mount, a copy) is opened read-only: reads work, writes fail with
// ErrReadOnly.
//
//	s, err := sqlitestore.Install(ctx, "app.db", sqlitestore.Options{Registry: reg})
//	...
//	defer s.Close()
//
// Options.Registry (a codec.Registry holding the message types) is
// required; the clock, notifier, reader pool size, busy timeout, logger and
// the page size of a new file have defaults. ":memory:" opens a private
// in-memory database, for tests.
//
// # Schema export and table prefix
//
// Apps that manage their database with their own migrations (goose,
// golang-migrate...) apply Migrations(prefix), versioned steps, in order
// (or Schema(prefix), the same scripts as one text; `sourced migrate
// -print` prints them, each marked with its version) and set
// journal_mode=WAL once. Every table, index and trigger name carries the
// prefix (Options.Prefix, default "sourced": sourced_messages,
// idx_sourced_messages_type, ...), so several stores, and the app's own
// tables, share one file. Each script records its version per prefix in
// <prefix>_schema_migrations rather than in PRAGMA user_version, which is
// one number for the whole file. For tests, Clear empties a store (the
// next position is 1 again) and Uninstall drops its tables; both touch
// only their prefix.
//
// # Concurrency model
//
// A Store holds one writer connection and a pool of reader connections.
// Every write (Update, Append, PromoteScheduled, Optimize, and the
// consumer-group operations) takes the writer,
// so writes of one process are serialised in Go (a write waits for the
// writer up to Options.BusyTimeout too, then fails with driver.ErrBusy: one
// transaction that runs long, such as sync work that blocks, does not wedge
// the others; Optimize and Close wait as long as their context lets them),
// and runs in one BEGIN
// IMMEDIATE transaction, so writes of several processes are serialised by
// SQLite's write lock, waited for up to Options.BusyTimeout: a read-then-
// write transaction never fails with SQLITE_BUSY_SNAPSHOT, and a guard
// checked inside the transaction holds across processes. Reads outside a
// transaction run on a reader in one read transaction (a consistent
// snapshot), concurrently with the writer thanks to WAL. Appends are
// announced to the notifier after the commit, never on rollback; a commit
// that only scheduled messages announces their types (a runtime's
// scheduler then re-computes when the next one is due).
//
// Writes of one process share commits (group commit): an Update that ends
// while others wait for the writer passes the open transaction on instead
// of committing, and the last of them commits for all (at most 64). Each
// Update's work is a savepoint, so its failure or panic rolls back its own
// work only, and each returns after the commit that holds its work. Only
// the first Update of a group lets its context interrupt SQLite (an
// interrupted write rolls the whole transaction back); later ones check
// their context before they start.
//
// The writer waits for another process's write lock by polling every few
// hundred microseconds rather than through SQLite's busy handler, whose
// sleeps of up to 100 ms let a process whose peers commit back to back
// wait out its whole timeout. A lock not taken within the busy timeout is
// an error matching driver.ErrBusy: the operation wrote nothing and may be
// retried (the router and the runtime do). A write refused for want of
// space (a full disk, SQLITE_FULL) is a *DiskFullError, matching
// ErrDiskFull and driver.ErrBusy too: it wrote nothing, its workers release
// their claims and back off instead of failing their groups, and they
// carry on once space is freed.
//
// Every connection gets its settings when it is opened: foreign_keys=ON,
// busy_timeout, temp_store=MEMORY (savepoint journals stay in memory
// rather than spilling to temporary files), and synchronous=NORMAL when the
// file is in WAL mode (a commit survives a crash of the process; a power
// loss may lose the last commits but never corrupts the file). Readers are
// query_only.
//
// # Write-ahead log and housekeeping
//
// A read transaction never outlives its call: a reader connection goes
// back to the pool with its interrupt cleared and any transaction rolled
// back, however the call ended, so no snapshot pins the WAL between calls
// (and a cancelled read cannot break the connection for the reads after
// it). Every connection sets journal_size_limit (JournalSizeLimit), and
// Store.Housekeep, which a shell.Runtime calls on every heartbeat
// (driver.Housekeeper), checkpoints the WAL: PASSIVE, then TRUNCATE when
// the WAL outgrew JournalSizeLimit or nothing was committed since the
// previous call. Under readers that never pause the WAL grows by what is
// written between two heartbeats; once they pause it is back under
// JournalSizeLimit at the next heartbeat, and empty at the first idle one.
// Between heartbeats the WAL is checkpointed off the writer: every 32
// commits a goroutine runs a PASSIVE checkpoint on a reader, while the
// writer goes on committing, and the writer's own automatic checkpoint
// (which would make one commit in fifty copy a thousand pages and sync the
// file while every other write of the process waits) fires only past a
// backstop of 2,000 pages, copying what the background ones left.
// Stats.WALBytes reports its size (and `sourced stats`). The planner
// statistics are refreshed by Install, by Open when they are missing or
// the log grew more than twice since, and by the runtime when it starts
// and then every OptimizeInterval. The statistics of a table holding fewer
// than 10,000 rows are not kept (Optimize): the planner then treats it as a
// large table, so the statistics of a near-empty log, which stay loaded in
// open connections, never make a partition read scan the log as it grows.
//
// Every call whose context ends returns an error matching the context's
// error (errors.Is(err, context.Canceled) or context.DeadlineExceeded),
// having written nothing, or completes as if the context had not ended.
//
// # Consumer groups
//
// The store is also a driver.Groups: registered groups (their configuration
// is stored, so every process's appends create their offsets), claims of
// partitions with pending work, acks, the group lifecycle, heartbeats and
// housekeeping. Every operation that writes is one BEGIN IMMEDIATE
// transaction. Pending work is tracked by a marker per offset kept exact
// in the append's transaction, so the claim scan is one descent of a
// partial index whatever the number of caught-up partitions; an idle
// group's poll is answered by the claim-scan latch (triggers in the
// database make it dirty on every message insert and claim release), and
// in the common case by an in-memory cache keyed on PRAGMA data_version
// without touching the database's tables. See groups.go for the design.
// Store.Changed (driver.ChangeDetector) tells the runtime's catch-up poll
// whether anything was committed since its last call.
//
// # Sync work
//
// Conn(tx) returns the connection of the open write transaction, from the
// driver.Tx of Update or the core.SyncTx a Sync effect receives: sync work (a
// read model, an outbox) writes its own tables there, in the same
// transaction as the append and the ack, and commits or rolls back with
// it. On another store's transaction Conn returns an error matching
// ErrNotSQLite (a type assertion on tx would panic on memstore). Do not
// begin or end transactions on the connection, and do not keep it after
// fn returns.
//
// Store.View reads those tables on the reader pool, in one read snapshot:
// it never takes the write lock, so a page rendering a read model never
// waits for the workers, and the workers never wait for it.
//
// Which features need this store: the application's own tables in the
// same transaction (Conn, View) exist on SQLite and PostgreSQL (pgstore.Conn,
// pgstore.View), not on memstore, which has no SQL; everything else (the
// log, guards, consumer groups, the runtime, the CLI's commands) works
// on every store.
//
// # Operator's side
//
// For tools such as cmd/sourced: Lag (pending messages per partition),
// GroupLag and ReadParked (a group's pending work and its parked
// partitions at a bounded cost, for the dashboard: driver.Lagger,
// driver.ParkedReader), Workers (heartbeat records, with the claims each
// holds), CancelScheduled (delete a scheduled message
// before it is promoted) and AppliedMigrations (the schema versions a file
// records, whatever its version, opened read-only).
//
// # Performance notes
//
// SQL text is constant, so zombiezen's per-connection statement cache
// always hits: lists are padded to a fixed set of shapes, and parameters
// the planner could inspect are written "+?N" so that new bindings never
// force a recompile. Statements that fire a trigger are written INSERT OR
// FAIL / UPDATE OR FAIL: with the default ABORT, a statement that may both
// abort and write several rows (a trigger counts) makes SQLite keep a
// statement journal, whose 64 KiB chunks this build's allocator maps and
// unmaps on every statement (measured: claim+ack 1,900/s with ABORT,
// 5,600/s with FAIL). For a single-row statement FAIL and ABORT undo the
// same (nothing). Key pair ids are cached in memory by the writer
// (dropped again when their transaction rolls back). See DefaultPageSize
// for the page size of new files, and pinAllocator (alloc_linux.go) for
// the C heap tuning of this SQLite build.
package sqlitestore
