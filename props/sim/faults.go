package sim

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// errCrash is what every store call of a crashed process returns: the
// process died, nothing it asks for reaches the store any more.
var errCrash = errors.New("sim: the process crashed")

// faultStore wraps the store under simulation. Every call (of the store,
// and of the transactions it hands out) is a numbered interleaving point:
// before it is forwarded, the world's hook may inject ErrBusy, crash the
// process, or run other actions first (another worker, the reaper, a clock
// step: what a concurrent process would do at that moment). Nothing here
// changes what the store does; it only chooses when things happen.
type faultStore struct {
	inner driver.Store
	w     *World
	inTx  int // depth of transactions under way (no interleaving inside one)
}

var _ driver.Store = (*faultStore)(nil)

// call is the interleaving point of one store call: it returns the error
// to inject, if any.
func (f *faultStore) call(name string, write bool) error {
	return f.w.point(name, f.inTx > 0, write)
}

// after is the point just after a call returned: a crash planned "after"
// strikes here, the call done but its answer lost.
func (f *faultStore) after(err error) error {
	if err == nil && f.w.crashed() {
		return errCrash
	}
	return err
}

func (f *faultStore) Registry() *codec.Registry { return f.inner.Registry() }
func (f *faultStore) Now() time.Time            { return f.inner.Now() }
func (f *faultStore) Notifier() driver.Notifier { return f.inner.Notifier() }

func (f *faultStore) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	if err := f.call("Update", true); err != nil {
		return err
	}
	err := f.inner.Update(ctx, func(tx driver.Tx) error {
		f.inTx++
		defer func() { f.inTx-- }()
		err := fn(&faultTx{inner: tx, f: f})
		if err == nil && f.w.crashed() {
			// The process died inside the transaction: it never commits.
			return errCrash
		}
		return err
	})
	return f.after(err)
}

func (f *faultStore) Append(ctx context.Context, msgs []core.Message, opts driver.AppendOptions) (driver.AppendResult, error) {
	var res driver.AppendResult
	err := f.Update(ctx, func(tx driver.Tx) (err error) {
		res, err = tx.Append(msgs, opts)
		return err
	})
	return res, err
}

func (f *faultStore) Read(ctx context.Context, conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := f.call("Read", false); err != nil {
		return driver.ReadResult{}, err
	}
	r, err := f.inner.Read(ctx, conds, opts)
	return r, f.after(err)
}

func (f *faultStore) ReadPartition(ctx context.Context, partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := f.call("ReadPartition", false); err != nil {
		return driver.ReadResult{}, err
	}
	r, err := f.inner.ReadPartition(ctx, partition, types, opts)
	return r, f.after(err)
}

func (f *faultStore) ReadAll(ctx context.Context, opts driver.ReadAllOptions) (driver.Page, error) {
	if err := f.call("ReadAll", false); err != nil {
		return driver.Page{}, err
	}
	p, err := f.inner.ReadAll(ctx, opts)
	return p, f.after(err)
}

func (f *faultStore) ReadCorrelation(ctx context.Context, id uuid.UUID) ([]core.PositionedMessage, error) {
	if err := f.call("ReadCorrelation", false); err != nil {
		return nil, err
	}
	r, err := f.inner.ReadCorrelation(ctx, id)
	return r, f.after(err)
}

func (f *faultStore) All(ctx context.Context, opts driver.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return driver.PageMessages(ctx, f.ReadAll, opts)
}

func (f *faultStore) PromoteScheduled(ctx context.Context, now time.Time) (int, error) {
	if err := f.call("PromoteScheduled", true); err != nil {
		return 0, err
	}
	n, err := f.inner.PromoteScheduled(ctx, now)
	return n, f.after(err)
}

func (f *faultStore) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	if err := f.call("NextScheduled", false); err != nil {
		return time.Time{}, false, err
	}
	t, ok, err := f.inner.NextScheduled(ctx)
	return t, ok, f.after(err)
}

func (f *faultStore) Stats(ctx context.Context) (driver.Stats, error) {
	if err := f.call("Stats", false); err != nil {
		return driver.Stats{}, err
	}
	s, err := f.inner.Stats(ctx)
	return s, f.after(err)
}

