package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Clearer is implemented by every store of the suite: Clear deletes
// everything the store holds (the log, the schedule, consumer groups and
// their offsets, heartbeats) and starts positions at 1 again, so that tests
// reuse one store.
type Clearer interface {
	Clear(ctx context.Context) error
}

// testHelpers holds every store to the methods tests rely on beside
// driver.Store, so that a test written against one store runs on another.
func (s suite) testHelpers(t *testing.T) {
	t.Run("Clear", func(t *testing.T) {
		e := s.genv(t, devices)
		cl, ok := e.store.(Clearer)
		if !ok {
			t.Fatalf("%T has no Clear(ctx) error method", e.store)
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, core.NewMessage(deviceRegistered{DeviceID: "d3", Name: "c"}).At(epoch.Add(time.Hour)))
		e.claim(devices, "w1", 10)
		if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, epoch); err != nil {
			t.Fatal(err)
		}
		e.notes.take()
		if err := cl.Clear(e.ctx); err != nil {
			t.Fatalf("clear: %v", err)
		}
		if st := e.stats(); st.MaxPosition != 0 || st.Scheduled != 0 || len(st.Groups) != 0 {
			t.Fatalf("stats after clear %+v, want an empty store", st)
		}
		if _, ok := e.nextScheduled(); ok {
			t.Fatal("a message is still scheduled after clear")
		}
		if page, err := e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{}); err != nil || page.Total != 0 {
			t.Fatalf("offsets after clear: %+v, %v", page, err)
		}
		if _, err := e.gs.Group(e.ctx, devices); err == nil {
			t.Fatal("the group survived clear")
		}
		e.expectNotes()
		// The store works as new: positions start at 1 again.
		e.register(groupSpec(devices))
		if res := e.append(deviceRegistered{DeviceID: "d1", Name: "a"}); res.Last != 1 {
			t.Fatalf("first append after clear at %d, want 1", res.Last)
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})

	t.Run("ReadScheduled", func(t *testing.T) {
		e := s.env(t)
		rs, ok := e.store.(driver.ScheduleReader)
		if !ok {
			t.Fatalf("%T has no ReadScheduled(ctx, limit) method", e.store)
		}
		read := func(limit int) []core.Message {
			t.Helper()
			ms, err := rs.ReadScheduled(e.ctx, limit)
			if err != nil {
				t.Fatalf("read scheduled: %v", err)
			}
			return ms
		}
		if got := read(0); len(got) != 0 {
			t.Fatalf("an empty schedule holds %d messages", len(got))
		}
		var sched []core.Message
		for _, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
			m := core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(d)).WithMetadata(map[string]any{"after": d.String()})
			sched = append(sched, e.append(courseCreated{CourseName: "Algebra"}, m).Messages[1])
		}
		want := []core.Message{sched[1], sched[2], sched[0]}
		same := func(what string, got, want []core.Message) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
			}
			for i := range got {
				if err := diffMessage(core.PositionedMessage{Message: got[i]}, core.PositionedMessage{Message: want[i]}); err != nil {
					t.Fatalf("%s: message %d: %v", what, i+1, err)
				}
			}
		}
		same("all", read(0), want)
		same("limit 2", read(2), want[:2])
		same("limit 10", read(10), want)
		if n, err := e.store.PromoteScheduled(e.ctx, epoch.Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("promote: %d, %v", n, err)
		}
		same("after a promotion", read(-1), want[1:])
	})
}
