package sourcedtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell/sourced/sourcedtest"
)

// The course domain of the tests, declared once in testdomain.
type (
	CreateCourse    = testdomain.CreateCourse
	CourseCreated   = testdomain.CourseCreated
	EnrolStudent    = testdomain.EnrolStudent
	StudentEnrolled = testdomain.StudentEnrolled
	NotifyStudent   = testdomain.NotifyStudent
)

type Noop struct {
	CourseName string `json:"course_name" sourced:"required"`
}

func registry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[CreateCourse](reg, "courses.create")
	codec.MustRegister[CourseCreated](reg, "courses.created")
	codec.MustRegister[EnrolStudent](reg, "courses.enrol")
	codec.MustRegister[StudentEnrolled](reg, "courses.enrolled")
	codec.MustRegister[NotifyStudent](reg, "students.notify")
	codec.MustRegister[Noop](reg, "courses.noop")
	return reg
}

var errExists = errors.New("course exists")

var courses = core.Decider[bool]{Group: "courses", PartitionBy: []string{"course_name"}}.With(
	core.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	core.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("course %q already exists: %w", c.CourseName, errExists)
		}
		return []any{CourseCreated(c)}, nil
	}),
	core.Decide(func(bool, Noop) ([]any, error) { return nil, nil }),
)

var synced []string

var enrolments = core.Decider[[]string]{Group: "enrolments", PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	core.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		return []any{StudentEnrolled(c)}, nil
	}),
	core.React(func(_ []string, e StudentEnrolled) []any { return []any{NotifyStudent{StudentID: e.StudentID}} }),
	core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[[]string]) error {
		synced = append(synced, b.State...)
		return nil
	}),
)

func TestDecider(t *testing.T) {
	reg := registry()
	sourcedtest.Decider(t, courses, sourcedtest.WithRegistry(reg)).
		When(CreateCourse{CourseID: "c1", CourseName: "Algebra"}).
		Then(CourseCreated{CourseID: "c1", CourseName: "Algebra"})
	sourcedtest.Decider(t, courses).
		Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
		When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
		ThenError(`course "Algebra" already exists: course exists`)
	sourcedtest.Decider(t, courses).
		Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
		When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
		ThenError(errExists)
	sourcedtest.Decider(t, courses).When(Noop{CourseName: "Algebra"}).Then()
	sourcedtest.Decider(t, enrolments).
		When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).
		Then(StudentEnrolled{CourseID: "c1", StudentID: "s1"}, core.NewMessage(NotifyStudent{StudentID: "s1"}))
	sourcedtest.Decider(t, enrolments).
		Given(StudentEnrolled{CourseID: "c1", StudentID: "s0"}).
		When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).
		ThenState(func(t testing.TB, s []string) {
			if !slices.Equal(s, []string{"s0", "s1"}) {
				t.Fatalf("state %v", s)
			}
		})
	synced = nil
	sourcedtest.Decider(t, enrolments).
		When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).
		ThenSync(StudentEnrolled{CourseID: "c1", StudentID: "s1"}, NotifyStudent{StudentID: "s1"})
	// Sync work runs for every batch, as on a store: once for the command,
	// once for the decider's reaction to its event.
	if !slices.Equal(synced, []string{"s1", "s1"}) {
		t.Fatalf("ThenSync ran sync work with state %v", synced)
	}
	sourcedtest.Decider(t, enrolments).
		When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).
		ThenPairs(func(t testing.TB, pairs []effects.Pair) {
			// The command's pair (its event, the sync work, the ack), then
			// the pair of the decider's reaction to that event.
			if len(pairs) != 2 || len(pairs[0].Signals) != 3 {
				t.Fatalf("pairs %+v", pairs)
			}
			if _, ok := pairs[1].Source.Payload.(StudentEnrolled); !ok {
				t.Fatalf("the reaction's source is %T, want the event", pairs[1].Source.Payload)
			}
			if got := effects.Messages(pairs[1:]); len(got) != 1 || !sourcedtest.Match(NotifyStudent{StudentID: "s1"}, got[0]) {
				t.Fatalf("the reaction's pair appends %+v", got)
			}
		})
}

type roster struct{ Students []string }

var rosterProjection = core.Projection[roster]{}.With(
	core.Evolve(func(r roster, e StudentEnrolled) roster { r.Students = append(r.Students, e.StudentID); return r }),
)

func TestProjectorAndProjection(t *testing.T) {
	var written roster
	p := core.Projector[roster]{Group: "rosters", PartitionBy: []string{"course_id"}}.With(
		core.Adopt(rosterProjection),
		core.React(func(_ roster, e StudentEnrolled) []any { return []any{NotifyStudent{StudentID: e.StudentID}} }),
		core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[roster]) error { written = b.State; return nil }),
	)
	sourcedtest.Projector(t, p, sourcedtest.WithRegistry(registry())).
		Given(StudentEnrolled{CourseID: "c1", StudentID: "s1"}).
		And(StudentEnrolled{CourseID: "c1", StudentID: "s2"}).
		Then(func(t testing.TB, r roster) {
			if !slices.Equal(r.Students, []string{"s1", "s2"}) {
				t.Fatalf("roster %+v", r)
			}
		})
	sourcedtest.Projector(t, p).Given(StudentEnrolled{CourseID: "c1", StudentID: "s1"}).ThenSync(func(t testing.TB, r roster) {
		if !slices.Equal(written.Students, []string{"s1"}) {
			t.Fatalf("sync wrote %+v", written)
		}
	})
	sourcedtest.Projector(t, p).Given(StudentEnrolled{CourseID: "c1", StudentID: "s1"}).ThenMessages(NotifyStudent{StudentID: "s1"})
	sourcedtest.Projection(t, rosterProjection).
		Given(StudentEnrolled{StudentID: "a"}, StudentEnrolled{StudentID: "b"}).
		Then(func(t testing.TB, r roster) {
			if len(r.Students) != 2 {
				t.Fatalf("roster %+v", r)
			}
		})
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed string
}

