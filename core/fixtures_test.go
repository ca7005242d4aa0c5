package core_test

import (
	"errors"
	"fmt"
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
	SendReminder    = testdomain.SendReminder
	CourseRenamed   = testdomain.CourseRenamed
)

// Fixtures of the core tests alone.

// NotifyStudent has student_id as its only attribute, unlike
// testdomain.NotifyStudent: TestConditionsForUsesDeclaredAttributesOnly
// counts the attributes of the conditions it derives.
type NotifyStudent struct {
	StudentID string `json:"student_id" sourced:"required"`
}

type Unregistered struct {
	CourseID string `json:"course_id"`
}

func registry() *codec.Registry {
	reg := codec.NewRegistry()
	err := errors.Join(
		codec.Register[CreateCourse](reg, "courses.create"),
		codec.Register[CourseCreated](reg, "courses.created"),
		codec.Register[EnrolStudent](reg, "courses.enrol_student"),
		codec.Register[StudentEnrolled](reg, "courses.student_enrolled"),
		codec.Register[NotifyStudent](reg, "students.notify"),
		codec.Register[SendReminder](reg, "courses.send_reminder"),
		codec.Register[CourseRenamed](reg, "courses.renamed"),
	)
	if err != nil {
		panic(err)
	}
	return reg
}

type course struct {
	Name      string
	NameTaken bool
}

var courseDecider = core.Decider[course]{
	Group:       "Courses::CourseDecider",
	PartitionBy: []string{"course_name"},
}.With(
	core.Evolve(func(s course, e CourseCreated) course {
		s.Name, s.NameTaken = e.CourseName, true
		return s
	}),
	core.Decide(func(s course, c CreateCourse) ([]any, error) {
		if s.NameTaken {
			return nil, fmt.Errorf("course %q already exists", c.CourseName)
		}
		return []any{CourseCreated{CourseID: c.CourseID, CourseName: c.CourseName}}, nil
	}),
	core.React(func(s course, e CourseCreated) []any {
		return []any{core.After(24*time.Hour, SendReminder{CourseID: e.CourseID})}
	}),
)

type enrolment struct {
	Students []string
}

const capacity = 2

var enrolmentDecider = core.Decider[enrolment]{
	Group:       "courses.enrolment_decider",
	PartitionBy: []string{"course_id"},
}.With(
	core.Evolve(func(s enrolment, e StudentEnrolled) enrolment {
		s.Students = append(s.Students, e.StudentID)
		return s
	}),
	core.Decide(func(s enrolment, c EnrolStudent) ([]any, error) {
		if len(s.Students) >= capacity {
			return nil, fmt.Errorf("course %s is full", c.CourseID)
		}
		return []any{StudentEnrolled{CourseID: c.CourseID, StudentID: c.StudentID}}, nil
	}),
	core.React(func(s enrolment, e StudentEnrolled) []any {
		return []any{NotifyStudent{StudentID: e.StudentID}}
	}),
)
