package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var errNotInstalled = driver.ErrNotInstalled

// Options configure a Store.
type Options struct {
	// Registry encodes, decodes, validates and indexes payloads. Required
	// unless RawPayloads.
	Registry *codec.Registry
	// Prefix names the store's tables (<prefix>_messages, ...) and indexes
	// (idx_<prefix>_...), so several stores, and the app's own tables,
	// share one schema. It must match ^[A-Za-z_][A-Za-z0-9_]*$ (at most
	// 40 characters) and is used in lower case. Default DefaultPrefix.
	Prefix string
	// Now is the store's clock: it stamps messages, decides which are
	// future-dated (scheduled) and dates claims. Default time.Now (or
	// Clock's).
	Now func() time.Time
	// Clock, instead of Now (giving both is refused), is the store's
	// clock and the one a shell.Runtime given no Config.Clock takes
	// (driver.Clocked): one clock, a driver.SimClock in a test, then drives
	// the store, the runtime and the workflows on it.
	Clock driver.Clock
	// Notifier is told, in this process, the distinct types of every
	// committed append and promotion. Default a new *driver.InlineNotifier.
	// Other processes learn of them through PostgreSQL (see Store.Listen).
	Notifier driver.Notifier
	// Logger receives the store's rare diagnostics (installs, listener
	// reconnections). Default slog.Default().
	Logger *slog.Logger
	// MaxConns caps the connection pool (0: pgxpool's default, or the
	// pool_max_conns parameter of the URL).
	MaxConns int32
	// ConcurrentAppends is how many transactions of the store's
	// standalone appends (Store.Append) are in flight at once in this
	// process. The appends made while all are busy wait, and go together,
	// in one transaction, as soon as one is done: only appends that could
	// commit in either order share one, and each is still refused or
	// written on its own (see "Appends sent together" in the package
	// doc). Default 1: one transaction in flight, with every append that
	// came meanwhile in the next. A negative value sends every append
	// alone, in a transaction of its own, at once. Appends inside Update
	// and Handle are never grouped.
	ConcurrentAppends int
	// RawPayloads opens the store for tools that know none of the
	// application's types (the sourced CLI): payloads are returned as
	// stored, as json.RawMessage, and Registry may be nil.
	RawPayloads bool
	// Tracer, when set, traces every statement and batch of the store's
	// connections (pgx.ConnConfig.Tracer): an OpenTelemetry adapter, or a
	// count of round trips (one per statement sent alone or batch; a
	// tracer implementing pgx.BatchTracer sees the batches).
	Tracer pgx.QueryTracer
}

// Store is the PostgreSQL message store, a driver.Store and driver.Groups.
// It is safe for concurrent use; any number of processes on any number of
// machines may open the same database. Build it with Open or Install.
type Store struct {
	// limits holds the claim statements with their limits written in
	// (see limited).
	limitsMu sync.Mutex
	limits   map[limitKey]string
	reg      *codec.Registry
	raw      bool
	names    names
	q        queries
	now      func() time.Time
	notifier driver.Notifier
	// ownNotifier is set when notifier is the store's own, which only
	// this store and its listeners call (see ScheduledCommits).
	ownNotifier bool
	// scheduledCommits counts the commits that scheduled messages, this
	// store's and those its listeners heard of (ScheduledCommits).
	scheduledCommits atomic.Int64
	// statsAt is the log position whose commit makes the advancer look at
	// the tables' sizes at once (see growing); statsNow tells it to.
	statsAt  atomic.Int64
	statsNow chan struct{}
	log      *slog.Logger
	pool     *pgxpool.Pool
	clock    driver.Clock // Options.Clock
	// lockKey is the advisory lock of this store's tables, boundaryNS
	// the namespace of its boundary locks (see boundary.go).
	lockKey    int64
	boundaryNS int32
	// unorderedPositions is a test's switch (BreakPositionOrder in
	// export_test.go) that removes the ordering mechanism, to show the
	// ordering test catches what it guards against.
	unorderedPositions bool
	// origin identifies this Store in the notifications it sends, so that
	// its own listener does not announce them twice.
	origin  string
	channel string
	// groups is the cached consumer-group configuration, reloaded when
	// <p>_head.config_version moves.
	groups atomic.Pointer[groupSet]
	wakes  *wakes
	// adv advances the stored horizon for the appends whose commit did
	// not (holes.go); appending counts this store's appends and
	// transactions that sent positions to draw and have not ended.
	adv       *advancer
	appending atomic.Int64
	// busy holds, per group (a *atomic.Bool), whether this store's last
	// claim of it claimed something (see idle).
	busy sync.Map
	// appends are the standalone appends in flight, and those waiting
	// to be sent together (together.go).
	appends appendGroups
	// refusable holds the SQL of the statements of batches that returned
	// an error, which the store's batches run prepared by name (see
	// sendBatch); anyRefusable is set once it holds one, so that until
	// then a batch looks none up.
	refusable    sync.Map
	anyRefusable atomic.Bool
	closeOnce    sync.Once
}

