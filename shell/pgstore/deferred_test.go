package pgstore_test

import (
	"context"
	"slices"
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

// The reads of a transaction are checked together, in one statement,
// each from its own position: a read overtaken among others, older and
// newer ones that were not, makes the transaction run again, whether its
// append goes with the COMMIT (Deferred) or at once; and reads that were
// not overtaken let it commit, though a message of one of them followed
// the oldest read (and preceded its own).
func TestTransactionChecksEachOfItsReads(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	device := func(id string) map[string]string { return map[string]string{"device_id": id} }
	register := func(id string) {
		t.Helper()
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: id}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, deferred := range []bool{true, false} {
		for _, overtake := range []string{"", "a", "b", "c"} {
			prefix := map[bool]string{true: "deferred-", false: "atonce-"}[deferred] + overtake + "-"
			ids := []string{prefix + "a", prefix + "b", prefix + "c"}
			for _, id := range ids {
				register(id)
			}
			runs, seen := 0, [][]int{}
			err := s.Update(ctx, func(tx driver.Tx) error {
				runs++
				var counts []int
				for i, id := range ids {
					r, err := tx.ReadPartition(device(id), []string{"device.registered"}, driver.ReadOptions{})
					if err != nil {
						return err
					}
					counts = append(counts, len(r.Messages))
					if i == 0 && runs == 1 { // (a run again holds the store's lock: no append beside it)
						register(ids[2]) // after the oldest read, before c's: c's read has it
					}
				}
				seen = append(seen, counts)
				if runs == 1 && overtake != "" {
					register(prefix + overtake)
				}
				_, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: ids[0]}), driver.AppendOptions{Deferred: deferred})
				return err
			})
			want := 2
			if overtake == "" {
				want = 1
			}
			if err != nil || runs != want {
				t.Fatalf("deferred=%v, %q overtaken: %v after %d runs (reads %v), want nil after %d", deferred, overtake, err, runs, seen, want)
			}
			if overtake != "" {
				i := strings.IndexByte("abc", overtake[0])
				if want := []int{2, 2, 3}[i]; seen[1][i] != want {
					t.Fatalf("deferred=%v: the second run read %v, want %d messages of %q", deferred, seen[1], want, overtake)
				}
			}
		}
	}
}

// The reads of ReadPartitions (driver.PartitionsReader: several read in
// one round trip, in a transaction holding the store's shared lock, as a
// worker's does once it claimed) are the transaction's reads: one of them
// overtaken by another append makes the transaction run again, and the
// run again reads the append.
func TestReadPartitionsAreCheckedAsReads(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
		t.Fatal(err)
	}
	register := func(id string) {
		t.Helper()
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: id}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		register(id)
	}
	var reads []driver.PartitionRead
	for _, id := range []string{"a", "b", "c"} {
		reads = append(reads, driver.PartitionRead{Partition: map[string]string{"device_id": id}, Types: []string{"device.registered"}})
	}
	runs, seen := 0, [][]int{}
	_, err := s.ClaimUpdate(ctx, "devices", "w1", 10, func(tx driver.Tx, _ *driver.ClaimedPartition) error {
		runs++
		res, err := tx.(driver.PartitionsReader).ReadPartitions(reads)
		if err != nil {
			return err
		}
		var counts []int
		for _, r := range res {
			counts = append(counts, len(r.Messages))
		}
		seen = append(seen, counts)
		if runs == 1 {
			register("b") // overtakes the second read
		}
		_, err = tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "a"}), driver.AppendOptions{Deferred: true})
		return err
	})
	if err != nil || runs != 2 {
		t.Fatalf("claim update: %v after %d runs (reads %v), want nil after 2", err, runs, seen)
	}
	if !slices.Equal(seen[0], []int{1, 1, 1}) || !slices.Equal(seen[1], []int{1, 2, 1}) {
		t.Fatalf("the runs read %v messages of a, b and c, want [1 1 1] then [1 2 1]", seen)
	}
}
