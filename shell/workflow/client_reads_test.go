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

func (s *typesRead) ReadPartition(ctx context.Context, p map[string]string, types []string, opts shell.ReadOptions) (shell.ReadResult, error) {
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
