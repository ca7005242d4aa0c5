package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// ErrClosed is returned by every operation on a store after Close.
var ErrClosed = errors.New("memstore: store is closed")

// Option configures a Store built by New.
type Option func(*Store)

// WithClock makes the store read the time from now instead of time.Now. The
// store stamps messages with it and compares message times with it to decide
// what to schedule. A runtime does not see a bare function: give a
// driver.Clock with WithSharedClock for one clock that drives both.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now, s.clock = now, nil }
}

// WithSharedClock makes the store read the time from c, as WithClock
// does, and keep c for the runtime: a shell.Runtime given no Config.Clock
// takes it (driver.Clocked), so one clock, a driver.SimClock in a test,
// drives the store's stamps and schedule, the runtime's promotions and
// timers, and the workflows' sleeps and retries.
func WithSharedClock(c driver.Clock) Option {
	return func(s *Store) {
		if c != nil {
			s.clock, s.now = c, c.Now
		}
	}
}

// Clock returns the clock given with WithSharedClock, nil without one
// (driver.Clocked).
func (s *Store) Clock() driver.Clock { return s.clock }

// WithNotifier makes the store announce the distinct types of every
// committed append (and of every promotion of scheduled messages) to n.
// Without it the store announces to an InlineNotifier of its own.
func WithNotifier(n driver.Notifier) Option {
	return func(s *Store) { s.notifier = n }
}

// WithLogger makes the store's logger l (shell.Handle logs there what it
// could not do with a snapshot, say); without it, slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.logger = l }
}

// Logger returns the store's logger (see WithLogger).
func (s *Store) Logger() *slog.Logger {
	if s.logger == nil {
		return slog.Default()
	}
	return s.logger
}

// TxContext is the transaction handed to sync work by Tx.Context (a
// core.SyncTx). The in-memory store has nothing beside the log for sync work to
// write to, so it has no methods.
type TxContext struct{}

// Store is an in-memory driver.Store. Build it with New; it is safe for
// concurrent use.
type Store struct {
	reg      *codec.Registry
	now      func() time.Time
	clock    driver.Clock // the clock shared with a runtime (WithSharedClock)
	notifier driver.Notifier
	logger   *slog.Logger

	mu       sync.RWMutex
	log      []record // ordered by position
	schedule []record // in the order the messages were scheduled
	// ids maps the id of every stored message to its position (0 while
	// it is scheduled).
	ids map[uuid.UUID]int64
	// maxPos is the highest position ever given: positions of deleted
	// messages are not reused (those of rolled back appends are).
	maxPos int64
	closed bool

	groups     map[string]*group
	groupList  []*group  // the groups in id order
	offsets    []*offset // every offset, by ascending id
	nextOffset int64     // the id of the newest offset
	workers    map[string]time.Time
	scans      int // claim scans run (the latch's O(1) polls run none)
	// snapshots are the deciders' persisted states (see snapshot.go).
	snapshots map[snapshotKey]driver.Snapshot
}

// record is a stored message: the envelope, the encoded payload and the key
// pairs it is indexed under.
type record struct {
	position    int64 // 0 while scheduled
	id          uuid.UUID
	typ         string
	version     int
	payload     []byte
	metadata    []byte // JSON; nil when the message has no metadata
	causationID uuid.UUID
	correlation uuid.UUID
	createdAt   time.Time
	keys        []codec.KeyPair
}

var (
	_ driver.Store   = (*Store)(nil)
	_ driver.Clocked = (*Store)(nil)
)

// New returns an empty store that encodes and decodes payloads with reg.
func New(reg *codec.Registry, opts ...Option) *Store {
	s := &Store{
		reg:     reg,
		now:     time.Now,
		ids:     make(map[uuid.UUID]int64),
		groups:  make(map[string]*group),
		workers: make(map[string]time.Time),
	}
	for _, o := range opts {
		o(s)
	}
	if s.notifier == nil {
		s.notifier = &driver.InlineNotifier{}
	}
	return s
}

// Now returns the store's time (its clock).
func (s *Store) Now() time.Time { return s.now() }

// Notifier returns the notifier the store announces committed appends to.
func (s *Store) Notifier() driver.Notifier { return s.notifier }

