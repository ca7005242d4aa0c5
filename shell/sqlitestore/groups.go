package sqlitestore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Consumer groups in SQLite.
//
// Tables (migration 2): <p>_consumer_groups (configuration, status, retry
// time, failure as JSON of driver.Failure, highest position folded from
// offsets that moved back or went (see below),
// the claim-scan latch), <p>_offsets (one row per partition: its key, last
// position, pending marker, replay mark and claim), <p>_offset_key_pairs
// (the key pairs that define a partition), <p>_workers (heartbeats),
// <p>_key_pair_candidates (key pairs to check for pruning) and
// <p>_counters (change counters other processes' writers watch).
//
// # Pending work: a marker per offset
//
// offsets.next_position is the position of the first message after
// last_position that wakes the partition (a handled type carrying every
// partition attribute with the partition's value: Pending work in
// shell/storetest's package doc), or
// NULL when there is none. It is exact at every commit:
//   - an append sets it, in the same transaction, on the offsets of the
//     partitions each new message carries in full (creating them: eager
//     offsets), unless it is set already (an earlier message is first);
//   - an ack or an advance moves last_position and recomputes it (one
//     index-backed probe: the first message of the partition's key pairs
//     after the new position);
//   - deleting a message recomputes it for the offsets waiting on that
//     message (found through a partial index on next_position);
//   - registration and reset recompute it for the whole group (discover).
//
// The claim scan is then a range of a partial index,
// idx_<p>_offsets_pending on (consumer_group_id, last_position) WHERE
// next_position IS NOT NULL AND claimed = 0: it holds the claimable
// offsets and nothing else, so finding the one furthest behind is one
// B-tree descent, and a group whose partitions are all caught up answers
// from an empty range, however many caught-up partitions it has. (The
// original scanned every unclaimed offset with an EXISTS over the key-pair
// index: 9 ms at 5,000 partitions, 264 ms at 100,000.) The query names its
// index (INDEXED BY), so the plan cannot change with the statistics.
//
// A message carrying only some of a composite partition's attributes sets
// no marker (it does not wake the partition) but is fetched, under
// conditional AND, with the partition's next claim.
//
// Raw SQL that inserts messages bypasses the markers (the latch triggers
// still fire): such messages are claimed once the group is re-registered
// with another configuration or reset, which rediscovers the log.
//
// Appends defer their wakes to the end of the Update's function (or to
// the transaction's next call that reads or writes offsets, or hands out
// its connection): a partition woken by several messages of a transaction
// is written once, and an AdvanceOffset past the message that woke it, in
// the same transaction (Handle), writes the offset once with no marker to
// set and clear (see pendingWake).
//
// # The highest position
//
// A group's highest acknowledged position is the furthest of its offsets'
// last positions and of consumer_groups.highest_position, into which a
// reset (ResetGroup, ResetPartition) or a deletion (ReleaseDrainedOffsets)
// folds the positions of the offsets it moves back or removes first. So an
// ack or an advance writes no group row: offsets never move backwards
// otherwise.
//
// # The latch
//
// consumer_groups.scan_version is the sign-encoded claim-scan latch
// (storetest's Latch tests pin what it must keep): >= 0 dirty, < 0 clean (an empty scan completed at
// version -v-1 and nothing changed since). Two triggers make a clean group
// dirty for every writer, any process, raw SQL included: inserting a
// message (every group), and releasing a claim (the offset's group: a
// release can expose work a scan skipped while the partition was held). A
// ClaimNext that finds the group clean answers nil in O(1); a dirty one
// scans and, when it finds nothing, compare-and-sets the latch clean
// against the version it read. The scan and the compare-and-set run in the
// same BEGIN IMMEDIATE transaction, so no bump can fall between them;
// that is why the triggers only bump clean groups (1 - v: above every
// earlier version) and leave dirty ones as they are, sparing a group-row
// write per appended message. Start and reset set the latch to 0.
//
// On top of the latch, the store remembers in memory, per group, the
// PRAGMA data_version at which it last found the group idle (see watcher):
// as long as nothing was committed since, ClaimNext answers without
// touching the database's tables or taking the writer.
//
// # Claims
//
// A claim runs in one BEGIN IMMEDIATE transaction: the status gate
// (active, or retrying once the retry time has passed by the store's
// clock), the latch, the scan, the conditional-AND fetch of up to the batch
// size of the partition's handled messages, and the claim itself (claimed,
// claimed_at, claimed_by). Acks and releases re-check, in their
// transaction, that the claim's worker still holds the offset.
//
// # Replays
//
// A reset keeps the offset rows and moves each back to 0, recording in
// replay_until how far it had been acknowledged; a claim of the partition
// is a replay when its last message is at or below that mark (per
// partition, see package storetest).

