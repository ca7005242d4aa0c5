package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A withdrawal in the transaction of a guarded append (as the router runs
// a workflow's delivery: its events, then effects.Unschedule) commits with
// it; and withdrawals racing promotions leave every message either
// promoted or withdrawn, never both, never neither.
func TestUnscheduleBesideAppendsAndPromotions(t *testing.T) {
	ctx := context.Background()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := open(t, pgstore.Options{Registry: reg, Now: func() time.Time { return now }})

	const n = 40
	var msgs []core.Message
	for i := range n {
		msgs = append(msgs, core.NewMessage(fixtures.CourseClosed{CourseName: fmt.Sprintf("c%d", i)}).At(now.Add(time.Minute)))
	}
	res, err := s.Append(ctx, msgs, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Withdraw the first one beside a guarded append.
	first := res.Messages[0].ID
	var withdrawn int
	err = s.Update(ctx, func(tx driver.Tx) error {
		read, err := tx.Read([]core.Condition{{Type: fixtures.TypeCourseCreated}}, driver.ReadOptions{})
		if err != nil {
			return err
		}
		if _, err := tx.Append([]core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: "Algebra"})}, driver.AppendOptions{Guard: &read.Guard}); err != nil {
			return err
		}
		withdrawn, err = tx.(driver.UnscheduleTx).Unschedule(first)
		return err
	})
	if err != nil || withdrawn != 1 {
		t.Fatalf("withdrawing beside a guarded append: %d, %v; want 1", withdrawn, err)
	}

	// The others: withdrawn one by one while promotions run.
	ids := make([]uuid.UUID, 0, n-1)
	for _, m := range res.Messages[1:] {
		ids = append(ids, m.ID)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		promoted int
	)
	for _, id := range ids {
		wg.Go(func() {
			var k int
			if err := s.Update(ctx, func(tx driver.Tx) error {
				var err error
				k, err = tx.(driver.UnscheduleTx).Unschedule(id)
				return err
			}); err != nil {
				t.Error(err)
			}
			mu.Lock()
			withdrawn += k
			mu.Unlock()
		})
	}
	wg.Go(func() {
		for range 5 {
			k, err := s.PromoteScheduled(ctx, now.Add(time.Hour))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			promoted += k
			mu.Unlock()
		}
	})
	wg.Wait()
	if _, err := s.PromoteScheduled(ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.Read(ctx, []core.Condition{{Type: fixtures.TypeCourseClosed}}, driver.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Scheduled != 0 || withdrawn+len(read.Messages) != n {
		t.Fatalf("%d withdrawn, %d promoted (%d counted), %d still scheduled: want %d withdrawn or promoted, each once", withdrawn, len(read.Messages), promoted, st.Scheduled, n)
	}
}
