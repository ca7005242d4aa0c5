package shell_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// withdrawer withdraws the scheduled message whose id the enrolment's
// student id names, then runs fail (if any) in the same transaction.
type withdrawer struct{ fail error }

func (withdrawer) HandledTypes() []string  { return []string{"courses.enrolled"} }
func (withdrawer) PartitionKeys() []string { return []string{"course_id"} }
func (w withdrawer) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		signals := []effects.Signal{effects.Unschedule{IDs: []uuid.UUID{uuid.MustParse(m.Payload.(StudentEnrolled).StudentID)}}}
		if w.fail != nil {
			signals = append(signals, effects.Sync{Work: func(context.Context, core.SyncTx) error { return w.fail }})
		}
		pairs = append(pairs, effects.Pair{Source: m, Signals: signals})
	}
	return pairs, nil
}

// effects.Unschedule withdraws a scheduled message in the batch's
// transaction: gone once the batch commits, still scheduled when the
// batch fails and rolls back.
func TestUnscheduleSignal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      error
		scheduled int64
	}{
		{"committed", nil, 0},
		{"rolled back", errors.New("the read model is down"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
			store := memstore.New(courseRegistry(), memstore.WithSharedClock(clk))
			res, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"}).At(clk.Now().Add(time.Hour))}, shell.AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := shell.Config{Workers: 1, ProcessID: "test", ErrorStrategy: shell.ErrorStrategy{Retries: 0}}
			rt := startRuntime(t, store, cfg, withdrawer{fail: tc.fail})
			store.Append(ctx, []core.Message{core.NewMessage(StudentEnrolled{CourseID: "c1", StudentID: res.Messages[0].ID.String()})}, shell.AppendOptions{})
			err = rt.WaitIdle(ctx, 0)
			if (tc.fail == nil) != (err == nil) {
				t.Fatalf("WaitIdle: %v, want a failure only when the batch fails", err)
			}
			if st, _ := store.Stats(ctx); st.Scheduled != tc.scheduled {
				t.Fatalf("%d scheduled, want %d", st.Scheduled, tc.scheduled)
			}
		})
	}
}