// Registry returns the codec registry the store was built with.
func (s *Store) Registry() *codec.Registry { return s.reg }

// Update runs fn in one transaction holding the store's lock. If fn returns
// an error or panics, everything it did (appends, deletes, offsets, claims,
// group changes) is undone (positions are then reused by the next append:
// the store is exactly as before) and the error is returned or the panic
// continues. After a commit the notifier is told the distinct types
// appended to the log. The transaction is also a driver.GroupTx.
func (s *Store) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return s.write(ctx, func(t *tx) error { return fn(t) })
}

// write runs fn in a transaction: the lock held, undone unless fn
// succeeds, the notifier told after the commit.
func (s *Store) write(ctx context.Context, fn func(t *tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	tx := &tx{s: s, maxPos: s.maxPos, nextOffset: s.nextOffset}
	committed := false
	defer func() {
		if !committed {
			tx.rollback()
		}
		tx.done = true
		s.mu.Unlock()
		if committed {
			s.notify(tx.types)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	return nil
}

// Append appends msgs in a transaction of its own; see driver.Tx.Append.
func (s *Store) Append(ctx context.Context, msgs []core.Message, opts driver.AppendOptions) (res driver.AppendResult, err error) {
	err = s.Update(ctx, func(tx driver.Tx) error {
		res, err = tx.Append(msgs, opts)
		return err
	})
	return res, err
}

// Read returns the messages matching any of conds; see driver.Tx.Read.
func (s *Store) Read(ctx context.Context, conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := s.rlock(ctx); err != nil {
		return driver.ReadResult{}, err
	}
	defer s.mu.RUnlock()
	return s.read(conds, opts)
}

// ReadPartition reads one partition under conditional AND; see
// driver.Tx.ReadPartition.
func (s *Store) ReadPartition(ctx context.Context, partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := s.rlock(ctx); err != nil {
		return driver.ReadResult{}, err
	}
	defer s.mu.RUnlock()
	return s.readPartition(partition, types, opts)
}

// ReadAll returns one page of the log; see driver.ReadAllOptions.
func (s *Store) ReadAll(ctx context.Context, opts driver.ReadAllOptions) (driver.Page, error) {
	if err := s.rlock(ctx); err != nil {
		return driver.Page{}, err
	}
	defer s.mu.RUnlock()
	return s.readAll(opts)
}

// All iterates the log (or the messages matching opts.Conditions) from
// opts.From in opts.Order, one page of opts.Limit at a time, fetching the
// next page only when the iteration gets there.
func (s *Store) All(ctx context.Context, opts driver.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return driver.PageMessages(ctx, s.ReadAll, opts)
}

// PromoteScheduled moves the scheduled messages due at or before now into
// the log, in the order they were scheduled, keeping their ids and times,
// and returns how many it moved. Promoted messages are appended like any
// other: they create the offsets of the consumer groups handling them. A
// due message that cannot be appended as it is (driver.CheckPromotable) is
// set aside, left in the schedule, while the others are promoted; the
// error is then a *driver.UnpromotedError listing it.
func (s *Store) PromoteScheduled(ctx context.Context, now time.Time) (int, error) {
	n := 0
	var aside []driver.UnpromotedMessage
	err := s.write(ctx, func(t *tx) error {
		n, aside = 0, nil
		old := s.schedule
		kept := make([]record, 0, len(old))
		for _, r := range old {
			if r.createdAt.After(now) {
				kept = append(kept, r)
				continue
			}
			if why := s.promotable(&r); why != nil {
				aside = append(aside, driver.UnpromotedMessage{ID: r.id, Type: r.typ, DueAt: r.createdAt, Err: why})
				kept = append(kept, r)
				continue
			}
			t.insert(r)
			n++
		}
		s.schedule = kept
		t.undo = append(t.undo, func() { s.schedule = old })
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(aside) > 0 {
		return n, &driver.UnpromotedError{Messages: aside}
	}
	return n, nil
}

// promotable reports why a due scheduled record cannot be promoted (nil
// when it can).
func (s *Store) promotable(r *record) error {
	typ, err := s.reg.ByName(r.typ)
	if err != nil {
		return err
	}
	m, err := s.decode(r)
	if err != nil {
		return err
	}
	return driver.CheckPromotable(typ, m.Message)
}

// NextScheduled returns when the earliest scheduled message is due, and
// false when none is scheduled.
func (s *Store) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	if err := s.rlock(ctx); err != nil {
		return time.Time{}, false, err
	}
	defer s.mu.RUnlock()
	if len(s.schedule) == 0 {
		return time.Time{}, false, nil
	}
	next := slices.MinFunc(s.schedule, func(a, b record) int { return a.createdAt.Compare(b.createdAt) })
	return next.createdAt, true, nil
}

// ReadScheduled returns up to limit scheduled messages (all when limit <=
// 0), soonest due first (in scheduling order among messages due at the
// same time): each message's CreatedAt is when it is due.
func (s *Store) ReadScheduled(ctx context.Context, limit int) ([]core.Message, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	due := slices.Clone(s.schedule)
	slices.SortStableFunc(due, func(a, b record) int { return a.createdAt.Compare(b.createdAt) })
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	out := make([]core.Message, 0, len(due))
	for i := range due {
		m, err := s.decode(&due[i])
		if err != nil {
			return nil, err
		}
		out = append(out, m.Message)
	}
	return out, nil
}

// Clear deletes everything the store holds: the log, the schedule,
// consumer groups with their offsets, and worker heartbeats. Positions
// start over, so the next message appended gets position 1 (and the next
// offset id 1). Clear is for tests (a fresh store per test); consumer
// groups must be registered again afterwards. It waits for running
// transactions and notifies nothing.
func (s *Store) Clear(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.log, s.schedule, s.ids, s.maxPos = nil, nil, make(map[uuid.UUID]int64), 0
	s.groups, s.groupList, s.offsets, s.nextOffset = make(map[string]*group), nil, nil, 0
	s.workers = make(map[string]time.Time)
	return nil
}

// Stats returns the newest position and the number of scheduled messages.
func (s *Store) Stats(ctx context.Context) (driver.Stats, error) {
	if err := s.rlock(ctx); err != nil {
		return driver.Stats{}, err
	}
	defer s.mu.RUnlock()
	st := driver.Stats{MaxPosition: s.lastPosition(), Scheduled: int64(len(s.schedule))}
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		st.Groups = append(st.Groups, s.groups[id].info())
	}
	return st, nil
}

// Optimize does nothing: the in-memory store has no query planner.
func (s *Store) Optimize(ctx context.Context) error { return ctx.Err() }

// Close drops the store's contents; later calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.log, s.schedule, s.ids = nil, nil, nil
	s.groups, s.groupList, s.offsets, s.workers = nil, nil, nil, nil
	return nil
}

// rlock takes the read lock unless ctx is done or the store is closed.
func (s *Store) rlock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) notify(types []string) {
	if s.notifier != nil && len(types) > 0 {
		s.notifier.Notify(types)
	}
}

// lastPosition is the position of the newest message (0 when empty). The
// caller holds the lock.
func (s *Store) lastPosition() int64 {
	if len(s.log) == 0 {
		return 0
	}
	return s.log[len(s.log)-1].position
}

// read implements Read with the lock held.
func (s *Store) read(conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := driver.CheckConditions(s.reg, conds); err != nil {
		return driver.ReadResult{}, fmt.Errorf("memstore: read: %w", err)
	}
	if err := driver.CheckReadOptions(opts); err != nil {
		return driver.ReadResult{}, fmt.Errorf("memstore: %w", err)
	}
	match := func(r *record) bool { return core.MatchAny(conds, r.typ, r.keys) }
	if len(conds) == 0 {
		match = func(*record) bool { return false }
	}
	return s.scan(match, conds, opts)
}

// readPartition implements ReadPartition with the lock held.
func (s *Store) readPartition(partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := driver.CheckReadPartition(s.reg, partition, types); err != nil {
		return driver.ReadResult{}, fmt.Errorf("memstore: %w", err)
	}
	if err := driver.CheckReadOptions(opts); err != nil {
		return driver.ReadResult{}, fmt.Errorf("memstore: %w", err)
	}
	typs := make([]*codec.Type, 0, len(types))
	for _, name := range types {
		t, err := s.reg.ByName(name)
		if err != nil {
			return driver.ReadResult{}, fmt.Errorf("memstore: read partition: %w", err)
		}
		typs = append(typs, t)
	}
	match := func(r *record) bool {
		return slices.Contains(types, r.typ) && core.InPartition(partition, r.keys)
	}
	if id, ok := partition[core.IDKey]; ok {
		// The partition of one message (an id-partitioned group's), found
		// by its id whatever it was indexed under.
		u, err := uuid.Parse(id) // checked by CheckReadPartition
		if err != nil {
			return driver.ReadResult{}, fmt.Errorf("memstore: read partition: %w", err)
		}
		match = func(r *record) bool { return r.id == u && slices.Contains(types, r.typ) }
	}
	return s.scan(match, core.ConditionsFor(partition, typs...), opts)
}

// scan returns the messages selected by match within opts, in position
// order, and the guard over conds that the read earns (see driver.Tx.Read).
func (s *Store) scan(match func(*record) bool, conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	last := s.lastPosition()
	guardPos := last
	if opts.Upto > 0 && opts.Upto < last {
		guardPos = opts.Upto
	}
	var msgs []core.PositionedMessage
	for i := s.indexAfter(opts.After); i < len(s.log); i++ {
		r := &s.log[i]
		if opts.Upto > 0 && r.position > opts.Upto {
			break
		}
		if !match(r) {
			continue
		}
		m, err := s.decode(r)
		if err != nil {
			return driver.ReadResult{}, err
		}
		msgs = append(msgs, m)
		if opts.Limit > 0 && len(msgs) == opts.Limit {
			guardPos = r.position
			break
		}
	}
	return driver.ReadResult{Messages: msgs, Guard: core.Guard{Conditions: conds, LastPosition: guardPos}}, nil
}

// readAll implements ReadAll with the lock held.
func (s *Store) readAll(opts driver.ReadAllOptions) (driver.Page, error) {
	if err := driver.CheckReadAll(s.reg, opts); err != nil {
		return driver.Page{}, fmt.Errorf("memstore: %w", err)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = driver.DefaultPageSize
	}
	page := driver.Page{LastPosition: s.lastPosition()}
	cursor, ok := opts.Cursor()
	if !ok {
		return page, nil
	}
	take := func(r *record) (bool, error) {
		if len(opts.Conditions) > 0 && !core.MatchAny(opts.Conditions, r.typ, r.keys) {
			return true, nil
		}
		m, err := s.decode(r)
		if err != nil {
			return false, err
		}
		page.Messages = append(page.Messages, m)
		return len(page.Messages) < limit, nil
	}
	if opts.Order == driver.Descending {
		from := cursor
		if from <= 0 {
			from = page.LastPosition
		}
		for i := s.indexAfter(from) - 1; i >= 0; i-- {
			if more, err := take(&s.log[i]); err != nil || !more {
				return page, err
			}
		}
		return page, nil
	}
	for i := s.indexAfter(cursor - 1); i < len(s.log); i++ {
		if more, err := take(&s.log[i]); err != nil || !more {
			return page, err
		}
	}
	return page, nil
}

// indexAfter returns the index in the log of the first message whose
// position is after pos.
func (s *Store) indexAfter(pos int64) int {
	i, _ := slices.BinarySearchFunc(s.log, pos+1, func(r record, p int64) int {
		switch {
		case r.position < p:
			return -1
		case r.position > p:
			return 1
		}
		return 0
	})
	return i
}

// decode rebuilds the message of a record, decoding its payload with the
// registry.
func (s *Store) decode(r *record) (core.PositionedMessage, error) {
	payload, err := s.reg.Decode(r.typ, r.version, r.payload)
	if err != nil {
		return core.PositionedMessage{}, fmt.Errorf("memstore: decode message %s at position %d: %w", r.id, r.position, err)
	}
	var md map[string]any
	if r.metadata != nil {
		if err := json.Unmarshal(r.metadata, &md); err != nil {
			return core.PositionedMessage{}, fmt.Errorf("memstore: decode metadata of message %s: %w", r.id, err)
		}
	}
	return core.PositionedMessage{
		Message: core.Message{
			ID:            r.id,
			Type:          r.typ,
			Payload:       payload,
			Metadata:      md,
			CausationID:   r.causationID,
			CorrelationID: r.correlation,
			CreatedAt:     r.createdAt,
		},
		Position: r.position,
	}, nil
}

// tx is the driver.Tx (and driver.GroupTx) of an Update. Every change it
// makes pushes a function that undoes it; a rollback runs them newest
// first, so each finds the store as the change left it.
type tx struct {
	s          *Store
	done       bool
	maxPos     int64 // s.maxPos at the start
	nextOffset int64 // s.nextOffset at the start
	undo       []func()
	groups     map[*group]struct{}  // groups whose state was saved
	offsets    map[*offset]struct{} // offsets whose state was saved
	types      []string             // distinct types appended to the log, for the notifier
}

var errTxDone = errors.New("memstore: transaction used after its Update returned")

func (t *tx) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.s.maxPos, t.s.nextOffset = t.maxPos, t.nextOffset
}

