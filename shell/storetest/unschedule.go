package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testUnschedule pins driver.UnscheduleTx: a scheduled message withdrawn in
// a transaction leaves the schedule with it (and only if it commits), is
// never promoted, and an id not in the schedule is skipped.
func (s suite) testUnschedule(t *testing.T) {
	e := s.env(t)
	a := core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Hour))
	b := core.NewMessage(courseClosed{CourseName: "History"}).At(epoch.Add(time.Hour))
	res := e.append(userRegistered{UserID: "joe", Name: "Joe"}, a, b)
	idA, idB := res.Messages[1].ID, res.Messages[2].ID
	logged := res.Messages[0].ID

	unschedule := func(fail bool, ids ...uuid.UUID) (int, error) {
		t.Helper()
		n := 0
		errFail := errors.New("roll back")
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			u, ok := tx.(driver.UnscheduleTx)
			if !ok {
				t.Fatalf("the store's Tx (%T) is not a driver.UnscheduleTx: it cannot withdraw a scheduled message (effects.Unschedule)", tx)
			}
			var err error
			if n, err = u.Unschedule(ids...); err != nil {
				return err
			}
			if fail {
				return errFail
			}
			return nil
		})
		if fail && errors.Is(err, errFail) {
			err = nil
		}
		return n, err
	}

	if n, err := unschedule(true, idA); err != nil || n != 1 {
		t.Fatalf("withdrawing a scheduled message in a transaction that rolls back: %d, %v; want 1 withdrawn, no error", n, err)
	}
	if st := e.stats(); st.Scheduled != 2 {
		t.Fatalf("%d scheduled after a rolled back withdrawal, want 2 (the withdrawal rolls back with its transaction)", st.Scheduled)
	}
	if n, err := unschedule(false, idA, uuid.Must(uuid.NewV7()), logged); err != nil || n != 1 {
		t.Fatalf("withdrawing a scheduled message, an unknown id and a logged message's id: %d, %v; want 1 withdrawn, no error", n, err)
	}
	if st := e.stats(); st.Scheduled != 1 || st.MaxPosition != 1 {
		t.Fatalf("stats %+v after withdrawing one of two scheduled messages, want 1 scheduled and the log untouched (max position 1)", st)
	}
	if n, err := unschedule(false, idA); err != nil || n != 0 {
		t.Fatalf("withdrawing a message withdrawn before: %d, %v; want 0, no error", n, err)
	}
	if n, err := unschedule(false); err != nil || n != 0 {
		t.Fatalf("withdrawing no id: %d, %v; want 0, no error", n, err)
	}
	e.promote(epoch.Add(2*time.Hour), 1)
	log := e.log()
	e.expectPositions("log", log, 1, 2)
	if log[1].ID != idB {
		t.Fatalf("promoted %v, want the message not withdrawn (%v)", log[1].ID, idB)
	}
	if n, err := unschedule(false, idB); err != nil || n != 0 {
		t.Fatalf("withdrawing a message promoted already: %d, %v; want 0, no error", n, err)
	}
	e.expectPositions("log", e.log(), 1, 2)
	// The id of a withdrawn message is free again: it was never logged.
	again := a
	again.ID = idA
	if _, err := e.store.Append(e.ctx, []core.Message{again}, driver.AppendOptions{}); err != nil {
		t.Fatalf("scheduling again the id of a withdrawn message: %v", err)
	}
	if st := e.stats(); st.Scheduled != 1 {
		t.Fatalf("%d scheduled, want 1", st.Scheduled)
	}
}
