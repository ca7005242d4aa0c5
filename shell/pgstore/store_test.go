package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// open installs a store with a fresh prefix and drops its tables when the
// test ends.
func open(t *testing.T, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	url := pgtest.URL(t)
	if opts.Prefix == "" {
		opts.Prefix = pgtest.Prefix()
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = 8
	}
	s, err := pgstore.Install(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Uninstall(ctx); err != nil {
			t.Errorf("uninstall: %v", err)
		}
		s.Close()
	})
	return s
}

// sibling opens another store on s's tables (another process's, as far
// as the stores can tell), closed when the test ends.
func sibling(t *testing.T, s *pgstore.Store, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	opts.Prefix = s.Prefix()
	o, err := pgstore.Open(context.Background(), pgtest.URL(t), opts)
	if err != nil {
		t.Fatalf("open a sibling store: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func factory(t *testing.T, reg *codec.Registry, now func() time.Time, n driver.Notifier) driver.Store {
	return open(t, pgstore.Options{Registry: reg, Now: now, Notifier: n})
}

func TestConformance(t *testing.T) { storetest.Run(t, factory) }

// The store gives the runtime its logger (driver.LoggerProvider).
var _ driver.LoggerProvider = (*pgstore.Store)(nil)

// The store shares the clock it is given with the runtime (driver.Clocked).
var _ driver.Clocked = (*pgstore.Store)(nil)

// One clock, given to the store, drives the runtime too; giving Now
// beside it is refused.
func TestOptionsClock(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	clk := driver.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	s := open(t, pgstore.Options{Registry: reg, Clock: clk})
	if s.Clock() != driver.Clock(clk) || !s.Now().Equal(clk.Now()) {
		t.Fatalf("store clock %v now %v, want the sim clock's %v", s.Clock(), s.Now(), clk.Now())
	}
	res, err := s.Append(context.Background(), core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
	if err != nil || !res.Messages[0].CreatedAt.Equal(clk.Now()) {
		t.Fatalf("append dated %v (%v), want the sim clock's %v", res.Messages[0].CreatedAt, err, clk.Now())
	}
	if _, err := shell.NewRuntime(s, shell.DefaultConfig()); err != nil {
		t.Fatalf("a runtime given no clock: %v, want it to take the store's", err)
	}
	cfg := shell.DefaultConfig()
	cfg.Clock = driver.NewSimClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := shell.NewRuntime(s, cfg); !errors.Is(err, driver.ErrClockMismatch) {
		t.Fatalf("a runtime given another clock: %v, want ErrClockMismatch", err)
	}
	if _, err := pgstore.Open(context.Background(), pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: s.Prefix(), Clock: clk, Now: time.Now}); err == nil {
		t.Fatal("Open with both Now and Clock succeeded, want a refusal")
	}
}