// insert appends a record to the log at the next position, creates or
// wakes the offsets of the consumer groups handling it, and makes every
// group's claim scan dirty.
func (t *tx) insert(r record) int64 {
	s := t.s
	s.maxPos++
	r.position = s.maxPos
	prev, had := s.ids[r.id]
	s.log = append(s.log, r)
	s.ids[r.id] = r.position
	t.undo = append(t.undo, func() {
		s.log[len(s.log)-1] = record{}
		s.log = s.log[:len(s.log)-1]
		if had {
			s.ids[r.id] = prev
		} else {
			delete(s.ids, r.id)
		}
	})
	t.types = appendDistinct(t.types, r.typ)
	t.indexed(&s.log[len(s.log)-1])
	return r.position
}

func (t *tx) Context() core.SyncTx { return TxContext{} }

func (t *tx) LastPosition() (int64, error) {
	if t.done {
		return 0, errTxDone
	}
	return t.s.lastPosition(), nil
}

func (t *tx) Read(conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if t.done {
		return driver.ReadResult{}, errTxDone
	}
	return t.s.read(conds, opts)
}

func (t *tx) ReadPartition(partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if t.done {
		return driver.ReadResult{}, errTxDone
	}
	return t.s.readPartition(partition, types, opts)
}

func (t *tx) ReadAll(opts driver.ReadAllOptions) (driver.Page, error) {
	if t.done {
		return driver.Page{}, errTxDone
	}
	return t.s.readAll(opts)
}

