package sourced_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sourced-go/sourced/shell/sourced"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The examples' domain: courses with unique names, and enrolments with a
// capacity of two students per course.
type (
	CreateCourse struct {
		CourseID   string `json:"course_id" sourced:"required"`
		CourseName string `json:"course_name" sourced:"required"`
	}
	CourseCreated struct {
		CourseID   string `json:"course_id"`
		CourseName string `json:"course_name"`
	}
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	WelcomeStudent struct {
		StudentID string `json:"student_id" sourced:"required"`
		CourseID  string `json:"course_id"`
	}
	StudentWelcomed struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
	// SendCertificate is a job: a certificate to e-mail.
	SendCertificate struct {
		StudentID string `json:"student_id" sourced:"required"`
		CourseID  string `json:"course_id"`
	}
)

func registry() *sourced.Registry {
	reg := sourced.NewRegistry()
	if err := errors.Join(
		sourced.Register[CreateCourse](reg, "courses.create"),
		sourced.Register[CourseCreated](reg, "courses.created"),
		sourced.Register[EnrolStudent](reg, "courses.enrol"),
		sourced.Register[StudentEnrolled](reg, "courses.enrolled"),
		sourced.Register[WelcomeStudent](reg, "students.welcome"),
		sourced.Register[StudentWelcomed](reg, "students.welcomed"),
		sourced.Register[SendCertificate](reg, "students.send_certificate"),
	); err != nil {
		panic(err)
	}
	return reg
}

// courseNames keeps course names unique: its boundary is the name.
var courseNames = sourced.Decider[bool]{Group: "courses.names", PartitionBy: []string{"course_name"}}.With(
	sourced.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	sourced.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("course %q already exists", c.CourseName)
		}
		return []any{CourseCreated(c)}, nil
	}),
)

// enrolments keeps each course to two students and has every student it
// enrols welcomed, in the background.
var enrolments = sourced.Decider[[]string]{Group: "courses.enrolments", PartitionBy: []string{"course_id"}}.With(
	sourced.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	sourced.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		switch {
		case slices.Contains(s, c.StudentID):
			return nil, fmt.Errorf("%s is already enrolled", c.StudentID)
		case len(s) >= 2:
			return nil, fmt.Errorf("course %s is full", c.CourseID)
		}
		return []any{StudentEnrolled(c)}, nil
	}),
	sourced.React(func(_ []string, e StudentEnrolled) []any {
		return []any{WelcomeStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
	}),
)

// welcomes decides the welcomes enrolments dispatch.
var welcomes = sourced.Decider[bool]{Group: "students.welcomes", PartitionBy: []string{"student_id"}}.With(
	sourced.Decide(func(_ bool, c WelcomeStudent) ([]any, error) { return []any{StudentWelcomed(c)}, nil }),
)

// openStore opens a store in memory, for the examples (a file path in an
// application).
func openStore(ctx context.Context) *sqlitestore.Store {
	store, err := sqlitestore.Install(ctx, ":memory:", sqlitestore.Options{Registry: registry()})
	if err != nil {
		panic(err)
	}
	return store
}
