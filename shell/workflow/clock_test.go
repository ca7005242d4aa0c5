package workflow_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// One clock for simulated time: a SimClock given once, to the store
// (memstore.WithSharedClock, sqlitestore Options.Clock), and no
// Config.Clock: the store stamps and schedules by it, the runtime promotes
// and times by it, and a workflow dates its retries and sleeps by it, on
// both stores. Nothing is due, promoted or run until the clock is advanced.
func TestOneClockGivenToTheStoreDrivesEverything(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, s := range []struct {
		name string
		open func(t *testing.T, clk shell.Clock) shell.Store
	}{
		{"memstore", func(t *testing.T, clk shell.Clock) shell.Store {
			return memstore.New(codec.NewRegistry(), memstore.WithSharedClock(clk))
		}},
		{"sqlitestore", func(t *testing.T, clk shell.Clock) shell.Store {
			t.Helper()
			store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "wf.db"), sqlitestore.Options{Registry: codec.NewRegistry(), Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			return store
		}},
	} {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			clk := shell.NewSimClock(start)
			store := s.open(t, clk)
			var attempts atomic.Int64
			wf := workflow.Define("one_clock", func(w *workflow.Workflow, _ int) (int, error) {
				n, err := workflow.Step(w, "call", func(context.Context) (int, error) {
					if attempts.Add(1) < 2 {
						return 0, errors.New("flaky")
					}
					return 2, nil
				}, workflow.Retries(1), workflow.Backoff(time.Minute, time.Hour))
				if err != nil {
					return 0, err
				}
				workflow.Sleep(w, time.Hour)
				return n, nil
			})
			rt, err := shell.NewRuntime(store, shell.DefaultConfig(), wf) // no Clock: the store's
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer rt.Stop(ctx)
			run, err := workflow.Start(ctx, store, wf, 0)
			if err != nil {
				t.Fatal(err)
			}
			settle := func() {
				t.Helper()
				if err := rt.WaitIdle(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			settle()
			info, err := run.Load(ctx)
			if err != nil || !info.StartedAt.Equal(start) {
				t.Fatalf("the run started at %v (%v), want the store's simulated %v", info.StartedAt, err, start)
			}
			if next, ok, _ := store.NextScheduled(ctx); !ok || !next.Equal(start.Add(time.Minute)) {
				t.Fatalf("the retry is scheduled for %v (%v), want %v: the one clock plus the back-off", next, ok, start.Add(time.Minute))
			}
			clk.Advance(time.Minute - time.Second)
			settle()
			if attempts.Load() != 1 {
				t.Fatalf("%d attempts before the retry is due, want 1", attempts.Load())
			}
			clk.Advance(time.Second)
			settle()
			if attempts.Load() != 2 {
				t.Fatalf("%d attempts once the retry is due, want 2: the runtime promotes by the store's clock", attempts.Load())
			}
			if next, ok, _ := store.NextScheduled(ctx); !ok || !next.Equal(start.Add(time.Minute+time.Hour)) {
				t.Fatalf("the sleep ends at %v (%v), want %v", next, ok, start.Add(time.Minute+time.Hour))
			}
			clk.Advance(time.Hour)
			if out, err := wait(t, run); err != nil || out != 2 {
				t.Fatalf("output %d, %v", out, err)
			}
			if info, err := run.Load(ctx); err != nil || !info.EndedAt.Equal(start.Add(time.Minute+time.Hour)) {
				t.Fatalf("the run ended at %v (%v), want %v", info.EndedAt, err, start.Add(time.Minute+time.Hour))
			}
		})
	}
}
