package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testSchedule(t *testing.T) {
	t.Run("a due message that cannot be promoted is set aside", s.testUnpromotable)
	t.Run("a scheduled message withdrawn in a transaction is never promoted", s.testUnschedule)
	t.Run("a future-dated message is scheduled, not logged", func(t *testing.T) {
		e := s.env(t)
		due := epoch.Add(time.Hour)
		res := e.append(courseCreated{CourseName: "Algebra"}, core.NewMessage(courseClosed{CourseName: "Algebra"}).At(due), userRegistered{UserID: "joe", Name: "Joe"})
		if !slices.Equal(res.Positions, []int64{1, 0, 2}) || res.Last != 2 {
			t.Fatalf("positions %v last %d, want [1 0 2] last 2", res.Positions, res.Last)
		}
		sched := res.Messages[1]
		if sched.ID.Version() != 7 || sched.CausationID != sched.ID || sched.CorrelationID != sched.ID || !sched.CreatedAt.Equal(due) {
			t.Fatalf("scheduled message stamped %+v, want a v7 id, own causation and correlation, due at %v", sched, due)
		}
		e.expectPositions("log", e.log(), 1, 2)
		if got := e.read([]core.Condition{cond(typeCourseClosed)}, driver.ReadOptions{}); len(got.Messages) != 0 {
			t.Fatalf("a read found the scheduled message: %s", describe(got.Messages))
		}
		if st := e.stats(); st.MaxPosition != 2 || st.Scheduled != 1 {
			t.Fatalf("stats %+v, want max position 2, 1 scheduled", st)
		}
	})

	t.Run("only scheduled messages: last is 0", func(t *testing.T) {
		e := s.env(t)
		res := e.append(core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Second)))
		if res.Last != 0 || !slices.Equal(res.Positions, []int64{0}) {
			t.Fatalf("positions %v last %d, want [0] last 0", res.Positions, res.Last)
		}
	})

	t.Run("a message dated now or earlier is logged", func(t *testing.T) {
		e := s.env(t)
		res := e.append(
			core.NewMessage(courseCreated{CourseName: "Algebra"}).At(epoch),
			core.NewMessage(courseCreated{CourseName: "History"}).At(epoch.Add(-time.Millisecond)),
		)
		if !slices.Equal(res.Positions, []int64{1, 2}) || e.stats().Scheduled != 0 {
			t.Fatalf("positions %v, %d scheduled; want [1 2] and none", res.Positions, e.stats().Scheduled)
		}
	})

	t.Run("NextScheduled is the earliest due time", func(t *testing.T) {
		e := s.env(t)
		if _, ok := e.nextScheduled(); ok {
			t.Fatal("NextScheduled reports a message in an empty schedule")
		}
		for _, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
			e.append(core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(d)))
		}
		if next, ok := e.nextScheduled(); !ok || !next.Equal(epoch.Add(time.Hour)) {
			t.Fatalf("next scheduled %v %v, want %v", next, ok, epoch.Add(time.Hour))
		}
	})

	t.Run("PromoteScheduled promotes due messages in scheduling order", func(t *testing.T) {
		e := s.env(t)
		e.append(userRegistered{UserID: "joe", Name: "Joe"})
		a := core.NewMessage(courseCreated{CourseName: "Algebra"}).At(epoch.Add(2 * time.Second)).WithMetadata(map[string]any{"by": "a"})
		b := core.NewMessage(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}).At(epoch.Add(time.Second))
		c := core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(10 * time.Second))
		res := e.append(a, b, c)
		e.notes.take()

		promoteAt := e.clock.Advance(5 * time.Second)
		e.promote(promoteAt, 2)
		log := e.log()
		e.expectPositions("log", log, 1, 2, 3)
		for i, want := range res.Messages[:2] {
			got := log[i+1]
			if got.ID != want.ID || got.Type != want.Type || !equalPayload(got.Payload, want.Payload) ||
				got.CausationID != want.CausationID || got.CorrelationID != want.CorrelationID {
				t.Fatalf("promoted message %d: got %+v, want %+v", i, got.Message, want)
			}
			if !got.CreatedAt.Equal(want.CreatedAt) && !got.CreatedAt.Equal(promoteAt) {
				t.Fatalf("promoted message %d: created at %v, want its due time %v or the promotion time %v", i, got.CreatedAt, want.CreatedAt, promoteAt)
			}
		}
		if got := log[1].Metadata["by"]; got != "a" {
			t.Fatalf("promoted metadata %v, want by=a kept", log[1].Metadata)
		}
		e.expectNotes([]string{typeCourseCreated, typeUserJoinedCourse})

		e.promote(promoteAt, 0)
		e.expectNotes()
		if next, ok := e.nextScheduled(); !ok || !next.Equal(c.CreatedAt) {
			t.Fatalf("next scheduled %v %v, want %v", next, ok, c.CreatedAt)
		}
		e.promote(c.CreatedAt, 1) // due at exactly now
		e.expectPositions("log", e.log(), 1, 2, 3, 4)
		if _, ok := e.nextScheduled(); ok || e.stats().Scheduled != 0 {
			t.Fatal("the schedule is not empty after promoting everything")
		}
		e.promote(c.CreatedAt.Add(time.Hour), 0)
	})

	t.Run("promoted messages are indexed and guarded", func(t *testing.T) {
		e := s.env(t)
		e.append(core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Minute)))
		conds := []core.Condition{cond(typeCourseClosed, "course_name", "Algebra")}
		g := e.read(conds, driver.ReadOptions{}).Guard
		e.promote(epoch.Add(time.Minute), 1)
		e.expectPositions("read", e.read(conds, driver.ReadOptions{}).Messages, 1)
		e.expectPositions("partition", e.readPartition(part("course_name", "Algebra"), []string{typeCourseClosed}, driver.ReadOptions{}).Messages, 1)
		e.conflict(e.mustFail(e.appendGuarded(g, courseCreated{CourseName: "Algebra"})), 1)
	})

	t.Run("due times compare as instants across zones and below a second", func(t *testing.T) {
		e := s.env(t)
		east, west, far := time.FixedZone("UTC+5", 5*3600), time.FixedZone("UTC-8", -8*3600), time.FixedZone("UTC+9", 9*3600)
		later := epoch.Add(1500 * time.Millisecond).In(east) // reads as later wall time
		soon := epoch.Add(250 * time.Millisecond).In(west)   // reads as an earlier wall time than now
		past := epoch.Add(-250 * time.Millisecond).In(east)  // in the past, but reads as a later wall time
		res := e.append(
			core.NewMessage(courseCreated{CourseName: "Later"}).At(later),
			core.NewMessage(courseCreated{CourseName: "Soon"}).At(soon),
			core.NewMessage(courseCreated{CourseName: "Past"}).At(past),
		)
		if !slices.Equal(res.Positions, []int64{0, 0, 1}) {
			t.Fatalf("positions %v, want [0 0 1]: only the message in the past is logged", res.Positions)
		}
		if next, ok := e.nextScheduled(); !ok || !next.Equal(soon) {
			t.Fatalf("next scheduled %v, want %v", next, soon.UTC())
		}
		e.promote(epoch.Add(249*time.Millisecond), 0)
		e.promote(epoch.Add(250*time.Millisecond).In(far), 1)
		e.promote(epoch.Add(1499*time.Millisecond).In(west), 0)
		e.promote(epoch.Add(1500*time.Millisecond).In(west), 1)
		log := e.log()
		e.expectPositions("log", log, 1, 2, 3)
		for i, want := range []string{"Past", "Soon", "Later"} {
			if got := log[i].Payload.(courseCreated).CourseName; got != want {
				t.Fatalf("position %d holds %s, want %s", i+1, got, want)
			}
		}
	})
}

func (e *env) nextScheduled() (time.Time, bool) {
	e.t.Helper()
	next, ok, err := e.store.NextScheduled(e.ctx)
	if err != nil {
		e.t.Fatalf("next scheduled: %v", err)
	}
	return next, ok
}

// promote promotes what is due at now and checks how many were.
func (e *env) promote(now time.Time, want int) {
	e.t.Helper()
	n, err := e.store.PromoteScheduled(e.ctx, now)
	if err != nil {
		e.t.Fatalf("promote at %v: %v", now, err)
	}
	if n != want {
		e.t.Fatalf("promote at %v: promoted %d, want %d", now, n, want)
	}
}