// Append checks every message (registered, valid, id not yet stored) and
// the guard before it writes anything, so a failed append leaves no trace.
func (t *tx) Append(msgs []core.Message, opts driver.AppendOptions) (driver.AppendResult, error) {
	if t.done {
		return driver.AppendResult{}, errTxDone
	}
	s := t.s
	if len(msgs) == 0 {
		return driver.AppendResult{}, nil
	}
	now := s.now()
	recs := make([]record, len(msgs))
	stamped := make([]core.Message, len(msgs))
	batch := make(map[uuid.UUID]struct{}, len(msgs))
	for i, m := range msgs {
		r, sm, err := s.prepare(m, now)
		if err == nil {
			err = driver.CheckPartitionValues(r.typ, r.keys, s.partitionKeys(r.typ))
		}
		if err != nil {
			return driver.AppendResult{}, fmt.Errorf("memstore: append message %d of %d: %w", i+1, len(msgs), err)
		}
		if _, dup := s.ids[r.id]; dup {
			return driver.AppendResult{}, fmt.Errorf("memstore: append message %d of %d: id %s: %w", i+1, len(msgs), r.id, driver.ErrDuplicateID)
		}
		if _, dup := batch[r.id]; dup {
			return driver.AppendResult{}, fmt.Errorf("memstore: append message %d of %d: id %s appears twice in the batch: %w", i+1, len(msgs), r.id, driver.ErrDuplicateID)
		}
		batch[r.id] = struct{}{}
		recs[i], stamped[i] = r, sm
	}
	if g := opts.Guard; g != nil && len(g.Conditions) > 0 {
		if err := driver.CheckConditions(s.reg, g.Conditions); err != nil {
			return driver.AppendResult{}, fmt.Errorf("memstore: append: guard: %w", err)
		}
		var conflicts []core.PositionedMessage
		for i := s.indexAfter(g.LastPosition); i < len(s.log); i++ {
			r := &s.log[i]
			if !core.MatchAny(g.Conditions, r.typ, r.keys) {
				continue
			}
			m, err := s.decode(r)
			if err != nil {
				return driver.AppendResult{}, err
			}
			conflicts = append(conflicts, m)
		}
		if len(conflicts) > 0 {
			return driver.AppendResult{}, &core.ConflictError{Guard: *g, Conflicts: conflicts}
		}
	}
	res := driver.AppendResult{Positions: make([]int64, len(msgs)), Messages: stamped}
	for i, r := range recs {
		if stamped[i].Scheduled(now) {
			s.schedule = append(s.schedule, r)
			s.ids[r.id] = 0
			t.undo = append(t.undo, func() {
				s.schedule[len(s.schedule)-1] = record{}
				s.schedule = s.schedule[:len(s.schedule)-1]
				delete(s.ids, r.id)
			})
			continue
		}
		res.Positions[i] = t.insert(r)
		res.Last = res.Positions[i]
	}
	return res, nil
}

