package readme

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

var rosterDB = map[string][]string{} // the application's read model, in memory here

func clearRosters(context.Context) error { clear(rosterDB); return nil }

// The README's failure snippet: a projector with its own error strategy
// (retry, then park the partition) and a hook that clears its read model
// on reset, and what an operator does with a parked partition.
func Example_failures() {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	store := memstore.New(reg, memstore.WithClock(func() time.Time { return now }))

	rosters := core.Projector[[]string]{
		Group: "courses.rosters", PartitionBy: []string{"course_id"},
		Hooks: core.Hooks{
			OnReset: clearRosters, // the group was reset: it replays the log into an empty read model
			ErrorStrategy: &core.ErrorStrategy{
				Retries: 3, After: time.Second, // retry 3 times, 1s, 2s, 3s apart
				Park: true, // then park the partition: the group goes on with the others
			},
		},
	}.With(
		core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
		core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[[]string]) error {
			if b.Partition["course_id"] == "poison" {
				return fmt.Errorf("cannot write roster %s", b.Partition["course_id"])
			}
			rosterDB[b.Partition["course_id"]] = b.State
			return nil
		}),
	)
	router, err := shell.NewRouter(store, shell.RouterOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, rosters)
	if err != nil {
		panic(err)
	}
	_ = router.Setup(ctx)
	_, _ = store.Append(ctx, core.Messages(StudentEnrolled{"poison", "s1"}, StudentEnrolled{"c1", "s2"}), shell.AppendOptions{})
	for range 4 { // the first try and 3 retries
		_ = router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
		if info, _ := store.Group(ctx, "courses.rosters"); !info.RetryAt.IsZero() {
			now = info.RetryAt
		}
	}
	fmt.Println(rosterDB)

	parked, err := store.ParkedPartitions(ctx, "courses.rosters")
	for _, p := range parked {
		fmt.Println(p.Partition, p.Failure.MessageType, p.Failure.Position, p.Attempts(), p.Failure.Error)
	}
	// An operator (or `sourced partitions retry|skip`) then:
	_, err = store.RetryPartition(ctx, "courses.rosters", map[string]string{"course_id": "poison"})    // hand it the message again,
	_, err = store.SkipFailedMessage(ctx, "courses.rosters", map[string]string{"course_id": "poison"}) // or go on after it,
	_, err = store.ResetPartition(ctx, "courses.rosters", map[string]string{"course_id": "poison"})    // or replay the partition
	fmt.Println(err)
	// Output:
	// map[c1:[s2]]
	// course_id:poison courses.enrolled 1 4 cannot write roster poison
	// sourced: partition course_id:poison of consumer group courses.rosters is not parked (parked: none); nothing was changed
}
