package sqlitestore

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.GroupTx = (*tx)(nil)

var idKeyNames = []string{core.IDKey}

// parseUUID returns the canonical form of a message id.
func parseUUID(s string) (string, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

func bindNullable(stmt *sqlite.Stmt, i int, v int64) {
	if v == 0 {
		stmt.BindNull(i)
	} else {
		stmt.BindInt64(i, v)
	}
}

// eager creates or wakes, in the append's transaction, the offsets of the
// groups handling a message just inserted at pos: one partition per
// combination of the values it carries for every partition attribute
// (none unless it carries them all: AND discovery), or one per message for
// an id-partitioned group. ids are the key pair ids of keys.
func (t *tx) eager(groups []*groupConf, pos int64, m *core.Message, keys []codec.KeyPair, ids []int64) error {
	var kbuf [128]byte
	for _, g := range groups {
		if g.byID() {
			id := m.ID.String()
			kp := int64(-1)
			for i, k := range keys {
				if k.Name == core.IDKey && k.Value == id {
					kp = ids[i]
				}
			}
			if kp < 0 {
				// Indexed by payload (the type's basis changed within this
				// transaction): index it by id too, so the queue can fetch it.
				var err error
				if kp, err = t.linkIgnore(pos, codec.KeyPair{Name: core.IDKey, Value: id}); err != nil {
					return err
				}
			}
			if err := t.wakeOffset(g, partitionKey(kbuf[:0], idKeyNames, []string{id}), pos, []int64{kp}); err != nil {
				return err
			}
			continue
		}
		it := &t.tuples
		for it.init(g.partitionBy, keys, ids); it.next(); {
			if err := t.wakeOffset(g, partitionKey(kbuf[:0], g.partitionBy, it.Values()), pos, it.kps); err != nil {
				return err
			}
		}
	}
	return nil
}

// wakeOffset marks the offset of a partition pending at pos (the newest
// position) unless it is pending already, creating the offset and its key
// pair links if it is new. The write is deferred (see pendingWake): an
// earlier message of the transaction waking the same offset makes it a
// no-op, and an AdvanceOffset of the same transaction past pos absorbs it.
func (t *tx) wakeOffset(g *groupConf, key []byte, pos int64, kps []int64) error {
	if t.findWake(g.row, key) >= 0 {
		return nil // an earlier message of this transaction wakes it first
	}
	start := len(t.wakeKps)
	t.wakeKps = append(t.wakeKps, kps...)
	t.wakes = append(t.wakes, pendingWake{g: g, key: string(key), pos: pos, kps: t.wakeKps[start:len(t.wakeKps):len(t.wakeKps)], next: -1})
	i := len(t.wakes) - 1
	switch {
	case t.wakeIndex != nil:
		t.index(i)
	case len(t.wakes) > wakeScan:
		t.wakeIndex = make(map[string]int, 2*len(t.wakes))
		for j := range t.wakes {
			t.index(j)
		}
	}
	return nil
}

// pendingWake is a wake of an offset (see wakeOffset) deferred until the
// transaction's member ends, or until one of its calls reads or writes the
// offsets (flushWakes): appends only record them. Several messages of one
// transaction waking one partition then cost one write, and a message
// whose offset the same transaction advances past it (Handle: the command,
// then AdvanceOffset past it) costs none: the advance writes the offset
// once, with no pending marker to set and clear again.
type pendingWake struct {
	g    *groupConf
	key  string
	pos  int64
	kps  []int64
	next int  // the next pending wake with the same key (another group), -1: none
	done bool // applied or absorbed
}

// wakeScan is how many pending wakes are searched one by one; beyond, they
// are indexed by key.
const wakeScan = 8

func (t *tx) index(i int) {
	w := &t.wakes[i]
	if j, ok := t.wakeIndex[w.key]; ok {
		w.next = j
	}
	t.wakeIndex[w.key] = i
}

// findWake returns the index of the pending wake of group row's offset at
// key, -1 when there is none.
func (t *tx) findWake(row int64, key []byte) int {
	if t.wakeIndex == nil {
		for i := range t.wakes {
			if w := &t.wakes[i]; !w.done && w.g.row == row && w.key == bytesText(key) {
				return i
			}
		}
		return -1
	}
	i, ok := t.wakeIndex[bytesText(key)]
	for ok && i >= 0 {
		if w := &t.wakes[i]; !w.done && w.g.row == row {
			return i
		}
		i = t.wakes[i].next
	}
	return -1
}

// flushWakes applies the pending wakes, in the order of their messages. A
// failure aborts the transaction: the messages are written, their offsets
// are not.
func (t *tx) flushWakes() error {
	return t.flushExcept(0)
}

// keepRemarks is flushExcept's keep for a caller that applies the wakes
// only (Delete: a deferred remark stays right however many deletes follow,
// since it reads the log when it runs).
const keepRemarks = -1

// pendingRemark is an offset whose pending marker named a message Delete
// removed: its recompute is deferred like a pendingWake, so that an Ack of
// the offset in the same member (a delete-on-ack queue deletes the claimed
// messages, then acks past them) writes the marker once. The recompute
// reads the offset's position when it runs, so it is right whatever
// happened to the offset since.
type pendingRemark struct {
	g  *groupConf
	id int64
}

// flushExcept applies the deferred pending-marker recomputes, except the
// one of offset keep (0: none; the caller writes that offset's marker
// itself), then the pending wakes.
func (t *tx) flushExcept(keep int64) error {
	if keep != keepRemarks {
		for _, r := range t.remarks {
			if r.id == keep {
				continue
			}
			if err := t.applyRemark(r); err != nil {
				err = fmt.Errorf("sqlitestore: recompute the pending markers of the deleted messages' offsets: %w", err)
				t.failed = err
				return err
			}
		}
		t.remarks = slices.DeleteFunc(t.remarks, func(r pendingRemark) bool { return r.id != keep })
	}
	for i := range t.wakes {
		w := &t.wakes[i]
		if w.done {
			continue
		}
		w.done = true
		if err := t.applyWake(w); err != nil {
			err = fmt.Errorf("sqlitestore: wake the offsets of the appended messages: %w", err)
			t.failed = err
			return err
		}
	}
	t.wakes, t.wakeIndex, t.wakeKps = t.wakes[:0], nil, t.wakeKps[:0]
	return nil
}

// applyWake writes a wake: the offset's pending marker set to w.pos unless
// it is set already (or the offset is past it), or the offset created.
func (t *tx) applyWake(w *pendingWake) error {
	q := t.s.q.g
	bind := func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, w.g.row)
		stmt.BindText(2, w.key)
		stmt.BindInt64(3, w.pos)
	}
	n, err := exec(t.conn, q.wake, bind)
	if err != nil || n == 1 {
		return err
	}
	n, err = exec(t.conn, q.insertOffset, func(stmt *sqlite.Stmt) {
		bind(stmt)
		stmt.BindInt64(4, 0)
	})
	if err != nil || n == 0 {
		return err // the offset exists and is pending already
	}
	return t.linkOffset(t.conn.LastInsertRowID(), w.kps)
}

