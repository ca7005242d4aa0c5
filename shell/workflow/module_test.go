package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// A workflow registered inside a shell.Module (a Bundle holds core
// definitions only) runs as one registered on its own.
func TestAWorkflowInAModuleRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline, not a measure: a run never finished fails instead of hanging
	defer cancel()
	wf := workflow.Define("moduled", func(w *workflow.Workflow, n int) (int, error) { return n * 2, nil })
	store := memstore.New(codec.NewRegistry())
	rt, err := shell.NewRuntime(store, shell.DefaultConfig(), shell.Module{shell.Module{wf}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	run, err := workflow.Start(ctx, store, wf, 21)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Wait(ctx); out != 42 || err != nil {
		t.Fatalf("run: %v, %v", out, err)
	}
}
