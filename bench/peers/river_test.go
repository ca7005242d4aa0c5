package peers_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // database/sql driver "sqlite3": the C SQLite, through cgo
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite": the SQLite Sourced runs on (zombiezen wraps modernc.org/sqlite)
)

// noopArgs is River's no-op job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverEngines are the SQLite builds River runs on. Both get the settings
// Sourced's store gives its file, on every connection: WAL, synchronous =
// NORMAL set explicitly, and a 5 s busy timeout; the file is created with
// 2 KiB pages (sqlitestore.DefaultPageSize) by riverCreateFile.
var riverEngines = []struct {
	name, driver string
	dsn          func(path string) string
}{
	// modernc.org/sqlite, the same SQLite (a translation of the C library
	// to Go) as Sourced's store: the like-for-like comparison.
	{"sqlite=modernc", "sqlite", func(path string) string {
		return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)"
	}},
	// mattn/go-sqlite3, the C library through cgo: River's best case here,
	// for reference (it needs cgo; skipped without).
	{"sqlite=mattn-cgo", "sqlite3", func(path string) string {
		return "file:" + path + "?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=5000"
	}},
}

// BenchmarkRiverQueueDrain drains jobs no-op jobs, inserted beforehand,
// through River on SQLite (riversqlite) with 2 workers (MaxWorkers 2 in the
// one queue). A job counts when River reports it completed, which its
// completer does after the transaction that marked it completed committed;
// the timer stops when all of them are, and the completed count is then
// checked in the database.
func BenchmarkRiverQueueDrain(b *testing.B) {
	for _, e := range riverEngines {
		b.Run(e.name, func(b *testing.B) {
			results.set("river "+e.name, riverQueueDrain(b, e.driver, e.dsn, drainJobs))
		})
	}
}

func riverQueueDrain(b *testing.B, driverName string, dsn func(string) string, jobs int) float64 {
	pinCHeap()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(b.TempDir(), "river.db")
		if err := riverCreateFile(ctx, driverName, path); err != nil {
			b.Skipf("%s: %v", driverName, err)
		}
		db, err := sql.Open(driverName, dsn(path))
		if err != nil {
			b.Fatal(err)
		}
		// riversqlite's advice: one connection, as River runs operations
		// in parallel that SQLite would otherwise answer with SQLITE_BUSY.
		db.SetMaxOpenConns(1)
		driver := riversqlite.New(db)
		migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			b.Fatal(err)
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, noopWorker{})
		client, err := river.NewClient(driver, &river.Config{
			Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: drainWorkers}},
			Workers: workers,
			// River's fastest settings: it fetches at most MaxWorkers jobs at
			// a time, at most once per FetchCooldown (default 100 ms).
			FetchCooldown:     river.FetchCooldownMin,
			FetchPollInterval: 10 * time.Millisecond,
			Logger:            quiet,
		})
		if err != nil {
			b.Fatal(err)
		}
		riverInsert(b, ctx, db, client, jobs)
		riverDrain(b, ctx, client, jobs)
		var done int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done != jobs {
			b.Fatalf("%d jobs completed in the database, want %d", done, jobs)
		}
		var mode string
		var sync, page int
		err = db.QueryRowContext(ctx, "SELECT journal_mode, synchronous, page_size FROM pragma_journal_mode, pragma_synchronous, pragma_page_size").Scan(&mode, &sync, &page)
		if err != nil || mode != "wal" || sync != 1 || page != 2048 {
			b.Fatalf("journal_mode %s, synchronous %d, page_size %d (%v): want wal, 1 (NORMAL), 2048", mode, sync, page, err)
		}
		db.Close()
	}
	rate := float64(jobs*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "jobs/s")
	return rate
}

// riverCreateFile creates the database file with 2 KiB pages, in WAL (the
// page size of a file is fixed by its first write, which switching to WAL
// is; mattn's DSN has no parameter for it).
func riverCreateFile(ctx context.Context, driverName, path string) error {
	db, err := sql.Open(driverName, "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, pragma := range []string{"PRAGMA page_size = 2048", "PRAGMA journal_mode = WAL"} {
		if _, err := db.ExecContext(ctx, pragma); err != nil {
			return err
		}
	}
	return db.Close()
}

// riverInsert inserts the jobs in transactions of 5,000 (InsertManyFastTx).
func riverInsert(b *testing.B, ctx context.Context, db *sql.DB, client *river.Client[*sql.Tx], jobs int) {
	const batch = 5000
	params := make([]river.InsertManyParams, 0, batch)
	for done := 0; done < jobs; {
		params = params[:0]
		for range min(batch, jobs-done) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		n, err := client.InsertManyFastTx(ctx, tx, params)
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		done += n
	}
}

// riverDrain times client draining jobs inserted beforehand: from its
// start until it reported every job completed, then stops it.
func riverDrain[TTx any](b *testing.B, ctx context.Context, client *river.Client[TTx], jobs int) {
	b.Helper()
	completed, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + 1,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()
	b.StartTimer()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	deadline := time.After(10 * time.Minute)
	for n := 0; n < jobs; n++ {
		select {
		case <-completed:
		case <-deadline:
			b.Fatalf("River completed %d of %d jobs in 10 minutes", n, jobs)
		}
	}
	b.StopTimer()
	cancel()
	if err := client.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
