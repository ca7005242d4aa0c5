package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var (
	_ driver.Groups  = (*Store)(nil)
	_ driver.GroupTx = (*tx)(nil)
)

// group is a registered consumer group with its offsets.
type group struct {
	id string
	groupState
	types   []*codec.Type      // the handled types, for claim guards
	offsets map[string]*offset // by partition key (see partitionKey)
	// ready holds the offsets with pending work that no worker holds:
	// what a claim scan chooses from.
	ready map[*offset]struct{}
}

// groupState is what a transaction saves of a group to undo its changes.
type groupState struct {
	label       string
	partitionBy []string // sorted; empty for an id-partitioned group
	exclusive   bool
	handled     []string
	status      driver.Status
	retryAt     time.Time
	failure     driver.Failure
	highest     int64
	// replay holds, per partition key, how far the partition had been
	// acknowledged when the group was last reset: a claim up to there is a
	// replay. Copied on write (transactions save groupState by value).
	replay map[string]int64
	// scan is the claim-scan latch, a sign-encoded version: >= 0 means
	// claimable work may have changed since the last empty scan (dirty);
	// < 0 means a scan found nothing at version -scan-1 and nothing
	// changed since (clean). Appends and releases bump it to |scan|+1.
	scan int64
	// hooks is set when the group was registered with GroupSpec.Hooks:
	// transitions counts its operator transitions since, hooked is the
	// Seq up to which their hooks ran, pending holds those whose hooks
	// have not (copied on write), and hookBy and hookAt are the claim on
	// the oldest of them. The group's work is not claimed while pending
	// holds any.
	hooks               bool
	transitions, hooked int64
	pending             []driver.GroupTransition
	hookBy              string
	hookAt              time.Time
}

// offset is one partition of a group: its cursor and its claim.
type offset struct {
	id        int64
	g         *group
	key       string
	partition core.Partition
	msgID     uuid.UUID // the message of an id-partitioned group's offset
	live      bool      // whether the offset is in the store
	offsetState
}

// offsetState is what a transaction saves of an offset.
type offsetState struct {
	last      int64
	claimed   bool
	claimedAt time.Time
	claimedBy string
	// wake holds, ascending, the positions after last of the messages of
	// the group's handled types that carry every partition attribute with
	// the partition's value (the messages that make a partition pending:
	// Pending work in shell/storetest's package doc). Appends add to it,
	// deletes remove from it.
	wake []int64
	// parked holds the failure that parked the partition (nil: not
	// parked); a parked offset is never ready.
	parked *parking
}

// parking is a parked partition's record.
type parking struct {
	failure driver.Failure
	at      time.Time
}

func (g *group) byID() bool { return len(g.partitionBy) == 0 }

func (g *group) handles(typ string) bool { return slices.Contains(g.handled, typ) }

// sync puts off in the ready set or takes it out, and reports whether it
// was put in.
func (g *group) sync(off *offset) bool {
	want := off.live && !off.claimed && off.parked == nil && len(off.wake) > 0
	_, is := g.ready[off]
	switch {
	case want && !is:
		g.ready[off] = struct{}{}
		return true
	case !want && is:
		delete(g.ready, off)
	}
	return false
}

// best returns the ready offset furthest behind (ties: the oldest offset).
func (g *group) best() *offset {
	var best *offset
	for off := range g.ready {
		if best == nil || off.last < best.last || off.last == best.last && off.id < best.id {
			best = off
		}
	}
	return best
}

// inPartition reports whether record r belongs to the partition of off
// under conditional AND (by id for an id-partitioned group).
func (g *group) inPartition(off *offset, r *record) bool {
	if g.byID() {
		return r.id == off.msgID
	}
	return core.InPartition(off.partition, r.keys)
}

// partitionKey is the canonical key of a partition (core.Partition's Key).
func partitionKey(names []string, values []string) string {
	return string(core.AppendPartitionKey(nil, names, values))
}

// tuple is a partition a message creates.
type tuple struct {
	key       string
	partition core.Partition
	msgID     uuid.UUID
}

// tuples returns the partitions of g that r carries in full (AND
// discovery): none unless r carries every partition attribute, one per
// combination of values when attributes hold several (a slice). An
// id-partitioned group has one partition per message.
func (g *group) tuples(r *record) []tuple {
	if g.byID() {
		id := r.id.String()
		return []tuple{{key: partitionKey([]string{core.IDKey}, []string{id}), partition: map[string]string{core.IDKey: id}, msgID: r.id}}
	}
	var out []tuple
	var w driver.PartitionWalk
	for w.Init(g.partitionBy, r.keys); w.Next(); {
		p := make(map[string]string, len(g.partitionBy))
		for j, name := range g.partitionBy {
			p[name] = w.Values()[j]
		}
		out = append(out, tuple{key: partitionKey(g.partitionBy, w.Values()), partition: p})
	}
	return out
}

