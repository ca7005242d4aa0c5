package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

func noop(w *workflow.Workflow, _ int) (int, error) { return 0, nil }

// Definition errors are reported when the workflow is registered, with
// what to do; a start that cannot be encoded appends nothing.
func TestDefinitionErrors(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	ctx := context.Background()
	for _, c := range []struct {
		wf   *workflow.Definition[int, int]
		want string
	}{
		{workflow.Define("Bad Name", noop), "is not allowed"},
		{workflow.Define[int, int]("nil_fn", nil), "nil workflow function"},
		{workflow.Define("nil_seed", noop, workflow.WithContext[int](nil)), "nil seed"},
	} {
		_, err := shell.NewRuntime(store, shell.DefaultConfig(), c.wf)
		var de *core.DefinitionError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: NewRuntime error %v, want a DefinitionError saying %q", c.wf.Name(), err, c.want)
		}
		if _, err := workflow.Start(ctx, store, c.wf, 1); !errors.As(err, &de) {
			t.Fatalf("%s: Start error %v", c.wf.Name(), err)
		}
	}
	// A type string taken by another Go type.
	reg := codec.NewRegistry()
	codec.MustRegister[struct{ X int }](reg, "taken.step_started")
	if _, err := shell.NewRuntime(memstore.New(reg), shell.DefaultConfig(), workflow.Define("taken", noop)); err == nil || !strings.Contains(err.Error(), "taken.step_started") {
		t.Fatalf("a taken type string: %v", err)
	}
	// An input with no JSON encoding: nothing appended.
	ch := workflow.Define("chans", func(w *workflow.Workflow, _ chan int) (int, error) { return 0, nil })
	if _, err := workflow.Start(ctx, store, ch, make(chan int)); err == nil || !strings.Contains(err.Error(), "encoding the input") {
		t.Fatalf("Start of an unencodable input: %v", err)
	}
	if st, _ := store.Stats(ctx); st.MaxPosition != 0 {
		t.Fatalf("%d messages appended by failed starts", st.MaxPosition)
	}
}

// Asking for a context of the wrong type fails the run, saying so.
func TestContextOfTheWrongType(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf := workflow.Define("typed", func(w *workflow.Workflow, _ int) (int, error) {
		return len(workflow.Context[Visited](w).URLs), nil
	}, workflow.WithContext(func() int { return 0 }))
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, run); err == nil || !strings.Contains(err.Error(), "Context[workflow_test.Visited] called, but its context is a int") {
		t.Fatalf("error %v", err)
	}
}

// Wait ends with the context; a run nobody drives keeps running.
func TestWaitCancelled(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf := workflow.Define("undriven", noop)
	run, err := workflow.Start(context.Background(), store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := run.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := run.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v", err)
	}
	if info, err := run.Load(context.Background()); err != nil || info.Status != workflow.Running {
		t.Fatalf("loaded %+v %v", info, err)
	}
}

// workflow.Permanent is core's marker, the one error strategies share.
func TestPermanentIsCoresMarker(t *testing.T) {
	base := errors.New("card declined")
	err := workflow.Permanent(base)
	if !core.IsPermanent(err) || !errors.Is(err, base) || err.Error() != "card declined" {
		t.Fatalf("workflow.Permanent(%v) = %v: want core's marker, reading and matching as the error", base, err)
	}
	if workflow.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}
