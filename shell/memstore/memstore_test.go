package memstore_test

import (
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

func open(t *testing.T, reg *codec.Registry, now func() time.Time, n driver.Notifier) driver.Store {
	s := memstore.New(reg, memstore.WithClock(now), memstore.WithNotifier(n))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

func TestGroupConformance(t *testing.T) { storetest.RunGroups(t, open) }
