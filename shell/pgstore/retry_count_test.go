package pgstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
)

type retryCountEvent struct {
	DeviceID string `json:"device_id"`
}

// Workers failing batches of one group at once each count a retry, from
// several processes (stores), even without the store's global lock
// (BreakPositionOrder drops it): ChangeGroup reads the group's row locked.
func TestConcurrentChangesCountEveryRetry(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[retryCountEvent](reg, "retry_count.event")
	first := open(t, pgstore.Options{Registry: reg})
	if err := first.RegisterGroup(t.Context(), driver.GroupSpec{ID: "retry_count.devices", PartitionBy: []string{"device_id"}, Handled: []string{"retry_count.event"}}); err != nil {
		t.Fatal(err)
	}
	second, err := pgstore.Open(t.Context(), pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: first.Prefix(), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	stores := []*pgstore.Store{first, second}
	for _, s := range stores {
		pgstore.BreakPositionOrder(s)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := stores[i%2].ChangeGroup(t.Context(), "retry_count.devices", func(st driver.GroupState) (driver.GroupChange, error) {
				time.Sleep(5 * time.Millisecond) // widen the window a read-modify-write could lose
				f := st.Failure
				f.RetryCount++
				f.Error = fmt.Sprintf("failure %d", f.RetryCount)
				return driver.GroupChange{Command: driver.CmdRetry, RetryAt: time.Now().Add(time.Hour), Failure: f}, nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	info, err := first.Group(t.Context(), "retry_count.devices")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != driver.StatusRetrying || info.Failure.RetryCount != n {
		t.Fatalf("after %d concurrent retries: %s with retry count %d, want retrying with %d", n, info.Status, info.Failure.RetryCount, n)
	}
}
