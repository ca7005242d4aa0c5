package sqlitestore

import (
	"errors"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.ClaimManyTx = (*tx)(nil)

// ClaimMany claims, in the transaction, up to partitions partitions of
// group for workerID, each with up to batchSize of its messages, in the
// order successive ClaimNext calls would claim them; see driver.ClaimManyTx.
// One statement finds them (the claim scan with a limit), then each is
// fetched and claimed as ClaimNext does. The status gate and the latch are
// ClaimNext's: a group that is not claimable or latched clean answers
// with no claims in O(1), and a scan that finds nothing latches the group.
func (t *tx) ClaimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return nil, err
	}
	if partitions <= 0 {
		return nil, fmt.Errorf("sqlitestore: claim %d partitions: the partition count must be positive", partitions)
	}
	return t.claimMany(group, workerID, batchSize, partitions)
}

// manyCandidate is an offset the ClaimMany scan found.
type manyCandidate struct {
	id, last, replay int64
	key              string
}

// claimMany is ClaimMany in the transaction.
func (t *tx) claimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	if err := t.flushWakes(); err != nil { // the scan sees this transaction's appends
		return nil, err
	}
	g, err := t.gs.lookup(group)
	if err != nil {
		return nil, err
	}
	st, err := t.groupState(g)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim %s: %w", group, err)
	}
	now := t.s.now()
	if !driver.Claimable(st.status, st.retryAt, now) || st.hooksPending || st.scan < 0 {
		return nil, nil // not claimable (its hooks pending), or latched: nothing changed since the last empty scan
	}
	if g.missing != nil {
		return nil, g.missing
	}
	q := t.s.q.g
	var (
		out   []*driver.ClaimedPartition
		cands []manyCandidate
		tbuf  [timeWidth]byte
		stale int // wrong pending markers repaired (see maxStaleMarkers)
	)
	for len(out) < partitions {
		want := partitions - len(out)
		cands = cands[:0]
		err := t.w.rows(q.scanMany, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindInt64(2, int64(want))
		}, func(stmt *sqlite.Stmt) {
			cands = append(cands, manyCandidate{id: stmt.ColumnInt64(0), key: stmt.ColumnText(1), last: stmt.ColumnInt64(2), replay: stmt.ColumnInt64(3)})
		})
		if err != nil {
			return out, fmt.Errorf("sqlitestore: claim %s: scan: %w", group, err)
		}
		if len(cands) == 0 {
			if len(out) == 0 {
				// An empty scan: latch the group clean, as ClaimNext does.
				_, err := exec(t.conn, q.latch, func(stmt *sqlite.Stmt) {
					stmt.BindInt64(1, g.row)
					stmt.BindInt64(2, st.scan)
				})
				if err != nil {
					return nil, fmt.Errorf("sqlitestore: claim %s: latch: %w", group, err)
				}
			}
			return out, nil
		}
		repaired := false
		for _, cd := range cands {
			c, err := t.claimCandidate(g, cd, workerID, batchSize, appendTime(tbuf[:0], now))
			if errors.Is(err, errStaleMarker) {
				repaired = true
				if stale++; stale >= maxStaleMarkers {
					return out, nil // leaves the group dirty, as ClaimNext does
				}
				continue
			}
			if err != nil {
				return out, err
			}
			out = append(out, c)
		}
		if !repaired {
			// The scan found fewer offsets than asked for, or as many as
			// were wanted: another scan would add nothing.
			return out, nil
		}
	}
	return out, nil
}

// errStaleMarker is claimCandidate's answer for an offset whose pending
// marker was wrong (repaired, not claimed).
var errStaleMarker = errors.New("sqlitestore: stale pending marker")

// claimCandidate fetches and claims one offset the ClaimMany scan found,
// as ClaimNext claims the one its scan finds.
func (t *tx) claimCandidate(g *groupConf, cd manyCandidate, workerID string, batchSize int, at []byte) (*driver.ClaimedPartition, error) {
	partition, err := parsePartition(cd.key)
	if err != nil {
		return nil, err
	}
	rows, err := t.s.queryPartition(t.conn, t.w, partition, g.handled, bound{lo: cd.last, hi: maxPosition}, batchSize)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim %s: fetch: %w", g.name, err)
	}
	if len(rows) == 0 {
		// The marker was wrong (its messages were deleted by raw SQL):
		// repair it.
		next, err := t.remark(g, cd.id, cd.last)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: claim %s: %w", g.name, err)
		}
		if next != 0 {
			return nil, fmt.Errorf("sqlitestore: claim %s: offset %d is pending at %d but its fetch is empty", g.name, cd.id, next)
		}
		return nil, errStaleMarker
	}
	n, err := exec(t.conn, t.s.q.g.claim, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, cd.id)
		stmt.BindText(2, bytesText(at))
		stmt.BindText(3, workerID)
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("offset %d is claimed already", cd.id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim %s: %w", g.name, err)
	}
	msgs, err := t.s.decodeRows(rows)
	if err != nil {
		return nil, inClaim(err, g.name, partition, cd.id)
	}
	lastPos := msgs[len(msgs)-1].Position
	return &driver.ClaimedPartition{
		Group:      g.name,
		WorkerID:   workerID,
		OffsetID:   cd.id,
		After:      cd.last,
		Partition:  partition,
		Messages:   msgs,
		Guard:      core.Guard{Conditions: core.ConditionsFor(partition, g.types...), LastPosition: lastPos},
		Replaying:  lastPos <= cd.replay,
		ReplayUpto: cd.replay,
	}, nil
}

// inClaim names the claim that met a message it cannot decode (a
// *driver.DecodeError) in the error.
func inClaim(err error, group string, partition core.Partition, offset int64) error {
	var de *driver.DecodeError
	if errors.As(err, &de) {
		de.Group, de.Partition, de.OffsetID = group, partition, offset
	}
	return err
}
