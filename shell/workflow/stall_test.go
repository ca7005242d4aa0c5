package workflow_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
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
