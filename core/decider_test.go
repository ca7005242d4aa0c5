package core_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
)

func stamped(payload any, at time.Time) core.Message {
	return core.NewMessage(payload).Stamp(uuid.New(), at)
}

func TestDeciderRunDecidesAndReacts(t *testing.T) {
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	cmd := stamped(CreateCourse{CourseID: "c1", CourseName: "Algebra"}, created)
	out, err := courseDecider.Run(nil, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 1 || out.Events[0].Payload != (CourseCreated{CourseID: "c1", CourseName: "Algebra"}) {
		t.Fatalf("events: %+v", out.Events)
	}
	if e := out.Events[0]; e.CausationID != cmd.ID || e.CorrelationID != cmd.ID {
		t.Fatalf("event not correlated with the command: %+v", e)
	}
	if !out.State.NameTaken || out.State.Name != "Algebra" {
		t.Fatalf("state after the events: %+v", out.State)
	}
	if len(out.Reactions) != 1 || out.Reactions[0].Payload != (SendReminder{CourseID: "c1"}) {
		t.Fatalf("reactions: %+v", out.Reactions)
	}
	r := out.Reactions[0]
	if r.Metadata["producer"] != "Courses::CourseDecider" || r.CorrelationID != cmd.ID {
		t.Fatalf("reaction envelope: %+v", r)
	}
}

func TestDeciderRejects(t *testing.T) {
	history := core.Messages(CourseCreated{CourseID: "c1", CourseName: "Algebra"})
	_, err := courseDecider.Run(history, core.NewMessage(CreateCourse{CourseID: "c2", CourseName: "Algebra"}))
	if err == nil || err.Error() != `course "Algebra" already exists` {
		t.Fatalf("err = %v", err)
	}
	_, err = courseDecider.Run(nil, core.NewMessage(EnrolStudent{}))
	if !errors.Is(err, core.ErrNotHandled) {
		t.Fatalf("an unhandled command: %v", err)
	}
}

func TestReactionDelayIsRelativeToTheEvent(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	evt := stamped(CourseCreated{CourseID: "c1", CourseName: "Algebra"}, at)
	rs, err := courseDecider.React(course{}, evt)
	if err != nil || len(rs) != 1 {
		t.Fatalf("React = %v, %v", rs, err)
	}
	if !rs[0].CreatedAt.Equal(at.Add(24 * time.Hour)) {
		t.Fatalf("reminder at %v", rs[0].CreatedAt)
	}
	if rs[0].CausationID != evt.ID {
		t.Fatal("reaction not caused by the event")
	}
	fixed := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := courseDecider.With(core.React(func(s course, e CourseRenamed) []any {
		return []any{core.At(fixed, SendReminder{CourseID: e.CourseID})}
	}))
	rs, _ = d.React(course{}, stamped(CourseRenamed{CourseID: "c1"}, at))
	if len(rs) != 1 || !rs[0].CreatedAt.Equal(fixed) {
		t.Fatalf("At: %+v", rs)
	}
}

func TestStepDecidesEachCommandOnTheOnesBefore(t *testing.T) {
	at := time.Now()
	batch := []core.PositionedMessage{
		{Message: stamped(EnrolStudent{CourseID: "c1", StudentID: "s1"}, at), Position: 1},
		{Message: stamped(EnrolStudent{CourseID: "c1", StudentID: "s2"}, at), Position: 2},
		{Message: stamped(EnrolStudent{CourseID: "c1", StudentID: "s3"}, at), Position: 3},
	}
	outs, err := enrolmentDecider.Step(core.StepInput{Partition: map[string]string{"course_id": "c1"}, Batch: batch})
	var be *core.BatchError
	if !errors.As(err, &be) || be.Index != 2 || be.Message.Position != 3 {
		t.Fatalf("the third enrolment exceeds capacity: err = %v", err)
	}
	if len(outs) != 2 || len(outs[0].Events) != 1 || len(outs[1].Events) != 1 {
		t.Fatalf("outcomes before the failure: %+v", outs)
	}
	if outs[1].Events[0].CausationID != batch[1].ID {
		t.Fatal("events correlated with their own command")
	}
}

func TestStepReactsToEventsUnlessReplaying(t *testing.T) {
	evt := core.PositionedMessage{Message: stamped(StudentEnrolled{CourseID: "c1", StudentID: "s1"}, time.Now()), Position: 7}
	in := core.StepInput{Partition: map[string]string{"course_id": "c1"}, History: []core.PositionedMessage{evt}, Batch: []core.PositionedMessage{evt}}
	outs, err := enrolmentDecider.Step(in)
	if err != nil || len(outs) != 1 || len(outs[0].Reactions) != 1 {
		t.Fatalf("reaction: %+v, %v", outs, err)
	}
	in.Replaying = true
	outs, _ = enrolmentDecider.Step(in)
	if len(outs) != 1 || len(outs[0].Reactions) != 0 {
		t.Fatalf("replay must not react: %+v", outs)
	}
	cmd := core.PositionedMessage{Message: stamped(EnrolStudent{CourseID: "c1", StudentID: "s2"}, time.Now()), Position: 8}
	in.Batch = []core.PositionedMessage{cmd}
	outs, _ = enrolmentDecider.Step(in)
	if len(outs) != 1 || len(outs[0].Events) != 0 {
		t.Fatalf("a replayed command was decided again: %+v", outs)
	}
}

func TestSyncWorkIsBoundToTheBatch(t *testing.T) {
	var got core.Batch[enrolment]
	var after int
	d := enrolmentDecider.With(
		core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[enrolment]) error { got = b; return nil }),
		core.AfterSync(func(ctx context.Context, b core.Batch[enrolment]) error { after++; return nil }),
	)
	cmd := core.PositionedMessage{Message: stamped(EnrolStudent{CourseID: "c1", StudentID: "s1"}, time.Now()), Position: 1}
	outs, err := d.Step(core.StepInput{Batch: []core.PositionedMessage{cmd}})
	if err != nil || len(outs[0].Sync) != 1 || len(outs[0].AfterSync) != 1 {
		t.Fatalf("outs %+v err %v", outs, err)
	}
	if err := outs[0].Sync[0](context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_ = outs[0].AfterSync[0](context.Background())
	if len(got.State.Students) != 1 || len(got.Events) != 1 || got.Messages[0].Position != 1 || after != 1 {
		t.Fatalf("sync saw %+v, after ran %d times", got, after)
	}
}

