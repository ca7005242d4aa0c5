package shell_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
)

// upkeepStore is a memstore that counts Optimize and Housekeep calls.
type upkeepStore struct {
	*memstore.Store
	optimized, housekept atomic.Int64
}

func (s *upkeepStore) Optimize(ctx context.Context) error {
	s.optimized.Add(1)
	return s.Store.Optimize(ctx)
}

func (s *upkeepStore) Housekeep(ctx context.Context) error {
	s.housekept.Add(1)
	return ctx.Err()
}

var _ driver.Housekeeper = (*upkeepStore)(nil)

func TestRuntimeOptimizesOnItsFirstTickThenHourly(t *testing.T) {
	store := &upkeepStore{Store: memstore.New(courseRegistry())}
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(clk)
	cfg.Workers = 1
	rt := startRuntime(t, store, cfg)
	eventually(t, "planner statistics refreshed when the runtime starts", func() bool { return store.optimized.Load() == 1 })
	clk.Advance(cfg.OptimizeInterval / 2)
	time.Sleep(20 * time.Millisecond)
	if n := store.optimized.Load(); n != 1 {
		t.Fatalf("%d refreshes half an interval after start, want 1", n)
	}
	clk.Advance(cfg.OptimizeInterval / 2)
	eventually(t, "second refresh an interval after the first", func() bool { return store.optimized.Load() == 2 })
	if enginehooks.RuntimeTasks(rt).Optimizer.Ticks() != 2 {
		t.Fatalf("optimizer ticks %d, want 2", enginehooks.RuntimeTasks(rt).Optimizer.Ticks())
	}
}

func TestRuntimeHousekeepsOnEveryHeartbeat(t *testing.T) {
	store := &upkeepStore{Store: memstore.New(courseRegistry())}
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(clk)
	cfg.Workers = 1
	startRuntime(t, store, cfg)
	for i := range 3 {
		time.Sleep(5 * time.Millisecond) // the reaper's timer is set
		clk.Advance(cfg.HeartbeatInterval)
		eventually(t, "the store housekept at the heartbeat", func() bool { return store.housekept.Load() == int64(i+1) })
	}
}
