package shell

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// snapshots is a decider's snapshot option on a store that keeps them:
// what Handle and Load start a cold partition from and save to.
type snapshots struct {
	store SnapshotStore
	codec core.SnapshotCodec[any]
	every int
	group string
	log   *slog.Logger
	// stale is set when the snapshot found could not be used (beyond the
	// log's end, or not decoding): save deletes it first, so that a
	// lower position can replace it.
	stale bool
}

// snapshotsOf returns the snapshot option of definition def on store, or
// nil when def takes no snapshots or the store keeps none.
func snapshotsOf(store Store, def any) *snapshots {
	sn, ok := def.(core.Snapshotting)
	if !ok {
		return nil
	}
	ss, ok := store.(SnapshotStore)
	if !ok {
		return nil
	}
	codec, every, ok := sn.SnapshotPolicy()
	if !ok {
		return nil
	}
	var group string
	if d, ok := def.(core.SpecProvider); ok {
		group = d.Spec().Group
	}
	return &snapshots{store: ss, codec: codec, every: every, group: group, log: storeLogger(store)}
}

// loadTx returns the state of partition's latest valid snapshot, read in
// tx, and its position; false when there is none to start from: none
// saved, the store's Tx cannot read them, one whose position is after the
// log's end (a log restored from an older backup, say), or one that does
// not decode (logged at WARN). The caller then folds the whole history.
func (s *snapshots) loadTx(tx Tx, partition string) (any, int64, bool) {
	if s == nil {
		return nil, 0, false
	}
	st, ok := tx.(driver.SnapshotTx)
	if !ok {
		return nil, 0, false
	}
	snap, found, err := st.LoadSnapshot(s.group, partition, s.codec.Version())
	if err != nil || !found {
		if err != nil {
			s.log.Warn("sourced: loading a snapshot failed; folding the partition from the log", "group", s.group, "partition", partition, "error", err)
		}
		return nil, 0, false
	}
	last, err := tx.LastPosition()
	if err != nil || snap.Position > last {
		if err == nil {
			s.stale = true
			s.log.Warn("sourced: a snapshot is beyond the end of the log (a restored log?); folding the partition from the log", "group", s.group, "partition", partition, "position", snap.Position, "log_end", last)
		}
		return nil, 0, false
	}
	return s.decode(snap)
}

// load is loadTx outside a transaction, for Load: the caller checks the
// position against its read of the log.
func (s *snapshots) load(ctx context.Context, partition string) (any, int64, bool) {
	snap, found, err := s.store.LoadSnapshot(ctx, s.group, partition, s.codec.Version())
	if err != nil || !found {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sourced: loading a snapshot failed; folding the partition from the log", "group", s.group, "partition", partition, "error", err)
		}
		return nil, 0, false
	}
	return s.decode(snap)
}

func (s *snapshots) decode(snap Snapshot) (any, int64, bool) {
	state, err := s.codec.Decode(snap.State)
	if err != nil {
		s.stale = true
		s.log.Warn("sourced: a snapshot does not decode; folding the partition from the log (it is replaced by the next snapshot)", "group", s.group, "partition", snap.Partition, "version", snap.Version, "position", snap.Position, "error", err)
		return nil, 0, false
	}
	return state, snap.Position, true
}

// save saves state, folded up to position, when it folded at least every
// events since the snapshot it started from (unsaved), and returns the
// events still unsaved: 0 once saved. Best-effort, after the decision
// committed: a failure is logged at WARN and changes nothing else.
func (s *snapshots) save(ctx context.Context, partition string, state any, position int64, unsaved int) int {
	if s == nil {
		return unsaved
	}
	s.dropStale(ctx, partition)
	if unsaved < s.every || position <= 0 {
		return unsaved
	}
	b, err := s.codec.Encode(state)
	if err == nil {
		err = s.store.SaveSnapshot(context.WithoutCancel(ctx), Snapshot{Group: s.group, Partition: partition, Version: s.codec.Version(), Position: position, State: b})
	}
	if err != nil {
		s.log.Warn("sourced: saving a snapshot failed (the decision is stored; the next one tries again)", "group", s.group, "partition", partition, "position", position, "error", err)
		return unsaved
	}
	return 0
}

