package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// Options configure a Store.
type Options struct {
	// Registry encodes, decodes, validates and indexes payloads. Required.
	Registry *codec.Registry
	// Prefix names the store's tables (<prefix>_messages, ...), indexes
	// (idx_<prefix>_...) and triggers (trg_<prefix>_...), so several stores
	// can share one file. It must match ^[A-Za-z_][A-Za-z0-9_]*$. Default
	// DefaultPrefix ("sourced").
	Prefix string
	// Now is the store's clock: it stamps messages and decides which are
	// future-dated (scheduled). Default time.Now (or Clock's).
	Now func() time.Time
	// Clock, instead of Now (giving both is refused), is the store's
	// clock and the one a shell.Runtime given no Config.Clock takes
	// (driver.Clocked): one clock, a driver.SimClock in a test, then drives
	// the store's stamps and schedule, the runtime's promotions and
	// timers, and the workflows' sleeps and retries.
	Clock driver.Clock
	// Notifier is told the distinct types of every committed append and
	// promotion. Default a new *driver.InlineNotifier (see Store.Notifier).
	Notifier driver.Notifier
	// PoolSize is the number of reader connections. Default
	// max(4, GOMAXPROCS).
	PoolSize int
	// BusyTimeout is how long a write waits for the write lock before
	// failing with an error matching driver.ErrBusy, whoever holds it:
	// another process (SQLite's lock), or another write of this process
	// (the store's one writer connection: a write transaction running long,
	// such as a sync handler that blocks, fails the others waiting behind
	// it after BusyTimeout rather than wedging them; the wait ends sooner
	// when the write's context does). A reader waits as long for a lock
	// held by another connection. Default 5s.
	BusyTimeout time.Duration
	// Logger receives the store's rare diagnostics (installs, optimizes).
	// Default slog.Default().
	Logger *slog.Logger
	// PageSize is the SQLite page size Install gives a new, empty database
	// file (a property of the file: ignored once the file has tables).
	// Default DefaultPageSize.
	PageSize int
	// ReadOnly opens the store read-only, as Open does by itself when the
	// file or its directory is not writable: reads work, every write
	// fails with ErrReadOnly.
	ReadOnly bool
	// RawPayloads opens the store for tools that know none of the
	// application's types (the sourced CLI): payloads are returned as
	// stored, as json.RawMessage, and Registry may be nil. Such a store
	// reads the log, pages it and operates consumer groups; appends and
	// partition reads, which need the types, fail.
	RawPayloads bool
}

// DefaultPageSize is the page size Install gives a new database: 2 KiB,
// not SQLite's usual 4 KiB. Measured on this SQLite (modernc.org/sqlite, a
// translation of the C library to Go, with its own C heap): splitting a
// B-tree page allocates a scratch buffer of about 2.5 pages' worth of cells,
// which for 4 KiB pages often exceeds the allocator's 16 KiB size classes
// and is then served by mmap, page faults and munmap on every split. With 2
// KiB pages it stays in a size class and is reused: batched appends used
// about 30% less CPU, and a 100-message partition read of a million-message
// log took 0.35 ms instead of 0.6 ms. Rows and index keys are still stored
// inline up to about 2 KiB and 490 bytes (beyond that SQLite uses overflow
// pages), which fits typical message payloads and key values.
const DefaultPageSize = 2048

// DefaultBusyTimeout is the BusyTimeout used when Options leaves it zero.
const DefaultBusyTimeout = 5 * time.Second