// RegisterGroup creates the group (active) or updates its label,
// partitioning and handled types, keeping its status, failure, offsets and
// highest position; see driver.Groups. A new group, or one whose
// partitioning or handled types change, discovers its partitions in the
// whole log at once, so messages appended before it was registered are
// claimed too. The configuration is stored, so every process's appends
// index and create offsets for it (each writer reloads it when another
// process changed it).
func (s *Store) RegisterGroup(ctx context.Context, spec driver.GroupSpec) error {
	spec, err := driver.NormalizeGroupSpec(s.reg, spec)
	if err != nil {
		return err
	}
	handled, partitionBy, label := spec.Handled, spec.PartitionBy, spec.Label
	pbJSON, _ := json.Marshal(partitionBy)
	hJSON, _ := json.Marshal(handled)
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		for _, o := range t.gs.list {
			if err := driver.CheckGroupConflict(spec, o.name, o.exclusive, o.handles); err != nil {
				return err
			}
		}
		q := s.q.g
		now := formatTime(s.now())
		old := t.gs.byName[spec.ID]
		changed := old == nil || !slices.Equal(old.partitionBy, partitionBy) || !slices.Equal(old.handled, handled) || old.exclusive != spec.Exclusive
		if !changed {
			_, err := exec(t.conn, q.updateLabel, func(stmt *sqlite.Stmt) {
				stmt.BindInt64(1, old.row)
				stmt.BindText(2, label)
				stmt.BindText(3, now)
			})
			if err != nil {
				return err
			}
			return t.setHooks(old, spec.Hooks)
		}
		bind := func(stmt *sqlite.Stmt) {
			stmt.BindText(2, label)
			stmt.BindText(3, string(pbJSON))
			stmt.BindBool(4, spec.Exclusive)
			stmt.BindText(5, string(hJSON))
			stmt.BindText(6, now)
		}
		var err error
		if old == nil {
			_, err = exec(t.conn, q.insertGroup, func(stmt *sqlite.Stmt) {
				stmt.BindText(1, spec.ID)
				bind(stmt)
			})
		} else {
			_, err = exec(t.conn, q.updateConfig, func(stmt *sqlite.Stmt) {
				stmt.BindInt64(1, old.row)
				bind(stmt)
			})
		}
		if err == nil {
			err = t.configured()
		}
		if err != nil {
			return err
		}
		if err := t.setHooks(t.gs.byName[spec.ID], spec.Hooks); err != nil {
			return err
		}
		return t.discover(t.gs.byName[spec.ID])
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: register consumer group %s: %w", spec.ID, err)
	}
	return nil
}

// configured records that the transaction changed the group configuration:
// other processes' writers see the counter move, this one reloads now.
func (t *tx) configured() error {
	if _, err := exec(t.conn, t.s.q.g.bumpCount, func(stmt *sqlite.Stmt) { stmt.BindText(1, counterGroups) }); err != nil {
		return err
	}
	t.configChanged = true
	gs, err := loadGroups(t.conn, t.s)
	if err != nil {
		return err
	}
	t.gs, t.w.groups = gs, gs
	return nil
}

// ClaimNext claims the partition of group with pending work whose offset
// is furthest behind (ties: the oldest offset) for workerID, with up to
// batchSize of its messages; see driver.Groups and the package notes above.
func (s *Store) ClaimNext(ctx context.Context, group, workerID string, batchSize int) (c *driver.ClaimedPartition, err error) {
	_, err = s.ClaimUpdate(ctx, group, workerID, batchSize, func(_ driver.Tx, claim *driver.ClaimedPartition) error {
		c = claim
		return nil
	})
	return c, err
}

