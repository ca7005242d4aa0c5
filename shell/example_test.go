package shell_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// Handle decides a command synchronously, as a web handler would: the
// command and its events are appended in one transaction, or nothing is.
func ExampleHandle() {
	ctx := context.Background()
	store := memstore.New(courseRegistry()) // sqlitestore.Open in production
	router, _ := shell.NewRouter(store, shell.RouterOptions{}, enrolments)
	_ = router.Setup(ctx) // registers the decider's consumer group

	res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil)
	fmt.Println(res.State, len(res.Events), err)

	_, err = shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil)
	fmt.Println(err)

	_, err = shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1"}, nil)
	fmt.Println(err)
	// Output:
	// [s1] 1 <nil>
	// s1 already enrolled
	// codec: invalid "courses.enrol" payload: student_id: is required
}

// Load reads a decider's state for a partition straight from the log, with
// the guard of the read; Upto loads it as it was at a position.
func ExampleLoad() {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	router, _ := shell.NewRouter(store, shell.RouterOptions{}, enrolments)
	_ = router.Setup(ctx)
	first, _ := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil)
	_, _ = shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s2"}, nil)

	students, guard, _ := shell.Load(ctx, store, enrolments, map[string]string{"course_id": "c1"}, nil)
	fmt.Println(students, guard.LastPosition)

	then, _, _ := shell.Load(ctx, store, enrolments, map[string]string{"course_id": "c1"}, &shell.ReadOptions{Upto: first.Position + 1})
	fmt.Println(then)

	// Appending with the guard of an older read conflicts.
	_, err := store.Append(ctx, core.Messages(StudentEnrolled{CourseID: "c1", StudentID: "s3"}),
		shell.AppendOptions{Guard: &core.Guard{Conditions: guard.Conditions, LastPosition: first.Position}})
	fmt.Println(errors.Is(err, shell.ErrConcurrentAppend))
	// Output:
	// [s1 s2] 4
	// [s1]
	// true
}

// A router drains its reactors: here the enrolment decider reacts to its
// events by dispatching NotifyStudent, which another decider handles.
func ExampleRouter_Drain() {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	router, err := shell.NewRouter(store, shell.RouterOptions{}, enrolments, notifications)
	if err != nil {
		panic(err)
	}
	_ = router.Setup(ctx)
	_, _ = store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: "s1"}), shell.AppendOptions{})
	if err := router.Drain(ctx, nil); err != nil {
		panic(err)
	}
	for m, _ := range store.All(ctx, shell.ReadAllOptions{}) {
		fmt.Println(m.Position, m.Type)
	}
	// Output:
	// 1 courses.enrol
	// 2 courses.enrolled
	// 3 students.notify
	// 4 students.notified
}
