package workflow_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// stores are the stores the workflow tests run on twice.
var stores = []struct {
	name string
	open func(t *testing.T) shell.Store
}{
	{"memstore", func(t *testing.T) shell.Store { return memstore.New(codec.NewRegistry()) }},
	{"sqlitestore", func(t *testing.T) shell.Store {
		t.Helper()
		store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "wf.db"), sqlitestore.Options{Registry: codec.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	}},
}

// waiting waits until run waits at its receive number seq (from 0).
func waiting[In, Out any](t *testing.T, run *workflow.Run[In, Out], seq int) {
	t.Helper()
	waitFor(t, func() bool {
		info, err := run.Load(context.Background())
		return err == nil && info.Current != nil && info.Current.Seq == seq && info.Current.Status == durable.OpWaiting
	})
}

func scheduled(t *testing.T, store shell.Store) int64 {
	t.Helper()
	st, err := store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Scheduled
}

// A timed Receive whose signal comes while it waits withdraws its timeout
// from the schedule in the transaction that records the signal: nothing is
// left to promote (issue 26).
func TestReceiveWithdrawsItsTimeoutWhenTheSignalComes(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			store := s.open(t)
			ctx := context.Background()
			wf := approvals()
			runtime(t, store, wf)
			run, err := workflow.Start(ctx, store, wf, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			waiting(t, run, 0)
			if n := scheduled(t, store); n != 1 {
				t.Fatalf("%d scheduled while the receive waits, want its timeout", n)
			}
			if err := run.Send(ctx, "approval", Approval{By: "ada"}); err != nil {
				t.Fatal(err)
			}
			if out, err := wait(t, run); err != nil || out != "approved by ada" {
				t.Fatalf("output %q, %v", out, err)
			}
			if n := scheduled(t, store); n != 0 {
				t.Fatalf("%d messages left in the schedule: the timeout of a receive whose signal came while it waited", n)
			}
			sameEvents(t, events(t, store, "approvals", run.ID),
				"workflow_started",
				"wait_started receive:approval#1",
				"signal_sent",
				`wait_ended receive:approval#1 timed_out=false {"by":"ada"}`,
				`workflow_complete "approved by ada"`,
			)
		})
	}
}

// A timeout that fired first ends the receive (ErrTimeout); a signal sent
// afterwards is not lost: it waits for the run's next Receive of its name,
// as a signal sent before any receive does.
func TestATimeoutFirstThenTheSignal(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			store := s.open(t)
			ctx := context.Background()
			wf := workflow.Define("late_signal", func(w *workflow.Workflow, _ int) (string, error) {
				_, err := workflow.Receive[Approval](w, "approval", 50*time.Millisecond)
				if !errors.Is(err, workflow.ErrTimeout) {
					return "", errors.New("the first receive did not time out")
				}
				a, err := workflow.Receive[Approval](w, "approval", 0)
				if err != nil {
					return "", err
				}
				return "timed out, then approved by " + a.By, nil
			})
			runtime(t, store, wf)
			run, err := workflow.Start(ctx, store, wf, 0)
			if err != nil {
				t.Fatal(err)
			}
			waiting(t, run, 1)
			if n := scheduled(t, store); n != 0 {
				t.Fatalf("%d scheduled after the timeout fired, want none", n)
			}
			if err := run.Send(ctx, "approval", Approval{By: "ada"}); err != nil {
				t.Fatal(err)
			}
			if out, err := wait(t, run); err != nil || out != "timed out, then approved by ada" {
				t.Fatalf("output %q, %v", out, err)
			}
			sameEvents(t, events(t, store, "late_signal", run.ID),
				"workflow_started",
				"wait_started receive:approval#1",
				"wait_ended receive:approval#1 timed_out=true ",
				"wait_started receive:approval#2",
				"signal_sent",
				`wait_ended receive:approval#2 timed_out=false {"by":"ada"}`,
				`workflow_complete "timed out, then approved by ada"`,
			)
		})
	}
}