func TestDefinitionErrors(t *testing.T) {
	dup := courseDecider.With(core.Evolve(func(s course, e CourseCreated) course { return s }))
	if err := dup.Err(); err == nil || !strings.Contains(err.Error(), "two evolve handlers") {
		t.Fatalf("duplicate evolve: %v", err)
	}
	if courseDecider.Err() != nil {
		t.Fatal("With must not change the decider it was called on")
	}
	notStruct := core.Decider[course]{}.With(core.Evolve(func(s course, e string) course { return s }))
	if err := notStruct.Err(); err == nil || !strings.Contains(err.Error(), "not a struct") {
		t.Fatalf("non-struct message: %v", err)
	}
	p := core.Projection[course]{}.With(core.Decide(func(s course, c CreateCourse) ([]any, error) { return nil, nil }))
	if p.Err() == nil {
		t.Fatal("a projection with a decide handler must be an error")
	}
	pr := core.Projector[course]{}.With(core.Decide(func(s course, c CreateCourse) ([]any, error) { return nil, nil }))
	if pr.Err() == nil {
		t.Fatal("a projector with a decide handler must be an error")
	}
}

func TestCheckPartitionSchema(t *testing.T) {
	reg := registry()
	if err := courseDecider.Check(reg); err != nil {
		t.Fatalf("the course decider is valid: %v", err)
	}
	if err := enrolmentDecider.Check(reg); err != nil {
		t.Fatalf("the enrolment decider is valid: %v", err)
	}
	evolveNone := func(s course, _ NotifyStudent) course { return s }
	decideNoKey := func(s course, _ NotifyStudent) ([]any, error) { return nil, nil }
	cases := []struct {
		name    string
		d       core.Decider[course]
		message string
		key     string
		problem string
	}{
		{"command lacks a key", courseDecider.With(core.Decide(decideNoKey)), "students.notify", "course_name", "every partition key"},
		{"command key not required", core.Decider[course]{Group: "g", PartitionBy: []string{"course_id"}}.With(
			core.Decide(func(s course, _ CourseRenamed) ([]any, error) { return nil, nil })), "courses.renamed", "course_id", "required attribute"},
		{"evolved event declares no key", courseDecider.With(core.Evolve(evolveNone)), "students.notify", "", "at least one partition key"},
		{"key of another Go type", core.Decider[course]{Group: "g", PartitionBy: []string{"course_name"}, KeyTypes: map[string]reflect.Type{"course_name": reflect.TypeFor[int]()}}.With(
			core.Decide(func(s course, c CreateCourse) ([]any, error) { return nil, nil })), "courses.create", "course_name", "Go type"},
		{"no type declares every key", core.Decider[course]{Group: "g", PartitionBy: []string{"course_name", "student_id"}}.With(
			core.Evolve(func(s course, _ CourseCreated) course { return s })), "", "", "no handled message declares every partition key"},
		{"unregistered type", courseDecider.With(core.Evolve(func(s course, _ Unregistered) course { return s })), "core_test.Unregistered", "", "unregistered"},
		{"no partition, not exclusive", core.Decider[course]{Group: "g"}.With(core.Decide(decideNoKey)), "", "", "only an Exclusive group"},
		{"bad group id", core.Decider[course]{Group: "bad group", PartitionBy: []string{"course_name"}}.With(core.Decide(func(s course, c CreateCourse) ([]any, error) { return nil, nil })), "", "", "not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Check(reg)
			if !errors.Is(err, core.ErrDefinition) {
				t.Fatalf("Check = %v, want a definition error", err)
			}
			var de *core.DefinitionError
			found := false
			for _, e := range unwrapAll(err) {
				if errors.As(e, &de) && de.Message == tc.message && de.Key == tc.key && strings.Contains(de.Problem, tc.problem) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no error for message %q key %q with %q in: %v", tc.message, tc.key, tc.problem, err)
			}
		})
	}
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unwrapAll(e)...)
		}
		return out
	}
	return []error{err}
}

