package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// Drain reports a batch that failed while draining as a
// *shell.GroupFailedError: the group, its status after the error strategy,
// the partition and message that failed, and the cause. The failure is
// recorded in the group (Stats, sourced stats) too.
func ExampleGroupFailedError() {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	router, _ := shell.NewRouter(store, shell.RouterOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, strictEnrolments)
	_ = router.Setup(ctx)
	for _, s := range []string{"s1", "s2", "s3"} { // the capacity is 2
		_, _ = store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: s}), shell.AppendOptions{})
	}

	err := router.Drain(ctx, nil)
	var failed *shell.GroupFailedError
	if errors.As(err, &failed) {
		fmt.Println(failed.Group, failed.Status, failed.Partition, failed.MessageType, failed.Position)
		fmt.Println(errors.Is(err, errFull))
	}
	info, _ := store.Group(ctx, "courses.enrolments")
	fmt.Println(info.Failure.Partition, info.Failure.ErrorType, info.Failure.Panicked())

	// A test that provokes failures on purpose says so.
	fmt.Println(router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}))
	// Output:
	// courses.enrolments failed course_id:c1 courses.enrol 3
	// true
	// course_id:c1 errors.New("course is full") false
	// <nil>
}
