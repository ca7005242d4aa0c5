package driver

import (
	"context"
	"time"
)

// Snapshot is a decider's folded state for one partition, persisted: the
// state a full fold of the partition's history up to Position gives,
// encoded by the decider's snapshot codec (core.Snapshots).
type Snapshot struct {
	// Group is the decider's consumer group (normalised).
	Group string
	// Partition is the partition's key (core.Partition's Key).
	Partition string
	// Version is the codec's version (core.SnapshotCodec.Version): a
	// snapshot is only used by a decider whose codec has the same.
	Version string
	// Position is the log position the state was folded up to: the
	// partition's history after it is folded onto the state.
	Position int64
	// State is the encoded state.
	State []byte
	// SavedAt is when the snapshot was saved (set by the store).
	SavedAt time.Time
}

// SnapshotStore is implemented by stores that persist deciders'
// snapshots (memstore, sqlitestore and pgstore do). Handle and Load use
// it for the deciders that opt in with core.Snapshots; a store without it
// folds every cold partition from the log.
type SnapshotStore interface {
	// LoadSnapshot returns the snapshot of group's partition taken under
	// version, and false when there is none.
	LoadSnapshot(ctx context.Context, group, partition, version string) (Snapshot, bool, error)
	// SaveSnapshot stores s (its SavedAt is the store's clock), replacing
	// the snapshot of the same group, partition and version when s's
	// Position is after it; a snapshot at or before the stored one's
	// position changes nothing. Snapshots of other versions are kept.
	SaveSnapshot(ctx context.Context, s Snapshot) error
	// DeleteSnapshots deletes the snapshots of group, every version, and
	// returns how many: those of the partitions given (their core.Partition
	// Keys), or all of the group's when none is given (of every
	// group when group is empty too). ResetGroup deletes the group's
	// snapshots in its own transaction, too.
	DeleteSnapshots(ctx context.Context, group string, partitions ...string) (int, error)
}

// SnapshotTx is implemented by the write transactions of a
// SnapshotStore: Handle loads a cold partition's snapshot inside the
// transaction that decides, so that it sees the log and the snapshots at
// one moment (a reset in between cannot hand it a deleted snapshot).
type SnapshotTx interface {
	// LoadSnapshot is SnapshotStore.LoadSnapshot inside the transaction.
	LoadSnapshot(group, partition, version string) (Snapshot, bool, error)
}
