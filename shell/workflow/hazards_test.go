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

// Step, Sleep or Receive called inside a step fails the run saying that a
// step cannot contain steps: not a panic "{}" then a non-determinism error
// telling the user to redeploy.
func TestAStepCannotContainSteps(t *testing.T) {
	for _, c := range []struct {
		name  string
		inner func(w *workflow.Workflow)
		want  string
	}{
		{"step_in_step", func(w *workflow.Workflow) {
			workflow.Step(w, "inner", func(context.Context) (int, error) { return 1, nil })
		}, `step "inner" was called inside step "outer"`},
		{"sleep_in_step", func(w *workflow.Workflow) { workflow.Sleep(w, time.Millisecond) }, `sleep "sleep" was called inside step "outer"`},
		{"receive_in_step", func(w *workflow.Workflow) { workflow.Receive[int](w, "go", 0) }, `receive "go" was called inside step "outer"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New(codec.NewRegistry())
			var ran atomic.Int64
			wf := workflow.Define(c.name, func(w *workflow.Workflow, _ int) (int, error) {
				return workflow.Step(w, "outer", func(context.Context) (int, error) {
					ran.Add(1)
					c.inner(w)
					return 1, nil
				}, workflow.Retries(3), workflow.Backoff(time.Millisecond, time.Millisecond))
			})
			runtime(t, store, wf)
			run, err := workflow.Start(context.Background(), store, wf, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = wait(t, run)
			if err == nil || !strings.Contains(err.Error(), "a step cannot contain steps") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying a step cannot contain steps (%s)", err, c.want)
			}
			if !errors.Is(err, workflow.ErrStepInStep) {
				t.Fatalf("errors.Is(%v, ErrStepInStep) is false", err)
			}
			var nd *durable.NonDeterminismError
			if errors.As(err, &nd) || strings.Contains(err.Error(), "deterministic") {
				t.Fatalf("reported as non-determinism: %v", err)
			}
			if ran.Load() != 1 {
				t.Fatalf("the step ran %d times: a programming error is not retried", ran.Load())
			}
			if got := events(t, store, c.name, run.ID); slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "step_failed") }) {
				t.Fatalf("recorded as a step failure: %q", got)
			}
		})
	}
}

// A nil step function fails the run at once, as the programming error it
// is: it is not retried as a transient failure.
func TestNilStepFunctionFailsTheRun(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf := workflow.Define("nil_step", func(w *workflow.Workflow, _ int) (int, error) {
		return workflow.Step[int](w, "charge", nil, workflow.Retries(3), workflow.Backoff(time.Millisecond, time.Millisecond))
	})
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, run); !errors.Is(err, workflow.ErrNilStep) || !strings.Contains(err.Error(), `step "charge"`) {
		t.Fatalf("error %v", err)
	}
	sameEvents(t, events(t, store, "nil_step", run.ID),
		"workflow_started",
		`workflow_failed step= *fmt.wrapError: workflow: a step with a nil function: workflow nil_step: step "charge"`,
	)
}

// Send to a run never started returns ErrNotFound and writes nothing: a
// run started later with that id does not receive it.
func TestSendToARunNeverStarted(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	ctx := context.Background()
	wf := approvals()
	if err := workflow.Send(ctx, store, wf, "later", "approval", Approval{By: "mallory"}); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("Send to a run never started: %v, want ErrNotFound", err)
	}
	if st, _ := store.Stats(ctx); st.MaxPosition != 0 {
		t.Fatalf("%d messages written", st.MaxPosition)
	}
	runtime(t, store, wf)
	run, err := workflow.Start(ctx, store, wf, 50*time.Millisecond, workflow.WithID("later"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, run); err != nil || out != "timed out" {
		t.Fatalf("the later run: %q, %v; want it to time out, with no signal", out, err)
	}
}

type cardDeclined struct{ Code string }

func (e *cardDeclined) Error() string { return "card declined: " + e.Code }

// A run failed by a step's failure gives its *StepError to errors.As:
// the step, its attempts, the Go type and the message of its error.
func TestRunErrorUnwrapsTheStepError(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf := workflow.Define("charge_typed", func(w *workflow.Workflow, _ int) (int, error) {
		_, err := workflow.Step(w, "charge", func(context.Context) (int, error) {
			return 0, &cardDeclined{Code: "51"}
		}, workflow.Retries(1), workflow.Backoff(time.Millisecond, time.Millisecond))
		return 0, fmt.Errorf("charging: %w", err)
	})
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, run)
	var se *workflow.StepError
	if !errors.As(err, &se) {
		t.Fatalf("errors.As(%v, *StepError) is false", err)
	}
	if se.Step != "charge" || se.Attempts != 2 || se.Type != "*workflow_test.cardDeclined" || se.Message != "card declined: 51" {
		t.Fatalf("step error %+v", se)
	}
}

// A timed Receive whose signal was there when it began leaves no timeout
// in the schedule.
func TestReceiveWithItsSignalSchedulesNoTimeout(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	ctx := context.Background()
	wf := approvals()
	run, err := workflow.Start(ctx, store, wf, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Send(ctx, "approval", Approval{By: "ada"}); err != nil {
		t.Fatal(err)
	}
	runtime(t, store, wf)
	if out, err := wait(t, run); err != nil || out != "approved by ada" {
		t.Fatalf("output %q, %v", out, err)
	}
	if st, _ := store.Stats(ctx); st.Scheduled != 0 {
		t.Fatalf("%d messages left in the schedule (the timeout of a receive that had its signal)", st.Scheduled)
	}
}

type attempts struct {
	Seen []string `json:"seen"`
}

// The choice pinned: what a failed attempt changed in the context is
// dropped; the next attempt starts from the context as it was before the
// step, and only a successful attempt's changes are persisted.
func TestAFailedAttemptsContextChangesAreDropped(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	var n atomic.Int64
	wf := workflow.Define("ctx_attempts", func(w *workflow.Workflow, _ int) ([]string, error) {
		_, err := workflow.Step(w, "try", func(context.Context) (int, error) {
			c := workflow.Context[attempts](w)
			c.Seen = append(c.Seen, fmt.Sprintf("attempt %d", n.Add(1)))
			if n.Load() == 1 {
				return 0, errors.New("flaky")
			}
			return 1, nil
		}, workflow.Retries(1), workflow.Backoff(time.Millisecond, time.Millisecond))
		return workflow.Context[attempts](w).Seen, err
	}, workflow.WithContext(func() attempts { return attempts{} }))
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := wait(t, run)
	if err != nil || !slices.Equal(out, []string{"attempt 2"}) {
		t.Fatalf("output %q, %v: want only the successful attempt's change", out, err)
	}
	info, err := run.Load(context.Background())
	if err != nil || string(info.Context) != `{"seen":["attempt 2"]}` {
		t.Fatalf("persisted context %s, %v", info.Context, err)
	}
}

// One clock: without workflow.Clock, a workflow dates its retries and
// sleeps by the clock of the runtime that handles it, so a simulated clock
// given to the store and the runtime drives the workflow too.
func TestWorkflowTakesTheRuntimesClock(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(codec.NewRegistry(), memstore.WithClock(clk.Now))
	var attempts atomic.Int64
	wf := workflow.Define("sim_clock", func(w *workflow.Workflow, _ int) (int, error) {
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
	cfg := shell.DefaultConfig()
	cfg.Clock = clk
	rt, err := shell.NewRuntime(store, cfg, wf)
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
	if next, ok, _ := store.NextScheduled(ctx); !ok || !next.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("the retry is scheduled for %v (%v), want %v: the runtime's clock plus the back-off", next, ok, clk.Now().Add(time.Minute))
	}
	clk.Advance(time.Minute)
	settle()
	if next, ok, _ := store.NextScheduled(ctx); !ok || !next.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("the sleep ends at %v (%v), want %v", next, ok, clk.Now().Add(time.Hour))
	}
	clk.Advance(time.Hour)
	if out, err := wait(t, run); err != nil || out != 2 {
		t.Fatalf("output %d, %v", out, err)
	}
}

// A step's error of a type registered with WithStepError comes back as
// that type (errors.As), rebuilt from the log: in the workflow function,
// live and on replay, and from the *RunError Wait returns.
func TestRegisteredStepErrorTypes(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	charge := func(w *workflow.Workflow) error {
		_, err := workflow.Step(w, "charge", func(context.Context) (int, error) {
			return 0, workflow.Permanent(fmt.Errorf("gateway: %w", &cardDeclined{Code: "51"}))
		})
		return err
	}
	compensates := workflow.Define("compensates", func(w *workflow.Workflow, _ int) (string, error) {
		err := charge(w)
		var cd *cardDeclined
		if !errors.As(err, &cd) {
			return "", fmt.Errorf("not a *cardDeclined: %w", err)
		}
		// A later step: the next handling replays the failed charge, and
		// must rebuild the same error to reach it.
		if _, err := workflow.Step(w, "notify", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return "", err
		}
		return "declined " + cd.Code, nil
	}, workflow.WithStepError[*cardDeclined]())
	fails := workflow.Define("fails_typed", func(w *workflow.Workflow, _ int) (int, error) {
		return 0, charge(w)
	}, workflow.WithStepError[*cardDeclined]())
	runtime(t, store, compensates, fails)
	ctx := context.Background()
	run, err := workflow.Start(ctx, store, compensates, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, run); err != nil || out != "declined 51" {
		t.Fatalf("output %q, %v", out, err)
	}
	frun, err := workflow.Start(ctx, store, fails, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, frun)
	var cd *cardDeclined
	var se *workflow.StepError
	if !errors.As(err, &cd) || cd.Code != "51" || !errors.As(err, &se) || se.Step != "charge" || se.Message != "gateway: card declined: 51" {
		t.Fatalf("errors.As(%v): %+v %+v", err, cd, se)
	}
}