func (f *faultStore) Optimize(ctx context.Context) error {
	if err := f.call("Optimize", true); err != nil {
		return err
	}
	return f.after(f.inner.Optimize(ctx))
}

func (f *faultStore) Close() error { return f.inner.Close() }

// Housekeep forwards the SQLite store's upkeep (a Runtime's reaper calls
// it).
func (f *faultStore) Housekeep(ctx context.Context) error {
	h, ok := f.inner.(driver.Housekeeper)
	if !ok {
		return nil
	}
	if err := f.call("Housekeep", true); err != nil {
		return err
	}
	return f.after(h.Housekeep(ctx))
}

// Changed forwards the SQLite store's change detection (the catch-up
// poll's); a store without one always changed.
func (f *faultStore) Changed(ctx context.Context) (bool, error) {
	cd, ok := f.inner.(driver.ChangeDetector)
	if !ok {
		return true, nil
	}
	if err := f.call("Changed", false); err != nil {
		return false, err
	}
	c, err := cd.Changed(ctx)
	return c, f.after(err)
}

func (f *faultStore) RegisterGroup(ctx context.Context, g driver.GroupSpec) error {
	if err := f.call("RegisterGroup", true); err != nil {
		return err
	}
	return f.after(f.inner.RegisterGroup(ctx, g))
}

func (f *faultStore) ClaimNext(ctx context.Context, group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	if err := f.call("ClaimNext", true); err != nil {
		return nil, err
	}
	c, err := f.inner.ClaimNext(ctx, group, workerID, batchSize)
	if err = f.after(err); err != nil {
		return nil, err
	}
	return c, nil
}

func (f *faultStore) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx driver.Tx, c *driver.ClaimedPartition) error) (bool, error) {
	if err := f.call("ClaimUpdate", true); err != nil {
		return false, err
	}
	did, err := f.inner.ClaimUpdate(ctx, group, workerID, batchSize, func(tx driver.Tx, c *driver.ClaimedPartition) error {
		f.inTx++
		defer func() { f.inTx-- }()
		err := fn(&faultTx{inner: tx, f: f}, c)
		if err == nil && f.w.crashed() {
			return errCrash
		}
		return err
	})
	return did, f.after(err)
}

func (f *faultStore) Release(ctx context.Context, c *driver.ClaimedPartition) error {
	if err := f.call("Release", true); err != nil {
		return err
	}
	return f.after(f.inner.Release(ctx, c))
}

func (f *faultStore) Ack(ctx context.Context, c *driver.ClaimedPartition, position int64) error {
	if err := f.call("Ack", true); err != nil {
		return err
	}
	return f.after(f.inner.Ack(ctx, c, position))
}

func (f *faultStore) ParkedPartitions(ctx context.Context, group string) ([]driver.ParkedPartition, error) {
	if err := f.call("ParkedPartitions", false); err != nil {
		return nil, err
	}
	out, err := f.inner.ParkedPartitions(ctx, group)
	return out, f.after(err)
}

func (f *faultStore) RetryPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	if err := f.call("RetryPartition", true); err != nil {
		return driver.ParkedPartition{}, err
	}
	out, err := f.inner.RetryPartition(ctx, group, partition)
	return out, f.after(err)
}

func (f *faultStore) SkipFailedMessage(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	if err := f.call("SkipFailedMessage", true); err != nil {
		return driver.ParkedPartition{}, err
	}
	out, err := f.inner.SkipFailedMessage(ctx, group, partition)
	return out, f.after(err)
}

func (f *faultStore) ResetPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	if err := f.call("ResetPartition", true); err != nil {
		return driver.ParkedPartition{}, err
	}
	out, err := f.inner.ResetPartition(ctx, group, partition)
	return out, f.after(err)
}

func (f *faultStore) StopGroup(ctx context.Context, group, reason string) error {
	if err := f.call("StopGroup", true); err != nil {
		return err
	}
	return f.after(f.inner.StopGroup(ctx, group, reason))
}

func (f *faultStore) StartGroup(ctx context.Context, group string) error {
	if err := f.call("StartGroup", true); err != nil {
		return err
	}
	return f.after(f.inner.StartGroup(ctx, group))
}

