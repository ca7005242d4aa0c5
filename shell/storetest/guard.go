package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testGuard(t *testing.T) {
	algebra := []core.Condition{cond(typeCourseCreated, "course_name", "Algebra")}

	t.Run("a matching message after the read conflicts", func(t *testing.T) {
		e := s.env(t)
		e.append(userRegistered{UserID: "joe", Name: "Joe"})
		g := e.read(algebra, driver.ReadOptions{}).Guard
		e.append(courseCreated{CourseName: "Algebra"})
		e.conflict(e.mustFail(e.appendGuarded(g, courseCreated{CourseName: "Algebra"})), 2)
	})

	t.Run("other types and other values do not conflict", func(t *testing.T) {
		e := s.env(t)
		g := e.read(algebra, driver.ReadOptions{}).Guard
		e.append(courseCreated{CourseName: "History"}, courseClosed{CourseName: "Algebra"}, userJoinedCourse{CourseName: "Algebra", UserID: "joe"})
		if _, err := e.appendGuarded(g, courseCreated{CourseName: "Algebra"}); err != nil {
			t.Fatalf("guarded append: %v", err)
		}
	})

	t.Run("an empty read still guards", func(t *testing.T) {
		e := s.env(t)
		e.append(userRegistered{UserID: "joe", Name: "Joe"}, userRegistered{UserID: "jake", Name: "Jake"})
		res := e.read(algebra, driver.ReadOptions{})
		if len(res.Messages) != 0 || res.Guard.LastPosition != 2 {
			t.Fatalf("read: %d messages, guard position %d; want none and 2", len(res.Messages), res.Guard.LastPosition)
		}
		e.append(courseCreated{CourseName: "Algebra"})
		e.conflict(e.mustFail(e.appendGuarded(res.Guard, courseCreated{CourseName: "Algebra"})), 3)
	})

	t.Run("a guard from an older read conflicts", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"}, courseCreated{CourseName: "History"})
		old := core.Guard{Conditions: algebra, LastPosition: 0}
		e.conflict(e.mustFail(e.appendGuarded(old, courseClosed{CourseName: "Algebra"})), 1)
		atOne := core.Guard{Conditions: algebra, LastPosition: 1}
		if _, err := e.appendGuarded(atOne, courseClosed{CourseName: "Algebra"}); err != nil {
			t.Fatalf("guard at the conflicting message's own position: %v", err)
		}
	})

	t.Run("a type-only condition guards every message of the type", func(t *testing.T) {
		e := s.env(t)
		g := e.read([]core.Condition{cond(typeCourseClosed)}, driver.ReadOptions{}).Guard
		e.append(courseCreated{CourseName: "Algebra"})
		if _, err := e.appendGuarded(g, userRegistered{UserID: "joe", Name: "Joe"}); err != nil {
			t.Fatalf("another type conflicted: %v", err)
		}
		g = e.read([]core.Condition{cond(typeCourseClosed)}, driver.ReadOptions{}).Guard
		e.append(courseClosed{CourseName: "Geometry"})
		e.conflict(e.mustFail(e.appendGuarded(g, userRegistered{UserID: "joe", Name: "Joe"})), 3)
	})

	t.Run("the conflict error carries the conflicting messages", func(t *testing.T) {
		e := s.env(t)
		g := e.read(algebra, driver.ReadOptions{}).Guard
		r := e.append(courseCreated{CourseName: "Algebra"}, courseCreated{CourseName: "History"}, courseCreated{CourseName: "Algebra"})
		ce := e.conflict(e.mustFail(e.appendGuarded(g, courseClosed{CourseName: "Algebra"})), 1, 3)
		want := []core.PositionedMessage{{Message: r.Messages[0], Position: 1}, {Message: r.Messages[2], Position: 3}}
		e.sameMessages("conflicts", ce.Conflicts, want)
		if ce.Guard.LastPosition != g.LastPosition || !sameConds(ce.Guard.Conditions, g.Conditions) {
			t.Fatalf("conflict error guard %+v, want %+v", ce.Guard, g)
		}
	})

	t.Run("a rejected append writes nothing, scheduled messages included", func(t *testing.T) {
		e := s.env(t)
		g := e.read(algebra, driver.ReadOptions{}).Guard
		e.append(courseCreated{CourseName: "Algebra"})
		e.notes.take()
		before := e.snapshot()
		later := core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Hour))
		_, err := e.store.Append(e.ctx, []core.Message{core.NewMessage(userRegistered{UserID: "joe", Name: "Joe"}), later}, driver.AppendOptions{Guard: &g})
		e.conflict(err, 1)
		e.unchanged(before)
	})

	t.Run("a guard without conditions never conflicts", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"}, courseClosed{CourseName: "Algebra"})
		if _, err := e.appendGuarded(core.Guard{}, courseCreated{CourseName: "Algebra"}); err != nil {
			t.Fatalf("guard without conditions: %v", err)
		}
		if _, err := e.appendGuarded(core.Guard{Conditions: []core.Condition{}}, courseCreated{CourseName: "Algebra"}); err != nil {
			t.Fatalf("guard with an empty condition list: %v", err)
		}
	})

	t.Run("a guard sees the writes of its own transaction", func(t *testing.T) {
		e := s.env(t)
		g := e.read(algebra, driver.ReadOptions{}).Guard
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			if _, err := tx.Append(msgs(courseCreated{CourseName: "Algebra"}), driver.AppendOptions{}); err != nil {
				return err
			}
			_, err := tx.Append(msgs(courseClosed{CourseName: "Algebra"}), driver.AppendOptions{Guard: &g})
			e.conflict(err, 1)
			// Advancing the guard past the transaction's own append (the
			// commands of one batch share a guard: without it the second
			// would conflict with the first's events) clears it.
			_, err = tx.Append(msgs(courseClosed{CourseName: "Algebra"}), driver.AppendOptions{Guard: new(g.Advance(1))})
			return err
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		e.expectPositions("log", e.log(), 1, 2)
	})

	t.Run("a new partition is created once by two concurrent writers", func(t *testing.T) {
		rounds := 6
		if testing.Short() {
			rounds = 2
		}
		for round := range rounds {
			e := s.env(t)
			if round%2 == 1 {
				e.append(userRegistered{UserID: "joe", Name: "Joe"})
			}
			ok, conflicts := e.race(2, func(i int) core.Guard {
				return e.readPartition(part("course_name", "Algebra"), []string{typeCourseCreated, typeCourseClosed}, driver.ReadOptions{}).Guard
			}, func(i int) any { return courseCreated{CourseName: "Algebra"} })
			if ok != 1 || conflicts != 1 {
				t.Fatalf("round %d: %d appends succeeded and %d conflicted, want 1 and 1", round, ok, conflicts)
			}
		}
	})
}

