package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sourced-go/sourced/shell/driver"
)

// testSnapshots holds a driver.SnapshotStore to its contract: one snapshot
// per group, partition and version; a save replaces it only when folded
// further; loads inside a write transaction see the same; DeleteSnapshots
// and ResetGroup delete a group's snapshots (and only them). A store that
// keeps no snapshots has nothing to prove (Handle folds from the log).
func (s suite) testSnapshots(t *testing.T) {
	e := s.genv(t, devices, bindings, jobs)
	ss, ok := e.store.(driver.SnapshotStore)
	if !ok {
		t.Skipf("%T does not implement driver.SnapshotStore", e.store)
	}
	ctx := e.ctx
	load := func(group, partition, version string) (driver.Snapshot, bool) {
		t.Helper()
		snap, found, err := ss.LoadSnapshot(ctx, group, partition, version)
		if err != nil {
			t.Fatalf("load snapshot %s %s %s: %v", group, partition, version, err)
		}
		return snap, found
	}
	save := func(snap driver.Snapshot) {
		t.Helper()
		if err := ss.SaveSnapshot(ctx, snap); err != nil {
			t.Fatalf("save snapshot %+v: %v", snap, err)
		}
	}
	expect := func(group, partition, version string, position int64, state []byte) {
		t.Helper()
		got, found := load(group, partition, version)
		if !found {
			t.Fatalf("snapshot %s %s %s: none, want position %d", group, partition, version, position)
		}
		if got.Group != group || got.Partition != partition || got.Version != version || got.Position != position || !bytes.Equal(got.State, state) {
			t.Fatalf("snapshot %s %s %s: got %+v, want position %d state %q", group, partition, version, got, position, state)
		}
		if !got.SavedAt.Equal(e.clock.Now()) {
			t.Fatalf("snapshot %s %s %s: saved at %v, want the store's clock %v", group, partition, version, got.SavedAt, e.clock.Now())
		}
	}
	part := "device_id=d1"
	if _, found := load(devices, part, "v1"); found {
		t.Fatal("a snapshot in an empty store")
	}
	// Binary state (a NUL byte, bytes that are not UTF-8) is kept exactly.
	state := []byte{0, 1, 0xff, 'x', 0}
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 10, State: state})
	expect(devices, part, "v1", 10, state)
	// Neither an older nor an equal position replaces it; a newer does.
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 9, State: []byte("older")})
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 10, State: []byte("same")})
	expect(devices, part, "v1", 10, state)
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 12, State: []byte("newer")})
	expect(devices, part, "v1", 12, []byte("newer"))
	// Versions, partitions and groups are kept apart.
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v2", Position: 3, State: []byte("v2 state")})
	save(driver.Snapshot{Group: devices, Partition: "device_id=d2", Version: "v1", Position: 4, State: []byte("d2")})
	save(driver.Snapshot{Group: bindings, Partition: part, Version: "v1", Position: 5, State: []byte{}})
	expect(devices, part, "v1", 12, []byte("newer"))
	expect(devices, part, "v2", 3, []byte("v2 state"))
	expect(devices, "device_id=d2", "v1", 4, []byte("d2"))
	expect(bindings, part, "v1", 5, []byte{})
	if _, found := load(devices, part, "v3"); found {
		t.Fatal("a snapshot of a version never saved")
	}

	// A load inside a write transaction sees the same snapshots; a
	// transaction that rolls back changes none.
	errRollback := errors.New("roll back")
	err := e.store.Update(ctx, func(tx driver.Tx) error {
		st, ok := tx.(driver.SnapshotTx)
		if !ok {
			t.Fatalf("%T implements driver.SnapshotStore, but its Tx (%T) not driver.SnapshotTx", e.store, tx)
		}
		got, found, err := st.LoadSnapshot(devices, part, "v1")
		if err != nil || !found || got.Position != 12 || !bytes.Equal(got.State, []byte("newer")) {
			t.Fatalf("load in a transaction: %+v, %v, %v; want position 12", got, found, err)
		}
		if _, found, err := st.LoadSnapshot(devices, part, "v9"); found || err != nil {
			t.Fatalf("load of a missing version in a transaction: %v, %v", found, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("update: %v", err)
	}
	expect(devices, part, "v1", 12, []byte("newer"))

	// ResetGroup deletes the group's snapshots, every version, and no
	// other group's.
	reset := func(group string) {
		t.Helper()
		if err := e.gs.StopGroup(ctx, group, "reset"); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.ResetGroup(ctx, group); err != nil {
			t.Fatal(err)
		}
	}
	reset(devices)
	for _, k := range [][2]string{{part, "v1"}, {part, "v2"}, {"device_id=d2", "v1"}} {
		if _, found := load(devices, k[0], k[1]); found {
			t.Fatalf("snapshot %s %s survived ResetGroup", k[0], k[1])
		}
	}
	expect(bindings, part, "v1", 5, []byte{})
	// A reset group saves again from scratch (an older position is fine).
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 2, State: []byte("after reset")})
	expect(devices, part, "v1", 2, []byte("after reset"))
	// Even an exclusive group's reset, which keeps its offsets, deletes its
	// snapshots.
	save(driver.Snapshot{Group: jobs, Partition: "x=1", Version: "v1", Position: 1, State: []byte("j")})
	reset(jobs)
	if _, found := load(jobs, "x=1", "v1"); found {
		t.Fatal("an exclusive group's snapshot survived ResetGroup")
	}

	// DeleteSnapshots of some partitions: every version of them, and
	// nothing else.
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v2", Position: 2, State: []byte("v2")})
	save(driver.Snapshot{Group: devices, Partition: "device_id=d3", Version: "v1", Position: 2, State: []byte("d3")})
	save(driver.Snapshot{Group: devices, Partition: "device_id=d4", Version: "v1", Position: 2, State: []byte("d4")})
	if n, err := ss.DeleteSnapshots(ctx, devices, part, "device_id=d3", "device_id=none"); err != nil || n != 3 {
		t.Fatalf("delete the snapshots of two partitions: %d, %v; want 3", n, err)
	}
	for _, k := range [][2]string{{part, "v1"}, {part, "v2"}, {"device_id=d3", "v1"}} {
		if _, found := load(devices, k[0], k[1]); found {
			t.Fatalf("snapshot %s %s survived DeleteSnapshots of its partition", k[0], k[1])
		}
	}
	expect(devices, "device_id=d4", "v1", 2, []byte("d4"))
	save(driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 2, State: []byte("after reset")})

	// DeleteSnapshots: one group's, counted; then every group's.
	n, err := ss.DeleteSnapshots(ctx, bindings)
	if err != nil || n != 1 {
		t.Fatalf("delete the snapshots of %s: %d, %v; want 1", bindings, n, err)
	}
	expect(devices, part, "v1", 2, []byte("after reset"))
	save(driver.Snapshot{Group: bindings, Partition: part, Version: "v1", Position: 5, State: []byte("b")})
	if n, err := ss.DeleteSnapshots(ctx, ""); err != nil || n != 3 {
		t.Fatalf("delete every snapshot: %d, %v; want 3", n, err)
	}
	if _, found := load(devices, part, "v1"); found {
		t.Fatal("a snapshot survived DeleteSnapshots(\"\")")
	}
	if n, err := ss.DeleteSnapshots(ctx, devices); err != nil || n != 0 {
		t.Fatalf("delete from no snapshots: %d, %v", n, err)
	}

	// A cancelled context is refused and writes nothing.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := ss.SaveSnapshot(cancelled, driver.Snapshot{Group: devices, Partition: part, Version: "v1", Position: 50, State: []byte("c")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("save with a cancelled context: %v, want context.Canceled", err)
	}
	if _, _, err := ss.LoadSnapshot(cancelled, devices, part, "v1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("load with a cancelled context: %v, want context.Canceled", err)
	}
	if _, found := load(devices, part, "v1"); found {
		t.Fatal("a save with a cancelled context wrote a snapshot")
	}
}