// ClaimUpdate claims like ClaimNext and calls fn with the claim in the
// same transaction; see driver.Groups.
func (s *Store) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx driver.Tx, c *driver.ClaimedPartition) error) (bool, error) {
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if !s.noIdleCache && s.watch.idleNow(group, s.commits.Load(), s.now()) {
		return false, nil
	}
	var c *driver.ClaimedPartition
	var idle bool
	var e idleClaim
	var t *tx
	err := s.update(ctx, false, func(stx driver.Tx) error {
		var err error
		t = stx.(*tx)
		c, idle, e.until, err = t.claimNext(group, workerID, batchSize)
		if err == nil && idle {
			// Read while the write lock is held: nothing committed since
			// the transaction read the group. Not cached when unreadable.
			var verr error
			e.version, verr = s.watch.current()
			idle = verr == nil
		}
		if err != nil || c == nil {
			return err
		}
		return fn(stx, c)
	})
	if err != nil {
		return c != nil, err
	}
	// Remembered only when no later transaction shared the commit: its
	// writes may have given the group work (the data version catches that
	// on a file, but not in memory).
	if idle && t.member == t.group.members {
		e.commits = t.group.commitNo
		s.watch.remember(group, e)
	}
	return c != nil, nil
}

// ClaimNext claims inside the transaction; see driver.GroupTx.
func (t *tx) ClaimNext(group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return nil, err
	}
	c, _, _, err := t.claimNext(group, workerID, batchSize)
	return c, err
}

// maxStaleMarkers bounds how many wrong pending markers (messages deleted
// behind the store's back) one claim repairs before it gives up for this
// poll, leaving the group dirty.
const maxStaleMarkers = 64

// claimNext is ClaimNext in the transaction. idle is true when it found
// nothing to claim, wrote nothing, and the answer holds until the database
// changes (or until the retry time, when not zero).
func (t *tx) claimNext(group, workerID string, batchSize int) (c *driver.ClaimedPartition, idle bool, until time.Time, err error) {
	if err := t.flushWakes(); err != nil {
		return nil, false, until, err
	}
	g, err := t.gs.lookup(group)
	if err != nil {
		return nil, false, until, err
	}
	st, err := t.groupState(g)
	if err != nil {
		return nil, false, until, fmt.Errorf("sqlitestore: claim %s: %w", group, err)
	}
	now := t.s.now()
	if !driver.Claimable(st.status, st.retryAt, now) {
		if st.status == driver.StatusRetrying {
			until = st.retryAt
		}
		return nil, true, until, nil
	}
	if st.hooksPending {
		return nil, true, until, nil // until FinishTransition (a commit) runs the last hook
	}
	if st.scan < 0 {
		return nil, true, until, nil // latched: nothing changed since the last empty scan
	}
	if g.missing != nil {
		return nil, false, until, g.missing
	}
	q := t.s.q.g
	for range maxStaleMarkers {
		var id, last, replay int64
		var key string
		found := false
		err := t.w.rows(q.scan, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }, func(stmt *sqlite.Stmt) {
			found = true
			id, key, last, replay = stmt.ColumnInt64(0), stmt.ColumnText(1), stmt.ColumnInt64(2), stmt.ColumnInt64(3)
		})
		if err != nil {
			return nil, false, until, fmt.Errorf("sqlitestore: claim %s: scan: %w", group, err)
		}
		if !found {
			_, err := exec(t.conn, q.latch, func(stmt *sqlite.Stmt) {
				stmt.BindInt64(1, g.row)
				stmt.BindInt64(2, st.scan)
			})
			if err != nil {
				return nil, false, until, fmt.Errorf("sqlitestore: claim %s: latch: %w", group, err)
			}
			return nil, false, until, nil // wrote the latch: the next poll reads it
		}
		partition, err := parsePartition(key)
		if err != nil {
			return nil, false, until, err
		}
		rows, err := t.s.queryPartition(t.conn, t.w, partition, g.handled, bound{lo: last, hi: maxPosition}, batchSize)
		if err != nil {
			return nil, false, until, fmt.Errorf("sqlitestore: claim %s: fetch: %w", group, err)
		}
		if len(rows) == 0 {
			// The marker was wrong (its messages were deleted by raw SQL):
			// repair it and look again.
			next, err := t.remark(g, id, last)
			if err != nil {
				return nil, false, until, fmt.Errorf("sqlitestore: claim %s: %w", group, err)
			}
			if next != 0 {
				return nil, false, until, fmt.Errorf("sqlitestore: claim %s: offset %d is pending at %d but its fetch is empty", group, id, next)
			}
			continue
		}
		var tbuf [timeWidth]byte
		n, err := exec(t.conn, q.claim, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, id)
			stmt.BindText(2, bytesText(appendTime(tbuf[:0], now)))
			stmt.BindText(3, workerID)
		})
		if err == nil && n != 1 {
			err = fmt.Errorf("offset %d is claimed already", id)
		}
		if err != nil {
			return nil, false, until, fmt.Errorf("sqlitestore: claim %s: %w", group, err)
		}
		msgs, err := t.s.decodeRows(rows)
		if err != nil {
			return nil, false, until, inClaim(err, g.name, partition, id)
		}
		lastPos := msgs[len(msgs)-1].Position
		return &driver.ClaimedPartition{
			Group:      g.name,
			WorkerID:   workerID,
			OffsetID:   id,
			After:      last,
			Partition:  partition,
			Messages:   msgs,
			Guard:      core.Guard{Conditions: core.ConditionsFor(partition, g.types...), LastPosition: lastPos},
			Replaying:  lastPos <= replay,
			ReplayUpto: replay,
		}, false, until, nil
	}
	return nil, false, until, nil
}

