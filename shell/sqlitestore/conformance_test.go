package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/internal/sqlitetest"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestConformance runs the store conformance suite against file databases,
// each a copy of one installed empty store (sqlitetest.Installer: the
// suite opens hundreds). It shares nothing with the other tests, so it
// runs beside them.
func TestConformance(t *testing.T) {
	t.Parallel()
	install := sqlitetest.Installer(t)
	storetest.Run(t, func(t *testing.T, reg *codec.Registry, now func() time.Time, n driver.Notifier) driver.Store {
		path := filepath.Join(t.TempDir(), "store.db")
		s, err := install(t.Context(), path, sqlitestore.Options{Registry: reg, Now: now, Notifier: n, PoolSize: 1})
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
