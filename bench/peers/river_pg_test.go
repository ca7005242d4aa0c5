package peers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sourced-go/sourced/bench"
)

// The drain on PostgreSQL, River's home ground: the same jobs and workers
// on the server of SOURCED_TEST_POSTGRES_URL, Sourced on pgstore (a fresh
// table prefix) and River on riverpgxv5 (a fresh schema). Without the
// variable both skip.

// pgURL returns the server's URL or skips b.
func pgURL(b *testing.B) string {
	url := os.Getenv(bench.PostgresURLEnv)
	if url == "" {
		b.Skip(bench.PostgresURLEnv + " is not set: the PostgreSQL drains need a server (see shell/pgstore/internal/pgtest)")
	}
	return url
}

// BenchmarkPostgresQueueDrain is bench.PostgresQueueDrain: Sourced's drain
// on pgstore.
func BenchmarkPostgresQueueDrain(b *testing.B) {
	url := pgURL(b)
	b.Run("store=postgres", func(b *testing.B) {
		results.set("sourced postgres", bench.PostgresQueueDrain(b, url, drainJobs))
	})
}

// BenchmarkRiverPostgresQueueDrain drains the same jobs through River on
// PostgreSQL (riverpgxv5, a pgx pool of the default size), with 2 workers
// (MaxWorkers 2) and River's fastest fetch settings, as on SQLite. A job
// counts when River reports it completed; the completed rows are checked
// afterwards.
func BenchmarkRiverPostgresQueueDrain(b *testing.B) {
	url := pgURL(b)
	b.Run("store=postgres", func(b *testing.B) {
		results.set("river postgres", riverPostgresDrain(b, url, drainJobs))
	})
}

func riverPostgresDrain(b *testing.B, url string, jobs int) float64 {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		var r [6]byte
		rand.Read(r[:])
		schema := "river" + hex.EncodeToString(r[:])
		admin, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			b.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		driver := riverpgxv5.New(pool)
		migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet, Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			b.Fatal(err)
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, noopWorker{})
		client, err := river.NewClient(driver, &river.Config{
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: drainWorkers}},
			Workers:           workers,
			FetchCooldown:     river.FetchCooldownMin,
			FetchPollInterval: 10 * time.Millisecond,
			Logger:            quiet,
			Schema:            schema,
		})
		if err != nil {
			b.Fatal(err)
		}
		const batch = 5000
		params := make([]river.InsertManyParams, 0, batch)
		for done := 0; done < jobs; {
			params = params[:0]
			for range min(batch, jobs-done) {
				params = append(params, river.InsertManyParams{Args: noopArgs{}})
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			n, err := client.InsertManyFastTx(ctx, tx, params)
			if err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			done += n
		}
		riverDrain(b, ctx, client, jobs)
		var done int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".river_job WHERE state = 'completed'").Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done != jobs {
			b.Fatalf("%d jobs completed in the database, want %d", done, jobs)
		}
		pool.Close()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			b.Fatal(err)
		}
		admin.Close(ctx)
	}
	rate := float64(jobs*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "jobs/s")
	return rate
}