// dropStale deletes the partition's snapshot found stale (see stale),
// whatever became of the decision: left in place, a snapshot beyond the
// log's end would become valid once the log grew past it.
func (s *snapshots) dropStale(ctx context.Context, partition string) {
	if s == nil || !s.stale {
		return
	}
	s.stale = false
	if _, err := s.store.DeleteSnapshots(context.WithoutCancel(ctx), s.group, partition); err != nil {
		s.log.Warn("sourced: deleting a stale snapshot failed", "group", s.group, "partition", partition, "error", err)
	}
}

// startState is where a decision on a partition's history starts, in its
// transaction: the StateCache entry (first attempt only, see Handle), else
// the latest valid snapshot, else the initial state. It returns the state,
// the position it is folded up to (the history is read after it) and the
// events it folded since its last snapshot.
//
// The router's pure path can call it (with StateCache.put and
// snapshots.save after commit) to start a claimed batch's history from a
// snapshot too.
func startState[S any](tx Tx, cache *StateCache, snaps *snapshots, key stateKey, fromCache bool, initial func() S) (S, int64, int) {
	if cache != nil && fromCache {
		if e, ok := cache.take(key); ok {
			return e.state.(S), e.position, e.unsaved
		}
	}
	if state, position, ok := snaps.loadTx(tx, key.partition); ok {
		if s, ok := state.(S); ok {
			return s, position, 0
		}
	}
	return initial(), 0, 0
}

// loadSnapshot is Load from e's latest valid snapshot: the state folded
// from it and the history after it, with the guard of that read (the
// guard of a full read: the same conditions and last position). false
// when e takes no snapshots, none is valid, or opts asks for a part of
// the history (After, Limit) or for a point in time before the snapshot.
// It saves a newer snapshot when the policy says so (Upto unset).
func loadSnapshot[S any](ctx context.Context, store Store, e core.Evolver[S], partition core.Partition, types []string, opts ReadOptions) (S, core.Guard, bool, error) {
	var zero S
	snaps := snapshotsOf(store, e)
	if snaps == nil || opts.After != 0 || opts.Limit != 0 {
		return zero, core.Guard{}, false, nil
	}
	defer snaps.dropStale(ctx, core.Partition(partition).Key()) // one that does not decode
	key := core.Partition(partition).Key()
	state, position, ok := snaps.load(ctx, key)
	if !ok || opts.Upto != 0 && position > opts.Upto {
		return zero, core.Guard{}, false, nil
	}
	base, ok := state.(S)
	if !ok {
		return zero, core.Guard{}, false, nil
	}
	res, err := store.ReadPartition(ctx, partition, types, ReadOptions{After: position, Upto: opts.Upto})
	if err != nil {
		return zero, core.Guard{}, false, err
	}
	if res.Guard.LastPosition < position {
		snaps.stale = true
		snaps.dropStale(ctx, key)
		snaps.log.Warn("sourced: a snapshot is beyond the end of the log (a restored log?); folding the partition from the log", "group", snaps.group, "partition", key, "position", position, "log_end", res.Guard.LastPosition)
		return zero, core.Guard{}, false, nil
	}
	s := e.Evolve(base, core.MessagesOf(res.Messages)...)
	if opts.Upto == 0 {
		snaps.save(ctx, key, s, res.Guard.LastPosition, len(res.Messages))
	}
	return s, res.Guard, true, nil
}

// saveLoaded saves the state a full Load folded (when the policy says
// so): the first Load of a long partition leaves a snapshot behind.
func saveLoaded[S any](ctx context.Context, store Store, e core.Evolver[S], partition core.Partition, opts ReadOptions, state S, res ReadResult) {
	if opts != (ReadOptions{}) {
		return
	}
	if snaps := snapshotsOf(store, e); snaps != nil {
		snaps.save(ctx, core.Partition(partition).Key(), state, res.Guard.LastPosition, len(res.Messages))
	}
}

// errNoSnapshots is returned by DeleteSnapshotsOf for a store that keeps
// none.
var errNoSnapshots = errors.New("sourced: the store keeps no snapshots (it does not implement shell.SnapshotStore)")

// DeleteSnapshotsOf deletes every snapshot of group in store (every
// group's when group is empty) and returns how many: after changing a
// decider's evolve handlers or upcasters without changing its codec's
// Version, say. ResetGroup does it for its group. A store that keeps no
// snapshots returns an error.
func DeleteSnapshotsOf(ctx context.Context, store Store, group string) (int, error) {
	ss, ok := store.(SnapshotStore)
	if !ok {
		return 0, errNoSnapshots
	}
	if g, err := core.NormalizeGroup(group); err == nil {
		group = g
	}
	return ss.DeleteSnapshots(ctx, group)
}
