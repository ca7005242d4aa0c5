package core_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// The course example of the manual, used throughout the tests.

type CreateCourse struct {
	CourseID   string `json:"course_id" sourced:"required"`
	CourseName string `json:"course_name" sourced:"required"`
}

type CourseCreated struct {
	CourseID   string `json:"course_id"`
	CourseName string `json:"course_name"`
}

type EnrolStudent struct {
	CourseID  string `json:"course_id" sourced:"required"`
	StudentID string `json:"student_id" sourced:"required"`
}

type StudentEnrolled struct {
	CourseID  string `json:"course_id"`
	StudentID string `json:"student_id"`
}

type NotifyStudent struct {
	StudentID string `json:"student_id" sourced:"required"`
}

type SendReminder struct {
	CourseID string `json:"course_id"`
}

type CourseRenamed struct {
	CourseID string `json:"course_id"`
	Name     string `json:"name"`
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
