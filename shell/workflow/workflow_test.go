package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// runtime starts a runtime with two workers driving reactors on store,
// polling every 20 ms.
func runtime(t *testing.T, store shell.Store, reactors ...any) *shell.Runtime {
	t.Helper()
	cfg := shell.DefaultConfig()
	cfg.CatchUpInterval = 20 * time.Millisecond
	return runtimeWith(t, store, cfg, reactors...)
}

// runtimeWith starts a runtime of cfg driving reactors on store, stopped
// when the test ends.
func runtimeWith(t *testing.T, store shell.Store, cfg shell.Config, reactors ...any) *shell.Runtime {
	t.Helper()
	rt, err := shell.NewRuntime(store, cfg, reactors...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	return rt
}

func wait[In, Out any](t *testing.T, run *workflow.Run[In, Out]) (Out, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := run.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run %s did not end", run.ID)
	}
	return out, err
}

// events renders a run's lifecycle events, in log order, as
// "suffix key attempt" lines.
func events(t *testing.T, store shell.Store, name, id string) []string {
	t.Helper()
	res, err := store.ReadPartition(context.Background(), map[string]string{"workflow_id": id}, durable.TypesOf(name).All(), shell.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range res.Messages {
		s := strings.TrimPrefix(m.Type, name+".")
		switch e := m.Payload.(type) {
		case durable.StepStarted:
			s += fmt.Sprintf(" %s %d", e.Key, e.Attempt)
		case durable.StepComplete:
			s += fmt.Sprintf(" %s %d %s", e.Key, e.Attempt, e.Result)
		case durable.StepFailed:
			s += fmt.Sprintf(" %s %d %s retry=%v", e.Key, e.Attempt, e.Error, e.RetryAt != nil)
		case durable.ContextUpdated:
			s += fmt.Sprintf(" %d %s", e.Seq, e.Context)
		case durable.WaitStarted:
			s += " " + e.Key
		case durable.WaitEnded:
			s += fmt.Sprintf(" %s timed_out=%v %s", e.Key, e.TimedOut, e.Payload)
		case durable.WorkflowComplete:
			s += " " + string(e.Output)
		case durable.WorkflowFailed:
			s += fmt.Sprintf(" step=%s %s: %s", e.Step, e.ErrorType, e.Error)
		}
		out = append(out, s)
	}
	return out
}

func sameEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// greeting is the manual's GreetingTask: two steps, the second retried.
func greeting(geolocateFailures int) (*workflow.Definition[string, string], *atomic.Int64, *atomic.Int64) {
	var resolved, located atomic.Int64
	wf := workflow.Define("greeting_task", func(w *workflow.Workflow, name string) (string, error) {
		ip, err := workflow.Step(w, "resolve_ip", func(context.Context) (string, error) {
			resolved.Add(1)
			return "10.0.0.1", nil
		})
		if err != nil {
			return "", err
		}
		location, err := workflow.Step(w, "geolocate", func(context.Context) (string, error) {
			if located.Add(1) <= int64(geolocateFailures) {
				return "", errors.New("geolocator unavailable")
			}
			return "Lisbon", nil
		}, workflow.Args(ip), workflow.Retries(3), workflow.Backoff(5*time.Millisecond, 20*time.Millisecond))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Hello %s, your IP is %s and its location is %s", name, ip, location), nil
	})
	return wf, &resolved, &located
}

func TestGreetingTask(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf, resolved, located := greeting(2)
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, "Ada")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(run.ID, "workflow-") {
		t.Fatalf("run id %q, want workflow-<uuid>", run.ID)
	}
	out, err := wait(t, run)
	if err != nil || out != "Hello Ada, your IP is 10.0.0.1 and its location is Lisbon" {
		t.Fatalf("output %q, %v", out, err)
	}
	if resolved.Load() != 1 || located.Load() != 3 {
		t.Fatalf("resolve_ip ran %d times, geolocate %d; want 1 and 3", resolved.Load(), located.Load())
	}
	sameEvents(t, events(t, store, "greeting_task", run.ID),
		"workflow_started",
		"step_started resolve_ip#1 1",
		`step_complete resolve_ip#1 1 "10.0.0.1"`,
		`step_started geolocate["10.0.0.1"] 1`,
		`step_failed geolocate["10.0.0.1"] 1 geolocator unavailable retry=true`,
		`step_started geolocate["10.0.0.1"] 2`,
		`step_failed geolocate["10.0.0.1"] 2 geolocator unavailable retry=true`,
		`step_started geolocate["10.0.0.1"] 3`,
		`step_complete geolocate["10.0.0.1"] 3 "Lisbon"`,
		`workflow_complete "Hello Ada, your IP is 10.0.0.1 and its location is Lisbon"`,
	)
	info, err := run.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != workflow.Complete || info.Output != out || len(info.Steps) != 2 || info.Steps[1].Attempts != 3 {
		t.Fatalf("loaded %+v", info)
	}
}