// applyRemark recomputes the pending marker of a deferred remark's offset
// from its current position (an offset gone since is skipped).
func (t *tx) applyRemark(r pendingRemark) error {
	found, last := false, int64(0)
	err := t.w.rows(t.s.q.g.held, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, r.id)
		stmt.BindInt64(2, r.g.row)
	}, func(stmt *sqlite.Stmt) {
		found = true
		last = stmt.ColumnInt64(0)
	})
	if err != nil || !found {
		return err
	}
	_, err = t.remark(r.g, r.id, last)
	return err
}

func (t *tx) linkOffset(id int64, kps []int64) error {
	for _, kp := range kps {
		_, err := exec(t.conn, t.s.q.g.linkOffset, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, id)
			stmt.BindInt64(2, kp)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// linkIgnore links the message at pos to k (if it is not already) and
// returns the key pair's id.
func (t *tx) linkIgnore(pos int64, k codec.KeyPair) (int64, error) {
	id, err := t.keyPairForWrite(k)
	if err != nil {
		return 0, err
	}
	_, err = exec(t.conn, t.s.q.g.linkIgnore, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, pos)
		stmt.BindInt64(2, id)
	})
	return id, err
}

// offsetKeys returns the key pair ids of an offset.
func (t *tx) offsetKeys(id int64) ([]int64, error) {
	var kps []int64
	err := t.w.rows(t.s.q.g.offsetKeys, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, id) }, func(stmt *sqlite.Stmt) {
		kps = append(kps, stmt.ColumnInt64(0))
	})
	return kps, err
}