// Release frees a claim without moving its offset. Only the claiming
// worker may release it (else an error matching driver.ErrNotClaimant).
func (s *Store) Release(ctx context.Context, c *driver.ClaimedPartition) error {
	return s.update(ctx, false, func(stx driver.Tx) error { return stx.(*tx).Release(c) })
}

// Release frees a claim without moving its offset, in the transaction;
// see driver.GroupTx.
func (t *tx) Release(c *driver.ClaimedPartition) error {
	if err := t.usable(); err != nil {
		return err
	}
	if _, _, err := t.held(c, "release"); err != nil {
		return err
	}
	_, err := exec(t.conn, t.s.q.g.release, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, c.OffsetID) })
	if err != nil {
		return fmt.Errorf("sqlitestore: release: %w", err)
	}
	return nil
}

// Ack moves the claim's offset to position and frees it, in a transaction
// of its own; see tx.Ack.
func (s *Store) Ack(ctx context.Context, c *driver.ClaimedPartition, position int64) error {
	return s.update(ctx, false, func(stx driver.Tx) error { return stx.(*tx).Ack(c, position) })
}

// operate runs an operator command on a group: the transition, then
// change, in one transaction that writes nothing when the status does not
// accept the command.
func (s *Store) operate(ctx context.Context, group string, cmd driver.GroupCommand, change func(t *tx, g *groupConf, r *groupRow, f *driver.Failure) error) error {
	return s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		g, err := t.gs.lookup(group)
		if err != nil {
			return err
		}
		r, err := t.groupState(g)
		if err != nil {
			return err
		}
		next, err := driver.Transition(g.name, r.status, cmd)
		if err != nil {
			return err
		}
		var f driver.Failure
		if err := json.Unmarshal([]byte(r.failure), &f); err != nil {
			return fmt.Errorf("sqlitestore: consumer group %s: failure: %w", g.name, err)
		}
		r.status = next
		if err := change(t, g, &r, &f); err != nil {
			return err
		}
		if err := t.recordTransition(g, cmd, f.Reason); err != nil {
			return err
		}
		return t.setStatus(g, r, f)
	})
}

// setStatus writes a group's status, retry time and failure.
func (t *tx) setStatus(g *groupConf, r groupRow, f driver.Failure) error {
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("sqlitestore: consumer group %s: encode failure: %w", g.name, err)
	}
	_, err = exec(t.conn, t.s.q.g.setStatus, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, g.row)
		stmt.BindText(2, string(r.status))
		if r.retryAt.IsZero() {
			stmt.BindNull(3)
		} else {
			stmt.BindText(3, formatTime(r.retryAt))
		}
		stmt.BindText(4, string(data))
		stmt.BindText(5, formatTime(t.s.now()))
	})
	return err
}

// announce has the transaction announce g's handled types after it
// commits, as an append of them would: the group was resumed (started, or
// a partition unparked), and its workers wake at once instead of at the
// next catch-up poll.
func (t *tx) announce(g *groupConf) {
	for _, typ := range g.handled {
		if !slices.Contains(t.types, typ) {
			t.types = append(t.types, typ)
		}
	}
}

func (t *tx) setLatch(g *groupConf, query string) error {
	_, err := exec(t.conn, query, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) })
	return err
}

// StopGroup stops a group: its failure keeps its fields and gets reason,
// its retry time is cleared.
func (s *Store) StopGroup(ctx context.Context, group, reason string) error {
	return s.operate(ctx, group, driver.CmdStop, func(t *tx, g *groupConf, r *groupRow, f *driver.Failure) error {
		r.retryAt = time.Time{}
		f.Reason = reason
		return nil
	})
}

