package core_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
)

// declaredCourse is the course decider with its outputs declared.
var declaredCourse = core.Decider[course]{Group: "courses.declared", PartitionBy: []string{"course_name"}}.With(
	core.Evolve(func(s course, e CourseCreated) course { s.NameTaken = true; return s }),
	core.Decide(func(s course, c CreateCourse) ([]any, error) {
		if c.CourseName == "wrong" {
			return []any{CourseRenamed{CourseID: c.CourseID}}, nil // not declared
		}
		return []any{CourseCreated{CourseID: c.CourseID, CourseName: c.CourseName}}, nil
	}).Emits(CourseCreated{}),
	core.React(func(s course, e CourseCreated) []any {
		if e.CourseID == "wrong" {
			return []any{NotifyStudent{StudentID: "x"}} // not declared
		}
		return []any{core.After(time.Hour, SendReminder{CourseID: e.CourseID})}
	}).Emits(SendReminder{}),
)

func TestEmitsAcceptsDeclaredTypes(t *testing.T) {
	if err := declaredCourse.Err(); err != nil {
		t.Fatal(err)
	}
	d, err := declaredCourse.Run(nil, core.NewMessage(CreateCourse{CourseID: "c1", CourseName: "Maths"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Events) != 1 || len(d.Reactions) != 1 {
		t.Fatalf("events %v reactions %v", d.Events, d.Reactions)
	}
}

func TestEmitsRefusesUndeclaredDecideOutput(t *testing.T) {
	_, err := declaredCourse.Run(nil, core.NewMessage(CreateCourse{CourseID: "c1", CourseName: "wrong"}))
	var ue *core.UndeclaredEmitError
	if !errors.Is(err, core.ErrUndeclaredEmit) || !errors.As(err, &ue) {
		t.Fatalf("err = %v, want an UndeclaredEmitError", err)
	}
	if ue.Emitted != reflect.TypeFor[CourseRenamed]() || ue.Consumes != reflect.TypeFor[CreateCourse]() {
		t.Fatalf("error names %v from %v", ue.Emitted, ue.Consumes)
	}
}

func TestEmitsRefusesUndeclaredReaction(t *testing.T) {
	_, err := declaredCourse.React(course{}, core.NewMessage(CourseCreated{CourseID: "wrong"}))
	if !errors.Is(err, core.ErrUndeclaredEmit) {
		t.Fatalf("err = %v, want ErrUndeclaredEmit", err)
	}
	// In a claimed batch the failure names the message.
	_, err = declaredCourse.Step(core.StepInput{Batch: []core.PositionedMessage{{Message: core.NewMessage(CourseCreated{CourseID: "wrong"}), Position: 3}}})
	var be *core.BatchError
	if !errors.As(err, &be) || !errors.Is(err, core.ErrUndeclaredEmit) || be.Message.Position != 3 {
		t.Fatalf("err = %v, want a BatchError at 3 matching ErrUndeclaredEmit", err)
	}
}

func TestEmitsOnEvolveIsADefinitionError(t *testing.T) {
	d := core.Decider[course]{Group: "g", PartitionBy: []string{"course_name"}}.With(
		core.Evolve(func(s course, e CourseCreated) course { return s }).Emits(CourseCreated{}),
	)
	if d.Err() == nil {
		t.Fatal("Emits on an evolve handler was accepted")
	}
	d = core.Decider[course]{Group: "g", PartitionBy: []string{"course_name"}}.With(
		core.Decide(func(s course, c CreateCourse) ([]any, error) { return nil, nil }).Emits("CourseCreated"),
	)
	if d.Err() == nil {
		t.Fatal("Emits with a string was accepted")
	}
}

func TestDescribeListsDeclaredOutputs(t *testing.T) {
	desc := declaredCourse.Describe()
	if desc.Kind != core.KindDecider {
		t.Fatalf("kind %q", desc.Kind)
	}
	want := map[core.FlowKind][]reflect.Type{
		core.FlowDecide: {reflect.TypeFor[CourseCreated]()},
		core.FlowReact:  {reflect.TypeFor[SendReminder]()},
		core.FlowEvolve: nil,
	}
	for _, f := range desc.Flows {
		w, ok := want[f.Kind]
		if !ok || !f.Known || !slices.Equal(f.Produces, w) {
			t.Errorf("flow %+v, want produces %v known", f, w)
		}
		delete(want, f.Kind)
	}
	if len(want) > 0 {
		t.Errorf("missing flows %v", want)
	}
	// Undeclared handlers are described as not known.
	for _, f := range courseDecider.Describe().Flows {
		if f.Kind != core.FlowEvolve && f.Known {
			t.Errorf("undeclared flow %+v reported known", f)
		}
	}
}

func TestEmitsSurvivesComposition(t *testing.T) {
	type RenameCreate struct {
		CourseID   string `json:"course_id" sourced:"required"`
		CourseName string `json:"course_name" sourced:"required"`
	}
	mapped := core.MapCommand(declaredCourse, func(c RenameCreate) CreateCourse { return CreateCourse(c) })
	var found bool
	for _, f := range mapped.Describe().Flows {
		if f.Kind == core.FlowDecide && f.Consumes == reflect.TypeFor[RenameCreate]() {
			found = f.Known && slices.Equal(f.Produces, []reflect.Type{reflect.TypeFor[CourseCreated]()})
		}
	}
	if !found {
		t.Fatalf("MapCommand lost the declaration: %+v", mapped.Describe().Flows)
	}
	if _, err := mapped.Run(nil, core.NewMessage(RenameCreate{CourseID: "c", CourseName: "wrong"})); !errors.Is(err, core.ErrUndeclaredEmit) {
		t.Fatalf("mapped decider: err = %v, want ErrUndeclaredEmit", err)
	}
	combined := core.Combine(declaredCourse, enrolmentDecider)
	n := 0
	for _, f := range combined.Describe().Flows {
		if f.Kind == core.FlowDecide && f.Known {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("Combine: %d declared decide flows, want 1: %+v", n, combined.Describe().Flows)
	}
}