// wakeAfter returns the position of the first message after after that
// makes the partition of key pairs kps pending for g (a handled type,
// carrying every partition attribute with the partition's value), 0 when
// there is none: the offset's pending marker.
func (t *tx) wakeAfter(g *groupConf, kps []int64, after int64) (int64, error) {
	if len(kps) == 0 {
		return 0, nil
	}
	sh := shape{kind: shapeWake, attrs: len(kps), types: padded(len(g.handled))}
	stmt, err := t.conn.Prepare(t.s.q.get(sh))
	if err != nil {
		return 0, err
	}
	stmt.BindInt64(1, after)
	stmt.BindInt64(2, maxPosition)
	stmt.BindInt64(3, 1)
	p := firstListParam
	for _, kp := range kps {
		stmt.BindInt64(p, kp)
		p++
	}
	for i := range sh.types {
		stmt.BindText(p, g.handled[min(i, len(g.handled)-1)])
		p++
	}
	has, err := stmt.Step()
	var pos int64
	if has {
		pos = stmt.ColumnInt64(0)
	}
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	return pos, err
}

// remark recomputes an offset's pending marker from last.
func (t *tx) remark(g *groupConf, id, last int64) (int64, error) {
	kps, err := t.offsetKeys(id)
	if err != nil {
		return 0, err
	}
	next, err := t.wakeAfter(g, kps, last)
	if err != nil {
		return 0, err
	}
	_, err = exec(t.conn, t.s.q.g.setNext, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, id)
		bindNullable(stmt, 2, next)
	})
	return next, err
}

// heldOffset is an offset a claim holds.
type heldOffset struct {
	last int64
	key  string
}

// held returns the group and the offset of a claim its worker still holds.
// An ack keeps the offset's deferred remark (see pendingRemark) until the
// claim is known to be held: the ack recomputes the marker itself.
func (t *tx) held(c *driver.ClaimedPartition, verb string) (*groupConf, heldOffset, error) {
	if c == nil {
		return nil, heldOffset{}, fmt.Errorf("sqlitestore: %s a nil claim", verb)
	}
	keep := int64(0)
	if verb == "ack" {
		keep = c.OffsetID
	}
	if err := t.flushExcept(keep); err != nil {
		return nil, heldOffset{}, err
	}
	g, err := t.gs.lookup(c.Group)
	if err != nil {
		return nil, heldOffset{}, err
	}
	var off heldOffset
	found, claimed, by := false, false, ""
	err = t.w.rows(t.s.q.g.held, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, c.OffsetID)
		stmt.BindInt64(2, g.row)
	}, func(stmt *sqlite.Stmt) {
		found = true
		off.last = stmt.ColumnInt64(0)
		claimed = stmt.ColumnInt(1) != 0
		by = stmt.ColumnText(2)
		off.key = stmt.ColumnText(3)
	})
	if err != nil {
		return nil, off, fmt.Errorf("sqlitestore: %s: %w", verb, err)
	}
	if !found {
		return nil, off, fmt.Errorf("sqlitestore: %s offset %d of %s (it is gone): %w", verb, c.OffsetID, c.Group, driver.ErrNotClaimant)
	}
	if !claimed || by != c.WorkerID {
		return nil, off, fmt.Errorf("sqlitestore: %s offset %d of %s as %q: %w", verb, c.OffsetID, c.Group, c.WorkerID, driver.ErrNotClaimant)
	}
	return g, off, nil
}