// saveGroup records g's state the first time the transaction changes it.
func (t *tx) saveGroup(g *group) {
	if _, ok := t.groups[g]; ok {
		return
	}
	if t.groups == nil {
		t.groups = map[*group]struct{}{}
	}
	t.groups[g] = struct{}{}
	saved := g.groupState
	t.undo = append(t.undo, func() { g.groupState = saved })
}

// saveOffset records off's state the first time the transaction changes
// it; the undo also puts the offset back in or out of the ready set.
func (t *tx) saveOffset(off *offset) {
	if _, ok := t.offsets[off]; ok {
		return
	}
	if t.offsets == nil {
		t.offsets = map[*offset]struct{}{}
	}
	t.offsets[off] = struct{}{}
	saved := off.offsetState
	saved.wake = slices.Clone(saved.wake)
	t.undo = append(t.undo, func() {
		off.offsetState = saved
		off.g.sync(off)
	})
}

// bump makes g's claim scan dirty.
func (t *tx) bump(g *group) {
	t.saveGroup(g)
	if g.scan < 0 {
		g.scan = -g.scan + 1
	} else {
		g.scan++
	}
}

// touch updates off's place in the ready set after a change; an offset
// that becomes claimable makes its group dirty.
func (t *tx) touch(off *offset) {
	if off.g.sync(off) {
		t.bump(off.g)
	}
}

// offsetFor returns g's offset for the partition, creating it.
func (t *tx) offsetFor(g *group, tp tuple) *offset {
	if off := g.offsets[tp.key]; off != nil {
		return off
	}
	s := t.s
	s.nextOffset++
	off := &offset{id: s.nextOffset, g: g, key: tp.key, partition: tp.partition, msgID: tp.msgID}
	t.addOffset(off)
	t.undo = append(t.undo, func() { t.s.removeOffset(off) })
	return off
}

// addOffset puts off in the store, in id order.
func (t *tx) addOffset(off *offset) {
	s := t.s
	off.live = true
	off.g.offsets[off.key] = off
	i, _ := slices.BinarySearchFunc(s.offsets, off.id, func(o *offset, id int64) int { return cmpInt(o.id, id) })
	s.offsets = slices.Insert(s.offsets, i, off)
	off.g.sync(off)
}

// removeOffset takes off out of the store.
func (s *Store) removeOffset(off *offset) {
	off.live = false
	delete(off.g.offsets, off.key)
	delete(off.g.ready, off)
	if i, ok := slices.BinarySearchFunc(s.offsets, off.id, func(o *offset, id int64) int { return cmpInt(o.id, id) }); ok {
		s.offsets = slices.Delete(s.offsets, i, i+1)
	}
}

// deleteOffset removes off in the transaction.
func (t *tx) deleteOffset(off *offset) {
	t.s.removeOffset(off)
	t.undo = append(t.undo, func() { t.addOffset(off) })
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// indexed records a message just appended at the end of the log: every
// group's scan becomes dirty (like the SQLite trigger on message insert),
// and the message creates or wakes the offsets of the groups handling it.
func (t *tx) indexed(r *record) {
	for _, g := range t.s.groupsByID() {
		t.bump(g)
		if !g.handles(r.typ) {
			continue
		}
		for _, tp := range g.tuples(r) {
			off := t.offsetFor(g, tp)
			if r.position > off.last {
				t.saveOffset(off)
				off.wake = append(off.wake, r.position)
				t.touch(off)
			}
		}
	}
}

// discover rebuilds the offsets of g from the whole log: offsets for every
// partition a handled message carries in full, and the pending positions
// of each. It runs when a group is registered (catching up on messages
// appended before) or its handling changes, and when it is reset.
func (t *tx) discover(g *group) {
	for _, off := range g.offsets {
		t.saveOffset(off)
		off.wake = nil
	}
	for i := range t.s.log {
		r := &t.s.log[i]
		if !g.handles(r.typ) {
			continue
		}
		for _, tp := range g.tuples(r) {
			off := t.offsetFor(g, tp)
			if r.position > off.last {
				t.saveOffset(off)
				off.wake = append(off.wake, r.position)
			}
		}
	}
	for _, off := range g.offsets {
		g.sync(off)
	}
	t.bump(g)
}

// groupsByID returns the groups in id order.
func (s *Store) groupsByID() []*group { return s.groupList }

// group returns a registered group, or an *UnknownGroupError.
func (s *Store) group(id string) (*group, error) {
	if g, ok := s.groups[id]; ok {
		return g, nil
	}
	return nil, &driver.UnknownGroupError{Group: id, Known: slices.Sorted(maps.Keys(s.groups))}
}

// RegisterGroup creates the group (active) or updates it, keeping its
// status, failure, offsets and highest position; see driver.Groups. A new
// group, or one whose partitioning or handled types change, discovers its
// partitions in the whole log at once, so messages appended before it was
// registered are claimed too.
func (s *Store) RegisterGroup(ctx context.Context, spec driver.GroupSpec) error {
	spec, err := driver.NormalizeGroupSpec(s.reg, spec)
	if err != nil {
		return err
	}
	handled, partitionBy, label := spec.Handled, spec.PartitionBy, spec.Label
	types := make([]*codec.Type, len(handled))
	for i, name := range handled {
		types[i], _ = s.reg.ByName(name) // checked by CheckGroupSpec
	}
	return s.write(ctx, func(t *tx) error {
		for _, o := range s.groupsByID() {
			if err := driver.CheckGroupConflict(spec, o.id, o.exclusive, o.handles); err != nil {
				return err
			}
		}
		g, ok := s.groups[spec.ID]
		if !ok {
			g = &group{id: spec.ID, offsets: map[string]*offset{}, ready: map[*offset]struct{}{}}
			g.status = driver.StatusActive
			s.groups[g.id] = g
			oldList := s.groupList
			s.groupList = slices.SortedFunc(maps.Values(s.groups), func(a, b *group) int { return strings.Compare(a.id, b.id) })
			t.undo = append(t.undo, func() { delete(s.groups, g.id); s.groupList = oldList })
		}
		t.saveGroup(g)
		changed := !ok || !slices.Equal(g.partitionBy, partitionBy) || !slices.Equal(g.handled, handled) || g.exclusive != spec.Exclusive
		g.label, g.partitionBy, g.exclusive, g.handled = label, partitionBy, spec.Exclusive, handled
		if !spec.Hooks {
			// No process runs the hooks of a group without any.
			g.pending, g.hooked, g.hookBy, g.hookAt = nil, g.transitions, "", time.Time{}
		}
		g.hooks = spec.Hooks
		oldTypes := g.types
		g.types = types
		t.undo = append(t.undo, func() { g.types = oldTypes })
		if changed {
			t.discover(g)
		}
		return nil
	})
}

// ClaimNext claims the partition of group with pending work whose offset
// is furthest behind; see driver.Groups. A group whose last scan found
// nothing answers without scanning until an append or a release makes it
// dirty again.
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
	var c *driver.ClaimedPartition
	err := s.write(ctx, func(t *tx) error {
		var err error
		if c, err = t.ClaimNext(group, workerID, batchSize); err != nil || c == nil {
			return err
		}
		return fn(t, c)
	})
	return c != nil, err
}

