package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// The store's own benchmark: the idle poll (the module bench/ holds the
// others, SQLite and PostgreSQL side by side). It needs
// SOURCED_TEST_POSTGRES_URL, e.g.
//
//	cd shell/pgstore && go test -run '^$' -bench ClaimIdle

func benchStore(b *testing.B, reg *codec.Registry) *pgstore.Store {
	b.Helper()
	s, err := pgstore.Install(context.Background(), pgtest.URL(b), pgstore.Options{Registry: reg, Prefix: pgtest.Prefix(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		s.Uninstall(context.Background())
		s.Close()
	})
	return s
}

// BenchmarkClaimIdle measures a poll of a group whose 10,000 partitions
// are all caught up: the O(1) idle probe.
func BenchmarkClaimIdle(b *testing.B) {
	b.Run("store=postgres/partitions=10000", func(b *testing.B) {
		reg, _ := storetest.NewRegistry()
		s := benchStore(b, reg)
		ctx := context.Background()
		if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
			b.Fatal(err)
		}
		var msgs []core.Message
		for i := range 10_000 {
			msgs = append(msgs, core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprint("d", i)}))
		}
		res, err := s.Append(ctx, msgs, driver.AppendOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// Every partition caught up (advanced past its message, as a
		// synchronously handled command is).
		err = s.Update(ctx, func(tx driver.Tx) error {
			for i, pos := range res.Positions {
				if ok, err := tx.AdvanceOffset("devices", map[string]string{"device_id": fmt.Sprint("d", i)}, pos); err != nil || !ok {
					return fmt.Errorf("advance: %v %v", ok, err)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		s.Optimize(ctx)
		b.ResetTimer()
		for range b.N {
			c, err := s.ClaimNext(ctx, "devices", "w", 100)
			if err != nil || c != nil {
				b.Fatal(c, err)
			}
		}
	})
}

// BenchmarkWarm measures a runtime's warm-up at its start (Store.Warm)
// of four new sessions for a group by key pairs claimed one partition or
// up to 32 at a time (BenchmarkPostgresEndToEnd's), each iteration on
// fresh sessions (the pool's connections closed before it, untimed), in
// ms/warm-up: what Start spends so that its first commands do not (see
// warm.go).
func BenchmarkWarm(b *testing.B) {
	reg, _ := storetest.NewRegistry()
	s := benchStore(b, reg)
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "bench.keyed", PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		b.Fatal(err)
	}
	w := driver.Warmup{Sessions: 4, BatchSize: 50, Claims: []int{1, 32}}
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		s.Pool().Reset()
		b.StartTimer()
		start := time.Now()
		if err := s.Warm(ctx, w); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
	}
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms/warm-up")
}