// partitionKeys yields the id and partition keys of each group handling
// typ, for driver.CheckPartitionValues.
func (s *Store) partitionKeys(typ string) iter.Seq2[string, []string] {
	return func(yield func(string, []string) bool) {
		for _, g := range s.groupList {
			if g.handles(typ) && !yield(g.id, g.partitionBy) {
				return
			}
		}
	}
}

// prepare validates, stamps and encodes one message.
func (s *Store) prepare(m core.Message, now time.Time) (record, core.Message, error) {
	if err := m.Err(); err != nil {
		return record{}, m, err // dated before its creation (core.Message.At)
	}
	typ, err := s.reg.TypeFor(m.Type, m.Payload)
	if err != nil {
		return record{}, m, err
	}
	if err := typ.Validate(m.Payload); err != nil {
		return record{}, m, err
	}
	data, err := typ.Encode(m.Payload)
	if err != nil {
		return record{}, m, err
	}
	if m.Type != "" && m.Type != typ.Name {
		return record{}, m, fmt.Errorf("message type %q is not the registered name %q of its payload %T: %w", m.Type, typ.Name, m.Payload, codec.ErrInvalid)
	}
	m.Type = typ.Name
	var id uuid.UUID
	if !m.Stamped() {
		if id, err = uuid.NewV7(); err != nil {
			return record{}, m, fmt.Errorf("new message id: %w", err)
		}
	}
	m = m.Stamp(id, now)
	m.CreatedAt = m.CreatedAt.UTC().Round(0)
	var md []byte
	if len(m.Metadata) > 0 {
		if md, err = json.Marshal(m.Metadata); err != nil {
			return record{}, m, fmt.Errorf("metadata of %s: %w", typ.Name, err)
		}
	}
	if err := driver.CheckDecodes(typ, data, md); err != nil {
		return record{}, m, err
	}
	return record{
		id:          m.ID,
		typ:         typ.Name,
		version:     typ.Version,
		payload:     data,
		metadata:    md,
		causationID: m.CausationID,
		correlation: m.CorrelationID,
		createdAt:   m.CreatedAt,
		keys:        typ.Keys(m.Payload, nil),
	}, m, nil
}

func appendDistinct(types []string, typ string) []string {
	if slices.Contains(types, typ) {
		return types
	}
	return append(types, typ)
}

var _ driver.UnscheduleTx = (*tx)(nil)

// Unschedule deletes the scheduled messages whose ids are ids from the
// schedule, in the transaction, and returns how many; see
// driver.UnscheduleTx.
func (t *tx) Unschedule(ids ...uuid.UUID) (int, error) {
	if t.done {
		return 0, errTxDone
	}
	s := t.s
	if len(ids) == 0 || len(s.schedule) == 0 {
		return 0, nil
	}
	old := s.schedule
	kept := make([]record, 0, len(old))
	var gone []uuid.UUID
	for _, r := range old {
		if slices.Contains(ids, r.id) {
			gone = append(gone, r.id)
			continue
		}
		kept = append(kept, r)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	s.schedule = kept
	for _, id := range gone {
		delete(s.ids, id)
	}
	t.undo = append(t.undo, func() {
		s.schedule = old
		for _, id := range gone {
			s.ids[id] = 0
		}
	})
	return len(gone), nil
}
