package shell_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// lateRule is valid when scheduled (scheduling is not stored) and refused
// once due: a message scheduled before a rule it breaks was added.
type lateRule struct {
	Key        string `json:"key"`
	scheduling bool
}

func (p lateRule) Validate() error {
	if !p.scheduling {
		return codec.FieldError{Field: "key", Problem: "is refused by a newer rule"}
	}
	return nil
}

// timerLog is a clock that reports every timer duration asked of it.
type timerLog struct {
	*shell.SimClock
	asked chan time.Duration
}

func (c timerLog) NewTimer(d time.Duration) shell.Timer {
	select {
	case c.asked <- d:
	default: // a spinning loop must not block here
	}
	return c.SimClock.NewTimer(d)
}

// TestSchedulerWaitsPastSetAsideMessages: a due message the store sets
// aside (shell.UnpromotedError) stays due for good, so the scheduler,
// which sleeps until the earliest due time, would tick again at once,
// forever; it waits its interval instead, reporting the message at each
// tick.
func TestSchedulerWaitsPastSetAsideMessages(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[lateRule](reg, "test.late_rule")
	start := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	clk := timerLog{shell.NewSimClock(start), make(chan time.Duration, 100)}
	store := memstore.New(reg, memstore.WithClock(clk.Now))
	if _, err := store.Append(t.Context(), []core.Message{core.NewMessage(lateRule{Key: "k", scheduling: true}).At(start.Add(time.Minute))}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	rt, err := shell.NewRuntime(store, shell.Config{Clock: clk, CatchUpInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	task := enginehooks.RuntimeTasks(rt).Scheduler
	task.Start()
	defer task.Stop(context.Background())
	if d := <-clk.asked; d != time.Minute {
		t.Fatalf("first wait %v, want the minute until the message is due", d)
	}
	clk.Advance(time.Minute)
	if d := <-clk.asked; d != time.Hour {
		t.Fatalf("wait after a tick that set the message aside: %v, want the interval (an hour)", d)
	}
	if task.Ticks() != 1 {
		t.Fatalf("%d ticks, want 1", task.Ticks())
	}
	// The tick's error names the message.
	if err := task.RunOnce(t.Context()); !errors.Is(err, shell.ErrUnpromoted) {
		t.Fatalf("a tick: %v, want shell.ErrUnpromoted", err)
	}
}