// StartGroup makes a group active, clearing its retry time and failure,
// and makes its claim scan dirty; its handled types are announced after
// the commit, so that workers wake at once.
func (s *Store) StartGroup(ctx context.Context, group string) error {
	return s.operate(ctx, group, driver.CmdStart, func(t *tx, g *groupConf, r *groupRow, f *driver.Failure) error {
		r.retryAt, *f = time.Time{}, driver.Failure{}
		t.announce(g)
		return t.setLatch(g, s.q.g.rescan)
	})
}

// ResetGroup moves every offset of the group back to the beginning (claims
// included), so that it replays the log once started; each offset records
// how far it had been acknowledged, so that claims up to there report
// Replaying, and the group's status and highest position stay; the
// group's snapshots (driver.Snapshot) are deleted. It does nothing else to
// an exclusive group: a delete-on-ack queue cannot be replayed.
func (s *Store) ResetGroup(ctx context.Context, group string) error {
	return s.operate(ctx, group, driver.CmdReset, func(t *tx, g *groupConf, r *groupRow, f *driver.Failure) error {
		if _, err := t.deleteSnapshots(g.name); err != nil {
			return err
		}
		if g.exclusive {
			return nil
		}
		for _, query := range []string{s.q.g.foldGroup, s.q.g.resetOffsets, s.q.g.unparkGroup} {
			if _, err := exec(t.conn, query, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }); err != nil {
				return err
			}
		}
		if err := t.discover(g); err != nil {
			return err
		}
		return t.setLatch(g, s.q.g.rescan)
	})
}

// RetryGroup moves the group to retrying until at with the failure, when
// its status accepts it; otherwise the group stays as it is.
func (s *Store) RetryGroup(ctx context.Context, group string, at time.Time, failure driver.Failure) error {
	_, err := s.ChangeGroup(ctx, group, func(driver.GroupState) (driver.GroupChange, error) {
		return driver.GroupChange{Command: driver.CmdRetry, RetryAt: at, Failure: failure}, nil
	})
	return err
}

// FailGroup moves the group to failed with the failure, when its status
// accepts it; otherwise the group stays as it is.
func (s *Store) FailGroup(ctx context.Context, group string, failure driver.Failure) error {
	_, err := s.ChangeGroup(ctx, group, func(driver.GroupState) (driver.GroupChange, error) {
		return driver.GroupChange{Command: driver.CmdFail, Failure: failure}, nil
	})
	return err
}

// ChangeGroup decides a worker command on the group's state and applies
// it, in one BEGIN IMMEDIATE transaction; see driver.Groups.
func (s *Store) ChangeGroup(ctx context.Context, group string, decide func(driver.GroupState) (driver.GroupChange, error)) (out driver.GroupState, err error) {
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		g, err := t.gs.lookup(group)
		if err != nil {
			return err
		}
		r, err := t.groupState(g)
		if err != nil {
			return err
		}
		st := driver.GroupState{Status: r.status, RetryAt: r.retryAt}
		if err := json.Unmarshal([]byte(r.failure), &st.Failure); err != nil {
			return fmt.Errorf("sqlitestore: consumer group %s: failure: %w", g.name, err)
		}
		out = st
		ch, err := decide(st)
		if err != nil {
			return err
		}
		if ch.Command == "" {
			return nil
		}
		if ch.Command == driver.CmdPark {
			out, err = t.park(g, r, ch.Failure)
			return err
		}
		if ch.Command != driver.CmdRetry && ch.Command != driver.CmdFail {
			return fmt.Errorf("sqlitestore: consumer group %s: ChangeGroup applies a worker command (retry, fail or park), not %q", g.name, ch.Command)
		}
		next, err := driver.Transition(g.name, r.status, ch.Command)
		if err != nil {
			return nil // a worker command: the group stays as it is
		}
		r.status, r.retryAt = next, time.Time{}
		if ch.Command == driver.CmdRetry {
			r.retryAt = ch.RetryAt
			if err := t.setLatch(g, s.q.g.dirty); err != nil {
				return err
			}
		}
		if err := t.setStatus(g, r, ch.Failure); err != nil {
			return err
		}
		// What the store gives back: times at its precision, the failure
		// through JSON.
		out = driver.GroupState{Status: r.status}
		if !r.retryAt.IsZero() {
			if out.RetryAt, err = parseTime(formatTime(r.retryAt)); err != nil {
				return err
			}
		}
		data, err := json.Marshal(ch.Failure)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &out.Failure)
	})
	if err != nil {
		return driver.GroupState{}, err
	}
	return out, nil
}