// Store is the SQLite message store, a driver.Store. It is safe for
// concurrent use by many goroutines; several processes may open the same
// file. Build it with Open (tables installed) or Install.
type Store struct {
	reg      *codec.Registry
	raw      bool // payloads returned as stored (Options.RawPayloads)
	names    names
	q        *queries
	now      func() time.Time
	clock    driver.Clock // Options.Clock
	notifier driver.Notifier
	// ownNotifier is set when notifier is the store's own (in-process:
	// it announces this store's commits only).
	ownNotifier bool
	log         *slog.Logger
	path        string // as given to Open
	uri         string
	flags       sqlite.OpenFlags
	memory      bool
	readOnly    bool
	pageSize    int
	walPath     string // the WAL file ("" in memory)
	hk          housekeeping

	// writer holds the one writer connection: taking it from the channel
	// is taking the write lock of this process (SQLite's own lock then
	// serialises processes).
	writer  chan *writer
	readers *sqlitex.Pool

	// watch is the connection that watches PRAGMA data_version for the
	// idle-claim cache and Changed.
	watch *watcher
	// commits counts the commits of the writer, and scheduledCommits
	// those that scheduled messages.
	commits          atomic.Int64
	scheduledCommits atomic.Int64
	// waiting counts the Update calls waiting for the writer: a member of
	// an open commit group hands the transaction over to them rather than
	// committing (see update).
	waiting atomic.Int64
	// busy is Options.BusyTimeout: how long takeWriter waits.
	busy time.Duration
	// noIdleCache turns the idle-claim cache off (benchmarks of the latch).
	noIdleCache bool
	// statsFloor is the fewest rows a table must have for Optimize to
	// keep its statistics (statsFloor; tests lower it).
	statsFloor int64

	// ckpt checkpoints the WAL off the writer (nil in memory or
	// read-only; see checkpointer.go).
	ckpt *checkpointer

	// states is the cache Handle keeps deciders' states in (StateCache).
	states *shell.StateCache

	closeOnce sync.Once
	closeErr  error
}

var (
	_ driver.Store           = (*Store)(nil)
	_ driver.Clocked         = (*Store)(nil)
	_ shell.StateCacheKeeper = (*Store)(nil)
)

// StateCache returns the cache in which shell.Handle keeps, by default,
// the folded states of the deciders it decides with this store (those
// whose state types hold no references; see shell.HandleOptions.Cache and
// NoCache): at most shell.DefaultStateCacheSize partitions. It is dropped
// whenever messages are deleted from the log (a delete-on-ack queue's
// ack, Clear), by this process or, noticed at the start of the next write
// transaction, by any other that opened the file and prefix; each
// decision reads the messages appended after its cached state's position,
// by any process, so a cached state is always the one a full fold gives.
// Messages deleted with SQL of one's own (AppConn) are not noticed: decide
// with NoCache, or call Drop on this cache. Give it to a Runtime
// (shell.Config.StateCache) to share the states with its workers.
func (s *Store) StateCache() *shell.StateCache { return s.states }

// indexBasis is what a message is indexed under.
type indexBasis uint8

const (
	// The zero value indexes every key pair of the payload.
	_ indexBasis = iota
	// indexID indexes the payload and core.IDKey = message id
	// (id-partitioned queues).
	indexID
)

