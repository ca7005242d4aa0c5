package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sourced-go/sourced/shell/driver"
)

var (
	_ driver.SnapshotStore = (*Store)(nil)
	_ driver.SnapshotTx    = (*tx)(nil)
)

// snapshotSQL is the SQL of the snapshots table (migration 4).
type snapshotSQL struct {
	load, save, delete string
}

func snapshotQueriesFor(n names) snapshotSQL {
	return snapshotSQL{
		load: fmt.Sprintf(`SELECT position, state, saved_at FROM %s
WHERE group_id = $1 AND partition_key = $2 AND state_version = $3`, n.snapshots),
		// A snapshot replaces the stored one only when it was folded
		// further: two decisions saving at once keep the newer state.
		save: fmt.Sprintf(`INSERT INTO %[1]s AS s (group_id, partition_key, state_version, position, state, saved_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (group_id, partition_key, state_version) DO UPDATE
SET position = excluded.position, state = excluded.state, saved_at = excluded.saved_at
WHERE s.position < excluded.position`, n.snapshots),
		delete: fmt.Sprintf(`DELETE FROM %s WHERE ($1 = '' OR group_id = $1) AND (cardinality($2::text[]) = 0 OR partition_key = ANY ($2::text[]))`, n.snapshots),
	}
}

// LoadSnapshot returns the snapshot of group's partition under version;
// see driver.SnapshotStore.
func (s *Store) LoadSnapshot(ctx context.Context, group, partition, version string) (driver.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return driver.Snapshot{}, false, err
	}
	snap, found, err := scanSnapshot(s.pool.QueryRow(ctx, s.q.snap.load, group, partition, version), group, partition, version)
	if err != nil {
		return driver.Snapshot{}, false, s.wrap(ctx, "load snapshot", err)
	}
	return snap, found, nil
}

// LoadSnapshot is Store.LoadSnapshot inside the transaction (which it
// locks as a read does).
func (t *tx) LoadSnapshot(group, partition, version string) (driver.Snapshot, bool, error) {
	if err := t.enter(lockAny, true); err != nil {
		return driver.Snapshot{}, false, err
	}
	snap, found, err := scanSnapshot(t.c.QueryRow(t.ctx, t.s.q.snap.load, group, partition, version), group, partition, version)
	if err != nil {
		return driver.Snapshot{}, false, t.fail("load snapshot", err)
	}
	return snap, found, nil
}

func scanSnapshot(row pgx.Row, group, partition, version string) (driver.Snapshot, bool, error) {
	snap := driver.Snapshot{Group: group, Partition: partition, Version: version}
	err := row.Scan(&snap.Position, &snap.State, &snap.SavedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Snapshot{}, false, nil
	}
	if err != nil {
		return driver.Snapshot{}, false, err
	}
	if snap.State == nil {
		snap.State = []byte{}
	}
	snap.SavedAt = snap.SavedAt.UTC()
	return snap, true, nil
}

// SaveSnapshot stores a snapshot, in a statement of its own (it takes
// none of the store's locks, so it never waits behind appends), unless
// one at or after its position is stored; see driver.SnapshotStore.
func (s *Store) SaveSnapshot(ctx context.Context, snap driver.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	state := snap.State
	if state == nil {
		state = []byte{}
	}
	if _, err := s.pool.Exec(ctx, s.q.snap.save, snap.Group, snap.Partition, snap.Version, snap.Position, state, s.Now().UTC().Truncate(time.Microsecond)); err != nil {
		return s.wrap(ctx, "save snapshot", err)
	}
	return nil
}

// DeleteSnapshots deletes the snapshots of group (of its partitions
// given; of every group when group is empty); see driver.SnapshotStore.
func (s *Store) DeleteSnapshots(ctx context.Context, group string, partitions ...string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if group == "" {
		partitions = nil
	}
	if partitions == nil {
		partitions = []string{}
	}
	tag, err := s.pool.Exec(ctx, s.q.snap.delete, group, partitions)
	if err != nil {
		return 0, s.wrap(ctx, "delete snapshots", err)
	}
	return int(tag.RowsAffected()), nil
}

// deleteSnapshots deletes group's snapshots in the transaction.
func (t *tx) deleteSnapshots(group string) error {
	if _, err := t.c.Exec(t.ctx, t.s.q.snap.delete, group, []string{}); err != nil {
		return t.fail("delete snapshots", err)
	}
	return nil
}