// Group returns a group's status and figures (the figures count its
// offsets: O(partitions)).
func (s *Store) Group(ctx context.Context, group string) (info driver.GroupInfo, err error) {
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		found := false
		var perr error
		err := queryRows(conn, s.q.g.groupInfo, func(stmt *sqlite.Stmt) { stmt.BindText(1, group) }, func(stmt *sqlite.Stmt) {
			found = true
			info, perr = scanGroupInfo(stmt)
		})
		if err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		if !found {
			return s.unknownGroup(conn, group)
		}
		return nil
	})
	return info, err
}

// groupInfos describes every group, by id.
func (s *Store) groupInfos(conn *sqlite.Conn) ([]driver.GroupInfo, error) {
	var out []driver.GroupInfo
	var perr error
	err := queryRows(conn, s.q.g.groupInfos, nil, func(stmt *sqlite.Stmt) {
		info, err := scanGroupInfo(stmt)
		if err != nil && perr == nil {
			perr = err
		}
		out = append(out, info)
	})
	if err == nil {
		err = perr
	}
	return out, err
}

func scanGroupInfo(stmt *sqlite.Stmt) (driver.GroupInfo, error) {
	info := driver.GroupInfo{
		ID:              stmt.ColumnText(0),
		Label:           stmt.ColumnText(1),
		Status:          driver.Status(stmt.ColumnText(2)),
		HighestPosition: stmt.ColumnInt64(5),
		Exclusive:       stmt.ColumnInt(7) != 0,
		Partitions:      stmt.ColumnInt64(8),
		OldestProcessed: stmt.ColumnInt64(9),
		NewestProcessed: stmt.ColumnInt64(10),
		HooksPending:    stmt.ColumnInt64(11),
	}
	var err error
	if stmt.ColumnType(3) != sqlite.TypeNull {
		if info.RetryAt, err = parseTime(stmt.ColumnText(3)); err != nil {
			return info, fmt.Errorf("sqlitestore: consumer group %s: retry_at: %w", info.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(stmt.ColumnText(4)), &info.Failure); err != nil {
		return info, fmt.Errorf("sqlitestore: consumer group %s: failure: %w", info.ID, err)
	}
	if err := json.Unmarshal([]byte(stmt.ColumnText(6)), &info.PartitionBy); err != nil {
		return info, fmt.Errorf("sqlitestore: consumer group %s: partition_by: %w", info.ID, err)
	}
	if len(info.PartitionBy) == 0 {
		info.PartitionBy = nil
	}
	return info, nil
}

// unknownGroup returns the *UnknownGroupError of group, naming the
// registered groups.
func (s *Store) unknownGroup(conn *sqlite.Conn, group string) error {
	var known []string
	err := queryRows(conn, s.q.g.groupNames, nil, func(stmt *sqlite.Stmt) { known = append(known, stmt.ColumnText(0)) })
	if err != nil {
		return err
	}
	return &driver.UnknownGroupError{Group: group, Known: known}
}

// Heartbeat records that the workers are alive at at.
func (s *Store) Heartbeat(ctx context.Context, workerIDs []string, at time.Time) error {
	if slices.Contains(workerIDs, "") {
		return errors.New("sqlitestore: heartbeat of a worker with no id")
	}
	if len(workerIDs) == 0 {
		return ctx.Err()
	}
	seen := formatTime(at)
	return s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		for _, id := range slices.Compact(slices.Sorted(slices.Values(workerIDs))) {
			_, err := exec(t.conn, s.q.g.heartbeat, func(stmt *sqlite.Stmt) {
				stmt.BindText(1, id)
				stmt.BindText(2, seen)
			})
			if err != nil {
				return fmt.Errorf("sqlitestore: heartbeat: %w", err)
			}
		}
		return nil
	})
}

// ReleaseStaleClaims releases, in one transaction, the claims of workers
// last seen at or before now-ttl, and those of workers that never
// heartbeat made at or before now-ttl; it returns how many.
func (s *Store) ReleaseStaleClaims(ctx context.Context, now time.Time, ttl time.Duration) (n int, err error) {
	if err := driver.CheckTTL(ttl); err != nil {
		return 0, err
	}
	cutoff := formatTime(now.Add(-ttl))
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		n, err = exec(t.conn, s.q.g.releaseStale, func(stmt *sqlite.Stmt) { stmt.BindText(1, cutoff) })
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: release stale claims: %w", err)
	}
	return n, nil
}