// Open opens the store in the SQLite database at path, whose schema must
// be installed (by Install, `sourced migrate`, or an app's migrations built
// from Migrations) at exactly this program's SchemaVersion:
//   - no table of the prefix: an error matching driver.ErrNotInstalled;
//   - an older version: driver.ErrSchemaOutdated (run Install or `sourced
//     migrate`);
//   - a newer version: driver.ErrSchemaNewer (upgrade the program);
//   - a table, index or trigger of the version missing (dropped by hand):
//     driver.ErrNotInstalled naming them (Install restores them).
//
// A file that is not a SQLite database gives an error matching
// ErrNotDatabase. A file that this process cannot write (or in a
// directory it cannot write: a read-only mount, a copy), or
// Options.ReadOnly, opens the store read-only: reads work, writes fail
// with ErrReadOnly. When the planner statistics are missing or much older
// than the log, Open refreshes them (Optimize) unless read-only.
//
// path is a file path or a "file:" URI; ":memory:" opens a private
// in-memory database, for tests (it is then empty, so use Install).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	s, err := open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	w := <-s.writer // no Update can run yet
	err = s.notDatabase(checkSchema(w.conn, s.names, path))
	if err == nil && !s.readOnly {
		err = s.optimizeIfStale(ctx, w.conn)
	}
	s.writer <- w
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Install opens the store at path like Open, creating or restoring its
// schema first (see Store.Install).
func Install(ctx context.Context, path string, opts Options) (*Store, error) {
	s, err := open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Install(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Registry == nil {
		if !opts.RawPayloads {
			return nil, errors.New("sqlitestore: Options.Registry is required")
		}
		opts.Registry = codec.NewRegistry()
	}
	prefix, err := checkPrefix(opts.Prefix)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Store{
		statsFloor: statsFloor,
		reg:        opts.Registry,
		raw:        opts.RawPayloads,
		names:      namesFor(prefix),
		now:        opts.Now,
		notifier:   opts.Notifier,
		log:        opts.Logger,
		writer:     make(chan *writer, 1),
		states:     shell.NewStateCache(shell.DefaultStateCacheSize),
	}
	if opts.Clock != nil {
		if opts.Now != nil {
			return nil, errors.New("sqlitestore: Options.Now and Options.Clock are both set: give one clock (Clock, to share it with the runtime)")
		}
		s.clock, s.now = opts.Clock, opts.Clock.Now
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.notifier == nil {
		s.notifier = new(driver.InlineNotifier)
		s.ownNotifier = true
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.pageSize = opts.PageSize
	if s.pageSize == 0 {
		s.pageSize = DefaultPageSize
	}
	if s.pageSize < 512 || s.pageSize > 65536 || s.pageSize&(s.pageSize-1) != 0 {
		return nil, fmt.Errorf("sqlitestore: page size %d is not a power of two between 512 and 65536", opts.PageSize)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	s.busy = busy
	size := opts.PoolSize
	if size <= 0 {
		size = max(4, runtime.GOMAXPROCS(0))
	}
	pinAllocator()
	s.q = newQueries(s.names)
	s.path = path
	s.uri, s.memory = dbURI(path)
	s.flags = openFlags
	if !s.memory {
		if uri, ok := readOnlyURI(path, opts.ReadOnly); ok {
			s.uri, s.readOnly, s.flags = uri, true, readOnlyFlags
		}
	}
	conn, err := openWriter(s.uri, s.flags, busy)
	if err != nil {
		return nil, s.notDatabase(err)
	}
	if !s.memory {
		file, err := mainFile(conn)
		if err != nil {
			conn.Close()
			return nil, s.notDatabase(err)
		}
		if file != "" {
			s.walPath = file + "-wal"
		}
	}
	s.writer <- newWriter(conn, busy)
	if s.readers, err = openReaders(s.uri, s.flags, size, busy); err != nil {
		conn.Close()
		return nil, err
	}
	if s.watch, err = openWatcher(s.uri, s.flags, s.memory); err != nil {
		s.readers.Close()
		conn.Close()
		return nil, err
	}
	if !s.memory && !s.readOnly {
		if err := sqlitex.ExecuteTransient(conn, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", autoCheckpointBackstop), nil); err != nil {
			s.watch.close()
			s.readers.Close()
			conn.Close()
			return nil, fmt.Errorf("sqlitestore: wal_autocheckpoint: %w", err)
		}
		s.startCheckpointer()
	}
	return s, nil
}

// Install creates the store's tables, indexes and triggers where missing
// (every migration of SchemaVersion is run again, each idempotent: a
// dropped index or trigger is restored), records the applied versions in
// <prefix>_schema_migrations, switches the file to WAL, and refreshes the
// planner statistics (Optimize) unless the log is empty. It is safe to run
// from several processes at once. A file recording a newer schema version
// is refused with driver.ErrSchemaNewer, and a read-only store with
// ErrReadOnly, before anything is written.
func (s *Store) Install(ctx context.Context) (err error) {
	defer func() { err = ctxErr(ctx, busyOr(err)) }()
	if s.readOnly {
		return s.readOnlyError("install (it creates or restores the schema)")
	}
	w, err := s.takeIdleWriter(ctx)
	if err != nil {
		return err
	}
	defer s.putWriter(w)
	if have, err := schemaVersion(w.conn, s.names); err != nil {
		return s.notDatabase(fmt.Errorf("sqlitestore: install: %w", err))
	} else if have > SchemaVersion {
		return newerError(s.path, s.names, have)
	}
	if err := setPageSize(w.conn, s.pageSize); err != nil {
		return s.readOnlyOr(err)
	}
	if !s.memory {
		if err := setWAL(w.conn); err != nil {
			return s.readOnlyOr(err)
		}
	}
	applied, err := migrate(ctx, w.conn, s.names, s.path)
	if err != nil {
		return s.readOnlyOr(err)
	}
	w.reset() // statements prepared against an older schema
	w.groups = nil
	if applied > 0 {
		s.log.DebugContext(ctx, "sqlitestore: installed schema", "prefix", s.names.prefix, "migrations", applied)
	}
	// ANALYZE records nothing for empty tables: skip it on a new store
	// (re-reading the statistics of every index costs more than the rest
	// of an install).
	if empty, err := queryInt(w.conn, s.q.logEmpty); err != nil || empty == 1 {
		return err
	}
	return s.readOnlyOr(s.optimize(ctx, w.conn))
}

// Now returns the store's time (Options.Now, or Options.Clock's).
func (s *Store) Now() time.Time { return s.now() }

// Clock returns Options.Clock, nil without one (driver.Clocked): a
// shell.Runtime given no Config.Clock takes it.
func (s *Store) Clock() driver.Clock { return s.clock }

// Registry returns the codec registry the store encodes and decodes with.
func (s *Store) Registry() *codec.Registry { return s.reg }

// Notifier returns the notifier the store announces committed appends to,
// for subscribing to it.
func (s *Store) Notifier() driver.Notifier { return s.notifier }

// Prefix returns the store's table prefix.
func (s *Store) Prefix() string { return s.names.prefix }

// Close closes the store's connections. It waits for a running write
// transaction to finish.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		w, _ := s.takeIdleWriter(context.Background())
		close(s.writer)
		s.ckpt.close()
		s.closeErr = errors.Join(s.readers.Close(), s.watch.close(), w.conn.Close())
	})
	return s.closeErr
}

var errClosed = errors.New("sqlitestore: store is closed")

// takeWriter takes the writer connection, waiting at most the busy
// timeout (as SQLite waits for another process's lock) or until ctx ends:
// past it, an error matching driver.ErrBusy.
func (s *Store) takeWriter(ctx context.Context) (*writer, error) {
	return s.takeWriterWithin(ctx, s.busy)
}

// takeWriterWithin is takeWriter waiting at most wait (0: until ctx ends).
func (s *Store) takeWriterWithin(ctx context.Context, wait time.Duration) (*writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // not left to select's choice when both are ready
	}
	take := func(w *writer, ok bool) (*writer, error) {
		if !ok {
			return nil, errClosed
		}
		if ctx.Done() != nil && w.group == nil {
			w.conn.SetInterrupt(ctx.Done())
		}
		return w, nil
	}
	select { // the common case: no timer
	case w, ok := <-s.writer:
		return take(w, ok)
	default:
	}
	var expired <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case w, ok := <-s.writer:
		return take(w, ok)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return nil, fmt.Errorf("%w: sqlitestore: another write of this process held the writer connection for over %v (Options.BusyTimeout), for instance a sync handler that blocks: try again, or find what holds it", driver.ErrBusy, wait)
	}
}

