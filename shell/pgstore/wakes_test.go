package pgstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestWakesCoalesce: a store's notifications to other processes are
// coalesced. The first commit after a quiet spell is announced within
// milliseconds; a lone writer appending as fast as it can is announced
// about once per pgstore.NotifyGap, not once or twice per append (a
// notification sent a millisecond after the one before took a sixth of a
// lone writer's rate), and the last notification names the newest
// position, so that a listener misses nothing.
func TestWakesCoalesce(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	c, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{s.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	type heardAt struct {
		at   time.Time
		last int64
	}
	var mu sync.Mutex
	var got []heardAt
	listening, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := c.WaitForNotification(listening)
			if err != nil {
				return
			}
			_, last, _ := pgstore.ParseNotification(n.Payload)
			mu.Lock()
			got = append(got, heardAt{time.Now(), last})
			mu.Unlock()
		}
	}()
	heard := func() []heardAt {
		mu.Lock()
		defer mu.Unlock()
		return append([]heardAt(nil), got...)
	}
	appendOne := func(i int) int64 {
		t.Helper()
		res, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: strconv.Itoa(i)}), driver.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Last
	}
	waitFor := func(pos int64) time.Time {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if h := heard(); len(h) > 0 && h[len(h)-1].last >= pos {
				return h[len(h)-1].at
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("position %d not announced within 5 s: heard %v", pos, heard())
		return time.Time{}
	}

	// After a quiet spell: at once.
	start := time.Now()
	first := appendOne(0)
	if took := waitFor(first).Sub(start); took > time.Second {
		t.Errorf("the first commit after a quiet spell announced %v after it began, want milliseconds", took)
	} else {
		t.Logf("first commit announced %v after the append began", took)
	}

	// A lone writer as fast as it goes.
	time.Sleep(50 * time.Millisecond)
	before := len(heard())
	const appends = 300
	start = time.Now()
	var last int64
	for i := range appends {
		last = appendOne(i + 1)
	}
	took := time.Since(start)
	waitFor(last)
	n := len(heard()) - before
	most := int(took/pgstore.NotifyGap) + 2
	t.Logf("%d appends in %v announced by %d notifications (at most %d)", appends, took, n, most)
	if n > most {
		t.Errorf("%d appends in %v announced by %d notifications, want at most one per %v (%d)", appends, took, n, pgstore.NotifyGap, most)
	}
	if n < 1 {
		t.Errorf("no notification for %d appends", appends)
	}
	stop()
	<-done
}
