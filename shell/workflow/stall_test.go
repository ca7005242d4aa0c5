package workflow_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// TestWorkflowTypesRegisteredAfterOpen follows examples/web's order on an
// existing SQLite file: open the store (its registry without the
// workflow's lifecycle events), write through it (creating a read model's
// table), build the runtime (which registers the workflow's events), start
// it, and start a run. The run must complete: the store learns the types
// registered after it opened (issue 28, item 1: the run stalled, with lag
// 0 and no error, until the group was stopped, reset and started).
func TestWorkflowTypesRegisteredAfterOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	double := func() *workflow.Definition[int, int] {
		return workflow.Define("doubler", func(w *workflow.Workflow, n int) (int, error) {
			return workflow.Step(w, "double", func(context.Context) (int, error) { return 2 * n, nil })
		})
	}
	for round := 1; round <= 2; round++ {
		store, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: codec.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		err = store.Update(ctx, func(tx shell.Tx) error {
			conn, err := sqlitestore.Conn(tx)
			if err != nil {
				return err
			}
			return conn.Prep(`CREATE TABLE IF NOT EXISTS read_model (id TEXT PRIMARY KEY)`).Reset()
		})
		if err != nil {
			t.Fatal(err)
		}
		wf := double()
		rt, err := shellRuntime(store, wf)
		if err != nil {
			t.Fatal(err)
		}
		run, err := workflow.Start(ctx, store, wf, 21*round)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := run.Wait(wctx)
		cancel()
		if err != nil || out != 42*round {
			stats, _ := store.Stats(ctx)
			t.Fatalf("round %d: run %s: %d, %v (want %d); groups %+v", round, run.ID, out, err, 42*round, stats.Groups)
		}
		if err := rt.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A step that runs longer than MaxClaimAge finishes, once: the worker
// renews its claim while the step runs, so the reaper gives the run to no
// other worker (issue 28, item 2: a 1.5 s step under a 600 ms MaxClaimAge
// ran again and again, never completing). The workflow declares a timeout
// above the step's duration (the default is MaxClaimAge).
func TestStepLongerThanMaxClaimAgeRunsOnce(t *testing.T) {
	ctx := context.Background()
	var runs atomic.Int64
	slow := workflow.Define("slow_report", func(w *workflow.Workflow, n int) (int, error) {
		return workflow.Step(w, "compile", func(ctx context.Context) (int, error) {
			runs.Add(1)
			select {
			case <-time.After(1500 * time.Millisecond):
				return n + 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
	}, workflow.WithHooks(core.Hooks{Timeout: 10 * time.Second}))
	store, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "app.db"), sqlitestore.Options{Registry: codec.NewRegistry(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := shell.DefaultConfig()
	cfg.Logger = quietLogger()
	cfg.CatchUpInterval = 20 * time.Millisecond
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.ClaimTTL = time.Second
	cfg.MaxClaimAge = 600 * time.Millisecond
	cfg.Workers = 2
	rt, err := shell.NewRuntime(store, cfg, slow)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	run, err := workflow.Start(ctx, store, slow, 41)
	if err != nil {
		t.Fatal(err)
	}
	out, err := wait(t, run)
	if err != nil || out != 42 {
		t.Fatalf("run = %d, %v; want 42", out, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the step ran %d times, want once", n)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