type stop struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	panic(stop{})
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(stop{})
}

func failure(fn func(t testing.TB)) string {
	r := &recorder{}
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stop); !ok {
					panic(v)
				}
			}
		}()
		fn(r)
	}()
	return r.failed
}

func TestFailuresAreReported(t *testing.T) {
	cases := map[string]struct {
		fn   func(t testing.TB)
		want string
	}{
		"wrong event": {func(t testing.TB) {
			sourcedtest.Decider(t, courses).When(CreateCourse{CourseID: "c1", CourseName: "Algebra"}).Then(CourseCreated{CourseID: "c9", CourseName: "Algebra"})
		}, "messages differ"},
		"missing reaction": {func(t testing.TB) {
			sourcedtest.Decider(t, enrolments).When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).Then(StudentEnrolled{CourseID: "c1", StudentID: "s1"})
		}, "NotifyStudent"},
		"unexpected rejection": {func(t testing.TB) {
			sourcedtest.Decider(t, courses).Given(CourseCreated{CourseName: "A"}).When(CreateCourse{CourseID: "c", CourseName: "A"}).Then()
		}, "was rejected"},
		"accepted, error wanted": {func(t testing.TB) {
			sourcedtest.Decider(t, courses).When(CreateCourse{CourseID: "c", CourseName: "A"}).ThenError("boom")
		}, "was accepted"},
		"other error text": {func(t testing.TB) {
			sourcedtest.Decider(t, courses).Given(CourseCreated{CourseName: "A"}).When(CreateCourse{CourseID: "c", CourseName: "A"}).ThenError("boom")
		}, `want "boom"`},
		"no When": {func(t testing.TB) { sourcedtest.Decider(t, courses).Then() }, "needs When"},
		"invalid definition": {func(t testing.TB) {
			bad := courses.With(core.Decide(func(bool, NotifyStudent) ([]any, error) { return nil, nil }))
			sourcedtest.Decider(t, bad, sourcedtest.WithRegistry(registry())).When(NotifyStudent{}).Then()
		}, "definition is invalid"},
		"invalid payload": {func(t testing.TB) {
			sourcedtest.Decider(t, courses, sourcedtest.WithRegistry(registry())).When(CreateCourse{CourseID: "c1"}).Then()
		}, "course_name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := failure(tc.fn)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("failure %q, want it to mention %q", got, tc.want)
			}
		})
	}
	_ = time.Now
}

// A command the registry refuses (a required attribute missing) is the
// rejection shell.Handle answers (a *codec.ValidationError, an HTTP 400),
// which ThenError asserts; it failed the test before. An invalid Given
// event still fails the test: the history is the test's own mistake.
func TestAnInvalidCommandIsARejection(t *testing.T) {
	reg := registry()
	var ve *codec.ValidationError
	sourcedtest.Decider(t, enrolments, sourcedtest.WithRegistry(reg)).
		When(EnrolStudent{CourseID: "c1"}).
		ThenError(&ve)
	if len(ve.Fields) != 1 || ve.Fields[0].Field != "student_id" {
		t.Fatalf("error %v, want it to name student_id", ve)
	}
	sourcedtest.Decider(t, enrolments, sourcedtest.WithRegistry(reg)).
		When(EnrolStudent{CourseID: "c1"}).
		ThenError(codec.ErrInvalid)
	if got := failure(func(t testing.TB) {
		sourcedtest.Decider(t, enrolments, sourcedtest.WithRegistry(reg)).
			When(EnrolStudent{CourseID: "c1"}).
			Then(StudentEnrolled{CourseID: "c1"})
	}); !strings.Contains(got, "was rejected") && !strings.Contains(got, "student_id") {
		t.Fatalf("Then on an invalid command: failure %q, want it to say the command was rejected", got)
	}
	if got := failure(func(t testing.TB) {
		sourcedtest.Decider(t, courses, sourcedtest.WithRegistry(reg)).
			Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}, CreateCourse{CourseID: "c2"}).
			When(CreateCourse{CourseID: "c2", CourseName: "Biology"}).
			Then(CourseCreated{CourseID: "c2", CourseName: "Biology"})
	}); !strings.Contains(got, "course_name") {
		t.Fatalf("an invalid Given event: failure %q, want it to fail the test naming course_name", got)
	}
}

// Chained Whens accumulate: the earlier command is decided first and the
// events it appended are the next one's history, as on a store. Before,
// the second When replaced the first, deciding on the Given history alone.
func TestChainedWhensAccumulate(t *testing.T) {
	sourcedtest.Decider(t, courses, sourcedtest.WithRegistry(registry())).
		When(CreateCourse{CourseID: "c1", CourseName: "Algebra"}).
		When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
		ThenError(errExists)
	sourcedtest.Decider(t, enrolments).
		When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).
		When(EnrolStudent{CourseID: "c1", StudentID: "s2"}).
		ThenState(func(t testing.TB, s []string) {
			if !slices.Equal(s, []string{"s1", "s2"}) {
				t.Fatalf("state %v, want both students", s)
			}
		})
	if got := failure(func(t testing.TB) {
		sourcedtest.Decider(t, courses).
			Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
			When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
			When(CreateCourse{CourseID: "c3", CourseName: "Algebra"}).
			Then()
	}); !strings.Contains(got, "earlier When") {
		t.Fatalf("a rejected earlier When: failure %q, want it to say so", got)
	}
}