// Ack moves the claim's offset to position (never backwards) and frees the
// claim; the group's highest position rises to position (being the
// furthest offset's, see foldGroup), and a retrying
// group whose failed partition this is recovers. Only the claiming worker
// may ack (else an error matching driver.ErrNotClaimant).
func (t *tx) Ack(c *driver.ClaimedPartition, position int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	g, off, err := t.held(c, "ack")
	if err != nil {
		return err
	}
	if err := driver.CheckAck(c, position); err != nil {
		return err
	}
	// The ack recomputes the marker below: a deferred remark of this
	// offset (kept by held) is superseded.
	t.dropRemark(c.OffsetID)
	last := max(off.last, position)
	kps, err := t.offsetKeys(c.OffsetID)
	if err != nil {
		return fmt.Errorf("sqlitestore: ack: %w", err)
	}
	next, err := t.wakeAfter(g, kps, last)
	if err != nil {
		return fmt.Errorf("sqlitestore: ack: %w", err)
	}
	q := t.s.q.g
	_, err = exec(t.conn, q.ack, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, c.OffsetID)
		stmt.BindInt64(2, last)
		bindNullable(stmt, 3, next)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: ack: %w", err)
	}
	var tbuf [timeWidth]byte
	_, err = exec(t.conn, q.ackGroup, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, g.row)
		stmt.BindText(2, bytesText(appendTime(tbuf[:0], t.s.now())))
		stmt.BindInt64(3, c.OffsetID)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: ack: %w", err)
	}
	return nil
}

// Delete removes the messages at positions from the log (positions not in
// the log are ignored). The offsets waiting on a deleted message get their
// pending marker recomputed; the offsets and key pairs the message was
// linked to become candidates for ReleaseDrainedOffsets and
// PruneOrphanKeyPairs.
func (t *tx) Delete(positions ...int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.flushExcept(keepRemarks); err != nil {
		return err
	}
	q := t.s.q.g
	for _, pos := range slices.Compact(slices.Sorted(slices.Values(positions))) {
		if pos <= 0 {
			continue
		}
		bind := func(stmt *sqlite.Stmt) { stmt.BindInt64(1, pos) }
		for _, query := range []string{q.flagDrain, q.candidatesOfMsg} {
			if _, err := exec(t.conn, query, bind); err != nil {
				return fmt.Errorf("sqlitestore: delete %d: %w", pos, err)
			}
		}
		n, err := exec(t.conn, q.deleteMessage, bind)
		if err != nil {
			return fmt.Errorf("sqlitestore: delete %d: %w", pos, err)
		}
		if n == 0 {
			continue
		}
		if !t.deletedBump {
			// Other processes drop their cached states when they see the
			// counter move (writer.sync); this one drops them now, before
			// a later member of the transaction takes one.
			if _, err := exec(t.conn, q.bumpCount, func(stmt *sqlite.Stmt) { stmt.BindText(1, counterDeleted) }); err != nil {
				return fmt.Errorf("sqlitestore: delete %d: %w", pos, err)
			}
			t.deletedBump = true
		}
		t.s.states.Drop("")
		type waiting struct{ id, group, last int64 }
		var offs []waiting
		err = t.w.rows(q.offsetsAtNext, bind, func(stmt *sqlite.Stmt) {
			offs = append(offs, waiting{stmt.ColumnInt64(0), stmt.ColumnInt64(1), stmt.ColumnInt64(2)})
		})
		if err != nil {
			return fmt.Errorf("sqlitestore: delete %d: %w", pos, err)
		}
		for _, o := range offs {
			g := t.gs.byRow[o.group]
			if g == nil {
				continue
			}
			t.deferRemark(g, o.id)
		}
	}
	return nil
}

// deferRemark records an offset's pending-marker recompute (see
// pendingRemark), once.
func (t *tx) deferRemark(g *groupConf, id int64) {
	for _, r := range t.remarks {
		if r.id == id {
			return
		}
	}
	t.remarks = append(t.remarks, pendingRemark{g: g, id: id})
}

// dropRemark forgets the deferred recompute of offset id.
func (t *tx) dropRemark(id int64) {
	t.remarks = slices.DeleteFunc(t.remarks, func(r pendingRemark) bool { return r.id == id })
}

