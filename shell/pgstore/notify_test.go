package pgstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// heard collects what a notifier announces.
type heard struct {
	mu    sync.Mutex
	types []string
	ch    chan struct{}
}

func listenTo(n driver.Notifier) *heard {
	h := &heard{ch: make(chan struct{}, 100)}
	n.Subscribe(func(types []string) {
		h.mu.Lock()
		h.types = append(h.types, types...)
		h.mu.Unlock()
		h.ch <- struct{}{}
	})
	return h
}

// wait waits for an announcement of typ.
func (h *heard) wait(t *testing.T, typ string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		h.mu.Lock()
		has := slices.Contains(h.types, typ)
		h.mu.Unlock()
		if has {
			return time.Since(start)
		}
		select {
		case <-h.ch:
		case <-deadline:
			t.Fatalf("no announcement of %s within %v", typ, within)
		}
	}
}

func (h *heard) reset() {
	h.mu.Lock()
	h.types = nil
	h.mu.Unlock()
}

// TestListenAcrossStores: an append on one store wakes another store's
// subscribers through LISTEN/NOTIFY; a store does not hear its own appends
// twice; a listener whose connection is killed reconnects and announces
// what was appended meanwhile.
func TestListenAcrossStores(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	a := open(t, pgstore.Options{Registry: reg})
	b := sibling(t, a, pgstore.Options{Registry: reg})
	ha := listenTo(a.Notifier())
	l, err := a.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	if _, err := b.Append(ctx, []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d1"})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	took := ha.wait(t, "device.registered", 5*time.Second)
	t.Logf("woken %v after the other store's append returned", took)

	// Own appends: announced once, directly, not again by the listener.
	ha.reset()
	if _, err := a.Append(ctx, []core.Message{core.NewMessage(fixtures.AssetRegistered{AssetID: "a1"})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	ha.mu.Lock()
	own := slices.Clone(ha.types)
	ha.mu.Unlock()
	if !slices.Equal(own, []string{"asset.registered"}) {
		t.Fatalf("own append announced as %v, want once", own)
	}

	// A rolled back append is never announced.
	ha.reset()
	_ = b.Update(ctx, func(tx driver.Tx) error {
		if _, err := tx.Append([]core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: "x"})}, driver.AppendOptions{}); err != nil {
			return err
		}
		return context.Canceled
	})

	// Kill the listener's connection and append in the same transaction:
	// the notification is sent while nobody listens, so only the
	// listener's catch-up after it reconnects can announce it.
	err = b.Update(ctx, func(tx driver.Tx) error {
		conn := tx.Context().(*pgstore.TxContext).Conn
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, "sourced-listener "+a.Channel()); err != nil {
			return err
		}
		_, err := tx.Append([]core.Message{core.NewMessage(fixtures.UserRegistered{UserID: "u1"})}, driver.AppendOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ha.wait(t, "user.registered", 10*time.Second)
	if l.Reconnects() != 1 {
		t.Fatalf("%d reconnections, want 1", l.Reconnects())
	}
	ha.mu.Lock()
	defer ha.mu.Unlock()
	if slices.Contains(ha.types, "course.created") {
		t.Fatalf("a rolled back append was announced: %v", ha.types)
	}
}
