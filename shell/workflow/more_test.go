package workflow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// Visited is IndexPages' context.
type Visited struct {
	URLs []string `json:"visited"`
}

// The manual's IndexPages: a context seeded once, changed by each step,
// persisted after it and replayed on every re-entry; a step called again
// with the same arguments is the same step and does not run again.
func TestIndexPages(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	var mu sync.Mutex
	fetched := map[string]int{}
	wf := workflow.Define("index_pages", func(w *workflow.Workflow, urls []string) (int, error) {
		visited := workflow.Context[Visited](w)
		for _, u := range urls {
			if _, err := workflow.Step(w, "fetch", func(context.Context) (int, error) {
				mu.Lock()
				fetched[u]++
				mu.Unlock()
				visited.URLs = append(visited.URLs, u)
				return len(u), nil
			}, workflow.Args(u)); err != nil {
				return 0, err
			}
		}
		return len(visited.URLs), nil
	}, workflow.WithContext(func() Visited { return Visited{URLs: []string{}} }))
	runtime(t, store, wf)
	run, err := workflow.Start(context.Background(), store, wf, []string{"a.com", "bb.com", "a.com"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := wait(t, run)
	if err != nil || out != 2 {
		t.Fatalf("output %d, %v; want 2 pages", out, err)
	}
	if fetched["a.com"] != 1 || fetched["bb.com"] != 1 {
		t.Fatalf("fetched %v, want each page once", fetched)
	}
	sameEvents(t, events(t, store, "index_pages", run.ID),
		"workflow_started",
		`step_started fetch["a.com"] 1`,
		`step_complete fetch["a.com"] 1 5`,
		`context_updated 0 {"visited":["a.com"]}`,
		`step_started fetch["bb.com"] 1`,
		`step_complete fetch["bb.com"] 1 6`,
		`context_updated 1 {"visited":["a.com","bb.com"]}`,
		`workflow_complete 2`,
	)
	info, err := run.Load(context.Background())
	if err != nil || string(info.Context) != `{"visited":["a.com","bb.com"]}` {
		t.Fatalf("loaded context %s, %v", info.Context, err)
	}
}

// A run with a wait: WaitStarted, then the scheduler promotes WaitEnded
// and the run goes on.
func TestSleep(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	var notified atomic.Int64
	wf := workflow.Define("reminder", func(w *workflow.Workflow, _ struct{}) (string, error) {
		if _, err := workflow.Step(w, "notify_started", func(context.Context) (bool, error) { notified.Add(1); return true, nil }); err != nil {
			return "", err
		}
		workflow.Sleep(w, 150*time.Millisecond)
		return workflow.Step(w, "notify_finished", func(context.Context) (string, error) { notified.Add(1); return "done", nil })
	})
	runtime(t, store, wf)
	start := time.Now()
	run, err := workflow.Start(context.Background(), store, wf, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, run); err != nil || out != "done" {
		t.Fatalf("output %q, %v", out, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("the run ended after %v, before its sleep", d)
	}
	if notified.Load() != 2 {
		t.Fatalf("steps ran %d times, want 2", notified.Load())
	}
	sameEvents(t, events(t, store, "reminder", run.ID),
		"workflow_started",
		"step_started notify_started#1 1",
		"step_complete notify_started#1 1 true",
		"wait_started sleep:sleep#1",
		"wait_ended sleep:sleep#1 timed_out=true ",
		"step_started notify_finished#1 1",
		`step_complete notify_finished#1 1 "done"`,
		`workflow_complete "done"`,
	)
}

type Approval struct {
	By string `json:"by"`
}

func approvals() *workflow.Definition[time.Duration, string] {
	return workflow.Define("approvals", func(w *workflow.Workflow, timeout time.Duration) (string, error) {
		a, err := workflow.Receive[Approval](w, "approval", timeout)
		if errors.Is(err, workflow.ErrTimeout) {
			return "timed out", nil
		}
		if err != nil {
			return "", err
		}
		return "approved by " + a.By, nil
	})
}

// A run waiting for a signal resumes when it is sent, and times out when
// it is not.
func TestSignals(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf := approvals()
	runtime(t, store, wf)
	ctx := context.Background()

	waiting, err := workflow.Start(ctx, store, wf, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		info, err := waiting.Load(ctx)
		return err == nil && info.Current != nil && info.Current.Status == durable.OpWaiting
	})
	if err := waiting.Send(ctx, "approval", Approval{By: "ada"}); err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, waiting); err != nil || out != "approved by ada" {
		t.Fatalf("output %q, %v", out, err)
	}
	sameEvents(t, events(t, store, "approvals", waiting.ID),
		"workflow_started",
		"wait_started receive:approval#1",
		"signal_sent",
		`wait_ended receive:approval#1 timed_out=false {"by":"ada"}`,
		`workflow_complete "approved by ada"`,
	)

	// Sent before the run reaches its Receive: taken at once.
	early, err := workflow.Start(ctx, store, wf, time.Minute, workflow.WithID("early"))
	if err != nil {
		t.Fatal(err)
	}
	if err := workflow.Send(ctx, store, wf, "early", "approval", Approval{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, early); err != nil || out != "approved by bob" {
		t.Fatalf("early signal: output %q, %v", out, err)
	}

	timesOut, err := workflow.Start(ctx, store, wf, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, timesOut); err != nil || out != "timed out" {
		t.Fatalf("output %q, %v", out, err)
	}
	sameEvents(t, events(t, store, "approvals", timesOut.ID),
		"workflow_started",
		"wait_started receive:approval#1",
		"wait_ended receive:approval#1 timed_out=true ",
		`workflow_complete "timed out"`,
	)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Starting with the id of a run that exists starts nothing.
func TestIdempotentStart(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf, resolved, _ := greeting(0)
	runtime(t, store, wf)
	ctx := context.Background()
	for range 3 {
		run, err := workflow.Start(ctx, store, wf, "Ada", workflow.WithID("order-1"))
		if err != nil || run.ID != "order-1" {
			t.Fatalf("start: %v %v", run, err)
		}
		if _, err := wait(t, run); err != nil {
			t.Fatal(err)
		}
	}
	if got := events(t, store, "greeting_task", "order-1"); got[0] != "workflow_started" || strings.Count(strings.Join(got, "\n"), "workflow_started") != 1 {
		t.Fatalf("events %q", got)
	}
	if resolved.Load() != 1 {
		t.Fatalf("resolve_ip ran %d times", resolved.Load())
	}
	if _, err := workflow.Load(ctx, store, wf, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("Load of an unknown run: %v", err)
	}
}

// Cancel ends a waiting run; a second cancel says it ended.
func TestCancel(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	wf := approvals()
	runtime(t, store, wf)
	ctx := context.Background()
	run, err := workflow.Start(ctx, store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		info, err := run.Load(ctx)
		return err == nil && info.Current != nil
	})
	if err := run.Cancel(ctx, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, run); !errors.Is(err, workflow.ErrCancelled) || !strings.Contains(err.Error(), "no longer needed") {
		t.Fatalf("wait: %v", err)
	}
	if err := run.Cancel(ctx, "again"); !errors.Is(err, workflow.ErrFinished) {
		t.Fatalf("second cancel: %v", err)
	}
	// A signal after the end is recorded and nothing happens.
	if err := run.Send(ctx, "approval", Approval{By: "late"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	sameEvents(t, events(t, store, "approvals", run.ID), "workflow_started", "wait_started receive:approval#1", "workflow_cancelled", "signal_sent")
}

// A run whose code changed under it (a step renamed) fails with a
// NonDeterminismError naming the step, and the renamed step never runs.
func TestNonDeterminism(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	ctx := context.Background()
	var ran atomic.Int64
	v1 := workflow.Define("orders", func(w *workflow.Workflow, _ int) (int, error) {
		if _, err := workflow.Step(w, "reserve", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return 0, err
		}
		if _, err := workflow.Receive[int](w, "go", 0); err != nil {
			return 0, err
		}
		return 1, nil
	})
	v2 := workflow.Define("orders", func(w *workflow.Workflow, _ int) (int, error) {
		if _, err := workflow.Step(w, "reserve_stock", func(context.Context) (int, error) { ran.Add(1); return 1, nil }); err != nil {
			return 0, err
		}
		return 1, nil
	})
	rt1, err := shellRuntime(store, v1)
	if err != nil {
		t.Fatal(err)
	}
	run, err := workflow.Start(ctx, store, v1, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		info, err := run.Load(ctx)
		return err == nil && info.Current != nil && info.Current.Kind == durable.KindReceive
	})
	rt1.Stop(ctx)
	runtime(t, store, v2)
	if err := workflow.Send(ctx, store, v2, run.ID, "go", 1); err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, workflow.Attach(store, v2, run.ID))
	var re *workflow.RunError
	if !errors.As(err, &re) || re.Failure.Type != "*durable.NonDeterminismError" || !strings.Contains(re.Failure.Message, `step "reserve" (key reserve#1)`) || !strings.Contains(re.Failure.Message, `step "reserve_stock"`) {
		t.Fatalf("error %v", err)
	}
	// The mismatch itself, rebuilt from the log, for errors.As.
	var nd *durable.NonDeterminismError
	if !errors.As(err, &nd) || nd.Seq != 0 || nd.RunID != run.ID || nd.Recorded.Name != "reserve" || nd.Called.Name != "reserve_stock" || nd.Called.Kind != durable.KindStep {
		t.Fatalf("errors.As(%v, *durable.NonDeterminismError): %+v", err, nd)
	}
	if ran.Load() != 0 {
		t.Fatal("the renamed step ran")
	}
}

// A receive's timeout promoted after the signal came, while the next step
// runs, is no conflict for that step's outcome: the step runs once. (The
// signal's delivery withdraws the timeout from the schedule; one promoted
// before that withdrawal committed arrives all the same, which the step
// appends here itself, as that promotion would.)
func TestLateTimeoutDoesNotRerunAStep(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	var ran atomic.Int64
	wf := workflow.Define("late_timeout", func(w *workflow.Workflow, _ int) (int, error) {
		if _, err := workflow.Receive[int](w, "go", time.Hour); err != nil {
			return 0, err
		}
		id := w.ID()
		return workflow.Step(w, "slow", func(ctx context.Context) (int, error) {
			ran.Add(1)
			late := core.NewMessage(durable.WaitEnded{WorkflowID: id, Seq: 0, Key: "receive:go#1", TimedOut: true})
			late.Type = "late_timeout.wait_ended"
			if _, err := store.Append(ctx, []core.Message{late}, shell.AppendOptions{}); err != nil {
				return 0, err
			}
			time.Sleep(100 * time.Millisecond) // the run's partition has news meanwhile
			return 7, nil
		})
	})
	runtime(t, store, wf)
	ctx := context.Background()
	run, err := workflow.Start(ctx, store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The signal comes while the receive waits (one there when it begins
	// is taken at once, and schedules no timeout).
	waitFor(t, func() bool {
		info, err := run.Load(ctx)
		return err == nil && info.Current != nil && info.Current.Status == durable.OpWaiting
	})
	if err := run.Send(ctx, "go", 1); err != nil {
		t.Fatal(err)
	}
	if out, err := wait(t, run); err != nil || out != 7 {
		t.Fatalf("output %d, %v", out, err)
	}
	if ran.Load() != 1 {
		t.Fatalf("the step ran %d times, want once", ran.Load())
	}
	got := events(t, store, "late_timeout", run.ID)
	if !slices.Contains(got, "wait_ended receive:go#1 timed_out=true ") {
		t.Fatalf("the timeout was not promoted during the step: %q", got)
	}
}

// A sleeping run outlives its runtime: stopped during the sleep, another
// runtime picks the run up when the sleep ends. Stats counts the runs.
func TestSleepAcrossRuntimes(t *testing.T) {
	store := memstore.New(codec.NewRegistry())
	ctx := context.Background()
	var ran atomic.Int64
	wf := workflow.Define("nap", func(w *workflow.Workflow, _ int) (int, error) {
		workflow.Sleep(w, 200*time.Millisecond)
		return workflow.Step(w, "wake", func(context.Context) (int, error) { ran.Add(1); return 1, nil })
	})
	first, err := shellRuntime(store, wf)
	if err != nil {
		t.Fatal(err)
	}
	run, err := workflow.Start(ctx, store, wf, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		info, err := run.Load(ctx)
		return err == nil && info.Current != nil && info.Current.Status == durable.OpWaiting
	})
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := workflow.Stats(ctx, store, "nap"); err != nil || st[0] != (workflow.Counts{Workflow: "nap", Running: 1, Total: 1}) {
		t.Fatalf("stats %+v, %v", st, err)
	}
	time.Sleep(250 * time.Millisecond) // the sleep ends with no runtime running
	runtime(t, store, wf)
	if out, err := wait(t, run); err != nil || out != 1 || ran.Load() != 1 {
		t.Fatalf("output %d, %v, ran %d", out, err, ran.Load())
	}
	if st, err := workflow.Stats(ctx, store, "nap"); err != nil || st[0] != (workflow.Counts{Workflow: "nap", Complete: 1, Total: 1}) {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// Retries wait on the store's clock through scheduled messages: with a
// simulated clock nothing is retried until the clock reaches the back-off,
// however long real time goes by; each retry waits twice as long.
func TestRetryBackoffIsScheduled(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(codec.NewRegistry(), memstore.WithClock(clk.Now))
	var attempts atomic.Int64
	wf := workflow.Define("flaky", func(w *workflow.Workflow, _ int) (int, error) {
		return workflow.Step(w, "call", func(context.Context) (int, error) {
			if attempts.Add(1) < 3 {
				return 0, errors.New("flaky")
			}
			return 3, nil
		}, workflow.Retries(5), workflow.Backoff(time.Minute, time.Hour))
	}, workflow.Clock(clk.Now))
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
	time.Sleep(50 * time.Millisecond)
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts before the clock moved, want 1", n)
	}
	next, ok, _ := store.NextScheduled(ctx)
	if !ok || !next.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("the retry is scheduled for %v (%v), want in 1 min", next, ok)
	}
	clk.Advance(time.Minute)
	settle()
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d attempts after 1 min, want 2", n)
	}
	if next, _, _ := store.NextScheduled(ctx); !next.Equal(clk.Now().Add(2 * time.Minute)) {
		t.Fatalf("the second retry is scheduled for %v, want in 2 min", next)
	}
	clk.Advance(2 * time.Minute)
	if out, err := wait(t, run); err != nil || out != 3 || attempts.Load() != 3 {
		t.Fatalf("output %d, %v after %d attempts", out, err, attempts.Load())
	}
}

// TestWorkflowHooks: a workflow's hooks (WithHooks) are called by the
// router's operator commands, as a definition's are.
func TestWorkflowHooks(t *testing.T) {
	ctx := context.Background()
	var heard []string
	wf := workflow.Define("hooked_task", func(w *workflow.Workflow, in string) (string, error) { return in, nil },
		workflow.WithHooks(core.Hooks{
			OnStop:  func(_ context.Context, reason string) error { heard = append(heard, "stop:"+reason); return nil },
			OnReset: func(context.Context) error { heard = append(heard, "reset"); return nil },
			OnStart: func(context.Context) error { heard = append(heard, "start"); return nil },
		}))
	store := memstore.New(codec.NewRegistry())
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { return rt.Stop(ctx, wf, "deploy") },
		func() error { return rt.Reset(ctx, wf) },
		func() error { return rt.Start(ctx, wf) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"stop:deploy", "reset", "start"}; !slices.Equal(heard, want) {
		t.Fatalf("heard %v, want %v", heard, want)
	}
}