// ClaimNext claims inside the transaction; see driver.GroupTx.
func (t *tx) ClaimNext(group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	if t.done {
		return nil, errTxDone
	}
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return nil, err
	}
	return t.claimNext(group, workerID, batchSize)
}

func (t *tx) claimNext(group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	s := t.s
	g, err := s.group(group)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if !driver.Claimable(g.status, g.retryAt, now) || len(g.pending) > 0 {
		return nil, nil
	}
	if g.scan < 0 {
		return nil, nil // latched: nothing changed since the last empty scan
	}
	version := g.scan
	s.scans++
	off := g.best()
	if off == nil {
		if g.scan == version { // compare-and-set against the version scanned
			t.saveGroup(g)
			g.scan = -version - 1
		}
		return nil, nil
	}
	t.saveOffset(off)
	off.claimed, off.claimedAt, off.claimedBy = true, now, workerID
	g.sync(off)
	msgs, err := s.fetch(g, off, batchSize)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("memstore: internal error: offset %d of %s is pending at %v but holds no message", off.id, g.id, off.wake)
	}
	last := msgs[len(msgs)-1].Position
	return &driver.ClaimedPartition{
		Group:      g.id,
		WorkerID:   workerID,
		OffsetID:   off.id,
		After:      off.last,
		Partition:  maps.Clone(off.partition),
		Messages:   msgs,
		Guard:      core.Guard{Conditions: core.ConditionsFor(off.partition, g.types...), LastPosition: last},
		Replaying:  last <= g.replay[off.key],
		ReplayUpto: g.replay[off.key],
	}, nil
}

