package shell_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// The parking strategy sets a poisoned partition aside instead of failing
// the whole group: the other partitions flow, and an operator retries the
// partition, skips the message it failed at, or resets it.
func ExampleErrorStrategy_park() {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	router, _ := shell.NewRouter(store, shell.RouterOptions{
		Logger:        quiet,
		ErrorStrategy: shell.ErrorStrategy{Park: true}, // no retries: park at the first failure
	}, strictEnrolments) // a refusal fails the batch (core.Hooks.RefusalsFail)
	_ = router.Setup(ctx)
	for _, e := range []EnrolStudent{{CourseID: "c1", StudentID: "s1"}, {CourseID: "c1", StudentID: "s2"}, {CourseID: "c1", StudentID: "s3"}, {CourseID: "c2", StudentID: "s4"}} { // c1 is full at s3
		_, _ = store.Append(ctx, core.Messages(e), shell.AppendOptions{})
	}

	fmt.Println(router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}))
	info, _ := store.Group(ctx, "courses.enrolments")
	fmt.Println("group:", info.Status)
	parked, _ := store.ParkedPartitions(ctx, "courses.enrolments")
	for _, p := range parked {
		fmt.Println("parked:", core.Partition(p.Partition).String(), p.Failure.MessageType, "at", p.Failure.Position, "after", p.Attempts(), "attempt(s):", p.Failure.Error)
	}

	// The operator skips the message the partition failed at.
	skipped, _ := store.SkipFailedMessage(ctx, "courses.enrolments", map[string]string{"course_id": "c1"})
	fmt.Println("skipped position", skipped.Failure.Position)
	parked, _ = store.ParkedPartitions(ctx, "courses.enrolments")
	fmt.Println(len(parked), "parked")
	// Output:
	// <nil>
	// group: active
	// parked: course_id:c1 courses.enrol at 3 after 1 attempt(s): sourced: message 2 (courses.enrol at position 3) failed: course is full
	// skipped position 3
	// 0 parked
}

// Listeners hear about every retry and failure of a strategy, in the order
// they were added: functions (OnRetry, OnFail) or a Reporter.
func ExampleErrorStrategy_OnRetry() {
	ctx := context.Background()
	clk := newClock()
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	strategy := shell.ErrorStrategy{Retries: 1, After: time.Second}.
		OnRetry(func(_ context.Context, r shell.RetryReport) {
			fmt.Printf("retry %d of %s %s (position %d) at +%v: %v\n", r.RetryCount, r.Group, r.Message.Type, r.Message.Position, r.RetryAt.Sub(clk.Now()), r.Err)
		}).
		OnFail(func(_ context.Context, f shell.FailureReport) {
			fmt.Printf("%s failed after %d retries in %s\n", f.Group, f.RetryCount, core.Partition(f.Partition).String())
		})
	router, _ := shell.NewRouter(store, shell.RouterOptions{ErrorStrategy: strategy, Now: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, strictEnrolments)
	_ = router.Setup(ctx)
	for _, s := range []string{"s1", "s2", "s3"} { // the capacity is 2
		_, _ = store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: s}), shell.AppendOptions{})
	}
	_ = router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	clk.Advance(time.Second)
	_ = router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	// Output:
	// retry 1 of courses.enrolments courses.enrol (position 3) at +1s: sourced: message 2 (courses.enrol at position 3) failed: course is full
	// courses.enrolments failed after 1 retries in course_id:c1
}

// A definition declares its lifecycle hooks in its Hooks field: the
// router calls them after an operator command, here a projector clearing
// its read model when its group is reset.
func ExampleRouter_Reset() {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rm := &rosters{}
	p := rosterProjector(rm)
	p.Hooks = core.Hooks{
		OnStop: func(_ context.Context, reason string) error { fmt.Println("stopped:", reason); return nil },
		OnReset: func(context.Context) error {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			rm.m = nil
			fmt.Println("read model cleared")
			return nil
		},
	}
	router, _ := shell.NewRouter(store, shell.RouterOptions{}, p)
	_ = router.Setup(ctx)
	_, _ = store.Append(ctx, core.Messages(StudentEnrolled{CourseID: "c1", StudentID: "s1"}), shell.AppendOptions{})
	_ = router.Drain(ctx, nil)
	fmt.Println(rm.get("c1"))

	_ = router.Stop(ctx, p, "rebuild")
	_ = router.Reset(ctx, p)
	fmt.Println(rm.get("c1"))
	_ = router.Start(ctx, p)
	_ = router.Drain(ctx, nil) // the replay rebuilds it
	fmt.Println(rm.get("c1"))
	// Output:
	// [s1]
	// stopped: rebuild
	// read model cleared
	// []
	// [s1]
}