// mustFail returns the error of an append, failing the test when it
// succeeded.
func (e *env) mustFail(res driver.AppendResult, err error) error {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("append succeeded at %v, want an error", res.Positions)
	}
	return err
}

// race has n writers read (all reads happen first) and then append
// concurrently under the guards they read. It returns how many appends
// succeeded and how many conflicted; any other error fails the test.
func (e *env) race(n int, read func(i int) core.Guard, write func(i int) any) (ok, conflicts int) {
	e.t.Helper()
	guards := make([]core.Guard, n)
	for i := range n {
		guards[i] = read(i)
	}
	errs := make([]error, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			start.Wait()
			_, errs[i] = e.appendGuarded(guards[i], write(i))
		})
	}
	start.Done()
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, core.ErrConcurrentAppend):
			conflicts++
		default:
			e.t.Fatalf("writer %d: %v", i, err)
		}
	}
	return ok, conflicts
}

// skewWriter reads the facts its decision needs, then appends one message
// that the other writer's guard matches.
type skewWriter struct {
	read  func(e *env) core.Guard
	write any
}

func readGuard(conds ...core.Condition) func(e *env) core.Guard {
	return func(e *env) core.Guard { return e.read(conds, driver.ReadOptions{}).Guard }
}

func partitionGuard(p map[string]string, types ...string) func(e *env) core.Guard {
	return func(e *env) core.Guard { return e.readPartition(p, types, driver.ReadOptions{}).Guard }
}

