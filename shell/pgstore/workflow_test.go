package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// TestWorkflowWaitOnPostgres: runs started and waited on through a
// PostgreSQL store end with their outputs, their waiters woken by the
// ends the store's notifications announce.
func TestWorkflowWaitOnPostgres(t *testing.T) {
	doubler := workflow.Define("doubler", func(w *workflow.Workflow, n int) (int, error) {
		return workflow.Step(w, "double", func(context.Context) (int, error) { return 2 * n, nil })
	})
	s := open(t, pgstore.Options{Registry: codec.NewRegistry()})
	rt, err := shell.NewRuntime(s, shell.Config{Workers: 2, Logger: slog.New(slog.DiscardHandler)}, doubler)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := workflow.Start(ctx, s, doubler, i, workflow.WithID(fmt.Sprint("run-", i)))
			if err != nil {
				t.Error(err)
				return
			}
			if out, err := run.Wait(ctx); err != nil || out != 2*i {
				t.Errorf("run %d: %d, %v; want %d", i, out, err, 2*i)
			}
		}()
	}
	wg.Wait()
}
