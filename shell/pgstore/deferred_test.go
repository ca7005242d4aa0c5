package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A deferred append (driver.AppendOptions.Deferred) checks the
// transaction's unlocked reads with the COMMIT that carries it: a read
// another append overtook meanwhile makes the transaction run again, as
// an append sent at once would, and the deferred messages are written
// once, by the run that commits.
func TestDeferredAppendOvertakenReadRunsAgain(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	d1 := map[string]string{"device_id": "d1"}
	if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	runs, seen := 0, []int{}
	err := s.Update(ctx, func(tx driver.Tx) error {
		runs++
		r, err := tx.ReadPartition(d1, []string{"device.registered"}, driver.ReadOptions{})
		if err != nil {
			return err
		}
		seen = append(seen, len(r.Messages))
		if runs == 1 { // another writer overtakes the read
			if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{}); err != nil {
				return err
			}
		}
		_, err = tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{Deferred: true})
		return err
	})
	if err != nil || runs != 2 {
		t.Fatalf("update: %v after %d runs, want nil after 2", err, runs)
	}
	if seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("the runs read %v messages of d1, want [1 2]: the second run reads the overtaking one", seen)
	}
	r, err := s.ReadPartition(ctx, d1, []string{"device.registered"}, driver.ReadOptions{})
	if err != nil || len(r.Messages) != 3 {
		t.Fatalf("d1 holds %d messages (%v), want 3: the deferred append written once", len(r.Messages), err)
	}
}

// An offset's move sent with the COMMIT (driver.DeferredAdvancer) to a
// position past the newest fails the transaction there: Update returns
// the refusal, and nothing the transaction did is written.
func TestDeferredAdvancePastTheNewestFailsTheCommit(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	err := s.Update(ctx, func(tx driver.Tx) error {
		if _, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d2"}), driver.AppendOptions{}); err != nil {
			return err
		}
		da, ok := tx.(driver.DeferredAdvancer)
		if !ok {
			t.Fatalf("%T is no driver.DeferredAdvancer", tx)
		}
		return da.AdvanceOffsetDeferred("devices", map[string]string{"device_id": "d1"}, 1<<40)
	})
	if err == nil || !strings.Contains(err.Error(), "past the newest position") {
		t.Fatalf("update: %v, want the move past the newest position refused", err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.ReadAll(ctx, driver.ReadAllOptions{})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("log holds %d messages (%v), want only d1: the append rolled back with the refused move", len(page.Messages), err)
	}
	// d1 is still there to claim: the offset did not move.
	c, err := s.ClaimNext(ctx, "devices", "w1", 10)
	if err != nil || c == nil || c.Partition["device_id"] != "d1" {
		t.Fatalf("claim after the refused move: %+v (%v), want d1's (stats %+v)", c, err, st)
	}
}