var _ driver.Store = (*Store)(nil)

// Open opens the store whose tables are installed in the database at url
// (a postgres:// URL or a key=value connection string, see pgxpool). A
// database without the store's tables gives an error matching
// driver.ErrNotInstalled; one whose schema version differs from this
// build's, ErrSchemaOutdated or ErrSchemaNewer.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	s, err := open(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	if err := s.checkVersion(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Install opens the store like Open, applying the migrations it lacks
// first (idempotent; safe from several processes at once).
func Install(ctx context.Context, url string, opts Options) (*Store, error) {
	s, err := open(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Install(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Install applies the migrations the database lacks, each recorded in
// <prefix>_schema_migrations; then checks the version like Open.
func (s *Store) Install(ctx context.Context) error {
	applied, err := s.migrate(ctx)
	if err != nil {
		return err
	}
	if applied > 0 {
		s.log.DebugContext(ctx, "pgstore: installed schema", "prefix", s.names.prefix, "migrations", applied)
	}
	s.groups.Store(nil)
	return s.checkVersion(ctx)
}

func open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Registry == nil {
		if !opts.RawPayloads {
			return nil, errors.New("pgstore: Options.Registry is required")
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
	if opts.Clock != nil {
		if opts.Now != nil {
			return nil, errors.New("pgstore: Options.Now and Options.Clock are both set: give one clock (Clock, to share it with the runtime)")
		}
		opts.Now = opts.Clock.Now
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	planMode := !namesPlanMode(cfg.ConnConfig.RuntimeParams)
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		registerUUID(c.TypeMap())
		if planMode {
			if _, err := c.Exec(ctx, genericPlans); err != nil {
				return fmt.Errorf("pgstore: connect: %w", err)
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	s := &Store{
		reg:        opts.Registry,
		raw:        opts.RawPayloads,
		names:      namesFor(prefix),
		now:        opts.Now,
		notifier:   opts.Notifier,
		log:        opts.Logger,
		pool:       pool,
		clock:      opts.Clock,
		lockKey:    lockKey(schema, prefix),
		boundaryNS: boundaryNamespace(schema, prefix),
		origin:     uuid.NewString(),
		channel:    channelFor(lockKey(schema, prefix)),
	}
	s.q = newQueries(s.names)
	s.wakes = newWakes(s)
	s.statsNow = make(chan struct{}, 1)
	s.statsAt.Store(firstStatsLook)
	s.adv = newAdvancer(s)
	s.appends = appendGroups{s: s, limit: defaultConcurrentAppends}
	if opts.ConcurrentAppends != 0 {
		s.appends.limit = max(0, opts.ConcurrentAppends)
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
	return s, nil
}

// Now returns the store's time (Options.Now).
func (s *Store) Now() time.Time { return s.now() }

// Registry returns the codec registry the store encodes and decodes with.
func (s *Store) Registry() *codec.Registry { return s.reg }

// Notifier returns the notifier the store announces committed appends to.
func (s *Store) Notifier() driver.Notifier { return s.notifier }

// Clock returns the clock given as Options.Clock (nil when the store was
// given Now or nothing), which a runtime on the store takes when its
// Config.Clock is nil (driver.Clocked).
func (s *Store) Clock() driver.Clock { return s.clock }

// Logger returns the store's logger (Options.Logger), which a runtime on
// the store logs with unless given its own (driver.LoggerProvider).
func (s *Store) Logger() *slog.Logger { return s.log }

// Prefix returns the store's table prefix.
func (s *Store) Prefix() string { return s.names.prefix }

// Pool returns the store's connection pool, for an app's own queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the store's connections. It waits for the connections in
// use to be released.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.adv.close()
		s.wakes.close()
		s.pool.Close()
	})
	return nil
}

// wrap adds the operation to err, and makes sure that an error caused by a
// done context matches it (errors.Is(err, context.Canceled)).
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(cerr, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// lockMode is which of the store's advisory locks a transaction takes.
type lockMode int

const (
	// lockExclusive serialises the transaction with every other write of
	// the store: appends, promotions, registrations, resets...
	lockExclusive lockMode = iota
	// lockShared lets transactions that only claim, acknowledge, release
	// or delete acknowledged messages run side by side, never beside an
	// exclusive one.
	lockShared
	// lockLazy (Update) takes no lock at BEGIN: its first operation
	// takes the lock it needs (see tx.acquire).
	lockLazy
	// lockNone is what a lazy transaction holds before its first
	// operation.
	lockNone
)

// Update runs fn in one transaction holding one of the store's advisory
// locks (see below and the package doc): its appends, guard checks and
// group changes are serialised with every other write of any process. If
// fn returns an error or panics, nothing it did is kept (the panic
// continues after the rollback). An append that fails for a documented
// reason (invalid payload, duplicate id, guard conflict) writes nothing
// and the transaction may go on; an error from PostgreSQL aborts it (its
// further use fails and Update returns that error). After the commit the
// notifier is told the distinct types appended; other processes are told
// through NOTIFY, sent after the commit (see Listener).
//
// The lock is taken by fn's first operation (see the package doc,
// "Ordering and locking"): the exclusive one by a read, an append, an
// advance or sync work (tx.Context), the shared one by a claim, an ack, a
// release or a delete, so that a transaction which only settles claims
// (a queue's delete and ack) runs beside other workers' instead of
// queueing behind every append. fn runs a second time, holding the
// exclusive lock from its start, when it needs the exclusive lock after
// taking the shared one, or appends after LastPosition while another
// append committed in between (LastPosition alone takes no lock); the
// first run's writes are rolled back.
func (s *Store) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return s.update(ctx, lockLazy, func(t *tx) error { return fn(t) })
}

// update runs fn in a transaction under the given lock, again under the
// exclusive lock when the transaction asks to restart (tx.acquire).
func (s *Store) update(ctx context.Context, mode lockMode, fn func(t *tx) error) error {
	for {
		restart, err := s.updateOnce(ctx, mode, fn)
		if !restart {
			return err
		}
		mode = lockExclusive
	}
}

// updateOnce runs fn in a transaction under the given lock; restart
// reports that it was rolled back to run again under the exclusive lock.
func (s *Store) updateOnce(ctx context.Context, mode lockMode, fn func(t *tx) error) (restart bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, s.wrap(ctx, "begin", err)
	}
	t := &tx{s: s, ctx: ctx, c: c, holds: lockNone, gen: s.adv.generation()}
	if err := t.begin(mode); err != nil {
		s.discard(c)
		return false, s.wrap(ctx, "begin", err)
	}
	committed := false
	defer func() {
		// A deferred append's check refused (after the rollback below):
		// its error, as Append would have returned it, or a run again.
		var dr *deferredRefusal
		if err == nil || !errors.As(err, &dr) {
			return
		}
		var again bool
		if _, again, err = s.refused(ctx, s.pool, dr.err, dr.guard); again {
			restart, err = true, nil
		}
	}()
	defer func() {
		t.done = true
		if t.counted {
			s.appending.Add(-1)
		}
		if !committed {
			if rerr := t.rollback(); rerr != nil {
				s.discard(c)
				c = nil
			}
		}
		if c != nil {
			c.Release()
		}
		if committed {
			s.afterCommit(t.gen, t.horizon, t.ownLast(), t.types, t.scheduledTypes)
		}
	}()
	err = fn(t)
	if t.restart {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if t.failed != nil {
		return false, s.wrap(ctx, "commit", t.failed)
	}
	// A context done before the commit rolls back; once COMMIT is sent it
	// is not interrupted, so that a context error always means nothing
	// was written (an interrupted COMMIT may have committed on the server).
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := t.commit(); err != nil {
		if t.restart { // a deferred append's lock or insert refused
			return true, nil
		}
		return false, s.wrap(context.Background(), "commit", err)
	}
	committed = true
	return false, nil
}

// discard closes a connection whose state is unknown (a failed rollback,
// an interrupted statement) and gives it back to the pool, which drops it.
func (s *Store) discard(c interface {
	Conn() *pgx.Conn
	Release()
}) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Conn().Close(ctx)
	c.Release()
}

// Read returns the messages matching any of conds; see driver.Tx.Read.
func (s *Store) Read(ctx context.Context, conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	return s.read(ctx, s.pool, conds, opts, nil)
}

// ReadPartition reads one partition under conditional AND; see
// driver.Tx.ReadPartition.
func (s *Store) ReadPartition(ctx context.Context, partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	return s.readPartition(ctx, s.pool, partition, types, opts, nil)
}

// ReadAll returns one page of the log; see driver.ReadAllOptions.
func (s *Store) ReadAll(ctx context.Context, opts driver.ReadAllOptions) (driver.Page, error) {
	return s.readAll(ctx, s.pool, opts, nil)
}

// All iterates the log (or the messages matching opts.Conditions) from
// opts.From in opts.Order, one page of opts.Limit at a time.
func (s *Store) All(ctx context.Context, opts driver.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return driver.PageMessages(ctx, s.ReadAll, opts)
}

// Stats returns the newest position, the number of scheduled messages and
// every consumer group's figures, from one snapshot.
func (s *Store) Stats(ctx context.Context) (st driver.Stats, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		if err := q.QueryRow(ctx, s.q.lastPosition).Scan(&st.MaxPosition); err != nil {
			return err
		}
		if err := q.QueryRow(ctx, s.q.countScheduled).Scan(&st.Scheduled); err != nil {
			return err
		}
		st.Groups, err = s.groupInfos(ctx, q, "")
		return err
	})
	return st, s.wrap(ctx, "stats", err)
}

// Optimize runs ANALYZE on the store's tables. PostgreSQL's autovacuum
// does it too; this is for right after a bulk load (and a shell.Runtime
// calls it when it starts and every Config.OptimizeInterval). A table
// that grows with use (the log, its key pairs, the schedule, the
// offsets) is left alone while it is smaller than its floor (statsFloor
// pages, keysStatsFloor for the key pairs'): the store analyses it once
// it reaches that (see analyze.go), and meanwhile the planner's
// estimates for a table never analysed keep the lookups index probes,
// where statistics of a nearly empty table would plan them as scans for
// as long as the sessions keep their plans. The others (the groups, the
// head, ...) stay a page or two and are analysed whatever their size.
func (s *Store) Optimize(ctx context.Context) error {
	big, err := s.bigEnough(ctx, s.names.tables())
	if err == nil && len(big) > 0 {
		_, err = s.pool.Exec(ctx, "ANALYZE "+strings.Join(big, ", "))
	}
	return s.wrap(ctx, "optimize", err)
}

// querier is what reads need of a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// snapshot runs fn in one read-only REPEATABLE READ transaction, so every
// statement of fn sees the same snapshot.
func (s *Store) snapshot(ctx context.Context, fn func(q querier) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// ScheduledCommits counts the commits that scheduled messages
// (driver.ScheduleCounter): this store's, counted before their
// notifications, and other processes' that its listeners heard of (their
// notifications say so; a reconnected listener counts one, as it cannot
// tell what it missed). A runtime then wakes its scheduler for those
// only, rather than reading when the next message is due after every
// append (10,089 such reads in a BenchmarkPostgresEndToEnd of 10,000
// commands). With a notifier of the caller's (Options.Notifier), which
// may announce commits no listener of this store heard, it returns -1:
// every notification wakes the scheduler.
func (s *Store) ScheduledCommits() int64 {
	if !s.ownNotifier {
		return -1
	}
	return s.scheduledCommits.Load()
}

var _ driver.ScheduleCounter = (*Store)(nil)