// AdvanceOffset moves a partition's offset to position without a claim
// (creating the offset if needed), unless a message of the group's handled
// types lies in the partition (conditional AND) strictly between the
// offset and position: then it returns false and changes nothing. It never
// moves an offset backwards; it returns true when the offset is at or past
// position afterwards.
func (t *tx) AdvanceOffset(group string, partition core.Partition, position int64) (bool, error) {
	if err := t.usable(); err != nil {
		return false, err
	}
	g, err := t.gs.lookup(group)
	if err != nil {
		return false, err
	}
	if position <= 0 {
		return true, nil // a scheduled command has no position: nothing to skip
	}
	p, key, err := partitionOf(g, partition)
	if err != nil {
		return false, err
	}
	// A pending wake at position: this transaction appended a message
	// there, so position is in the log.
	if i := t.findWake(g.row, key); i < 0 || t.wakes[i].pos != position {
		newest, err := lastPosition(t.conn, t.s.q)
		if err != nil {
			return false, fmt.Errorf("sqlitestore: advance: %w", err)
		}
		if position > newest {
			return false, fmt.Errorf("sqlitestore: advance %s to position %d, past the newest position %d", group, position, newest)
		}
	}
	// A wake of this offset by a message of this transaction (still
	// pending, see pendingWake): the advance past that very message absorbs
	// it (the marker would be set and cleared in one transaction); any
	// other is applied first.
	var woken *pendingWake
	if i := t.findWake(g.row, key); i >= 0 {
		w := &t.wakes[i]
		w.done = true
		if w.pos == position {
			woken = w
		} else if err := t.applyWake(w); err != nil {
			t.failed = err
			return false, fmt.Errorf("sqlitestore: advance: %w", err)
		}
	}
	// The wake absorbed, written after all (the advance is held back).
	unabsorb := func() error {
		if err := t.applyWake(woken); err != nil {
			t.failed = err
			return fmt.Errorf("sqlitestore: advance: %w", err)
		}
		return nil
	}
	q := t.s.q.g
	id, last, found := int64(0), int64(0), false
	err = t.w.rows(q.offsetByKey, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, g.row)
		stmt.BindText(2, bytesText(key))
	}, func(stmt *sqlite.Stmt) {
		id, last, found = stmt.ColumnInt64(0), stmt.ColumnInt64(1), true
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: advance: %w", err)
	}
	if !found && woken == nil {
		if id, err = t.createOffset(g, p, key); err != nil {
			return false, fmt.Errorf("sqlitestore: advance: %w", err)
		}
	}
	if last >= position {
		return true, nil // (an absorbed wake would not have marked it: it is past)
	}
	held, err := t.s.partitionHas(t.conn, t.w, p, g.handled, bound{lo: last, hi: position - 1})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: advance: %w", err)
	}
	if held {
		if woken != nil {
			return false, unabsorb()
		}
		return false, nil // an unprocessed message holds it back
	}
	var kps []int64
	if woken != nil {
		kps = woken.kps // the partition's key pairs, as the offset's links hold them
	} else if kps, err = t.offsetKeys(id); err != nil {
		return false, fmt.Errorf("sqlitestore: advance: %w", err)
	}
	next, err := t.wakeAfter(g, kps, position)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: advance: %w", err)
	}
	if !found && woken != nil {
		// The offset of the woken partition, created where the advance
		// leaves it, as the wake would have created it (not a drain
		// candidate: a message carries the partition).
		n, err := exec(t.conn, q.insertOffsetAt, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindText(2, bytesText(key))
			stmt.BindInt64(3, position)
			bindNullable(stmt, 4, next)
		})
		if err == nil && n != 1 {
			err = errors.New("offset exists")
		}
		if err == nil {
			err = t.linkOffset(t.conn.LastInsertRowID(), kps)
		}
		if err != nil {
			t.failed = err
			return false, fmt.Errorf("sqlitestore: advance: %w", err)
		}
	} else {
		_, err = exec(t.conn, q.advance, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, id)
			stmt.BindInt64(2, position)
			bindNullable(stmt, 3, next)
		})
	}
	// The group's highest position is the offset's now (see foldGroup).
	if err != nil {
		return false, fmt.Errorf("sqlitestore: advance: %w", err)
	}
	return true, nil
}

