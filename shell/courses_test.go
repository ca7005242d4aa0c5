package shell_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
)

// The course domain of the tests, declared once in testdomain.
type (
	CreateCourse    = testdomain.CreateCourse
	CourseCreated   = testdomain.CourseCreated
	EnrolStudent    = testdomain.EnrolStudent
	StudentEnrolled = testdomain.StudentEnrolled
	NotifyStudent   = testdomain.NotifyStudent
	StudentNotified = testdomain.StudentNotified
)

func courseRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[CreateCourse](reg, "courses.create")
	codec.MustRegister[CourseCreated](reg, "courses.created")
	codec.MustRegister[EnrolStudent](reg, "courses.enrol")
	codec.MustRegister[StudentEnrolled](reg, "courses.enrolled")
	codec.MustRegister[NotifyStudent](reg, "students.notify")
	codec.MustRegister[StudentNotified](reg, "students.notified")
	return reg
}

var courseNames = core.Decider[bool]{Group: "Courses::CourseNames", PartitionBy: []string{"course_name"}}.With(
	core.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	core.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("course %q already exists", c.CourseName)
		}
		return []any{CourseCreated(c)}, nil
	}),
)

const capacity = 2

var errFull = errors.New("course is full")

var enrolments = core.Decider[[]string]{Group: "courses.enrolments", PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	core.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		if slices.Contains(s, c.StudentID) {
			return nil, fmt.Errorf("%s already enrolled", c.StudentID)
		}
		if len(s) >= capacity {
			return nil, errFull
		}
		return []any{StudentEnrolled(c)}, nil
	}),
	core.React(func(_ []string, e StudentEnrolled) []any {
		return []any{NotifyStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
	}),
)

// strictEnrolments is enrolments whose business refusals fail the batch
// (core.Hooks.RefusalsFail) instead of being recorded: the tests and
// examples of error strategies provoke their failures with it.
var strictEnrolments = func() core.Decider[[]string] {
	d := enrolments
	d.Hooks.RefusalsFail = true
	return d
}()

var notifications = core.Decider[int]{Group: "students.notifications", PartitionBy: []string{"student_id"}}.With(
	core.Decide(func(_ int, c NotifyStudent) ([]any, error) { return []any{StudentNotified(c)}, nil }),
)

// rosters is a read model written by the roster projector's sync work.
type rosters struct {
	mu sync.Mutex
	m  map[string][]string
}

func (r *rosters) get(course string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.m[course])
}

type roster struct {
	CourseID string
	Students []string
}

func rosterProjector(rm *rosters) core.Projector[roster] {
	return core.Projector[roster]{Group: "courses.rosters", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(r roster, e CourseCreated) roster { r.CourseID = e.CourseID; return r }),
		core.Evolve(func(r roster, e StudentEnrolled) roster {
			r.CourseID, r.Students = e.CourseID, append(r.Students, e.StudentID)
			return r
		}),
		core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[roster]) error {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if rm.m == nil {
				rm.m = map[string][]string{}
			}
			rm.m[b.State.CourseID] = slices.Clone(b.State.Students)
			return nil
		}),
	)
}

// clock is a settable clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
