package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testClockSteps pins that a store stamps an undated message with the
// same reading of its clock it decides scheduling by: a clock stepping
// back between two readings (NTP) never schedules a message appended now.
// (shell.Handle relies on it.)
func (s suite) testClockSteps(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := epoch
	back := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(-time.Second)
		return now
	}
	st := s.open(t, reg, back, newRecorder())
	e := &env{t: t, ctx: t.Context(), store: st, reg: reg, clock: newClock(), notes: newRecorder()}
	res := e.append(courseCreated{CourseName: "Algebra"}, userRegistered{UserID: "joe", Name: "Joe"})
	err = e.store.Update(e.ctx, func(tx driver.Tx) error {
		r, err := tx.Append([]core.Message{core.NewMessage(courseClosed{CourseName: "Algebra"})}, driver.AppendOptions{})
		res.Positions = append(res.Positions, r.Positions...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range res.Positions {
		if p != int64(i+1) {
			t.Fatalf("positions %v: an undated message was scheduled as the clock stepped back", res.Positions)
		}
	}
	if st := e.stats(); st.Scheduled != 0 || st.MaxPosition != 3 {
		t.Fatalf("stats %+v, want 3 messages logged and none scheduled", st)
	}
}