// createOffset creates the offset of a partition no message created
// (creating its key pairs if no message carries them), with its pending
// marker, flagged for the drained-offset check.
func (t *tx) createOffset(g *groupConf, partition core.Partition, key []byte) (int64, error) {
	names := g.partitionBy
	if g.byID() {
		names = idKeyNames
	}
	kps := make([]int64, len(names))
	for i, name := range names {
		id, err := t.keyPairForWrite(codec.KeyPair{Name: name, Value: partition[name]})
		if err != nil {
			return 0, err
		}
		kps[i] = id
	}
	next, err := t.wakeAfter(g, kps, 0)
	if err != nil {
		return 0, err
	}
	n, err := exec(t.conn, t.s.q.g.insertOffset, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, g.row)
		stmt.BindText(2, bytesText(key))
		bindNullable(stmt, 3, next)
		stmt.BindInt64(4, 1)
	})
	if err != nil {
		return 0, err
	}
	if n != 1 {
		return 0, errors.New("offset exists")
	}
	id := t.conn.LastInsertRowID()
	return id, t.linkOffset(id, kps)
}

// discover brings a group's offsets in line with the whole log: an offset
// for every partition a handled message carries in full, and every
// offset's pending marker recomputed. It runs when a group is registered
// (catching up on messages appended before) or its partitioning or handled
// types change, and when it is reset. The messages of an id-partitioned
// group's types are indexed by id too (those appended before it was
// registered were indexed by payload).
func (t *tx) discover(g *groupConf) error {
	q := t.s.q.g
	type offset struct {
		id, last, next int64
		seen           bool
	}
	existing := map[string]*offset{}
	err := t.w.rows(q.groupOffsets, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }, func(stmt *sqlite.Stmt) {
		existing[stmt.ColumnText(1)] = &offset{id: stmt.ColumnInt64(0), last: stmt.ColumnInt64(2), next: stmt.ColumnInt64(3)}
	})
	if err != nil {
		return err
	}
	type fresh struct {
		key  string
		wake int64
		kps  []int64
	}
	var created []*fresh // new partitions, in the order their first message came
	news := map[string]*fresh{}
	visit := func(pos int64, key string, kps []int64) {
		if o := existing[key]; o != nil {
			if !o.seen && pos > o.last {
				o.seen, o.next = true, pos
			}
			return
		}
		if news[key] == nil {
			f := &fresh{key: key, wake: pos, kps: slices.Clone(kps)}
			news[key] = f
			created = append(created, f)
		}
	}
	for _, o := range existing {
		o.next = 0
	}
	if g.byID() {
		type msg struct {
			pos int64
			id  string
		}
		var msgs []msg
		sh := shape{kind: shapeTyped, types: padded(len(g.handled))}
		err = t.w.rows(t.s.q.get(sh), func(stmt *sqlite.Stmt) {
			for i := range sh.types {
				stmt.BindText(1+i, g.handled[min(i, len(g.handled)-1)])
			}
		}, func(stmt *sqlite.Stmt) {
			msgs = append(msgs, msg{stmt.ColumnInt64(0), stmt.ColumnText(1)})
		})
		if err != nil {
			return err
		}
		var kbuf []byte
		for _, m := range msgs {
			kp, err := t.linkIgnore(m.pos, codec.KeyPair{Name: core.IDKey, Value: m.id})
			if err != nil {
				return err
			}
			kbuf = partitionKey(kbuf[:0], idKeyNames, []string{m.id})
			visit(m.pos, string(kbuf), []int64{kp})
		}
	} else {
		type pair struct {
			id          int64
			name, value string
		}
		var cur int64
		var pairs []pair
		var kbuf []byte
		flush := func() {
			if len(pairs) == 0 {
				return
			}
			keys := make([]codec.KeyPair, len(pairs))
			ids := make([]int64, len(pairs))
			slices.SortFunc(pairs, func(a, b pair) int {
				if a.name != b.name {
					if a.name < b.name {
						return -1
					}
					return 1
				}
				if a.value < b.value {
					return -1
				}
				if a.value > b.value {
					return 1
				}
				return 0
			})
			for i, p := range pairs {
				keys[i], ids[i] = codec.KeyPair{Name: p.name, Value: p.value}, p.id
			}
			var it tuples
			for it.init(g.partitionBy, keys, ids); it.next(); {
				kbuf = partitionKey(kbuf[:0], g.partitionBy, it.Values())
				visit(cur, string(kbuf), it.kps)
			}
			pairs = pairs[:0]
		}
		sh := shape{kind: shapeDiscover, types: padded(len(g.handled)), attrs: padded(len(g.partitionBy))}
		err = t.w.rows(t.s.q.get(sh), func(stmt *sqlite.Stmt) {
			for i := range sh.types {
				stmt.BindText(1+i, g.handled[min(i, len(g.handled)-1)])
			}
			for i := range sh.attrs {
				stmt.BindText(1+sh.types+i, g.partitionBy[min(i, len(g.partitionBy)-1)])
			}
		}, func(stmt *sqlite.Stmt) {
			if pos := stmt.ColumnInt64(0); pos != cur {
				flush()
				cur = pos
			}
			pairs = append(pairs, pair{stmt.ColumnInt64(1), stmt.ColumnText(2), stmt.ColumnText(3)})
		})
		if err != nil {
			return err
		}
		flush()
	}
	for _, o := range existing {
		_, err := exec(t.conn, q.setNext, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, o.id)
			bindNullable(stmt, 2, o.next)
		})
		if err != nil {
			return err
		}
	}
	for _, f := range created {
		_, err := exec(t.conn, q.insertOffset, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindText(2, f.key)
			stmt.BindInt64(3, f.wake)
			stmt.BindInt64(4, 0)
		})
		if err != nil {
			return err
		}
		if err := t.linkOffset(t.conn.LastInsertRowID(), f.kps); err != nil {
			return err
		}
	}
	_, err = exec(t.conn, q.dirty, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) })
	return err
}

