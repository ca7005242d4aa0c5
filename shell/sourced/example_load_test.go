package sourced_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sourced-go/sourced/shell/sourced"
)

// Load reads a state straight from the log with the guard of the read: an
// append with that guard is refused if a message the read would have seen
// arrived since, so a decision made outside Handle stays consistent.
func ExampleLoad() {
	ctx := context.Background()
	store := openStore(ctx)
	defer store.Close()
	_, _ = sourced.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "ada"})

	students, guard, err := sourced.Load(ctx, store, enrolments, sourced.Partition{"course_id": "c1"})
	fmt.Println(students, err)

	// Someone else enrols a student after the read...
	_, _ = sourced.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "bob"})

	// ...so an append decided on the stale read is refused.
	_, err = store.Append(ctx, sourced.Messages(StudentEnrolled{CourseID: "c1", StudentID: "cy"}),
		sourced.AppendOptions{Guard: &guard})
	fmt.Println(errors.Is(err, sourced.ErrConcurrentAppend))
	// Output:
	// [ada] <nil>
	// true
}