func (s *Store) putWriter(w *writer) {
	w.conn.SetInterrupt(nil)
	if w.group == nil && !w.conn.AutocommitEnabled() {
		// A transaction no group owns: a path that failed to end its
		// own. Ended here, so the next write can begin.
		s.log.Error("sqlitestore: the writer came back inside a transaction; rolled back")
		w.rollback()
	}
	s.writer <- w
}

// Update runs fn in one BEGIN IMMEDIATE transaction on the writer
// connection. If fn returns an error or panics its work rolls back (the
// panic continues after the rollback). An append that fails for a
// documented reason (invalid payload, duplicate id, guard conflict) writes
// nothing and the transaction may go on; one that fails while writing (an
// I/O error, an interruption) aborts it: the transaction's further use
// fails and Update rolls back and returns that error. After the commit the
// notifier is told the distinct types appended to the log. Do not call the
// Store's writing methods from inside fn (they wait for the writer fn
// holds): use tx.
//
// Concurrent Updates share commits (group commit): an Update whose fn
// returns while others wait for the writer hands the open transaction to
// the next one instead of committing, each fn's work being a savepoint of
// its own, and the last one commits for all. Every Update still returns
// only after the commit that made its work durable and visible, and one
// fn's failure rolls back only its own work.
func (s *Store) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return s.update(ctx, false, fn)
}