func (s suite) testWriteSkew(t *testing.T) {
	pairs := []struct {
		name string
		a, b skewWriter
	}{
		{
			"type-only guard against attribute guard",
			skewWriter{readGuard(cond(typeCourseCreated)), userJoinedCourse{CourseName: "Algebra", UserID: "joe"}},
			skewWriter{readGuard(cond(typeUserJoinedCourse, "user_id", "joe")), courseCreated{CourseName: "History"}},
		},
		{
			"narrow guard against wide guard",
			skewWriter{readGuard(cond(typeUserJoinedCourse, "course_name", "Algebra", "user_id", "joe")), userJoinedCourse{CourseName: "Algebra", UserID: "jake"}},
			skewWriter{readGuard(cond(typeUserJoinedCourse, "course_name", "Algebra")), userJoinedCourse{CourseName: "Algebra", UserID: "joe"}},
		},
		{
			"partition guard against type-only guard",
			skewWriter{partitionGuard(part("course_name", "Algebra", "user_id", "joe"), typeCourseCreated, typeUserJoinedCourse, typeCourseClosed), courseClosed{CourseName: "History"}},
			skewWriter{readGuard(cond(typeCourseClosed)), courseCreated{CourseName: "Algebra"}},
		},
		{
			"partitions of two accounts of a slice attribute",
			skewWriter{partitionGuard(part("accounts", "acc1"), typeTransfer), transfer{Accounts: []string{"acc2", "acc3"}, Amount: 1}},
			skewWriter{partitionGuard(part("accounts", "acc2"), typeTransfer), transfer{Accounts: []string{"acc1", "acc4"}, Amount: 2}},
		},
		{
			"several conditions against one",
			skewWriter{readGuard(cond(typeDeviceBound, "device_id", "d1"), cond(typeAssetRegistered, "asset_id", "a1")), deviceRegistered{DeviceID: "d2", Name: "Sensor"}},
			skewWriter{readGuard(cond(typeDeviceRegistered, "device_id", "d2")), assetRegistered{AssetID: "a1", Label: "Boiler"}},
		},
		{
			"partitions on different attributes",
			skewWriter{partitionGuard(part("device_id", "d1"), typeDeviceRegistered, typeDeviceBound), assetRegistered{AssetID: "a1", Label: "Boiler"}},
			skewWriter{partitionGuard(part("asset_id", "a1"), typeAssetRegistered, typeDeviceBound), deviceBound{"d1", "a2"}},
		},
	}
	setup := []any{userRegistered{UserID: "joe", Name: "Joe"}, deviceRegistered{DeviceID: "d9", Name: "Other"}}
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			for _, order := range []string{"a then b", "b then a"} {
				t.Run(order, func(t *testing.T) {
					e := s.env(t)
					e.append(setup...)
					first, second := p.a, p.b
					if order == "b then a" {
						first, second = second, first
					}
					g1, g2 := first.read(e), second.read(e)
					r, err := e.appendGuarded(g1, first.write)
					if err != nil {
						t.Fatalf("first writer: %v", err)
					}
					e.conflict(e.mustFail(e.appendGuarded(g2, second.write)), r.Last)
				})
			}
			t.Run("concurrently", func(t *testing.T) {
				for round := range rounds {
					e := s.env(t)
					e.append(setup...)
					w := []skewWriter{p.a, p.b}
					ok, conflicts := e.race(2, func(i int) core.Guard { return w[i].read(e) }, func(i int) any { return w[i].write })
					if ok != 1 || conflicts != 1 {
						t.Fatalf("round %d: %d succeeded, %d conflicted; want exactly one of each", round, ok, conflicts)
					}
				}
			})
		})
	}
}
