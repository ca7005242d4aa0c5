package sourced_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/shell/sourced"
)

// The runtime runs reactions in the background: enrolling a student
// dispatches a welcome, which another decider decides. A Module carries a
// bounded context's reactors as one value.
func ExampleNewRuntime() {
	ctx := context.Background()
	store := openStore(ctx)
	defer store.Close()

	rt, err := sourced.NewRuntime(store, sourced.DefaultConfig(), sourced.Module{enrolments, welcomes})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := rt.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Stop(ctx)

	_, _ = sourced.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "ada"})
	if err := rt.WaitIdle(ctx, 0); err != nil { // for tests and examples: until everything settled
		fmt.Println(err)
	}
	for m, err := range store.All(ctx, sourced.ReadAllOptions{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d %T\n", m.Position, m.Payload)
	}
	// Output:
	// 1 sourced_test.EnrolStudent
	// 2 sourced_test.StudentEnrolled
	// 3 sourced_test.WelcomeStudent
	// 4 sourced_test.StudentWelcomed
}

// Supervise is what a worker process's main calls: it runs the runtime
// until SIGINT or SIGTERM (or ctx ends), then stops it gracefully.
func ExampleSupervise() {
	store := openStore(context.Background())
	defer store.Close()
	rt, err := sourced.NewRuntime(store, sourced.DefaultConfig(), enrolments, welcomes)
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel) // SIGTERM, in a real process
	fmt.Println(sourced.Supervise(ctx, rt))
	// Output: <nil>
}
