package storetest

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testUpdate(t *testing.T) {
	t.Run("appends of one transaction commit together", func(t *testing.T) {
		e := s.env(t)
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			r1, err := tx.Append(msgs(courseCreated{CourseName: "Algebra"}), driver.AppendOptions{})
			if err != nil {
				return err
			}
			r2, err := tx.Append(msgs(userRegistered{UserID: "joe", Name: "Joe"}, core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Hour)), courseCreated{CourseName: "History"}), driver.AppendOptions{})
			if err != nil {
				return err
			}
			if r1.Last != 1 || r2.Last != 3 {
				t.Errorf("positions in the transaction: %v then %v, want [1] then [2 0 3]", r1.Positions, r2.Positions)
			}
			if got := e.notes.take(); len(got) != 0 {
				t.Errorf("announced %v before the commit", got)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		e.expectPositions("log", e.log(), 1, 2, 3)
		if st := e.stats(); st.Scheduled != 1 {
			t.Fatalf("%d scheduled, want 1", st.Scheduled)
		}
		e.expectNotes([]string{typeCourseCreated, typeUserRegistered})
	})

	t.Run("reads in a transaction see its writes", func(t *testing.T) {
		e := s.env(t)
		e.append(userRegistered{UserID: "joe", Name: "Joe"})
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			if _, err := tx.Append(msgs(courseCreated{CourseName: "Algebra"}, userJoinedCourse{CourseName: "Algebra", UserID: "joe"}), driver.AppendOptions{}); err != nil {
				return err
			}
			last, err := tx.LastPosition()
			if err != nil || last != 3 {
				t.Errorf("LastPosition %d, %v; want 3", last, err)
			}
			r, err := tx.Read([]core.Condition{cond(typeCourseCreated, "course_name", "Algebra")}, driver.ReadOptions{})
			if err != nil || !slices.Equal(positionsOf(r.Messages), []int64{2}) || r.Guard.LastPosition != 3 {
				t.Errorf("Read: %v guard %d, %v; want [2] guard 3", positionsOf(r.Messages), r.Guard.LastPosition, err)
			}
			r, err = tx.ReadPartition(part("course_name", "Algebra", "user_id", "joe"), []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse}, driver.ReadOptions{})
			if err != nil || !slices.Equal(positionsOf(r.Messages), []int64{1, 2, 3}) {
				t.Errorf("ReadPartition: %v, %v; want [1 2 3]", positionsOf(r.Messages), err)
			}
			p, err := tx.ReadAll(driver.ReadAllOptions{Order: driver.Descending})
			if err != nil || !slices.Equal(positionsOf(p.Messages), []int64{3, 2, 1}) || p.LastPosition != 3 {
				t.Errorf("ReadAll: %v last %d, %v; want [3 2 1] last 3", positionsOf(p.Messages), p.LastPosition, err)
			}
			if tx.Context() == nil {
				t.Error("Context is nil")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
	})

	// rolledBack checks that an Update ending in failure (fail returns an
	// error or panics) left the store as it was, ids included.
	rolledBack := func(t *testing.T, deferred bool, fail func() error) {
		e := s.env(t)
		e.append(userRegistered{UserID: "joe", Name: "Joe"}, core.NewMessage(courseClosed{CourseName: "Old"}).At(epoch.Add(time.Hour)))
		e.notes.take()
		before := e.snapshot()
		logged, scheduled := core.NewMessage(courseCreated{CourseName: "Algebra"}), core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Minute))
		logged.ID, scheduled.ID = uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
		var err error
		panicked := func() (p any) {
			defer func() { p = recover() }()
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				if _, err := tx.Append([]core.Message{logged, scheduled}, driver.AppendOptions{}); err != nil {
					return err
				}
				if _, err := tx.Append(msgs(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}), driver.AppendOptions{Deferred: deferred}); err != nil {
					return err
				}
				return fail()
			})
			return nil
		}()
		if panicked == nil && err == nil {
			t.Fatal("update succeeded, want its failure")
		}
		if panicked == nil && !errors.Is(err, errRollback) {
			t.Fatalf("update: error %v, want the function's error", err)
		}
		// The log after a rollback is as before: same messages, same
		// newest position, nothing scheduled, nothing announced; the next
		// append takes the next position and the rolled back ids are free.
		e.unchanged(before)
		res := e.append(logged, scheduled)
		if skips(e.store) {
			if res.Positions[0] <= before.stats.MaxPosition {
				t.Fatalf("the append after the rollback went to position %d, want one after %d", res.Positions[0], before.stats.MaxPosition)
			}
		} else if res.Positions[0] != before.stats.MaxPosition+1 {
			t.Fatalf("the append after the rollback went to position %d, want %d", res.Positions[0], before.stats.MaxPosition+1)
		}
	}
	t.Run("an error rolls everything back", func(t *testing.T) {
		rolledBack(t, false, func() error { return errRollback })
	})
	t.Run("a panic rolls everything back", func(t *testing.T) {
		rolledBack(t, false, func() error { panic("boom") })
	})
	t.Run("an error rolls a deferred append back", func(t *testing.T) {
		rolledBack(t, true, func() error { return errRollback })
	})

	t.Run("a deferred guarded append that conflicts fails the transaction", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"})
		r, err := e.store.Read(e.ctx, []core.Condition{cond(typeCourseCreated, "course_name", "Algebra")}, driver.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		guard := r.Guard
		e.append(courseCreated{CourseName: "Algebra"}) // the conflict
		e.notes.take()
		before := e.snapshot()
		err = e.store.Update(e.ctx, func(tx driver.Tx) error {
			if _, err := tx.Append(msgs(userRegistered{UserID: "ann", Name: "Ann"}), driver.AppendOptions{}); err != nil {
				return err
			}
			// A store may refuse it here or at the commit: either way the
			// Update fails with the conflict and writes nothing.
			_, err := tx.Append(msgs(userJoinedCourse{CourseName: "Algebra", UserID: "ann"}), driver.AppendOptions{Guard: &guard, Deferred: true})
			return err
		})
		var ce *core.ConflictError
		if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Position != 2 {
			t.Fatalf("update: %v, want a *core.ConflictError naming the message at position 2", err)
		}
		e.unchanged(before)
	})

	t.Run("a deferred append commits with the transaction", func(t *testing.T) {
		e := s.env(t)
		e.append(userRegistered{UserID: "joe", Name: "Joe"})
		e.notes.take()
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			r, err := tx.Append(msgs(courseCreated{CourseName: "Algebra"}, userJoinedCourse{CourseName: "Algebra", UserID: "joe"}), driver.AppendOptions{Deferred: true})
			if err != nil {
				return err
			}
			// Stamped as any append's; positions are the store's to give
			// or not (nil when it sends the append later).
			if len(r.Messages) != 2 || r.Messages[0].ID == uuid.Nil || r.Messages[1].ID == uuid.Nil || r.Messages[0].CreatedAt.IsZero() {
				t.Errorf("deferred append returned messages %+v, want both stamped", r.Messages)
			}
			if r.Positions != nil && len(r.Positions) != 2 {
				t.Errorf("deferred append returned positions %v, want none or one per message", r.Positions)
			}
			// The transaction reads what it appended, deferred or not.
			got, err := tx.ReadPartition(part("course_name", "Algebra", "user_id", "joe"), []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse}, driver.ReadOptions{})
			if err != nil || len(got.Messages) != 3 {
				t.Errorf("ReadPartition after a deferred append: %d messages, %v; want 3", len(got.Messages), err)
			}
			_, err = tx.Append(msgs(courseCreated{CourseName: "History"}), driver.AppendOptions{Deferred: true})
			return err
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		log := e.log()
		if len(log) != 4 {
			t.Fatalf("log holds %d messages after the commit, want 4", len(log))
		}
		for i, want := range []string{typeUserRegistered, typeCourseCreated, typeUserJoinedCourse, typeCourseCreated} {
			if log[i].Type != want {
				t.Fatalf("log[%d] is a %s, want %s (the deferred appends in their order)", i, log[i].Type, want)
			}
		}
		e.expectNotes([]string{typeCourseCreated, typeUserJoinedCourse})
	})

	t.Run("a failed append does not spoil the transaction", func(t *testing.T) {
		e := s.env(t)
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			if _, err := tx.Append(msgs(courseCreated{CourseName: "Algebra"}), driver.AppendOptions{}); err != nil {
				return err
			}
			if _, err := tx.Append(msgs(userRegistered{UserID: "jake", Name: "Jake"}, signup{}), driver.AppendOptions{}); err == nil {
				t.Error("an invalid append succeeded")
			}
			_, err := tx.Append(msgs(userRegistered{UserID: "joe", Name: "Joe"}), driver.AppendOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		log := e.log()
		e.expectPositions("log", log, 1, 2)
		if log[1].Payload != (userRegistered{UserID: "joe", Name: "Joe"}) {
			t.Fatalf("position 2 holds %+v, want joe", log[1].Payload)
		}
	})

	t.Run("subscribers are told after the commit", func(t *testing.T) {
		e := s.env(t)
		var seen atomic.Int64
		unsubscribe := e.notes.Subscribe(func([]string) {
			// A subscriber may read the store: the commit is done.
			st, err := e.store.Stats(e.ctx)
			if err != nil {
				t.Errorf("stats in a subscriber: %v", err)
			}
			seen.Store(st.MaxPosition)
		})
		defer unsubscribe()
		e.append(courseCreated{CourseName: "Algebra"}, courseCreated{CourseName: "History"})
		if seen.Load() != 2 {
			t.Fatalf("the subscriber saw max position %d, want 2", seen.Load())
		}
		_ = e.store.Update(e.ctx, func(tx driver.Tx) error {
			_, err := tx.Append(msgs(courseClosed{CourseName: "Algebra"}), driver.AppendOptions{})
			if seen.Load() != 2 {
				t.Errorf("the subscriber was called inside the transaction")
			}
			return errors.Join(err, errRollback)
		})
		e.expectNotes([]string{typeCourseCreated})
	})

	t.Run("other readers never see a transaction half done", func(t *testing.T) {
		e := s.env(t)
		var stop atomic.Bool
		var wg sync.WaitGroup
		var bad atomic.Int64
		wg.Go(func() {
			for !stop.Load() {
				st, err := e.store.Stats(e.ctx)
				if err == nil && st.MaxPosition != 0 && st.MaxPosition != 3 {
					bad.Store(st.MaxPosition)
				}
				runtime.Gosched()
			}
		})
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			for _, p := range []any{courseCreated{CourseName: "A"}, courseCreated{CourseName: "B"}, courseCreated{CourseName: "C"}} {
				if _, err := tx.Append(msgs(p), driver.AppendOptions{}); err != nil {
					return err
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if b := bad.Load(); b != 0 {
			t.Fatalf("a reader saw max position %d during the transaction", b)
		}
	})
}

var errRollback = errors.New("storetest: roll back")

// skips reports whether store's positions may skip numbers (see
// driver.SkippingPositions): the suite then checks that they increase.
func skips(store driver.Store) bool {
	sp, ok := store.(driver.SkippingPositions)
	return ok && sp.PositionsMaySkip()
}
