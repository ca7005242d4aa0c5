package shell_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
)

// warmStore is a memstore that is a driver.Warmer: it records the
// warm-ups asked of it and the order of its warm-ups and optimisations.
type warmStore struct {
	*memstore.Store
	err    error  // Warm's answer
	cancel func() // called by Warm, when set
	mu     sync.Mutex
	calls  []string
	warmed []driver.Warmup
}

func (s *warmStore) Optimize(ctx context.Context) error {
	s.mu.Lock()
	s.calls = append(s.calls, "optimize")
	s.mu.Unlock()
	return s.Store.Optimize(ctx)
}

func (s *warmStore) Warm(ctx context.Context, w driver.Warmup) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "warm")
	s.warmed = append(s.warmed, w)
	if s.cancel != nil {
		s.cancel()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.err
}

func (s *warmStore) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

var _ driver.Warmer = (*warmStore)(nil)

func TestRuntimeWarmsTheStoreAtStart(t *testing.T) {
	store := &warmStore{Store: memstore.New(courseRegistry())}
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(clk)
	cfg.Workers = 3
	cfg.BatchSize = 20
	startRuntime(t, store, cfg, newManyQueue())
	// Before Start returned: the statistics refreshed, then the warm-up.
	if got := store.log(); !slices.Equal(got, []string{"optimize", "warm"}) {
		t.Fatalf("calls when Start returned %v, want [optimize warm]", got)
	}
	w := store.warmed[0]
	if w.Sessions != cfg.Workers+2 || w.BatchSize != 20 {
		t.Fatalf("warm-up %+v, want %d sessions (the workers, the appends and the upkeep) and the batch size 20", w, cfg.Workers+2)
	}
	// The claims' partitions: one (the first claim of a pure reactor,
	// every claim of a partitioned one), and the queue's (ClaimPartitions,
	// which defaults to the batch size).
	if !slices.Contains(w.Claims, 1) || !slices.Contains(w.Claims, cfg.BatchSize) || !slices.IsSorted(w.Claims) {
		t.Fatalf("warm-up claims %v, want sorted, with 1 and %d", w.Claims, cfg.BatchSize)
	}
	// Start's refresh was the optimizer's first tick: the next comes an
	// interval later, not at once.
	time.Sleep(20 * time.Millisecond)
	if got := store.log(); len(got) != 2 {
		t.Fatalf("calls after start %v, want no second refresh before the interval", got)
	}
	clk.Advance(cfg.OptimizeInterval)
	eventually(t, "the optimizer's tick an interval after start", func() bool { return len(store.log()) == 3 })
}

func TestRuntimeStartsWhenTheWarmUpFails(t *testing.T) {
	store := &warmStore{Store: memstore.New(courseRegistry()), err: errors.New("server unreachable")}
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &records{}
	cfg := testConfig(clk)
	cfg.Logger = slog.New(logs)
	startRuntime(t, store, cfg, &flaky{})
	if len(logs.find("warming the store up failed")) != 1 {
		t.Fatal("a failed warm-up is not logged")
	}
}

func TestRuntimeStartCancelledDuringWarmUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	store := &warmStore{Store: memstore.New(courseRegistry()), cancel: cancel}
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := shell.NewRuntime(store, testConfig(clk), &flaky{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v, want context.Canceled", err)
	}
	// Nothing runs: a later Start starts.
	store.cancel = nil
	if err := rt.Start(context.Background()); err != nil {
		t.Fatalf("Start after a cancelled one: %v", err)
	}
	rt.Stop(context.Background())
}

func TestRuntimeWithoutWorkersDoesNotWarm(t *testing.T) {
	store := &warmStore{Store: memstore.New(courseRegistry())}
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(clk)
	cfg.Workers = 0
	startRuntime(t, store, cfg, &flaky{})
	if slices.Contains(store.log(), "warm") {
		t.Fatal("a runtime without workers warmed the store: it claims nothing")
	}
}