// tuples walks the partitions a message carries in full
// (driver.PartitionWalk), with the key pair ids of each partition's
// values: ids[i] is the id of keys[i].
type tuples struct {
	driver.PartitionWalk
	ids   []int64
	kps   []int64
	kpBuf [4]int64 // partitions of up to 4 attributes allocate nothing
}

func (it *tuples) init(names []string, keys []codec.KeyPair, ids []int64) {
	it.Init(names, keys)
	it.ids = ids
}

// next moves to the next partition; Values and kps hold it.
func (it *tuples) next() bool {
	if !it.Next() {
		return false
	}
	it.kps = it.kpBuf[:0]
	for _, j := range it.Pick() {
		it.kps = append(it.kps, it.ids[j])
	}
	return true
}

// groupRow is the state of a group's row.
type groupRow struct {
	status  driver.Status
	retryAt time.Time
	scan    int64
	failure string
	highest int64
	// hooksPending is set while operator transitions of the group wait
	// for their lifecycle hooks: its work is not claimed.
	hooksPending bool
}

func (t *tx) groupState(g *groupConf) (groupRow, error) {
	var r groupRow
	var perr error
	found := false
	err := t.w.rows(t.s.q.g.groupState, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }, func(stmt *sqlite.Stmt) {
		found = true
		r.status = driver.Status(stmt.ColumnText(0))
		if stmt.ColumnType(1) != sqlite.TypeNull {
			r.retryAt, perr = parseTime(stmt.ColumnText(1))
		}
		r.scan = stmt.ColumnInt64(2)
		r.failure = stmt.ColumnText(3)
		r.highest = stmt.ColumnInt64(4)
		r.hooksPending = stmt.ColumnInt(5) != 0
	})
	if err == nil {
		err = perr
	}
	if err == nil && !found {
		err = fmt.Errorf("consumer group %s vanished", g.name)
	}
	return r, err
}
