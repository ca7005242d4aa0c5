package readme

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/sourced"
	"github.com/sourced-go/sourced/shell/sourced/sourcedtest"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

type CreateCourse struct {
	CourseID   string `json:"course_id" sourced:"required"`
	CourseName string `json:"course_name" sourced:"required"`
}
type CourseCreated struct {
	CourseID   string `json:"course_id"`
	CourseName string `json:"course_name"`
}

func registry() *sourced.Registry {
	reg := sourced.NewRegistry()
	err := errors.Join(
		sourced.Register[CreateCourse](reg, "courses.create"),
		sourced.Register[CourseCreated](reg, "courses.created"),
	)
	// The rest of the application's types, not in the README's snippet.
	err = errors.Join(err,
		sourced.Register[SendReminder](reg, "courses.send_reminder"),
		sourced.Register[EnrolStudent](reg, "courses.enrol"),
		sourced.Register[StudentEnrolled](reg, "courses.enrolled"),
	)
	if err != nil {
		panic(err)
	}
	return reg
}

var reg = registry()

type (
	SendReminder struct {
		CourseID string `json:"course_id" sourced:"required"`
	}
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
)

var Courses = sourced.Decider[bool]{Group: "courses.names", PartitionBy: []string{"course_name"}}.With(
	sourced.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	sourced.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("course %q already exists", c.CourseName)
		}
		return []any{CourseCreated(c)}, nil
	}),
	sourced.React(func(_ bool, e CourseCreated) []any {
		return []any{sourced.After(24*time.Hour, SendReminder{CourseID: e.CourseID})} // relative to the event: pure
	}),
)

func TestDuplicateName(t *testing.T) {
	sourcedtest.Decider(t, Courses, sourcedtest.WithRegistry(reg)).
		Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
		When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
		ThenError(`course "Algebra" already exists`)
}

// The README's sentence on delayed reactions, as a test.
func TestReminderIsDueADayLater(t *testing.T) {
	sourcedtest.Decider(t, Courses, sourcedtest.WithRegistry(reg)).
		When(CreateCourse{CourseID: "c1", CourseName: "Algebra"}).
		Then(CourseCreated{CourseID: "c1", CourseName: "Algebra"}, sourced.After(24*time.Hour, SendReminder{CourseID: "c1"}))
}

// Enrolments and Rosters are the README's other reactors.
var Enrolments = sourced.Decider[[]string]{Group: "courses.enrolments", PartitionBy: []string{"course_id"}}.With(
	sourced.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	sourced.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		if slices.Contains(s, c.StudentID) {
			return nil, fmt.Errorf("%s is already enrolled", c.StudentID)
		}
		return []any{StudentEnrolled(c)}, nil
	}),
)

var Rosters = sourced.Projector[[]string]{Group: "courses.rosters", PartitionBy: []string{"course_id"}}.With(
	sourced.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
)

// The web snippet in the order a new user writes it: the workers start in
// the background and the first command is handled at once (the decider's
// consumer group is registered by whichever comes first).
func Example_web() {
	dir, err := os.MkdirTemp("", "sourced-readme")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))

	store, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: reg}) // or Open, after your migrations
	rt, err := sourced.NewRuntime(store, sourced.DefaultConfig(), Courses, Enrolments, Rosters)
	go sourced.Supervise(ctx, rt) // workers until SIGINT/SIGTERM, then a graceful stop

	res, err := sourced.Handle(ctx, store, Courses, CreateCourse{CourseID: "c1", CourseName: "Algebra"})
	switch {
	case errors.Is(err, sourced.ErrInvalid): // 400: every failing field is named
	case errors.Is(err, sourced.ErrBusy): // 503: the store is busy, try again
	case err != nil: // 409: the decider rejected it
	}
	names, guard, err := sourced.Load(ctx, store, Courses, sourced.Partition{"course_name": "Algebra"})

	fmt.Println(len(res.Events), err, names, guard.LastPosition)
	_, err = sourced.Handle(ctx, store, Courses, CreateCourse{CourseID: "c2", CourseName: "Algebra"})
	fmt.Println(err)
	_, err = sourced.Handle(ctx, store, Courses, CreateCourse{CourseID: "c3"})
	fmt.Println(errors.Is(err, sourced.ErrInvalid), err)
	// Wait for Supervise to have started the runtime (its groups are
	// registered then), let the workers settle, and stop.
	for _, err := store.Group(ctx, "courses.rosters"); err != nil; _, err = store.Group(ctx, "courses.rosters") {
		time.Sleep(time.Millisecond)
	}
	if err := rt.WaitIdle(ctx, 0); err != nil {
		panic(err)
	}
	cancel()
	if err := rt.Stop(context.Background()); err != nil {
		panic(err)
	}
	if err := store.Close(); err != nil {
		panic(err)
	}
	// Output:
	// 1 <nil> true 2
	// course "Algebra" already exists
	// true codec: invalid "courses.create" payload: course_name: is required
}