func TestSpec(t *testing.T) {
	s := enrolmentDecider.Spec()
	if s.Group != "courses.enrolment_decider" || s.Label != s.Group || !s.History {
		t.Fatalf("spec %+v", s)
	}
	want := []reflect.Type{reflect.TypeFor[EnrolStudent](), reflect.TypeFor[StudentEnrolled]()}
	if !reflect.DeepEqual(s.Handled, want) {
		t.Fatalf("handled %v, want commands then reaction types %v", s.Handled, want)
	}
	if !reflect.DeepEqual(s.Evolved, []reflect.Type{reflect.TypeFor[StudentEnrolled]()}) {
		t.Fatalf("evolved %v", s.Evolved)
	}
	if got := courseDecider.Spec().Group; got != "courses.course_decider" {
		t.Fatalf("group normalised to %q", got)
	}
}

// EvolveHistory folds positioned messages as Evolve folds their messages,
// handlers, order and unhandled types alike.
func TestEvolveHistoryIsEvolve(t *testing.T) {
	tally := core.Decider[[]string]{Group: "tally", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(s []string, e CourseCreated) []string { return append(s, "created "+e.CourseName) }),
		core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, "enrolled "+e.StudentID) }),
	)
	rapid.Check(t, func(t *rapid.T) {
		var history []core.PositionedMessage
		for i, k := range rapid.SliceOf(rapid.IntRange(0, 2)).Draw(t, "kinds") {
			var p any = CourseCreated{CourseID: "c", CourseName: fmt.Sprint("n", i)}
			switch k {
			case 1:
				p = StudentEnrolled{CourseID: "c", StudentID: fmt.Sprint("s", i)}
			case 2:
				p = CreateCourse{CourseID: "c", CourseName: "x"} // not evolved: skipped
			}
			history = append(history, core.PositionedMessage{Message: core.NewMessage(p), Position: int64(i + 1)})
		}
		want := tally.Evolve([]string{"start"}, core.MessagesOf(history)...)
		if got := tally.EvolveHistory([]string{"start"}, history); !slices.Equal(got, want) {
			t.Fatalf("EvolveHistory = %v, Evolve = %v", got, want)
		}
	})
}
