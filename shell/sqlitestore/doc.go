// Package sqlitestore is the SQLite message store of Sourced: the
// production shell.Store, on zombiezen.com/go/sqlite (a pure-Go SQLite, no
// cgo).
//
// # Opening and installing
//
// Install opens the database file at a path, creates the store's tables,
// indexes and version table where missing, switches the file to WAL and
// refreshes the planner statistics; it is idempotent and safe to run from
// several processes at once. Open opens a store whose tables exist and
// fails with an error matching shell.ErrNotInstalled otherwise:
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
// Apps that manage their database with their own migrations apply
// Migrations(prefix) in order (or Schema(prefix), the same scripts as one
// text) and set journal_mode=WAL once. Every table, index and trigger name
// carries the prefix (Options.Prefix, default "sourced": sourced_messages,
// idx_sourced_messages_type, ...), so several stores, and the app's own
// tables, share one file. Install records applied scripts per prefix in
// <prefix>_schema_migrations rather than in PRAGMA user_version, which is
// one number for the whole file.
//
// # Concurrency model
//
// A Store holds one writer connection and a pool of reader connections.
// Every write (Update, Append, PromoteScheduled, Optimize) takes the writer,
// so writes of one process are serialised in Go, and runs in one BEGIN
// IMMEDIATE transaction, so writes of several processes are serialised by
// SQLite's write lock, waited for up to Options.BusyTimeout: a read-then-
// write transaction never fails with SQLITE_BUSY_SNAPSHOT, and a guard
// checked inside the transaction holds across processes. Reads outside a
// transaction run on a reader in one read transaction (a consistent
// snapshot), concurrently with the writer thanks to WAL. Appends are
// announced to the notifier after the commit, never on rollback.
//
// Every connection gets its settings when it is opened: foreign_keys=ON,
// busy_timeout, and synchronous=NORMAL when the file is in WAL mode (a
// commit survives a crash of the process; a power loss may lose the last
// commits but never corrupts the file). Readers are query_only.
//
// # Sync work
//
// Inside Update, tx.Context() is a *TxContext whose Conn is the connection
// of the open transaction: sync work (a read model, an outbox) writes its
// own tables there, in the same transaction as the append, and commits or
// rolls back with it. Do not begin or end transactions on it, and do not
// keep it after fn returns.
//
// # Performance notes
//
// SQL text is constant, so zombiezen's per-connection statement cache
// always hits: lists are padded to a fixed set of shapes, and parameters
// the planner could inspect are written "+?N" so that new bindings never
// force a recompile. Key pair ids are cached in memory by the writer
// (dropped again when their transaction rolls back). See DefaultPageSize
// for the page size of new files, and pinAllocator (alloc_linux.go) for
// the C heap tuning of this SQLite build.
package sqlitestore
