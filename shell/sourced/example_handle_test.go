package sourced_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sourced-go/sourced/shell/sourced"
)

// Handle decides a command synchronously, as a web handler does: the
// command and its events are stored in one transaction, or nothing is, and
// the error says what to answer.
func ExampleHandle() {
	ctx := context.Background()
	store := openStore(ctx)
	defer store.Close()

	res, err := sourced.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "ada"})
	fmt.Println(res.State, len(res.Events), err)

	for _, cmd := range []EnrolStudent{
		{CourseID: "c1", StudentID: "ada"}, // refused by the decider
		{CourseID: "c1"},                   // invalid: nothing is decided
	} {
		_, err := sourced.Handle(ctx, store, enrolments, cmd)
		var invalid *sourced.ValidationError
		switch {
		case errors.As(err, &invalid):
			fmt.Println("400:", invalid.Fields[0].Field, invalid.Fields[0].Problem)
		case errors.Is(err, sourced.ErrBusy):
			fmt.Println("503: try again")
		case err != nil:
			fmt.Println("409:", err)
		}
	}
	// Output:
	// [ada] 1 <nil>
	// 409: ada is already enrolled
	// 400: student_id is required
}
