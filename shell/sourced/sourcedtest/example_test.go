package sourcedtest_test

import (
	"testing"

	"github.com/sourced-go/sourced/shell/sourced/sourcedtest"
)

// Given history, When a command, Then the events and reactions, or an
// error: no store needed.
func ExampleDecider() {
	t := &testing.T{} // in a real test, the test's own t
	sourcedtest.Decider(t, courses).
		Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
		When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
		ThenError(errExists)
	sourcedtest.Decider(t, enrolments).
		When(EnrolStudent{CourseID: "c1", StudentID: "s1"}).
		Then(StudentEnrolled{CourseID: "c1", StudentID: "s1"}, NotifyStudent{StudentID: "s1"})
	// Output:
}