// ReleaseClaimsOlderThan releases, in one transaction, every claim made at
// or before cutoff, whoever holds it, and returns the released offsets as
// they were.
func (s *Store) ReleaseClaimsOlderThan(ctx context.Context, cutoff time.Time) (out []driver.Offset, err error) {
	at := formatTime(cutoff)
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		out = nil
		var perr error
		err := t.w.rows(s.q.g.oldClaims, func(stmt *sqlite.Stmt) { stmt.BindText(1, at) }, func(stmt *sqlite.Stmt) {
			o, err := scanOffset(stmt)
			if err != nil && perr == nil {
				perr = err
			}
			out = append(out, o)
		})
		if err == nil {
			err = perr
		}
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		slices.SortFunc(out, func(a, b driver.Offset) int { return cmp.Compare(a.ID, b.ID) })
		_, err = exec(t.conn, s.q.g.releaseOld, func(stmt *sqlite.Stmt) { stmt.BindText(1, at) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: release claims older than %s: %w", at, err)
	}
	return out, nil
}

// RenewClaims sets the claim time of each claim its worker still holds to
// at, in one transaction; see driver.ClaimRenewer.
func (s *Store) RenewClaims(ctx context.Context, claims []*driver.ClaimedPartition, at time.Time) (n int, err error) {
	ts := formatTime(at)
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		n = 0
		for _, c := range claims {
			if c == nil {
				return errors.New("sqlitestore: renew a nil claim")
			}
			k, err := exec(t.conn, s.q.g.renew, func(stmt *sqlite.Stmt) {
				stmt.BindInt64(1, c.OffsetID)
				stmt.BindText(2, c.WorkerID)
				stmt.BindText(3, ts)
			})
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: renew claims: %w", err)
	}
	return n, nil
}

// RemoveWorkers deletes the workers' heartbeat rows.
func (s *Store) RemoveWorkers(ctx context.Context, workerIDs []string) error {
	if len(workerIDs) == 0 {
		return ctx.Err()
	}
	return s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		for _, id := range workerIDs {
			if _, err := exec(t.conn, s.q.g.removeWorker, func(stmt *sqlite.Stmt) { stmt.BindText(1, id) }); err != nil {
				return fmt.Errorf("sqlitestore: remove worker %s: %w", id, err)
			}
		}
		return nil
	})
}

// ReleaseDrainedOffsets deletes the unclaimed offsets whose partition no
// longer holds a message of the group's handled types (under conditional
// AND: a message carrying some of a composite partition's attributes keeps
// it); it returns how many. Only offsets that may have drained are
// checked: those a deleted message was linked to, and those AdvanceOffset
// created for partitions no message created.
func (s *Store) ReleaseDrainedOffsets(ctx context.Context) (n int, err error) {
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		q := s.q.g
		type candidate struct {
			id, group int64
			key       string
			claimed   bool
			pending   bool
		}
		var cands []candidate
		err := t.w.rows(q.drainable, nil, func(stmt *sqlite.Stmt) {
			cands = append(cands, candidate{stmt.ColumnInt64(0), stmt.ColumnInt64(1), stmt.ColumnText(2), stmt.ColumnInt(3) != 0, stmt.ColumnType(4) != sqlite.TypeNull})
		})
		if err != nil {
			return err
		}
		for _, c := range cands {
			if c.claimed {
				continue // checked once released
			}
			bind := func(stmt *sqlite.Stmt) { stmt.BindInt64(1, c.id) }
			g := t.gs.byRow[c.group]
			drained := false
			if g != nil && !c.pending {
				partition, err := parsePartition(c.key)
				if err != nil {
					return err
				}
				has, err := s.partitionHas(t.conn, t.w, partition, g.handled, bound{lo: 0, hi: maxPosition})
				if err != nil {
					return err
				}
				drained = !has
			}
			if !drained {
				if _, err := exec(t.conn, q.clearDrain, bind); err != nil {
					return err
				}
				continue
			}
			if _, err := exec(t.conn, q.foldOffset, bind); err != nil {
				return err
			}
			if _, err := exec(t.conn, q.candidatesOfOff, bind); err != nil {
				return err
			}
			if _, err := exec(t.conn, q.deleteOffset, bind); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: release drained offsets: %w", err)
	}
	return n, nil
}