func (f *faultStore) ClaimTransition(ctx context.Context, group, claimant string, now time.Time, lease time.Duration) (*driver.GroupTransition, error) {
	if err := f.call("ClaimTransition", true); err != nil {
		return nil, err
	}
	out, err := f.inner.ClaimTransition(ctx, group, claimant, now, lease)
	return out, f.after(err)
}

func (f *faultStore) FinishTransition(ctx context.Context, t *driver.GroupTransition, ran bool) error {
	if err := f.call("FinishTransition", true); err != nil {
		return err
	}
	return f.after(f.inner.FinishTransition(ctx, t, ran))
}

func (f *faultStore) ResetGroup(ctx context.Context, group string) error {
	if err := f.call("ResetGroup", true); err != nil {
		return err
	}
	return f.after(f.inner.ResetGroup(ctx, group))
}

func (f *faultStore) RetryGroup(ctx context.Context, group string, at time.Time, failure driver.Failure) error {
	if err := f.call("RetryGroup", true); err != nil {
		return err
	}
	return f.after(f.inner.RetryGroup(ctx, group, at, failure))
}

func (f *faultStore) FailGroup(ctx context.Context, group string, failure driver.Failure) error {
	if err := f.call("FailGroup", true); err != nil {
		return err
	}
	return f.after(f.inner.FailGroup(ctx, group, failure))
}

func (f *faultStore) ChangeGroup(ctx context.Context, group string, decide func(driver.GroupState) (driver.GroupChange, error)) (driver.GroupState, error) {
	if err := f.call("ChangeGroup", true); err != nil {
		return driver.GroupState{}, err
	}
	st, err := f.inner.ChangeGroup(ctx, group, decide)
	return st, f.after(err)
}

func (f *faultStore) Group(ctx context.Context, group string) (driver.GroupInfo, error) {
	if err := f.call("Group", false); err != nil {
		return driver.GroupInfo{}, err
	}
	g, err := f.inner.Group(ctx, group)
	return g, f.after(err)
}

func (f *faultStore) Heartbeat(ctx context.Context, workerIDs []string, at time.Time) error {
	if err := f.call("Heartbeat", true); err != nil {
		return err
	}
	err := f.inner.Heartbeat(ctx, workerIDs, at)
	if err == nil {
		f.w.heartbeat(workerIDs, at)
	}
	return f.after(err)
}

func (f *faultStore) ReleaseStaleClaims(ctx context.Context, now time.Time, ttl time.Duration) (int, error) {
	if err := f.call("ReleaseStaleClaims", true); err != nil {
		return 0, err
	}
	n, err := f.inner.ReleaseStaleClaims(ctx, now, ttl)
	if err == nil {
		f.w.reaped(now, ttl)
	}
	return n, f.after(err)
}

func (f *faultStore) ReleaseClaimsOlderThan(ctx context.Context, cutoff time.Time) ([]driver.Offset, error) {
	if err := f.call("ReleaseClaimsOlderThan", true); err != nil {
		return nil, err
	}
	o, err := f.inner.ReleaseClaimsOlderThan(ctx, cutoff)
	return o, f.after(err)
}

func (f *faultStore) RemoveWorkers(ctx context.Context, workerIDs []string) error {
	if err := f.call("RemoveWorkers", true); err != nil {
		return err
	}
	return f.after(f.inner.RemoveWorkers(ctx, workerIDs))
}

func (f *faultStore) ReleaseDrainedOffsets(ctx context.Context) (int, error) {
	if err := f.call("ReleaseDrainedOffsets", true); err != nil {
		return 0, err
	}
	n, err := f.inner.ReleaseDrainedOffsets(ctx)
	return n, f.after(err)
}

func (f *faultStore) PruneOrphanKeyPairs(ctx context.Context) (int, error) {
	if err := f.call("PruneOrphanKeyPairs", true); err != nil {
		return 0, err
	}
	n, err := f.inner.PruneOrphanKeyPairs(ctx)
	return n, f.after(err)
}

func (f *faultStore) ReadOffsets(ctx context.Context, q driver.OffsetQuery) (driver.OffsetPage, error) {
	if err := f.call("ReadOffsets", false); err != nil {
		return driver.OffsetPage{}, err
	}
	p, err := f.inner.ReadOffsets(ctx, q)
	return p, f.after(err)
}

