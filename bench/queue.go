package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// QueueDrainWorkers is the number of workers QueueDrain runs.
const QueueDrainWorkers = 2

// queueJob is the payload of QueueDrain's no-op jobs.
type queueJob struct {
	Seq int `json:"seq"`
}

const queueJobType = "bench.queue_job"

// drainQueue is a delete-on-ack work queue: exclusive, with no partition
// keys, so it is partitioned by message id (one partition per job: jobs run
// concurrently and unordered), and each job is deleted when its ack
// commits. It counts a job done only after that transaction committed.
type drainQueue struct {
	target int64
	done   atomic.Int64
	all    chan struct{}
}

func (q *drainQueue) HandledTypes() []string { return []string{queueJobType} }
func (q *drainQueue) Exclusive() bool        { return true }
func (q *drainQueue) GroupID() string        { return "bench.queue" }

// HandleClaim runs no job (they are no-ops) and acks each one with delete.
// The last pair also carries an AfterSync, which the router runs after the
// batch's transaction (the deletes and the ack) committed: that is where
// the batch's jobs are counted.
func (q *drainQueue) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	pairs := make([]effects.Pair, len(c.Messages))
	for i, m := range c.Messages {
		pairs[i] = effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{Delete: true}}}
	}
	if n := int64(len(pairs)); n > 0 {
		last := &pairs[n-1]
		last.Signals = append(last.Signals, effects.AfterSync{Work: func(context.Context) error {
			if q.done.Add(n) == q.target {
				close(q.all)
			}
			return nil
		}})
	}
	return pairs, nil
}

// QueueDrain measures a delete-on-ack queue: jobs no-op jobs are appended
// (in transactions of 5,000, not timed) to a fresh file database installed
// by sqlitestore (WAL; the store sets synchronous = NORMAL on each of its
// connections, checked here), then a Runtime with QueueDrainWorkers
// workers and the default configuration otherwise drains it. The timer
// runs from Start until every job's delete-and-ack transaction committed.
// It reports jobs/s (also returned, for comparisons) and checks afterwards
// that the log is empty.
//
// It is exported so that the peers module (bench/peers) runs the very same
// drain beside River's.
func QueueDrain(b *testing.B, jobs int) float64 {
	b.Helper()
	return queueDrain(b, jobs, sqliteQueueStore(b), handWritten)
}

// sqliteQueueStore opens QueueDrain's store: a fresh file database
// installed by sqlitestore, its settings checked.
func sqliteQueueStore(b *testing.B) func(ctx context.Context, reg *codec.Registry, log *slog.Logger) (shell.Store, func() error) {
	return func(ctx context.Context, reg *codec.Registry, log *slog.Logger) (shell.Store, func() error) {
		path := filepath.Join(b.TempDir(), "queue.db")
		store, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: reg, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		if err := checkFileSettings(ctx, store); err != nil {
			b.Fatal(err)
		}
		return store, store.Close
	}
}

// drainReactor is the reactor a drain runs: all is closed once done counts
// every job; counted tells whether a job is counted once its delete
// committed (else the drain waits for the log to be empty before it stops
// the timer).
type drainReactor struct {
	reactor any
	all     <-chan struct{}
	done    func() int64
	counted bool
}

// handWritten is the drain's hand-written delete-on-ack reactor
// (drainQueue), which counts a job once its delete committed.
func handWritten(jobs int64) drainReactor {
	q := &drainQueue{target: jobs, all: make(chan struct{})}
	return drainReactor{reactor: q, all: q.all, done: q.done.Load, counted: true}
}

// PostgresQueueDrain is QueueDrain on the PostgreSQL server at url: the
// same queue, jobs, appends, runtime and checks, on a pgstore installed
// under a fresh table prefix (dropped afterwards).
func PostgresQueueDrain(b *testing.B, url string, jobs int) float64 {
	b.Helper()
	return queueDrain(b, jobs, func(ctx context.Context, reg *codec.Registry, log *slog.Logger) (shell.Store, func() error) {
		store := OpenPostgres(b, url, reg, log)
		return store, func() error {
			if err := store.Uninstall(ctx); err != nil {
				return err
			}
			return store.Close()
		}
	}, handWritten)
}

