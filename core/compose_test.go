package core_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
)

type RenameCourse struct {
	CourseID string `json:"course_id"`
	Name     string `json:"name"`
}

func TestCombineRoutesCommandsAndEvents(t *testing.T) {
	both := core.Combine(enrolmentDecider, core.Decider[course]{Group: "courses.names", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(s course, e CourseCreated) course { s.Name = e.CourseName; return s }),
		core.Evolve(func(s course, e StudentEnrolled) course { s.NameTaken = true; return s }),
	))
	if err := both.Check(registry()); err != nil {
		t.Fatalf("combined decider: %v", err)
	}
	s := both.Fold(CourseCreated{CourseID: "c1", CourseName: "Algebra"}, StudentEnrolled{CourseID: "c1", StudentID: "s1"})
	if s.Second.Name != "Algebra" || !s.Second.NameTaken || !slices.Equal(s.First.Students, []string{"s1"}) {
		t.Fatalf("an event handled by both evolves both: %+v", s)
	}
	out, err := both.Run(nil, core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: "s2"}))
	if err != nil || len(out.Events) != 1 || len(out.Reactions) != 1 {
		t.Fatalf("combined Run: %+v, %v", out, err)
	}
	if !out.State.Second.NameTaken {
		t.Fatal("the second decider evolved the first one's event")
	}
	if both.Spec().Group != "courses.enrolment_decider" {
		t.Fatalf("group %q", both.Spec().Group)
	}
}

func TestCombineRefusesACommandDecidedTwice(t *testing.T) {
	both := core.Combine(courseDecider, courseDecider)
	if err := both.Err(); err == nil || !strings.Contains(err.Error(), "both deciders decide") {
		t.Fatalf("err = %v", err)
	}
}

func TestCombineProjections(t *testing.T) {
	count := core.Projection[int]{}.With(core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }))
	p := core.CombineProjections(rosterProjection, count)
	s := p.Fold(StudentEnrolled{StudentID: "a"}, StudentEnrolled{StudentID: "b"})
	if s.Second != 2 || len(s.First.Students) != 2 {
		t.Fatalf("combined projection %+v", s)
	}
}

func TestMapState(t *testing.T) {
	type app struct {
		Courses course
		Other   int
	}
	d := core.MapState(courseDecider, nil,
		func(a app) course { return a.Courses },
		func(a app, c course) app { a.Courses = c; return a })
	_, err := d.Run(core.Messages(CourseCreated{CourseName: "Algebra"}), core.NewMessage(CreateCourse{CourseName: "Algebra"}))
	if err == nil {
		t.Fatal("the mapped decider must decide as the original")
	}
	out, err := d.Run(nil, core.NewMessage(CreateCourse{CourseName: "Algebra"}))
	if err != nil || !out.State.Courses.NameTaken {
		t.Fatalf("mapped state %+v, %v", out.State, err)
	}
}

func TestMapCommandAndEvent(t *testing.T) {
	type CreateByName struct {
		Name string `json:"course_name"`
	}
	d := core.MapCommand(courseDecider, func(c CreateByName) CreateCourse { return CreateCourse{CourseName: c.Name} })
	if d.Handles(core.PayloadType(CreateCourse{})) || !d.Handles(core.PayloadType(CreateByName{})) {
		t.Fatal("MapCommand replaces the command type")
	}
	out, err := d.Run(nil, core.NewMessage(CreateByName{Name: "Algebra"}))
	if err != nil || out.Events[0].Payload.(CourseCreated).CourseName != "Algebra" {
		t.Fatalf("%+v %v", out, err)
	}
	if bad := core.MapCommand(courseDecider, func(c CreateByName) EnrolStudent { return EnrolStudent{} }); bad.Err() == nil {
		t.Fatal("mapping a command the decider does not decide is an error")
	}

	e := core.MapEvent(courseDecider,
		func(c CourseCreated) CourseRenamed { return CourseRenamed{CourseID: c.CourseID, Name: c.CourseName} },
		func(r CourseRenamed) CourseCreated { return CourseCreated{CourseID: r.CourseID, CourseName: r.Name} })
	out, err = e.Run(nil, core.NewMessage(CreateCourse{CourseID: "c1", CourseName: "Algebra"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := out.Events[0].Payload.(CourseRenamed); !ok || got.Name != "Algebra" {
		t.Fatalf("event not mapped: %+v", out.Events[0].Payload)
	}
	if !out.State.NameTaken || len(out.Reactions) != 1 {
		t.Fatalf("the mapped event is evolved and reacted to: %+v", out)
	}
	if _, err := e.Run(core.Messages(CourseRenamed{Name: "Algebra"}), core.NewMessage(CreateCourse{CourseName: "Algebra"})); err == nil {
		t.Fatal("history of mapped events must be evolved")
	}
	_ = errors.New
}
