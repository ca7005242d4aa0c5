package sqlitestore

import (
	"context"
	"fmt"
	"sync"

	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
)

var (
	_ driver.SnapshotStore = (*Store)(nil)
	_ driver.SnapshotTx    = (*tx)(nil)
)

// snapshotSQL is the SQL of the snapshots table (migration 4) of one
// prefix, built once so that every call prepares the same text.
type snapshotSQL struct {
	load, save, deleteGroup, deleteAll, deletePartition string
}

var snapshotQueries sync.Map // prefix -> *snapshotSQL

func snapshotQueriesFor(n names) *snapshotSQL {
	if q, ok := snapshotQueries.Load(n.prefix); ok {
		return q.(*snapshotSQL)
	}
	q := &snapshotSQL{
		load: fmt.Sprintf(`SELECT position, state, saved_at FROM %s
WHERE group_id = ?1 AND partition_key = ?2 AND state_version = ?3`, n.snapshots),
		// A snapshot replaces the stored one only when it was folded
		// further: two decisions saving at once keep the newer state.
		save: fmt.Sprintf(`INSERT INTO %[1]s (group_id, partition_key, state_version, position, state, saved_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (group_id, partition_key, state_version) DO UPDATE
SET position = excluded.position, state = excluded.state, saved_at = excluded.saved_at
WHERE excluded.position > %[1]s.position`, n.snapshots),
		deleteGroup:     fmt.Sprintf(`DELETE FROM %s WHERE group_id = ?1`, n.snapshots),
		deleteAll:       fmt.Sprintf(`DELETE FROM %s`, n.snapshots),
		deletePartition: fmt.Sprintf(`DELETE FROM %s WHERE group_id = ?1 AND partition_key = ?2`, n.snapshots),
	}
	actual, _ := snapshotQueries.LoadOrStore(n.prefix, q)
	return actual.(*snapshotSQL)
}

// LoadSnapshot returns the snapshot of group's partition under version,
// read on a reader connection; see driver.SnapshotStore.
func (s *Store) LoadSnapshot(ctx context.Context, group, partition, version string) (snap driver.Snapshot, found bool, err error) {
	err = s.withReader(ctx, func(conn *sqlite.Conn) error {
		snap, found, err = loadSnapshot(conn, s.names, group, partition, version)
		return err
	})
	if err != nil {
		return driver.Snapshot{}, false, fmt.Errorf("sqlitestore: load snapshot: %w", err)
	}
	return snap, found, nil
}

// LoadSnapshot is Store.LoadSnapshot inside the write transaction.
func (t *tx) LoadSnapshot(group, partition, version string) (driver.Snapshot, bool, error) {
	if err := t.usable(); err != nil {
		return driver.Snapshot{}, false, err
	}
	snap, found, err := loadSnapshot(t.conn, t.s.names, group, partition, version)
	if err != nil {
		return driver.Snapshot{}, false, fmt.Errorf("sqlitestore: load snapshot: %w", err)
	}
	return snap, found, nil
}

func loadSnapshot(conn *sqlite.Conn, n names, group, partition, version string) (snap driver.Snapshot, found bool, err error) {
	stmt, err := conn.Prepare(snapshotQueriesFor(n).load)
	if err != nil {
		return snap, false, err
	}
	defer func() {
		if rerr := stmt.Reset(); err == nil {
			err = rerr
		}
	}()
	stmt.BindText(1, group)
	stmt.BindText(2, partition)
	stmt.BindText(3, version)
	row, err := stmt.Step()
	if err != nil || !row {
		return snap, false, err
	}
	snap = driver.Snapshot{Group: group, Partition: partition, Version: version, Position: stmt.ColumnInt64(0)}
	snap.State = make([]byte, stmt.ColumnLen(1))
	stmt.ColumnBytes(1, snap.State)
	if snap.SavedAt, err = parseTime(stmt.ColumnText(2)); err != nil {
		return driver.Snapshot{}, false, fmt.Errorf("snapshot of %s %s: saved_at: %w", group, partition, err)
	}
	return snap, true, nil
}

// SaveSnapshot stores a snapshot in a write transaction of its own,
// unless one at or after its position is stored; see driver.SnapshotStore.
func (s *Store) SaveSnapshot(ctx context.Context, snap driver.Snapshot) error {
	err := s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		_, err := exec(t.conn, snapshotQueriesFor(s.names).save, func(stmt *sqlite.Stmt) {
			stmt.BindText(1, snap.Group)
			stmt.BindText(2, snap.Partition)
			stmt.BindText(3, snap.Version)
			stmt.BindInt64(4, snap.Position)
			stmt.BindBytes(5, snap.State)
			stmt.BindText(6, formatTime(s.Now()))
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: save snapshot: %w", err)
	}
	return nil
}

// DeleteSnapshots deletes the snapshots of group (of its partitions
// given; of every group when group is empty); see driver.SnapshotStore.
func (s *Store) DeleteSnapshots(ctx context.Context, group string, partitions ...string) (n int, err error) {
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		if len(partitions) == 0 || group == "" {
			n, err = t.deleteSnapshots(group)
			return err
		}
		n = 0
		for _, p := range partitions {
			d, err := exec(t.conn, snapshotQueriesFor(s.names).deletePartition, func(stmt *sqlite.Stmt) {
				stmt.BindText(1, group)
				stmt.BindText(2, p)
			})
			if err != nil {
				return err
			}
			n += d
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: delete snapshots: %w", err)
	}
	return n, nil
}

func (t *tx) deleteSnapshots(group string) (int, error) {
	q := snapshotQueriesFor(t.s.names)
	if group == "" {
		return exec(t.conn, q.deleteAll, nil)
	}
	return exec(t.conn, q.deleteGroup, func(stmt *sqlite.Stmt) { stmt.BindText(1, group) })
}