// PostgresURLEnv is the environment variable naming the PostgreSQL server
// the store=postgres benchmarks run against (the store's test server).
const PostgresURLEnv = "SOURCED_TEST_POSTGRES_URL"

// OpenPostgres installs a pgstore at url under a fresh table prefix, so
// that benchmarks sharing a server never share tables.
func OpenPostgres(b testing.TB, url string, reg *codec.Registry, log *slog.Logger) *pgstore.Store {
	b.Helper()
	var r [6]byte
	rand.Read(r[:])
	store, err := pgstore.Install(context.Background(), url, pgstore.Options{Registry: reg, Logger: log, Prefix: "bench" + hex.EncodeToString(r[:])})
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// queueDrain runs the drain of QueueDrain on the stores open gives (one per
// iteration, closed by the function returned with it), with the reactor
// react makes.
func queueDrain(b *testing.B, jobs int, open func(ctx context.Context, reg *codec.Registry, log *slog.Logger) (shell.Store, func() error), react func(jobs int64) drainReactor) float64 {
	b.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		reg := codec.NewRegistry()
		if err := codec.Register[queueJob](reg, queueJobType); err != nil {
			b.Fatal(err)
		}
		store, closeStore := open(ctx, reg, quiet)
		q := react(int64(jobs))
		cfg := shell.DefaultConfig()
		cfg.Workers = QueueDrainWorkers
		cfg.Logger = quiet
		cfg.ProcessID = "bench"
		rt, err := shell.NewRuntime(store, cfg, q.reactor)
		if err != nil {
			b.Fatal(err)
		}
		// Register the id-partitioned group before appending, as an app
		// does at boot: the store then indexes the jobs by id (and payload).
		if err := rt.Router().Setup(ctx); err != nil {
			b.Fatal(err)
		}
		appendJobs(b, ctx, store, jobs)

		b.StartTimer()
		if err := rt.Start(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case <-q.all:
		case <-time.After(10 * time.Minute):
			b.Fatalf("%d of %d jobs done in 10 minutes", q.done(), jobs)
		}
		for !q.counted && !logEmpty(b, ctx, store) {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()

		if err := rt.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		if !logEmpty(b, ctx, store) || q.done() != int64(jobs) {
			b.Fatalf("after the drain: %d jobs of %d counted done, the log empty: %v", q.done(), jobs, logEmpty(b, ctx, store))
		}
		if err := closeStore(); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(jobs*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "jobs/s")
	return rate
}

// appendJobs appends n jobs in transactions of 5,000.
func appendJobs(b *testing.B, ctx context.Context, store shell.Store, n int) {
	const batch = 5000
	msgs := make([]core.Message, 0, batch)
	for seq := 0; seq < n; {
		msgs = msgs[:0]
		for range min(batch, n-seq) {
			msgs = append(msgs, core.Message{Payload: queueJob{Seq: seq}})
			seq++
		}
		if _, err := store.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// checkFileSettings checks, on the store's writer connection, the settings
// the River drain is given explicitly: WAL and synchronous = NORMAL (1).
func checkFileSettings(ctx context.Context, store *sqlitestore.Store) error {
	return store.Update(ctx, func(tx shell.Tx) error {
		conn := tx.Context().(*sqlitestore.TxContext).Conn()
		got := map[string]string{}
		for _, p := range []string{"journal_mode", "synchronous"} {
			err := sqlitex.ExecuteTransient(conn, "PRAGMA "+p, &sqlitex.ExecOptions{
				ResultFunc: func(stmt *sqlite.Stmt) error { got[p] = stmt.ColumnText(0); return nil },
			})
			if err != nil {
				return err
			}
		}
		if got["journal_mode"] != "wal" || got["synchronous"] != "1" {
			return fmt.Errorf("sqlitestore file settings %v, want journal_mode wal and synchronous 1 (NORMAL)", got)
		}
		return nil
	})
}

// logEmpty reports whether store's log holds no message.
func logEmpty(b *testing.B, ctx context.Context, store shell.Store) bool {
	page, err := store.ReadAll(ctx, shell.ReadAllOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	return len(page.Messages) == 0
}