// fetch returns up to n messages of the partition after its offset, under
// conditional AND. A partition of one attribute (or of a message id) holds
// exactly the messages that wake it; a composite one also holds messages
// carrying only some of its attributes, found by scanning.
func (s *Store) fetch(g *group, off *offset, n int) ([]core.PositionedMessage, error) {
	var out []core.PositionedMessage
	take := func(r *record) error {
		m, err := s.decode(r)
		if err == nil {
			out = append(out, m)
		}
		return err
	}
	if len(g.partitionBy) <= 1 {
		for _, pos := range off.wake {
			if len(out) == n {
				break
			}
			i := s.indexAfter(pos - 1)
			if i == len(s.log) || s.log[i].position != pos {
				return nil, fmt.Errorf("memstore: internal error: offset %d of %s wakes at %d, which is not in the log", off.id, g.id, pos)
			}
			if err := take(&s.log[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	for i := s.indexAfter(off.last); i < len(s.log) && len(out) < n; i++ {
		r := &s.log[i]
		if g.handles(r.typ) && g.inPartition(off, r) {
			if err := take(r); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Ack moves the claim's offset to position and frees it, in a transaction
// of its own; see driver.GroupTx.
func (s *Store) Ack(ctx context.Context, c *driver.ClaimedPartition, position int64) error {
	return s.write(ctx, func(t *tx) error { return t.Ack(c, position) })
}

// Release frees a claim without moving its offset; see driver.Groups.
func (s *Store) Release(ctx context.Context, c *driver.ClaimedPartition) error {
	return s.write(ctx, func(t *tx) error { return t.Release(c) })
}

// Release frees a claim without moving its offset, in the transaction;
// see driver.GroupTx.
func (t *tx) Release(c *driver.ClaimedPartition) error {
	off, err := t.held(c, "release")
	if err != nil {
		return err
	}
	t.unclaim(off)
	return nil
}

// held returns the offset of a claim its worker still holds.
func (t *tx) held(c *driver.ClaimedPartition, verb string) (*offset, error) {
	if t.done {
		return nil, errTxDone
	}
	if c == nil {
		return nil, fmt.Errorf("memstore: %s a nil claim", verb)
	}
	g, err := t.s.group(c.Group)
	if err != nil {
		return nil, err
	}
	i, ok := slices.BinarySearchFunc(t.s.offsets, c.OffsetID, func(o *offset, id int64) int { return cmpInt(o.id, id) })
	if !ok || t.s.offsets[i].g != g {
		return nil, fmt.Errorf("memstore: %s offset %d of %s (it is gone): %w", verb, c.OffsetID, c.Group, driver.ErrNotClaimant)
	}
	off := t.s.offsets[i]
	if !off.claimed || off.claimedBy != c.WorkerID {
		return nil, fmt.Errorf("memstore: %s offset %d of %s as %q: %w", verb, c.OffsetID, c.Group, c.WorkerID, driver.ErrNotClaimant)
	}
	return off, nil
}

// unclaim frees off; like the SQLite trigger on release, the group's scan
// becomes dirty.
func (t *tx) unclaim(off *offset) {
	t.saveOffset(off)
	off.claimed, off.claimedAt, off.claimedBy = false, time.Time{}, ""
	t.touch(off)
	t.bump(off.g)
}

// moveTo moves off forward to position and raises the group's highest
// position.
func (t *tx) moveTo(off *offset, position int64) {
	t.saveOffset(off)
	t.saveGroup(off.g)
	if position > off.last {
		off.last = position
		i, _ := slices.BinarySearch(off.wake, position+1)
		off.wake = off.wake[i:]
	}
	off.g.highest = max(off.g.highest, position)
	t.touch(off)
}

// Ack moves the claim's offset to position (never backwards), frees the
// claim and raises the group's highest position; a retrying group whose
// failed partition this is recovers. Only the claiming worker may ack.
func (t *tx) Ack(c *driver.ClaimedPartition, position int64) error {
	off, err := t.held(c, "ack")
	if err != nil {
		return err
	}
	if err := driver.CheckAck(c, position); err != nil {
		return err
	}
	t.moveTo(off, position)
	t.unclaim(off)
	g := off.g
	if g.status == driver.StatusRetrying && g.failure.OffsetID == off.id {
		next, _ := driver.Transition(g.id, g.status, driver.CmdRecover)
		g.status, g.retryAt, g.failure = next, time.Time{}, driver.Failure{}
	}
	return nil
}

// Delete removes the messages at positions from the log (positions not in
// the log are ignored), and from the pending work of every offset.
func (t *tx) Delete(positions ...int64) error {
	if t.done {
		return errTxDone
	}
	s := t.s
	for _, pos := range slices.Compact(slices.Sorted(slices.Values(positions))) {
		i := s.indexAfter(pos - 1)
		if i == len(s.log) || s.log[i].position != pos {
			continue
		}
		r := s.log[i]
		s.log = slices.Delete(s.log, i, i+1)
		delete(s.ids, r.id)
		t.undo = append(t.undo, func() {
			j := s.indexAfter(r.position - 1)
			s.log = slices.Insert(s.log, j, r)
			s.ids[r.id] = r.position
		})
		for _, g := range s.groupsByID() {
			if !g.handles(r.typ) {
				continue
			}
			for _, tp := range g.tuples(&r) {
				off := g.offsets[tp.key]
				if off == nil {
					continue
				}
				if j, ok := slices.BinarySearch(off.wake, pos); ok {
					t.saveOffset(off)
					off.wake = slices.Delete(off.wake, j, j+1)
					t.touch(off)
				}
			}
		}
	}
	return nil
}

// AdvanceOffset moves a partition's offset to position without a claim;
// see driver.GroupTx. It returns true when the offset is at or past
// position afterwards (moved, or already there), false when a message of
// the group's handled types lies in the partition between the offset and
// position, unprocessed.
func (t *tx) AdvanceOffset(group string, partition core.Partition, position int64) (bool, error) {
	if t.done {
		return false, errTxDone
	}
	s := t.s
	g, err := s.group(group)
	if err != nil {
		return false, err
	}
	if position > s.maxPos {
		return false, fmt.Errorf("memstore: advance %s to position %d, past the newest position %d", group, position, s.maxPos)
	}
	if position <= 0 {
		return true, nil // every offset is there already (a scheduled command has no position)
	}
	var tp tuple
	if g.byID() {
		id, err := uuid.Parse(partition[core.IDKey])
		if len(partition) != 1 || err != nil {
			return false, fmt.Errorf("memstore: advance %s: partition %v is not {%q: message id}", group, partition, core.IDKey)
		}
		tp = tuple{key: partitionKey([]string{core.IDKey}, []string{id.String()}), partition: map[string]string{core.IDKey: id.String()}, msgID: id}
	} else {
		if !slices.Equal(slices.Sorted(maps.Keys(partition)), g.partitionBy) {
			return false, fmt.Errorf("memstore: advance %s: partition %v does not hold exactly its partition attributes %v", group, partition, g.partitionBy)
		}
		values := make([]string, len(g.partitionBy))
		for i, name := range g.partitionBy {
			values[i] = partition[name]
		}
		tp = tuple{key: partitionKey(g.partitionBy, values), partition: maps.Clone(partition)}
	}
	off := t.offsetFor(g, tp)
	if off.last >= position {
		return true, nil
	}
	for i := s.indexAfter(off.last); i < len(s.log) && s.log[i].position < position; i++ {
		if r := &s.log[i]; g.handles(r.typ) && g.inPartition(off, r) {
			return false, nil
		}
	}
	t.moveTo(off, position)
	return true, nil
}

// operate runs an operator command on a group: the transition, then
// change, in one transaction that writes nothing when the status does not
// accept the command.
func (s *Store) operate(ctx context.Context, id string, cmd driver.GroupCommand, change func(t *tx, g *group)) error {
	return s.write(ctx, func(t *tx) error {
		g, err := s.group(id)
		if err != nil {
			return err
		}
		next, err := driver.Transition(g.id, g.status, cmd)
		if err != nil {
			return err
		}
		t.saveGroup(g)
		g.status = next
		change(t, g)
		if g.hooks {
			g.transitions++
			reason := ""
			if cmd == driver.CmdStop {
				reason = g.failure.Reason
			}
			g.pending = append(slices.Clone(g.pending), driver.GroupTransition{Seq: g.transitions, Command: cmd, Reason: reason, At: s.now()})
		}
		return nil
	})
}

// ClaimTransition claims the oldest transition of the group whose hook has
// not run; see driver.Groups.
func (s *Store) ClaimTransition(ctx context.Context, group, claimant string, now time.Time, lease time.Duration) (*driver.GroupTransition, error) {
	if err := driver.CheckClaimTransition(claimant, lease); err != nil {
		return nil, err
	}
	var out *driver.GroupTransition
	err := s.write(ctx, func(t *tx) error {
		g, err := s.group(group)
		if err != nil {
			return err
		}
		if len(g.pending) == 0 || g.hookBy != "" && g.hookAt.After(now.Add(-lease)) {
			return nil
		}
		t.saveGroup(g)
		g.hookBy, g.hookAt = claimant, now
		tr := g.pending[0]
		tr.Group, tr.Claimant, tr.ClaimedAt = g.id, claimant, now
		out = &tr
		return nil
	})
	return out, err
}

// FinishTransition records that the hook of a claimed transition ran, or
// releases it; see driver.Groups.
func (s *Store) FinishTransition(ctx context.Context, tr *driver.GroupTransition, ran bool) error {
	return s.write(ctx, func(t *tx) error {
		g, err := s.group(tr.Group)
		if err != nil {
			return err
		}
		if len(g.pending) == 0 || g.pending[0].Seq != tr.Seq || g.hookBy != tr.Claimant {
			return fmt.Errorf("memstore: finish transition %d of consumer group %s: %w", tr.Seq, g.id, driver.ErrNotClaimant)
		}
		t.saveGroup(g)
		g.hookBy, g.hookAt = "", time.Time{}
		if ran {
			g.hooked = tr.Seq
			g.pending = slices.Clone(g.pending[1:])
			if len(g.pending) == 0 {
				// The group's work may be claimed again: wake its workers.
				g.scan = 0
				t.announce(g)
			}
		}
		return nil
	})
}

// StopGroup stops a group, keeping reason in its failure (a failed group
// keeps its failure fields too).
func (s *Store) StopGroup(ctx context.Context, id, reason string) error {
	return s.operate(ctx, id, driver.CmdStop, func(t *tx, g *group) {
		g.retryAt = time.Time{}
		g.failure.Reason = reason
	})
}

// StartGroup makes a group active, clearing its retry time and failure,
// and makes its claim scan dirty; its handled types are announced after
// the commit, so that workers wake at once.
func (s *Store) StartGroup(ctx context.Context, id string) error {
	return s.operate(ctx, id, driver.CmdStart, func(t *tx, g *group) {
		g.retryAt, g.failure, g.scan = time.Time{}, driver.Failure{}, 0
		t.announce(g)
	})
}

// ResetGroup deletes a group's offsets (claims included), so that it
// replays the log from the beginning once started; the group's status and
// highest position stay, and each partition remembers how far it had been
// acknowledged, so that claims up to there report Replaying; the group's
// snapshots (driver.Snapshot) are deleted. It does nothing else to an
// exclusive group: a delete-on-ack queue cannot be replayed.
func (s *Store) ResetGroup(ctx context.Context, id string) error {
	return s.operate(ctx, id, driver.CmdReset, func(t *tx, g *group) {
		t.deleteSnapshots(g.id)
		if g.exclusive {
			return
		}
		replay := maps.Clone(g.replay)
		if replay == nil {
			replay = map[string]int64{}
		}
		for _, off := range slices.Collect(maps.Values(g.offsets)) {
			replay[off.key] = max(replay[off.key], off.last)
			t.deleteOffset(off)
		}
		g.replay = replay
		t.discover(g)
		g.scan = 0
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
// it, in one transaction; see driver.Groups.
func (s *Store) ChangeGroup(ctx context.Context, group string, decide func(driver.GroupState) (driver.GroupChange, error)) (driver.GroupState, error) {
	var out driver.GroupState
	err := s.write(ctx, func(t *tx) error {
		g, err := s.group(group)
		if err != nil {
			return err
		}
		ch, err := decide(g.state())
		if err != nil {
			return err
		}
		if err := t.change(g, ch); err != nil {
			return err
		}
		out = g.state()
		return nil
	})
	return out, err
}

// change applies a worker command to g, when its status accepts it.
func (t *tx) change(g *group, ch driver.GroupChange) error {
	if ch.Command == "" {
		return nil
	}
	if ch.Command != driver.CmdRetry && ch.Command != driver.CmdFail && ch.Command != driver.CmdPark {
		return fmt.Errorf("memstore: consumer group %s: ChangeGroup applies a worker command (retry, fail or park), not %q", g.id, ch.Command)
	}
	f, err := storedFailure(ch.Failure)
	if err != nil {
		return err
	}
	if ch.Command == driver.CmdPark {
		t.park(g, f)
		return nil
	}
	next, err := driver.Transition(g.id, g.status, ch.Command)
	if err != nil {
		return nil // a worker command: the group stays as it is
	}
	t.saveGroup(g)
	g.status, g.failure = next, f
	if ch.Command == driver.CmdRetry {
		g.retryAt = ch.RetryAt.UTC().Round(0)
		t.bump(g)
	} else {
		g.retryAt = time.Time{}
	}
	return nil
}

// announce has the transaction announce g's handled types after it
// commits, as an append of them would: the group was resumed (started, or
// a partition unparked), and its workers wake at once instead of at the
// next catch-up poll.
func (t *tx) announce(g *group) {
	for _, typ := range g.handled {
		t.types = appendDistinct(t.types, typ)
	}
}

// state is the group's status, retry time and failure, copied.
func (g *group) state() driver.GroupState {
	st := driver.GroupState{Status: g.status, RetryAt: g.retryAt, Failure: g.failure}
	if f := g.failure.RetryAt; f != nil {
		at := *f
		st.Failure.RetryAt = &at
	}
	return st
}

// storedFailure is the failure as the SQLite store gives it back: through
// JSON, so that the twins agree on what survives.
func storedFailure(f driver.Failure) (driver.Failure, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return driver.Failure{}, fmt.Errorf("memstore: encode failure: %w", err)
	}
	var out driver.Failure
	if err := json.Unmarshal(data, &out); err != nil {
		return driver.Failure{}, fmt.Errorf("memstore: decode failure: %w", err)
	}
	return out, nil
}

// Group returns a group's status and figures.
func (s *Store) Group(ctx context.Context, group string) (driver.GroupInfo, error) {
	if err := s.rlock(ctx); err != nil {
		return driver.GroupInfo{}, err
	}
	defer s.mu.RUnlock()
	g, err := s.group(group)
	if err != nil {
		return driver.GroupInfo{}, err
	}
	return g.info(), nil
}

// info describes the group; the caller holds the lock.
func (g *group) info() driver.GroupInfo {
	info := driver.GroupInfo{
		ID:              g.id,
		Label:           g.label,
		Status:          g.status,
		RetryAt:         g.retryAt,
		Failure:         g.failure,
		Partitions:      int64(len(g.offsets)),
		HighestPosition: g.highest,
		PartitionBy:     slices.Clone(g.partitionBy),
		Exclusive:       g.exclusive,
		HooksPending:    int64(len(g.pending)),
	}
	if f := g.failure.RetryAt; f != nil {
		at := *f
		info.Failure.RetryAt = &at
	}
	for _, off := range g.offsets {
		if off.last > 0 && (info.OldestProcessed == 0 || off.last < info.OldestProcessed) {
			info.OldestProcessed = off.last
		}
		info.NewestProcessed = max(info.NewestProcessed, off.last)
	}
	return info
}

// Heartbeat records that the workers are alive at at.
func (s *Store) Heartbeat(ctx context.Context, workerIDs []string, at time.Time) error {
	if slices.Contains(workerIDs, "") {
		return errors.New("memstore: heartbeat of a worker with no id")
	}
	return s.write(ctx, func(t *tx) error {
		for _, w := range workerIDs {
			s.workers[w] = at
		}
		return nil
	})
}

// ReleaseStaleClaims releases the claims of workers last seen at or before
// now-ttl, and those of workers that never heartbeat claimed at or before
// now-ttl; it returns how many.
func (s *Store) ReleaseStaleClaims(ctx context.Context, now time.Time, ttl time.Duration) (int, error) {
	if err := driver.CheckTTL(ttl); err != nil {
		return 0, err
	}
	cutoff := now.Add(-ttl)
	n := 0
	err := s.write(ctx, func(t *tx) error {
		for _, off := range slices.Clone(s.offsets) {
			if !off.claimed {
				continue
			}
			seen, ok := s.workers[off.claimedBy]
			if !ok {
				seen = off.claimedAt
			}
			if !seen.After(cutoff) {
				t.unclaim(off)
				n++
			}
		}
		return nil
	})
	return n, err
}

// ReleaseClaimsOlderThan releases every claim made at or before cutoff,
// whoever holds it, and returns the released offsets as they were.
func (s *Store) ReleaseClaimsOlderThan(ctx context.Context, cutoff time.Time) ([]driver.Offset, error) {
	var out []driver.Offset
	err := s.write(ctx, func(t *tx) error {
		for _, off := range slices.Clone(s.offsets) {
			if off.claimed && !off.claimedAt.After(cutoff) {
				out = append(out, off.info())
				t.unclaim(off)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RenewClaims sets the claim time of each claim its worker still holds to
// at; see driver.ClaimRenewer.
func (s *Store) RenewClaims(ctx context.Context, claims []*driver.ClaimedPartition, at time.Time) (int, error) {
	n := 0
	err := s.write(ctx, func(t *tx) error {
		n = 0
		for _, c := range claims {
			off, err := t.held(c, "renew")
			if errors.Is(err, driver.ErrNotClaimant) || errors.As(err, new(*driver.UnknownGroupError)) {
				continue
			}
			if err != nil {
				return err
			}
			t.saveOffset(off)
			off.claimedAt = at
			n++
		}
		return nil
	})
	return n, err
}

// RemoveWorkers deletes the workers' heartbeats.
func (s *Store) RemoveWorkers(ctx context.Context, workerIDs []string) error {
	return s.write(ctx, func(t *tx) error {
		for _, w := range workerIDs {
			if seen, ok := s.workers[w]; ok {
				delete(s.workers, w)
				t.undo = append(t.undo, func() { s.workers[w] = seen })
			}
		}
		return nil
	})
}

// ReleaseDrainedOffsets deletes the unclaimed offsets whose partition no
// longer holds a message of the group's handled types (under conditional
// AND: a message carrying only some partition attributes keeps the
// partition, since a new offset would deliver it again); it returns how
// many.
func (s *Store) ReleaseDrainedOffsets(ctx context.Context) (int, error) {
	n := 0
	err := s.write(ctx, func(t *tx) error {
		carried := map[*group]map[codec.KeyPair]bool{}
		for _, off := range slices.Clone(s.offsets) {
			g := off.g
			if off.claimed || len(off.wake) > 0 {
				continue
			}
			if g.byID() {
				if pos := s.ids[off.msgID]; pos == 0 {
					t.deleteOffset(off)
					n++
				}
				continue
			}
			pairs, ok := carried[g]
			if !ok {
				pairs = map[codec.KeyPair]bool{}
				for i := range s.log {
					if g.handles(s.log[i].typ) {
						for _, k := range s.log[i].keys {
							pairs[k] = true
						}
					}
				}
				carried[g] = pairs
			}
			if !s.holds(g, off, pairs) {
				t.deleteOffset(off)
				n++
			}
		}
		return nil
	})
	return n, err
}

// holds reports whether the log holds a handled message of off's
// partition; pairs are the key pairs handled messages carry, to rule most
// partitions out without scanning.
func (s *Store) holds(g *group, off *offset, pairs map[codec.KeyPair]bool) bool {
	carries := false
	for name, value := range off.partition {
		if pairs[codec.KeyPair{Name: name, Value: value}] {
			carries = true
			break
		}
	}
	if !carries {
		return false
	}
	for i := range s.log {
		if r := &s.log[i]; g.handles(r.typ) && g.inPartition(off, r) {
			return true
		}
	}
	return false
}

// PruneOrphanKeyPairs returns 0: the in-memory store keeps no dictionary
// of key pairs (a message's pairs go with it when it is deleted).
func (s *Store) PruneOrphanKeyPairs(ctx context.Context) (int, error) {
	if err := s.rlock(ctx); err != nil {
		return 0, err
	}
	s.mu.RUnlock()
	return 0, nil
}

// ReadOffsets returns a page of offsets by ascending id from q.From; Total
// counts the offsets of q.Group (all groups when empty).
func (s *Store) ReadOffsets(ctx context.Context, q driver.OffsetQuery) (driver.OffsetPage, error) {
	if err := s.rlock(ctx); err != nil {
		return driver.OffsetPage{}, err
	}
	defer s.mu.RUnlock()
	var only *group
	if q.Group != "" {
		g, err := s.group(q.Group)
		if err != nil {
			return driver.OffsetPage{}, err
		}
		only = g
	}
	limit := q.Limit
	if limit <= 0 {
		limit = driver.DefaultPageSize
	}
	page := driver.OffsetPage{Offsets: []driver.Offset{}}
	if only != nil {
		page.Total = int64(len(only.offsets))
	} else {
		page.Total = int64(len(s.offsets))
	}
	i, _ := slices.BinarySearchFunc(s.offsets, q.From, func(o *offset, id int64) int { return cmpInt(o.id, id) })
	for ; i < len(s.offsets) && len(page.Offsets) < limit; i++ {
		off := s.offsets[i]
		if only != nil && off.g != only {
			continue
		}
		page.Offsets = append(page.Offsets, off.info())
	}
	return page, nil
}

var _ driver.Lagger = (*Store)(nil)

// GroupLag counts the pending work of group within the bounds of q; see
// driver.Lagger.
func (s *Store) GroupLag(ctx context.Context, group string, q driver.LagQuery) (driver.Lag, error) {
	limit, err := driver.CheckLagQuery(q)
	if err != nil {
		return driver.Lag{}, err
	}
	if err := s.rlock(ctx); err != nil {
		return driver.Lag{}, err
	}
	defer s.mu.RUnlock()
	g, err := s.group(group)
	if err != nil {
		return driver.Lag{}, err
	}
	out := driver.Lag{ByOffset: map[int64]int{}, Limit: limit}
	var pending []*offset
	for _, off := range g.offsets {
		if !off.live {
			continue
		}
		if len(off.wake) > 0 {
			out.Pending++
			pending = append(pending, off)
		}
		if off.parked != nil {
			out.Parked++
		}
	}
	var count []*offset
	switch {
	case len(q.Offsets) > 0:
		for _, off := range pending {
			if slices.Contains(q.Offsets, off.id) {
				count = append(count, off)
			}
		}
	case q.Partitions > 0:
		slices.SortFunc(pending, func(a, b *offset) int {
			if c := cmpInt(a.last, b.last); c != 0 {
				return c
			}
			return cmpInt(a.id, b.id)
		})
		count = pending[:min(q.Partitions, len(pending))]
	}
	for _, off := range count {
		if n := s.pendingCount(g, off, limit); n > 0 {
			out.ByOffset[off.id] = n
		}
	}
	return out, nil
}

// pendingCount counts, up to limit, the messages fetch would return for
// off, decoding none; the caller holds the lock.
func (s *Store) pendingCount(g *group, off *offset, limit int) int {
	if len(g.partitionBy) <= 1 {
		return min(len(off.wake), limit)
	}
	n := 0
	for i := s.indexAfter(off.last); i < len(s.log) && n < limit; i++ {
		r := &s.log[i]
		if g.handles(r.typ) && g.inPartition(off, r) {
			n++
		}
	}
	return n
}

// info describes the offset; the caller holds the lock.
func (off *offset) info() driver.Offset {
	return driver.Offset{
		ID:           off.id,
		Group:        off.g.id,
		GroupStatus:  off.g.status,
		Partition:    maps.Clone(off.partition),
		LastPosition: off.last,
		Claimed:      off.claimed,
		ClaimedAt:    off.claimedAt,
		ClaimedBy:    off.claimedBy,
		Parked:       off.parked != nil,
	}
}

// Offsets iterates the offsets of q lazily, a page of q.Limit at a time.
// The iteration stops at the first error, which it yields.
func (s *Store) Offsets(ctx context.Context, q driver.OffsetQuery) iter.Seq2[driver.Offset, error] {
	return driver.PageOffsets(ctx, s.ReadOffsets, q)
}

var _ driver.ClaimManyTx = (*tx)(nil)

// ClaimMany claims, in the transaction, up to partitions partitions of
// group for workerID, each with up to batchSize of its messages, one after
// another as ClaimNext claims them (the status gate and the latch
// included); see driver.ClaimManyTx.
func (t *tx) ClaimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	if partitions <= 0 {
		return nil, fmt.Errorf("memstore: claim %d partitions: the partition count must be positive", partitions)
	}
	var out []*driver.ClaimedPartition
	for len(out) < partitions {
		c, err := t.ClaimNext(group, workerID, batchSize)
		if err != nil {
			return out, err
		}
		if c == nil {
			break
		}
		out = append(out, c)
	}
	return out, nil
}