func (f *faultStore) Offsets(ctx context.Context, q driver.OffsetQuery) iter.Seq2[driver.Offset, error] {
	return func(yield func(driver.Offset, error) bool) {
		for o, err := range f.inner.Offsets(ctx, q) {
			if !yield(o, err) || err != nil {
				return
			}
		}
	}
}

// faultTx wraps a transaction of the store under simulation: its calls are
// points too (a crash or a cancellation may strike between two statements
// of a transaction), but nothing else runs inside a transaction: it holds
// the store's write lock.
type faultTx struct {
	inner driver.Tx
	f     *faultStore
}

func (t *faultTx) point(name string) error { return t.f.call("tx."+name, true) }

func (t *faultTx) Append(msgs []core.Message, opts driver.AppendOptions) (driver.AppendResult, error) {
	if err := t.point("Append"); err != nil {
		return driver.AppendResult{}, err
	}
	return t.inner.Append(msgs, opts)
}

func (t *faultTx) Read(conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := t.point("Read"); err != nil {
		return driver.ReadResult{}, err
	}
	return t.inner.Read(conds, opts)
}

func (t *faultTx) ReadPartition(partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := t.point("ReadPartition"); err != nil {
		return driver.ReadResult{}, err
	}
	return t.inner.ReadPartition(partition, types, opts)
}

func (t *faultTx) ReadAll(opts driver.ReadAllOptions) (driver.Page, error) {
	if err := t.point("ReadAll"); err != nil {
		return driver.Page{}, err
	}
	return t.inner.ReadAll(opts)
}

func (t *faultTx) LastPosition() (int64, error) {
	if err := t.point("LastPosition"); err != nil {
		return 0, err
	}
	return t.inner.LastPosition()
}

func (t *faultTx) Context() core.SyncTx { return t.inner.Context() }

func (t *faultTx) ClaimNext(group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	if err := t.point("ClaimNext"); err != nil {
		return nil, err
	}
	return t.inner.ClaimNext(group, workerID, batchSize)
}

func (t *faultTx) Ack(c *driver.ClaimedPartition, position int64) error {
	if err := t.point("Ack"); err != nil {
		return err
	}
	return t.inner.Ack(c, position)
}

func (t *faultTx) Release(c *driver.ClaimedPartition) error {
	if err := t.point("Release"); err != nil {
		return err
	}
	return t.inner.Release(c)
}

func (t *faultTx) Delete(positions ...int64) error {
	if err := t.point("Delete"); err != nil {
		return err
	}
	return t.inner.Delete(positions...)
}

func (t *faultTx) AdvanceOffset(group string, partition core.Partition, position int64) (bool, error) {
	if err := t.point("AdvanceOffset"); err != nil {
		return false, err
	}
	return t.inner.AdvanceOffset(group, partition, position)
}

// Unschedule withdraws scheduled messages through the inner transaction
// (every store under simulation has driver.UnscheduleTx): a workflow's
// receive that got its signal withdraws its timeout so, and the
// simulation strikes there too.
func (t *faultTx) Unschedule(ids ...uuid.UUID) (int, error) {
	if err := t.point("Unschedule"); err != nil {
		return 0, err
	}
	u, ok := t.inner.(driver.UnscheduleTx)
	if !ok {
		return 0, fmt.Errorf("sim: %T cannot withdraw scheduled messages", t.inner)
	}
	return u.Unschedule(ids...)
}

// ClaimMany claims several partitions through the inner transaction
// (every store under simulation has driver.ClaimManyTx), as the router
// does for a queue and, on a store whose positions may skip, for a pure
// reactor.
func (t *faultTx) ClaimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	if err := t.point("ClaimMany"); err != nil {
		return nil, err
	}
	m, ok := t.inner.(driver.ClaimManyTx)
	if !ok {
		return nil, fmt.Errorf("sim: %T cannot claim several partitions at once", t.inner)
	}
	return m.ClaimMany(group, workerID, batchSize, partitions)
}

var (
	_ driver.UnscheduleTx = (*faultTx)(nil)
	_ driver.ClaimManyTx  = (*faultTx)(nil)
)

// busy is the error an injected ErrBusy fault returns: what a store
// returns when another process held its write lock too long.
func busy(name string) error {
	return fmt.Errorf("sim: %s: another process holds the write lock: %w", name, driver.ErrBusy)
}
