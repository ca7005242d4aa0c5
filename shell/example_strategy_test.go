package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// mailer sends each notification through a gateway that fails as its
// course id says: "down" (transient), "bounced" (permanent).
type mailer struct{}

var errMailboxGone = errors.New("mailbox gone")

func (mailer) GroupID() string         { return "example.mailer" }
func (mailer) HandledTypes() []string  { return []string{"students.notify"} }
func (mailer) PartitionKeys() []string { return []string{"student_id"} }
func (mailer) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for i, m := range c.Messages {
		switch m.Payload.(NotifyStudent).CourseID {
		case "down":
			return pairs, &core.BatchError{Message: m, Index: i, Err: errGatewayDown}
		case "bounced":
			return pairs, &core.BatchError{Message: m, Index: i, Err: core.Permanent(errMailboxGone)}
		}
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{}}})
	}
	return pairs, nil
}

// A strategy that decides from the error, the message and the attempt:
// a Permanent error skips its message at once, a transient one is retried
// with a back-off of its own three times, then parks its partition.
func ExampleErrorStrategyFunc() {
	ctx := context.Background()
	clk := newClock()
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	strategy := core.ErrorStrategyFunc(func(a core.FailedAttempt) core.ErrorDecision {
		switch {
		case core.IsPermanent(a.Err):
			return core.SkipMessage()
		case a.Retries < 3:
			return core.RetryAt(a.Now.Add(time.Duration(a.Retries+1) * time.Minute))
		}
		return core.ParkPartition()
	})
	strategy = strategy.OnFail(func(_ context.Context, f core.FailureReport) {
		fmt.Printf("%s at position %d: %v (skipped %v, parked %v)\n", core.Partition(f.Partition).String(), f.Message.Position, f.Err, f.Skipped, f.Parked)
	})
	router, _ := shell.NewRouter(store, shell.RouterOptions{ErrorStrategy: strategy, Now: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, mailer{})
	_ = router.Setup(ctx)
	_, _ = store.Append(ctx, core.Messages(NotifyStudent{StudentID: "s1", CourseID: "bounced"}, NotifyStudent{StudentID: "s2", CourseID: "down"}), shell.AppendOptions{})
	for retry := 1; retry <= 4; retry++ {
		_ = router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
		clk.Advance(time.Duration(retry) * time.Minute)
	}
	// Output:
	// student_id:s1 at position 1: sourced: message 0 (students.notify at position 1) failed: mailbox gone (skipped true, parked false)
	// student_id:s2 at position 2: sourced: message 0 (students.notify at position 2) failed: gateway down (skipped false, parked true)
}

// A command a background worker's decider refuses is an outcome: the
// refusal is recorded and the group goes on; the sender awaits the
// command's outcome, matching the decider's sentinel with errors.Is.
func ExampleAwaitCommand() {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	router, _ := shell.NewRouter(store, shell.RouterOptions{}, enrolments)
	_ = router.Setup(ctx)
	res, _ := store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: "s1"}, EnrolStudent{CourseID: "c1", StudentID: "s2"}, EnrolStudent{CourseID: "c1", StudentID: "s3"}), shell.AppendOptions{})
	fmt.Println("drain:", router.Drain(ctx, nil)) // the capacity is 2

	for _, cmd := range res.Messages {
		out, err := shell.AwaitCommand(ctx, store, cmd.ID, nil)
		switch {
		case errors.Is(err, errFull):
			fmt.Println(cmd.Payload.(EnrolStudent).StudentID, "refused:", out.Refusal.Message)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println(cmd.Payload.(EnrolStudent).StudentID, "enrolled:", out.Events[0].Type)
		}
	}
	// Output:
	// drain: <nil>
	// s1 enrolled: courses.enrolled
	// s2 enrolled: courses.enrolled
	// s3 refused: course is full
}