// Retries(3) is four attempts at most; then the step's error reaches the
// function, which fails the run with it.
func TestRetriesExhausted(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf, _, located := greeting(100)
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, "Ada")
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, run)
	var re *workflow.RunError
	if !errors.As(err, &re) || re.Step != "geolocate" || re.Failure.Type != "*errors.errorString" {
		t.Fatalf("error %#v, want a *RunError naming geolocate", err)
	}
	if located.Load() != 4 {
		t.Fatalf("geolocate ran %d times, want 4 (1 + 3 retries)", located.Load())
	}
	got := events(t, store, "greeting_task", run.ID)
	if n := len(got); got[n-2] != `step_failed geolocate["10.0.0.1"] 4 geolocator unavailable retry=false` ||
		got[n-1] != "workflow_failed step=geolocate *errors.errorString: workflow step geolocate failed after 4 attempt(s): geolocator unavailable" {
		t.Fatalf("last events %q", got[n-2:])
	}
}

// A failing step without retries fails the run on its first failure; a
// panic is recorded with its stack.
func TestFailingStep(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	var charged, after atomic.Int64
	wf := workflow.Define("charge", func(w *workflow.Workflow, amount int) (int, error) {
		if _, err := workflow.Step(w, "charge", func(context.Context) (int, error) {
			charged.Add(1)
			return 0, fmt.Errorf("card declined for %d", amount)
		}); err != nil {
			return 0, err
		}
		after.Add(1)
		return amount, nil
	})
	panics := workflow.Define("panics", func(w *workflow.Workflow, _ struct{}) (int, error) {
		return workflow.Step(w, "boom", func(context.Context) (int, error) { panic("boom") })
	})
	runtime(t, store, wf, panics)
	run, err := workflow.Start(context.Background(), store, wf, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, run); err == nil || !strings.Contains(err.Error(), "card declined for 5") {
		t.Fatalf("error %v", err)
	}
	sameEvents(t, events(t, store, "charge", run.ID),
		"workflow_started",
		"step_started charge#1 1",
		"step_failed charge#1 1 card declined for 5 retry=false",
		"workflow_failed step=charge *errors.errorString: workflow step charge failed after 1 attempt(s): card declined for 5",
	)
	if charged.Load() != 1 || after.Load() != 0 {
		t.Fatalf("charged %d, after %d", charged.Load(), after.Load())
	}
	prun, err := workflow.Start(context.Background(), store, panics, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, prun)
	info, err := prun.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := info.Steps[0].Failure; f == nil || f.Type != "panic" || !strings.Contains(f.Stack, "workflow_test.go") {
		t.Fatalf("panic recorded as %+v", f)
	}
}

func shellRuntime(store shell.Store, reactors ...any) (*shell.Runtime, error) {
	cfg := shell.DefaultConfig()
	cfg.CatchUpInterval = 20 * time.Millisecond
	rt, err := shell.NewRuntime(store, cfg, reactors...)
	if err != nil {
		return nil, err
	}
	return rt, rt.Start(context.Background())
}
