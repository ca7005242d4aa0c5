package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// nextCounter counts a store's NextScheduled calls: its runtime's
// scheduler's wake-ups.
type nextCounter struct {
	*pgstore.Store
	next atomic.Int64
}

func (s *nextCounter) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	s.next.Add(1)
	return s.Store.NextScheduled(ctx)
}

// A runtime on PostgreSQL wakes its scheduler for the commits that
// scheduled messages (driver.ScheduleCounter), this process's and, through
// its listener, other processes', and not for plain appends: another
// process's message scheduled a moment ahead is promoted at its time,
// long before the scheduler's interval.
func TestSchedulerWokenByScheduledCommitsOnly(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	other := open(t, pgstore.Options{Registry: reg})
	raw := sibling(t, other, pgstore.Options{Registry: reg})
	s := &nextCounter{Store: raw}
	if n := s.ScheduledCommits(); n != 0 {
		t.Fatalf("ScheduledCommits = %d on a new store, want 0", n)
	}
	l, err := raw.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := shell.DefaultConfig()
	cfg.CatchUpInterval = time.Minute // the scheduler's interval: never reached here
	rt, err := shell.NewRuntime(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.WithoutCancel(ctx))
	time.Sleep(100 * time.Millisecond) // the tasks' first ticks
	before := s.next.Load()
	const appends = 20
	for i := range appends {
		st := []driver.Store{s, other}[i%2] // this process's and another's
		if _, err := st.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d"}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the other store's notifications
	if woken := s.next.Load() - before; woken > 2 {
		t.Errorf("the scheduler read the next due time %d times for %d plain appends, want it left asleep", woken, appends)
	}

	// Another process schedules: this one's listener hears it, and its
	// scheduler promotes the message when due.
	due := time.Now().Add(300 * time.Millisecond)
	if _, err := other.Append(ctx, []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "later"}).At(due)}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := other.ScheduledCommits(); n != 1 {
		t.Errorf("ScheduledCommits = %d after one scheduling commit, want 1", n)
	}
	cond := core.Condition{Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "later"}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := s.Read(ctx, []core.Condition{cond}, driver.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other process's scheduled message was not promoted: the scheduler was not woken for it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.ScheduledCommits(); n < 1 {
		t.Errorf("ScheduledCommits = %d after the listener heard a scheduling commit, want at least 1", n)
	}

	// A notifier of the caller's may announce commits no listener of the
	// store heard: the store does not count then.
	mine := sibling(t, other, pgstore.Options{Registry: reg, Notifier: new(driver.InlineNotifier)})
	if n := mine.ScheduledCommits(); n != -1 {
		t.Errorf("ScheduledCommits = %d with the caller's notifier, want -1", n)
	}
}
