package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// A cancelled run leaves nothing in the schedule: a sleep's end and a
// step's retry, each scheduled an hour ahead, are withdrawn in the
// transaction that records the cancellation (and so never promoted into
// the log of a run that ended).
func TestCancelWithdrawsWhatTheRunScheduled(t *testing.T) {
	sleeper := workflow.Define("sleeper", func(w *workflow.Workflow, _ int) (int, error) {
		workflow.Sleep(w, time.Hour)
		return 1, nil
	})
	retrier := workflow.Define("retrier", func(w *workflow.Workflow, _ int) (int, error) {
		return workflow.Step(w, "flaky", func(context.Context) (int, error) { return 0, errors.New("down") },
			workflow.Retries(3), workflow.Backoff(time.Hour, time.Hour))
	})
	for _, wf := range []*workflow.Definition[int, int]{sleeper, retrier} {
		t.Run(wf.Name(), func(t *testing.T) {
			store := memstore.New(codec.NewRegistry())
			runtime(t, store, wf)
			ctx := context.Background()
			run, err := workflow.Start(ctx, store, wf, 0)
			if err != nil {
				t.Fatal(err)
			}
			scheduled := func() int {
				msgs, err := store.ReadScheduled(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				return len(msgs)
			}
			waitFor(t, func() bool { return scheduled() == 1 })
			if err := run.Cancel(ctx, "not needed"); err != nil {
				t.Fatal(err)
			}
			if n := scheduled(); n != 0 {
				t.Fatalf("%d messages left in the schedule of the cancelled run, want 0", n)
			}
		})
	}
}

// typesRead is a memory store that records the types of every partition
// read.
type typesRead struct {
	*memstore.Store
	mu    sync.Mutex
	reads [][]string
}

func (s *typesRead) ReadPartition(ctx context.Context, p core.Partition, types []string, opts shell.ReadOptions) (shell.ReadResult, error) {
	s.mu.Lock()
	s.reads = append(s.reads, slices.Clone(types))
	s.mu.Unlock()
	return s.Store.ReadPartition(ctx, p, types, opts)
}

// Wait reads a run's start and end, not its history, to tell that it
// completed and with what output (a waiter among many looks again at
// every run's end: each look reads two events).
func TestWaitReadsStartAndEnd(t *testing.T) {
	steps := workflow.Define("steps", func(w *workflow.Workflow, n int) (int, error) {
		for i := range 5 {
			if _, err := workflow.Step(w, fmt.Sprint("s", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return 0, err
			}
		}
		return n * 2, nil
	})
	s := &typesRead{Store: memstore.New(codec.NewRegistry())}
	runtime(t, s, steps)
	ctx := context.Background()
	run, err := workflow.Start(ctx, s, steps, 21)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { info, err := run.Load(ctx); return err == nil && info.Status.Terminal() })
	s.mu.Lock()
	s.reads = nil
	s.mu.Unlock()
	out, err := run.Wait(ctx)
	if err != nil || out != 42 {
		t.Fatalf("Wait: %d, %v; want 42", out, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, types := range s.reads {
		if len(types) != 4 {
			t.Fatalf("Wait read the run's types %v, want its start and its three ends", types)
		}
	}
	if len(s.reads) != 1 {
		t.Fatalf("Wait read %d times, want once", len(s.reads))
	}
}

// Runs waited on at once cost one read of their own when they end, not one
// each time any of them ends: 30 waiters whose runs end one after another
// read their runs about twice each (the first look and the one after their
// end), where waking every waiter at every end read them 30·31/2 times.
// Each still gets its own run's output, and a waiter whose context ends
// returns its error and leaves.
func TestManyWaitersReadTheirOwnRuns(t *testing.T) {
	gated := workflow.Define("gated", func(w *workflow.Workflow, n int) (int, error) {
		signal, err := workflow.Receive[int](w, "go", time.Hour)
		if err != nil {
			return 0, err
		}
		return n*100 + signal, nil
	})
	s := &typesRead{Store: memstore.New(codec.NewRegistry())}
	runtime(t, s, gated)
	ctx := context.Background()
	const n = 30
	runs := make([]*workflow.Run[int, int], n)
	for i := range runs {
		run, err := workflow.Start(ctx, s, gated, i)
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = run
	}
	waitFor(t, func() bool { // every run waits for its signal
		for _, run := range runs {
			if info, err := run.Load(ctx); err != nil || info.Current == nil {
				return false
			}
		}
		return true
	})
	s.mu.Lock()
	s.reads = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	outs := make([]int, n)
	errs := make([]error, n)
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = run.Wait(ctx)
		}()
	}
	cancelled, cancel := context.WithCancel(ctx)
	lone := make(chan error, 1)
	go func() { _, err := runs[0].Wait(cancelled); lone <- err }()
	cancel()
	if err := <-lone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: %v, want context.Canceled", err)
	}
	for i, run := range runs {
		if err := run.Send(ctx, "go", i); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // ends one after another
	}
	wg.Wait()
	for i := range runs {
		if errs[i] != nil || outs[i] != i*101 {
			t.Fatalf("run %d: %d, %v; want %d", i, outs[i], errs[i], i*101)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reads) > 3*n+2 {
		t.Fatalf("%d waiters read their runs %d times, want about %d", n, len(s.reads), 2*n)
	}
}
