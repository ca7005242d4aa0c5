package sourced_test

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/shell/sourced"
)

// A decider's consistency boundary is its PartitionBy attributes: here the
// course name, so two courses cannot share a name, however concurrent the
// commands.
func ExampleDecider() {
	ctx := context.Background()
	store := openStore(ctx)
	defer store.Close()

	for _, c := range []CreateCourse{
		{CourseID: "c1", CourseName: "Algebra"},
		{CourseID: "c2", CourseName: "Algebra"},
		{CourseID: "c2", CourseName: "Geometry"},
	} {
		res, err := sourced.Handle(ctx, store, courseNames, c)
		if err != nil {
			fmt.Println(c.CourseID, c.CourseName, "refused:", err)
			continue
		}
		fmt.Println(c.CourseID, c.CourseName, "stored at", res.Position)
	}
	// Output:
	// c1 Algebra stored at 1
	// c2 Algebra refused: course "Algebra" already exists
	// c2 Geometry stored at 3
}

// Register registers a message type under a stable name; a field tagged
// `sourced:"required"` must be present and non-empty, or the message is
// refused with a *ValidationError naming it.
func ExampleRegister() {
	reg := sourced.NewRegistry()
	if err := sourced.Register[CreateCourse](reg, "courses.create"); err != nil {
		fmt.Println(err)
	}
	fmt.Println(reg.Validate(CreateCourse{CourseID: "c1"}))
	// Output:
	// codec: invalid "courses.create" payload: course_name: is required
}