// PruneOrphanKeyPairs deletes the key pairs that no message and no offset
// uses any more, among those that lost a message or an offset since the
// last prune (the one-per-message __id pairs of a drained queue, values of
// deleted messages); it returns how many. Other processes' writers drop
// their cached key pair ids when they see it happened.
func (s *Store) PruneOrphanKeyPairs(ctx context.Context) (n int, err error) {
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		q := s.q.g
		var gone []keyPair
		if err := t.w.rows(q.prune, nil, func(stmt *sqlite.Stmt) {
			gone = append(gone, keyPair{stmt.ColumnText(0), stmt.ColumnText(1)})
		}); err != nil {
			return err
		}
		if _, err := exec(t.conn, q.clearCandidates, nil); err != nil {
			return err
		}
		if len(gone) > 0 {
			if _, err := exec(t.conn, q.bumpCount, func(stmt *sqlite.Stmt) { stmt.BindText(1, counterPruned) }); err != nil {
				return err
			}
			// Our own bump would make the next sync drop the whole cache:
			// drop only these ids, and move the writer's counter along.
			for _, k := range gone {
				t.w.forget(k)
			}
			t.prunedBump = true
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: prune orphan key pairs: %w", err)
	}
	return n, nil
}

// ReadOffsets returns a page of offsets by ascending id from q.From; Total
// counts the offsets of q.Group (all groups when empty).
func (s *Store) ReadOffsets(ctx context.Context, oq driver.OffsetQuery) (page driver.OffsetPage, err error) {
	limit := oq.Limit
	if limit <= 0 {
		limit = driver.DefaultPageSize
	}
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		q := s.q.g
		var groupRow int64
		if oq.Group != "" {
			found := false
			err := queryRows(conn, q.groupByName, func(stmt *sqlite.Stmt) { stmt.BindText(1, oq.Group) }, func(stmt *sqlite.Stmt) {
				found, groupRow = true, stmt.ColumnInt64(0)
			})
			if err != nil {
				return err
			}
			if !found {
				return s.unknownGroup(conn, oq.Group)
			}
			if page.Total, err = queryInt(conn, q.countGroup, groupRow); err != nil {
				return err
			}
		} else if page.Total, err = queryInt(conn, q.countOffsets); err != nil {
			return err
		}
		query := q.readOffsets
		if oq.Group != "" {
			query = q.readGroupOffsets
		}
		page.Offsets = []driver.Offset{}
		var perr error
		err := queryRows(conn, query, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, oq.From)
			stmt.BindInt64(2, int64(limit))
			if oq.Group != "" {
				stmt.BindInt64(3, groupRow)
			}
		}, func(stmt *sqlite.Stmt) {
			o, err := scanOffset(stmt)
			if err != nil && perr == nil {
				perr = err
			}
			page.Offsets = append(page.Offsets, o)
		})
		if err == nil {
			err = perr
		}
		return err
	})
	if err != nil {
		var ue *driver.UnknownGroupError
		if errors.As(err, &ue) {
			return driver.OffsetPage{}, err
		}
		return driver.OffsetPage{}, fmt.Errorf("sqlitestore: read offsets: %w", err)
	}
	return page, nil
}

// Offsets iterates the offsets of q lazily, a page of q.Limit at a time,
// holding no connection while the loop body runs. The iteration stops at
// the first error, which it yields.
func (s *Store) Offsets(ctx context.Context, q driver.OffsetQuery) iter.Seq2[driver.Offset, error] {
	return driver.PageOffsets(ctx, s.ReadOffsets, q)
}

// scanOffset reads an offset from a row of offsetCols.
func scanOffset(stmt *sqlite.Stmt) (driver.Offset, error) {
	o := driver.Offset{
		ID:           stmt.ColumnInt64(0),
		Group:        stmt.ColumnText(1),
		GroupStatus:  driver.Status(stmt.ColumnText(2)),
		LastPosition: stmt.ColumnInt64(4),
		Claimed:      stmt.ColumnInt(5) != 0,
		ClaimedBy:    stmt.ColumnText(7),
		Parked:       stmt.ColumnInt(8) != 0,
	}
	var err error
	if o.Partition, err = parsePartition(stmt.ColumnText(3)); err != nil {
		return o, err
	}
	if stmt.ColumnType(6) != sqlite.TypeNull {
		if o.ClaimedAt, err = parseTime(stmt.ColumnText(6)); err != nil {
			return o, err
		}
	}
	return o, nil
}
