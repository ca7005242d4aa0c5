package topology_test

import (
	"fmt"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell/workflow"
	"github.com/sourced-go/sourced/statechart"
)

// The course domain of the tests, declared once in testdomain.
type (
	CreateCourse    = testdomain.CreateCourse
	CourseCreated   = testdomain.CourseCreated
	EnrolStudent    = testdomain.EnrolStudent
	StudentEnrolled = testdomain.StudentEnrolled
)

type (
	OpenEnrolment struct {
		CourseID string `json:"course_id" sourced:"required"`
	}
	EnrolmentOpened struct {
		CourseID string `json:"course_id"`
	}
	CloseCourse struct {
		CourseID string `json:"course_id" sourced:"required"`
	}
	CourseRef struct {
		CourseID string `json:"course_id"`
	}
	DraftState struct {
		CourseRef
		statechart.Move
	}
	OpenState struct {
		CourseRef
		statechart.Move
	}
	ClosedState struct {
		CourseRef
		statechart.Move
	}
)

type fixture struct {
	reg        *codec.Registry
	courses    core.Decider[bool]
	enrolments core.Decider[int]
	catalog    core.Projector[map[string]string]
	lifecycle  statechart.Machine[struct{}]
	greeting   *workflow.Definition[string, string]
}

func newFixture() fixture {
	reg := codec.NewRegistry()
	codec.MustRegister[CreateCourse](reg, "courses.create_course")
	codec.MustRegister[CourseCreated](reg, "courses.course_created")
	codec.MustRegister[EnrolStudent](reg, "courses.enrol_student")
	codec.MustRegister[StudentEnrolled](reg, "courses.student_enrolled")
	codec.MustRegister[OpenEnrolment](reg, "courses.open_enrolment")
	codec.MustRegister[EnrolmentOpened](reg, "courses.enrolment_opened")
	codec.MustRegister[CloseCourse](reg, "courses.close_course")
	f := fixture{reg: reg}
	f.courses = core.Decider[bool]{Group: "courses.course_decider", Label: "CourseDecider", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(bool, CourseCreated) bool { return true }),
		core.Decide(func(exists bool, c CreateCourse) ([]any, error) {
			if exists {
				return nil, fmt.Errorf("course %s exists", c.CourseID)
			}
			return []any{CourseCreated(c)}, nil
		}).Emits(CourseCreated{}),
		core.React(func(_ bool, e CourseCreated) []any {
			return []any{core.After(time.Hour, OpenEnrolment{CourseID: e.CourseID})}
		}).Emits(OpenEnrolment{}),
		core.Decide(func(bool, OpenEnrolment) ([]any, error) { return nil, nil }).Emits(EnrolmentOpened{}),
	)
	f.enrolments = core.Decider[int]{Group: "courses.enrolment_decider", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }),
		core.Decide(func(n int, c EnrolStudent) ([]any, error) { return []any{StudentEnrolled(c)}, nil }), // undeclared
	)
	f.catalog = core.Projector[map[string]string]{Group: "courses.catalog", Label: "Catalog", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(m map[string]string, e CourseCreated) map[string]string { return m }),
		core.Evolve(func(m map[string]string, e StudentEnrolled) map[string]string { return m }),
	)
	draft := statechart.Declare[DraftState]("draft")
	open := statechart.Declare[OpenState]("open")
	closed := statechart.Declare[ClosedState]("closed")
	f.lifecycle = statechart.Machine[struct{}]{Group: "courses.lifecycle", PartitionBy: []string{"course_id"}, Registry: reg}.Chart(
		statechart.Initial(statechart.On[CourseCreated](draft)),
		statechart.Place(draft, statechart.On[EnrolmentOpened](open)),
		statechart.Place(open,
			statechart.After(30*24*time.Hour, CloseCourse{}),
			statechart.Command[CloseCourse](closed)),
		statechart.Final(closed),
	)
	if err := f.lifecycle.Register(reg); err != nil {
		panic(err)
	}
	f.greeting = workflow.Define("greeting", func(w *workflow.Workflow, name string) (string, error) { return "hello " + name, nil })
	if err := f.greeting.Register(reg); err != nil {
		panic(err)
	}
	return f
}

func (f fixture) all() []any {
	return []any{f.courses, f.enrolments, f.catalog, f.lifecycle, f.greeting}
}
