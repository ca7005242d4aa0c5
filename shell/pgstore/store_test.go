package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
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

func factory(t *testing.T, reg *codec.Registry, now func() time.Time, n shell.Notifier) shell.Store {
	return open(t, pgstore.Options{Registry: reg, Now: now, Notifier: n})
}

func TestConformance(t *testing.T) { storetest.Run(t, factory) }

// The store gives the runtime its logger (shell.LoggerProvider).
var _ shell.LoggerProvider = (*pgstore.Store)(nil)
