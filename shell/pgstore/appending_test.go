package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestTransactionCountsAsAppendingWhileItsInsertRuns: a transaction is
// counted among its store's appends in flight from the moment it sends
// the insert that draws its positions, not once the insert's result is
// back. An append that commits above such a transaction's position waits
// for it; counted, it waits for the transaction's own advance after its
// commit, and does not send the advancer's settle meanwhile (see
// advancer.run). Before, a deferred insert (Handle's, the router's) was
// counted only when its batch had come back, after its COMMIT: the
// appends it held back settled in a statement of their own, about 1,100
// times in a BenchmarkPostgresEndToEnd run. Each insert here is held in
// the server by an uncommitted row with the same message id, from
// another connection, until that row is rolled back.
func TestTransactionCountsAsAppendingWhileItsInsertRuns(t *testing.T) {
	for _, deferred := range []bool{true, false} {
		t.Run(fmt.Sprintf("deferred=%v", deferred), func(t *testing.T) {
			ctx := t.Context()
			reg, err := storetest.NewRegistry()
			if err != nil {
				t.Fatal(err)
			}
			s := open(t, pgstore.Options{Registry: reg})
			m := core.NewMessage(fixtures.CourseCreated{CourseName: "Algebra"})
			m.ID = uuid.Must(uuid.NewV7())
			btx := holdID(t, fmt.Sprintf(`INSERT INTO %s_messages (message_id, message_type, payload, created_at) VALUES ($1, 'blocker', 'null', now())`, s.Prefix()), m.ID)
			done := make(chan error, 1)
			go func() {
				done <- s.Update(ctx, func(tx driver.Tx) error {
					_, err := tx.Append([]core.Message{m}, driver.AppendOptions{Deferred: deferred})
					return err
				})
			}()
			deadline := time.Now().Add(5 * time.Second)
			for pgstore.Appending(s) != 1 {
				if time.Now().After(deadline) {
					btx.Rollback(ctx)
					t.Fatalf("the transaction whose insert waits in the server is not counted: %d appending", pgstore.Appending(s))
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("the transaction ended (%v) while its insert should wait", err)
			default:
			}
			if n := pgstore.Appending(s); n != 1 {
				t.Fatalf("%d appending while the insert waits, want 1", n)
			}
			releaseHeld(t, s, btx, done)
			if got, err := s.ReadAll(ctx, driver.ReadAllOptions{}); err != nil || len(got.Messages) != 1 || got.Messages[0].ID != m.ID {
				t.Fatalf("read %v, %v; want the one message", got.Messages, err)
			}
		})
	}
}

// holdID runs insert, which writes a row with the message id id, in a
// transaction of its own that it leaves open (the caller rolls it back):
// until then the server holds any other insert of that id.
func holdID(t *testing.T, insert string, id uuid.UUID) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	blocker, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blocker.Close(context.Background()) })
	btx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := btx.Exec(ctx, insert, id); err != nil {
		t.Fatal(err)
	}
	return btx
}

// releaseHeld rolls back the row holdID left open, then checks that the
// transaction it held ends without error (its result on done) and that
// s counts no append in flight afterwards.
func releaseHeld(t *testing.T, s *pgstore.Store, btx pgx.Tx, done <-chan error) {
	t.Helper()
	if err := btx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := pgstore.Appending(s); n != 0 {
		t.Fatalf("%d appending after the transaction ended, want 0", n)
	}
}

// TestTransactionWithoutInsertsIsNotCountedAsAppending: a transaction
// whose deferred batch draws no position (here an append of a scheduled
// message alone: its lock and check, then the schedule's insert) is not
// counted among the appends in flight while that batch runs. Before, a
// transaction was counted as soon as it sent any deferred statement whose
// result it reads, the lock's among them: an offset's move or a
// scheduled append counted as an append in flight, so the store's other
// appends advanced the horizon after their commits rather than in them
// and the advancer waited out its grace for positions none of them held.
// The schedule's insert is held in the server by an uncommitted row with
// the same message id.
func TestTransactionWithoutInsertsIsNotCountedAsAppending(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := open(t, pgstore.Options{Registry: reg})
	m := core.NewMessage(fixtures.CourseCreated{CourseName: "Geometry"}).At(now.Add(time.Hour))
	m.ID = uuid.Must(uuid.NewV7())
	btx := holdID(t, fmt.Sprintf(`INSERT INTO %s_scheduled_messages (message_id, message_type, payload, available_at, scheduled_at) VALUES ($1, 'blocker', 'null', now(), now())`, s.Prefix()), m.ID)
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx driver.Tx) error {
			_, err := tx.Append([]core.Message{m}, driver.AppendOptions{Deferred: true})
			return err
		})
	}()
	// Wait until the schedule's insert waits on the blocker's row.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var waiting bool
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO `+s.Prefix()+`_scheduled_messages%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			btx.Rollback(ctx)
			t.Fatal("the scheduled append's insert never waited on the blocker")
		}
		time.Sleep(time.Millisecond)
	}
	if n := pgstore.Appending(s); n != 0 {
		btx.Rollback(ctx)
		t.Fatalf("%d appending while a transaction that draws no position runs, want 0", n)
	}
	releaseHeld(t, s, btx, done)
	if got, err := s.ReadScheduled(ctx, 0); err != nil || len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("scheduled %v, %v; want the one message", got, err)
	}
}

// TestPromotionLeavesNoAppendingCount: a transaction that promotes due
// scheduled messages draws positions and is counted in flight until it
// ends; before, it was uncounted on its end without having been counted,
// so every promotion left the count one lower (-1 after one), and the
// store's later appends took the count for "none in flight" when one was
// (advancing the horizon in the transaction, settling at once).
func TestPromotionLeavesNoAppendingCount(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	s := open(t, pgstore.Options{Registry: reg, Now: func() time.Time { return now }})
	due := now.Add(time.Minute)
	for range 2 {
		if _, err := s.Append(ctx, []core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: "History"}).At(due)}, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PromoteScheduled(ctx, due)
	var ue *driver.UnpromotedError
	if err != nil && !errors.As(err, &ue) || n != 2 {
		t.Fatalf("promoted %d, %v; want 2", n, err)
	}
	if n := pgstore.Appending(s); n != 0 {
		t.Fatalf("%d appending after the promotion, want 0", n)
	}
}
