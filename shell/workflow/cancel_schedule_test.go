package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
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
