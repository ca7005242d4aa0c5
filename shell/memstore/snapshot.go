package memstore

import (
	"context"
	"slices"

	"github.com/sourced-go/sourced/shell/driver"
)

// snapshotKey identifies a snapshot: a group's partition under a codec
// version.
type snapshotKey struct{ group, partition, version string }

var (
	_ driver.SnapshotStore = (*Store)(nil)
	_ driver.SnapshotTx    = (*tx)(nil)
)

// LoadSnapshot returns the snapshot of group's partition under version;
// see driver.SnapshotStore.
func (s *Store) LoadSnapshot(ctx context.Context, group, partition, version string) (driver.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return driver.Snapshot{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return driver.Snapshot{}, false, ErrClosed
	}
	return s.loadSnapshot(group, partition, version)
}

// LoadSnapshot is Store.LoadSnapshot inside the transaction.
func (t *tx) LoadSnapshot(group, partition, version string) (driver.Snapshot, bool, error) {
	if t.done {
		return driver.Snapshot{}, false, errTxDone
	}
	return t.s.loadSnapshot(group, partition, version)
}

func (s *Store) loadSnapshot(group, partition, version string) (driver.Snapshot, bool, error) {
	snap, ok := s.snapshots[snapshotKey{group, partition, version}]
	if ok {
		snap.State = slices.Clone(snap.State)
	}
	return snap, ok, nil
}

// SaveSnapshot stores a snapshot unless one at or after its position is
// stored already; see driver.SnapshotStore.
func (s *Store) SaveSnapshot(ctx context.Context, snap driver.Snapshot) error {
	return s.write(ctx, func(t *tx) error {
		k := snapshotKey{snap.Group, snap.Partition, snap.Version}
		old, had := s.snapshots[k]
		if had && old.Position >= snap.Position {
			return nil
		}
		if s.snapshots == nil {
			s.snapshots = make(map[snapshotKey]driver.Snapshot)
		}
		snap.State = slices.Clone(snap.State)
		snap.SavedAt = s.now().UTC()
		s.snapshots[k] = snap
		t.undo = append(t.undo, func() {
			if had {
				s.snapshots[k] = old
			} else {
				delete(s.snapshots, k)
			}
		})
		return nil
	})
}

// DeleteSnapshots deletes the snapshots of group (of its partitions
// given; of every group when group is empty); see driver.SnapshotStore.
func (s *Store) DeleteSnapshots(ctx context.Context, group string, partitions ...string) (n int, err error) {
	err = s.write(ctx, func(t *tx) error {
		n = t.deleteSnapshots(group, partitions...)
		return nil
	})
	return n, err
}

// deleteSnapshots deletes group's snapshots in the transaction.
func (t *tx) deleteSnapshots(group string, partitions ...string) int {
	s := t.s
	n := 0
	for k, snap := range s.snapshots {
		if group != "" && k.group != group || len(partitions) > 0 && !slices.Contains(partitions, k.partition) {
			continue
		}
		delete(s.snapshots, k)
		t.undo = append(t.undo, func() { s.snapshots[k] = snap })
		n++
	}
	return n
}
