package sourced_test

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/shell/sourced"
)

// A queue does jobs in the background: append a job (a registered message
// type) and one of the runtime's workers does it, once, and deletes it
// from the log. A job whose Work fails is tried again after a back-off,
// as a new job counting its attempts, while the other jobs go on; when its
// attempts run out it is parked for an operator to retry or skip.
func ExampleNewQueue() {
	ctx := context.Background()
	store := openStore(ctx)
	defer store.Close()

	certificates := sourced.NewQueue("students.certificates", func(ctx context.Context, job sourced.Job[SendCertificate]) error {
		fmt.Printf("e-mailing %s the certificate of %s (attempt %d)\n", job.Payload.StudentID, job.Payload.CourseID, job.Attempt)
		return nil // an error: tried again later (Attempts, Backoff)
	})
	cfg := sourced.DefaultConfig()
	cfg.Workers = 1
	rt, err := sourced.NewRuntime(store, cfg, certificates)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := rt.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Stop(ctx)

	// Enqueue: append the job, alone or with the events that call for it.
	_, err = store.Append(ctx, sourced.Messages(SendCertificate{StudentID: "ada", CourseID: "c1"}), sourced.AppendOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := rt.WaitIdle(ctx, 0); err != nil {
		fmt.Println(err)
	}
	left := 0
	for _, err := range store.All(ctx, sourced.ReadAllOptions{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		left++
	}
	fmt.Println("jobs left in the log:", left)
	// Output:
	// e-mailing ada the certificate of c1 (attempt 1)
	// jobs left in the log: 0
}
