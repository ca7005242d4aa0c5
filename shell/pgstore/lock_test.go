package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// An Update takes its lock at its first operation: one that acks and
// then appends after LastPosition needs the exclusive lock after the
// shared one, and runs again holding the exclusive lock from the start; the first run's ack
// is rolled back, so the ack and the append each happen once.
func TestUpdateUpgradesByRunningAgain(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimNext(ctx, "devices", "w1", 10)
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	runs := 0
	err = s.Update(ctx, func(tx driver.Tx) error {
		runs++
		if err := tx.Ack(c, c.Last()); err != nil {
			return err
		}
		// An append after LastPosition takes the exclusive lock (what fn
		// was told stays the newest position), which a transaction
		// holding the shared one cannot take: it runs again.
		if _, err := tx.LastPosition(); err != nil {
			return err
		}
		_, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d2"}), driver.AppendOptions{})
		return err
	})
	if err != nil || runs != 2 {
		t.Fatalf("update: %v after %d runs, want nil after 2", err, runs)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.MaxPosition != 2 {
		t.Fatalf("log ends at %d (%v), want 2: the append happened once", st.MaxPosition, err)
	}
	// d1 is acked (not claimable again), d2 is pending.
	next, err := s.ClaimNext(ctx, "devices", "w2", 10)
	if err != nil || next == nil || next.Partition["device_id"] != "d2" {
		t.Fatalf("next claim %+v (%v), want d2's", next, err)
	}
	if again, err := s.ClaimNext(ctx, "devices", "w3", 10); err != nil || again != nil {
		t.Fatalf("a third claim %+v (%v), want none: d1 was acked once", again, err)
	}
}

// LastPosition before any other operation takes no lock; if another
// append commits before the Update's own append takes the exclusive
// lock, what LastPosition said is stale (a router checks the batch's own
// guards against it), so fn runs again and sees the newer position.
func TestUpdateLastPositionOvertaken(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	var seen []int64
	err := s.Update(ctx, func(tx driver.Tx) error {
		last, err := tx.LastPosition()
		if err != nil {
			return err
		}
		seen = append(seen, last)
		if len(seen) == 1 { // another writer commits in between
			if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "other"}), driver.AppendOptions{}); err != nil {
				return err
			}
		}
		_, err = tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "mine"}), driver.AppendOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != 0 || seen[1] != 1 {
		t.Fatalf("LastPosition said %v over the runs, want [0 1]", seen)
	}
	page, err := s.ReadAll(ctx, driver.ReadAllOptions{})
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("log %v (%v), want the other writer's and one of mine", page.Messages, err)
	}
	// Without an append in between, one run.
	runs := 0
	if err := s.Update(ctx, func(tx driver.Tx) error {
		runs++
		if _, err := tx.LastPosition(); err != nil {
			return err
		}
		_, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "again"}), driver.AppendOptions{})
		return err
	}); err != nil || runs != 1 {
		t.Fatalf("update: %v after %d runs, want nil after 1", err, runs)
	}
}

// An Update that only acks and deletes (a queue's settlement) holds the
// shared lock: it runs while another transaction holds the shared lock
// too, which the exclusive lock could not.
func TestQueueSettlementBesideAClaim(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	c1 := twoJobsOneClaimed(t, s)
	// w2's claim stays open (its transaction holds the shared lock)
	// while w1 settles c1 in another transaction.
	done := make(chan error, 1)
	err := s.Update(ctx, func(tx driver.Tx) error {
		c2, err := tx.ClaimNext("q", "w2", 1)
		if err != nil || c2 == nil {
			return errors.Join(err, errors.New("no second claim"))
		}
		go func() {
			// Under the exclusive lock it would wait for the claim's
			// transaction, which waits for it: give up after a while.
			wait, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			done <- s.Update(wait, func(tx driver.Tx) error {
				if err := tx.Delete(c1.Last()); err != nil {
					return err
				}
				return tx.Ack(c1, c1.Last())
			})
		}()
		return <-done
	})
	if err != nil {
		t.Fatalf("settling beside an open claim: %v", err)
	}
	page, err := s.ReadAll(ctx, driver.ReadAllOptions{})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("log %v (%v), want one job left", page.Messages, err)
	}
}

// A settlement (the acknowledgement of a claim) leaves the group's row
// unlocked until its COMMIT: the group's highest position is derived from
// its offsets, so that workers settling claims of one group never queue
// on its row. The row is probed with FOR NO KEY UPDATE NOWAIT (the lock an
// UPDATE of the row takes) while the acknowledgement is sent but not
// committed.
func TestSettlementLeavesTheGroupRowUnlocked(t *testing.T) {
	prefix := pgtest.Prefix()
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	ctx := context.Background()
	c1 := twoJobsOneClaimed(t, s)
	probe, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	err = s.Update(ctx, func(tx driver.Tx) error {
		if err := tx.Ack(c1, c1.Last()); err != nil {
			return err
		}
		// The next statement sends the deferred acknowledgement first.
		c2, err := tx.ClaimNext("q", "w1", 1)
		if err != nil || c2 == nil {
			return errors.Join(err, errors.New("no second claim"))
		}
		if err := tx.Ack(c2, c2.Last()); err != nil {
			return err
		}
		if _, err := tx.ClaimNext("q", "w1", 1); err != nil {
			return err
		}
		_, err = probe.Exec(ctx, fmt.Sprintf(`SELECT 1 FROM %s_consumer_groups WHERE group_id = 'q' FOR NO KEY UPDATE NOWAIT`, prefix))
		if err != nil {
			return fmt.Errorf("the group row is locked by the settling transaction: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Group(ctx, "q")
	if err != nil || info.HighestPosition != 2 {
		t.Fatalf("group %+v (%v), want highest position 2", info, err)
	}
}

// twoJobsOneClaimed registers the queue q on s, appends two jobs and
// returns w1's claim of the first.
func twoJobsOneClaimed(t *testing.T, s *pgstore.Store) *driver.ClaimedPartition {
	t.Helper()
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "q", Exclusive: true, Handled: []string{"device.registered"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "a"}, fixtures.DeviceRegistered{DeviceID: "b"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	c1, err := s.ClaimNext(ctx, "q", "w1", 1)
	if err != nil || c1 == nil {
		t.Fatal(c1, err)
	}
	return c1
}
