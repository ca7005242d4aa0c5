package bench

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// BenchmarkQueueWork is BenchmarkQueueDrain with the queue an application
// writes, effects.Queue (sourced.NewQueue), instead of the hand-written
// reactor: the same 100,000 no-op jobs, file database, 2 workers and
// default configuration. A job is counted when its Work returns, and the
// timer stops once every job was done and the log is empty (every delete
// committed; looked at every millisecond once the last job ran). Compare
// it with BenchmarkQueueDrain in the same run: what the concept costs.
//
//	go test ./bench -run '^$' -bench 'Queue(Work|Drain)$' -benchtime 1x
func BenchmarkQueueWork(b *testing.B) {
	const jobs = 100_000
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.StopTimer()
	for range b.N {
		reg := codec.NewRegistry()
		if err := codec.Register[queueJob](reg, queueJobType); err != nil {
			b.Fatal(err)
		}
		store, err := sqlitestore.Install(ctx, filepath.Join(b.TempDir(), "queue.db"), sqlitestore.Options{Registry: reg, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		var done atomic.Int64
		all := make(chan struct{})
		q := effects.NewQueue("bench.queue", func(context.Context, effects.Job[queueJob]) error {
			if done.Add(1) == jobs {
				close(all)
			}
			return nil
		})
		cfg := shell.DefaultConfig()
		cfg.Workers = QueueDrainWorkers
		cfg.Logger = quiet
		rt, err := shell.NewRuntime(store, cfg, q)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.Router().Setup(ctx); err != nil {
			b.Fatal(err)
		}
		appendJobs(b, ctx, store, jobs)

		b.StartTimer()
		if err := rt.Start(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Minute):
			b.Fatalf("%d of %d jobs done in 10 minutes", done.Load(), jobs)
		}
		for {
			page, err := store.ReadAll(ctx, shell.ReadAllOptions{Limit: 1})
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Messages) == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()

		if err := rt.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		if n := done.Load(); n != jobs {
			b.Fatalf("%d jobs done, want %d (a job done twice?)", n, jobs)
		}
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "jobs/s")
}