// Append appends msgs in a transaction of its own; see driver.Tx.Append.
func (s *Store) Append(ctx context.Context, msgs []core.Message, opts driver.AppendOptions) (res driver.AppendResult, err error) {
	if len(msgs) == 0 {
		return driver.AppendResult{}, ctx.Err()
	}
	err = s.update(ctx, true, func(tx driver.Tx) error {
		res, err = tx.Append(msgs, opts)
		return err
	})
	return res, err
}

// Read returns the messages matching any of conds; see driver.Tx.Read.
func (s *Store) Read(ctx context.Context, conds []core.Condition, opts driver.ReadOptions) (res driver.ReadResult, err error) {
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		res, err = s.read(conn, nil, conds, opts)
		return err
	})
	return res, err
}

// ReadPartition reads one partition under conditional AND; see
// driver.Tx.ReadPartition.
func (s *Store) ReadPartition(ctx context.Context, partition core.Partition, types []string, opts driver.ReadOptions) (res driver.ReadResult, err error) {
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		res, err = s.readPartition(conn, nil, partition, types, opts)
		return err
	})
	return res, err
}

// ReadAll returns one page of the log; see driver.ReadAllOptions.
func (s *Store) ReadAll(ctx context.Context, opts driver.ReadAllOptions) (page driver.Page, err error) {
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		page, err = s.readAll(conn, nil, opts)
		return err
	})
	return page, err
}

// All iterates the log (or the messages matching opts.Conditions) from
// opts.From in opts.Order, reading one page of opts.Limit at a time and the
// next page only when the iteration gets there. No connection is held
// while the loop body runs.
func (s *Store) All(ctx context.Context, opts driver.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return driver.PageMessages(ctx, s.ReadAll, opts)
}

// Stats returns the newest position, the number of scheduled messages and
// every consumer group's figures (see Store.Group).
func (s *Store) Stats(ctx context.Context) (st driver.Stats, err error) {
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		if st.MaxPosition, err = lastPosition(conn, s.q); err != nil {
			return err
		}
		if st.Scheduled, err = queryInt(conn, s.q.countScheduled); err != nil {
			return err
		}
		st.Groups, err = s.groupInfos(conn)
		return err
	})
	if err == nil {
		st.WALBytes, err = s.walSize()
	}
	return st, err
}

// Optimize refreshes the query planner's statistics with a bounded ANALYZE
// (PRAGMA analysis_limit = 400, then ANALYZE, on the writer connection:
// analysis_limit is per connection). Run it after install (Install does)
// and periodically as the log grows.
//
// The statistics of a table with fewer than 10,000 rows are not kept:
// the planner then assumes a large table, as on a new store, and every hot
// query keeps its index plan however much the table grows. (Statistics of
// a near-empty log, taken when a runtime starts on a new store, made the
// planner scan the whole log for every message of a partition read once
// the log had grown; and a connection keeps the statistics it loaded when
// it opened.)
func (s *Store) Optimize(ctx context.Context) (err error) {
	defer func() { err = ctxErr(ctx, busyOr(err)) }()
	if s.readOnly {
		return s.readOnlyError("optimize")
	}
	w, err := s.takeIdleWriter(ctx)
	if err != nil {
		return err
	}
	defer s.putWriter(w)
	return s.optimize(ctx, w.conn)
}

// statsFloor is the fewest rows a table must hold for Optimize to keep
// the statistics ANALYZE took of it (see Optimize).
const statsFloor = 10_000

func (s *Store) optimize(ctx context.Context, conn *sqlite.Conn) (err error) {
	start := time.Now()
	if err := sqlitex.ExecuteTransient(conn, "PRAGMA analysis_limit = 400", nil); err != nil {
		return fmt.Errorf("sqlitestore: optimize: %w", err)
	}
	// One transaction: no connection opening meanwhile loads statistics
	// of small tables (a connection keeps what it loaded at open).
	if err := sqlitex.ExecuteTransient(conn, "BEGIN IMMEDIATE", nil); err != nil {
		return fmt.Errorf("sqlitestore: optimize: %w", err)
	}
	defer func() {
		end := "COMMIT"
		if err != nil {
			end = "ROLLBACK"
		}
		// An ended context interrupts every statement, ROLLBACK included:
		// the transaction must end whatever ctx did, or the writer goes
		// back to the pool inside it and every later write fails with
		// "cannot start a transaction within a transaction".
		old := conn.SetInterrupt(nil)
		defer conn.SetInterrupt(old)
		if conn.AutocommitEnabled() {
			return // SQLite rolled back already
		}
		eerr := sqlitex.ExecuteTransient(conn, end, nil)
		if eerr != nil && end == "COMMIT" {
			eerr = errors.Join(eerr, sqlitex.ExecuteTransient(conn, "ROLLBACK", nil))
		}
		if eerr != nil && !conn.AutocommitEnabled() {
			panic("sqlitestore: optimize: ending the transaction failed: " + eerr.Error())
		}
		if err == nil && eerr != nil {
			err = fmt.Errorf("sqlitestore: optimize: %w", eerr)
		}
	}()
	tables := s.names.requiredTables()
	for _, t := range tables {
		if err := sqlitex.ExecuteTransient(conn, "ANALYZE "+t, nil); err != nil {
			return fmt.Errorf("sqlitestore: optimize: %w", err)
		}
	}
	dropped, err := dropSmallStats(conn, tables, s.statsFloor)
	if err != nil {
		return fmt.Errorf("sqlitestore: optimize: %w", err)
	}
	if dropped > 0 {
		// ANALYZE of a schema table gathers nothing and reloads the
		// statistics of this connection (and expires its statements).
		if err := sqlitex.ExecuteTransient(conn, "ANALYZE sqlite_schema", nil); err != nil {
			return fmt.Errorf("sqlitestore: optimize: %w", err)
		}
	}
	s.log.Debug("sqlitestore: analyzed", "prefix", s.names.prefix, "took", time.Since(start), "small_tables", dropped)
	return ctx.Err()
}

// dropSmallStats deletes the statistics (sqlite_stat1, sqlite_stat4) of
// those of tables that hold fewer than floor rows, and returns how many
// tables it dropped. The planner treats a table without statistics as
// large, which is what the hot queries are written for: statistics of a
// small table would tell it to scan the table, and stay loaded in open
// connections while the table grows.
func dropSmallStats(conn *sqlite.Conn, tables []string, floor int64) (int, error) {
	small := make([]string, 0, len(tables))
	for _, t := range tables {
		rows, found, err := analyzedRows(conn, t)
		if err != nil {
			return 0, err
		}
		if found && rows < floor {
			small = append(small, t)
		}
	}
	stat4, err := queryInt(conn, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'sqlite_stat4'`)
	if err != nil {
		return 0, err
	}
	for _, t := range small {
		if err := sqlitex.Execute(conn, `DELETE FROM sqlite_stat1 WHERE tbl = ?`, &sqlitex.ExecOptions{Args: []any{t}}); err != nil {
			return 0, err
		}
		if stat4 == 0 {
			continue
		}
		if err := sqlitex.Execute(conn, `DELETE FROM sqlite_stat4 WHERE tbl = ?`, &sqlitex.ExecOptions{Args: []any{t}}); err != nil {
			return 0, err
		}
	}
	return len(small), nil
}

// withSnapshot runs fn on a reader connection inside one read transaction,
// so every statement of fn sees the same snapshot of the database. The
// transaction ends with the call (withReader rolls it back): a snapshot is
// never held longer than one call, so it never pins the WAL.
func (s *Store) withSnapshot(ctx context.Context, fn func(conn *sqlite.Conn) error) error {
	return s.withReader(ctx, func(conn *sqlite.Conn) error {
		if err := execPrepped(conn, "BEGIN DEFERRED"); err != nil {
			return fmt.Errorf("sqlitestore: begin: %w", err)
		}
		return fn(conn)
	})
}
