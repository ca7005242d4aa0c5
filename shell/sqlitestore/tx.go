package sqlitestore

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// TxContext is what the SQLite store hands to sync work as its core.SyncTx
// (driver.Tx.Context): the open write transaction, whose connection sync
// work reaches with the package function Conn (which also accepts the
// driver.Tx of Update, and returns ErrNotSQLite on another store instead
// of panicking as a type assertion does). It is valid only until the
// transaction ends.
type TxContext struct {
	tx *tx
}

// Conn returns the connection of the open transaction. Prefer the package
// function Conn(tx), which needs no type assertion and reports a
// transaction that ended.
func (c *TxContext) Conn() *sqlite.Conn {
	// The application's SQL sees the offsets as the appends left them (a
	// failure aborts the transaction).
	c.tx.flushWakes()
	return c.tx.conn
}

// tx is the driver.Tx of an Update.
type tx struct {
	s      *Store
	w      *writer
	conn   *sqlite.Conn
	done   bool
	solo   bool     // the transaction exists for this one append
	failed error    // an append failed while writing: the transaction must roll back
	types  []string // distinct types appended to the log, for the notifier
	// scheduledTypes are the distinct types scheduled; announced when the
	// transaction appended nothing to the log, so that a runtime's
	// scheduler re-computes when the next message is due.
	scheduledTypes []string
	gs             *groupSet
	// configChanged is set when the transaction changed a group's
	// configuration: the writer reloads it after a rollback too.
	configChanged bool
	prunedBump    bool // the transaction bumped the key_pairs counter
	deletedBump   bool // the transaction bumped the deleted counter
	group         *commitGroup
	member        int     // this transaction's place in its group (1 is the first)
	kpIDs         []int64 // scratch: the key pair ids of the message being inserted
	tuples        tuples  // scratch: the partitions of the message being inserted
	// The offset wakes deferred to the member's end (see pendingWake):
	// wakeIndex maps a partition key to its last wake when there are many,
	// wakeKps holds their key pair ids.
	wakes     []pendingWake
	wakeIndex map[string]int
	wakeKps   []int64
	// The pending-marker recomputes Delete deferred (see pendingRemark).
	remarks []pendingRemark
}

var _ driver.Tx = (*tx)(nil)

var errTxDone = errors.New("sqlitestore: transaction used after its Update returned")

// usable reports why the transaction cannot be used, if it cannot.
func (t *tx) usable() error {
	if t.done {
		return errTxDone
	}
	if t.failed != nil {
		return fmt.Errorf("sqlitestore: transaction aborted by a failed append: %w", t.failed)
	}
	return nil
}

func (t *tx) Context() core.SyncTx { return &TxContext{tx: t} }

func (t *tx) LastPosition() (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	return lastPosition(t.conn, t.s.q)
}

func (t *tx) Read(conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := t.usable(); err != nil {
		return driver.ReadResult{}, err
	}
	return t.s.read(t.conn, t.w, conds, opts)
}

func (t *tx) ReadPartition(partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := t.usable(); err != nil {
		return driver.ReadResult{}, err
	}
	return t.s.readPartition(t.conn, t.w, partition, types, opts)
}

func (t *tx) ReadAll(opts driver.ReadAllOptions) (driver.Page, error) {
	if err := t.usable(); err != nil {
		return driver.Page{}, err
	}
	return t.s.readAll(t.conn, t.w, opts)
}

// prepared is one message ready to write.
type prepared struct {
	typ       *codec.Type
	version   int // payload version (the type's, or an older one on promotion)
	payload   []byte
	metadata  []byte // nil: NULL
	scheduled bool
	keys      []codec.KeyPair
	// fresh marks a message that came without an id: prepare gave it a
	// new one (a version 7 UUID, random past its time), which no stored
	// message holds, so checkIDs need not look for it.
	fresh bool
}

// Append validates, stamps and encodes every message, checks the guard and
// checks that no id is stored yet, all before it writes anything, so an
// append failing for any of the documented reasons leaves no trace in the
// transaction. (No savepoint: one makes SQLite journal every page the
// append then changes, measured 30% more CPU.) A failure while writing
// (I/O, interruption) aborts the transaction.
func (t *tx) Append(msgs []core.Message, opts driver.AppendOptions) (driver.AppendResult, error) {
	if err := t.usable(); err != nil {
		return driver.AppendResult{}, err
	}
	if len(msgs) == 0 {
		return driver.AppendResult{}, nil
	}
	s := t.s
	if t.gs.stale(s) {
		// A type was registered since the transaction began: the groups
		// handling it must see this append (their eager offsets).
		gs, err := loadGroups(t.conn, s)
		if err != nil {
			return driver.AppendResult{}, err
		}
		t.gs, t.w.groups = gs, gs
	}
	now := s.now()
	stamped := make([]core.Message, len(msgs))
	preps := make([]prepared, len(msgs))
	seen := make(map[uuid.UUID]struct{}, len(msgs))
	keyBuf := make([]codec.KeyPair, 0, 2*len(msgs)) // shared by the messages' key lists
	for i, m := range msgs {
		m, p, err := s.prepare(m, now, keyBuf, t.gs)
		if err != nil {
			return driver.AppendResult{}, fmt.Errorf("sqlitestore: append message %d of %d: %w", i+1, len(msgs), err)
		}
		if _, dup := seen[m.ID]; dup {
			return driver.AppendResult{}, fmt.Errorf("sqlitestore: append message %d of %d: id %s appears twice in the batch: %w", i+1, len(msgs), m.ID, driver.ErrDuplicateID)
		}
		seen[m.ID] = struct{}{}
		keyBuf = p.keys[len(p.keys):]
		stamped[i], preps[i] = m, p
	}
	if g := opts.Guard; g != nil && len(g.Conditions) > 0 {
		if err := driver.CheckConditions(s.typed(), g.Conditions); err != nil {
			return driver.AppendResult{}, fmt.Errorf("sqlitestore: append: guard: %w", err)
		}
		rows, err := s.queryConditions(t.conn, t.w, g.Conditions, bound{lo: g.LastPosition, hi: maxPosition}, 0, false)
		if err != nil {
			return driver.AppendResult{}, fmt.Errorf("sqlitestore: append: guard check: %w", err)
		}
		if len(rows) > 0 {
			conflicts, err := s.decodeRows(rows)
			if err != nil {
				return driver.AppendResult{}, err
			}
			return driver.AppendResult{}, &core.ConflictError{Guard: *g, Conflicts: conflicts}
		}
	}

	if err := t.checkIDs(stamped, preps); err != nil {
		return driver.AppendResult{}, err
	}
	res := driver.AppendResult{Positions: make([]int64, len(msgs)), Messages: stamped}
	if err := t.write(stamped, preps, now, &res); err != nil {
		if !t.solo {
			// Rows of this append may be written: the transaction cannot
			// commit any more (see Store.Update).
			t.failed = err
		}
		return driver.AppendResult{}, err
	}
	return res, nil
}

// write inserts the prepared messages.
func (t *tx) write(msgs []core.Message, preps []prepared, now time.Time, res *driver.AppendResult) error {
	var nowText []byte
	for i := range msgs {
		m, p := &msgs[i], &preps[i]
		if p.scheduled {
			if !slices.Contains(t.scheduledTypes, m.Type) {
				t.scheduledTypes = append(t.scheduledTypes, m.Type)
			}
			if nowText == nil {
				nowText = appendTime(nil, now)
			}
			if err := t.insertScheduled(m, p, nowText); err != nil {
				return err
			}
			continue
		}
		pos, err := t.insertMessage(m, p, nil)
		if err != nil {
			return err
		}
		res.Positions[i] = pos
		res.Last = pos
		if !slices.Contains(t.types, m.Type) {
			t.types = append(t.types, m.Type)
		}
	}
	return nil
}

// checkIDs fails with driver.ErrDuplicateID, before anything is written,
// if a message's id is already stored. Within one table the unique index
// would catch it at the insert, which is enough when the append is its
// transaction's only work (the failure rolls everything back); an append
// sharing its transaction probes first. Across the log and the schedule
// the probe is always needed. The schedule is usually empty, so an append
// of its own usually pays one probe.
func (t *tx) checkIDs(msgs []core.Message, preps []prepared) error {
	var inLog, inSchedule []uuid.UUID
	anyScheduled := -1
	for i := range msgs {
		id := msgs[i].ID
		if preps[i].fresh {
			continue
		}
		if preps[i].scheduled {
			inLog = append(inLog, id)
			if !t.solo {
				inSchedule = append(inSchedule, id)
			}
			continue
		}
		if !t.solo {
			inLog = append(inLog, id)
		}
		if anyScheduled < 0 {
			n, err := queryInt(t.conn, t.s.q.anyScheduled)
			if err != nil {
				return fmt.Errorf("sqlitestore: append: %w", err)
			}
			anyScheduled = int(n)
		}
		if anyScheduled > 0 {
			inSchedule = append(inSchedule, id)
		}
	}
	if err := t.probeIDs(shapeLoggedIDs, inLog, "in the log"); err != nil {
		return err
	}
	return t.probeIDs(shapeScheduledIDs, inSchedule, "scheduled")
}

// idChunk is the most ids one probe statement checks.
const idChunk = 64

// probeIDs fails if any of ids is in the table of kind.
func (t *tx) probeIDs(kind shapeKind, ids []uuid.UUID, where string) error {
	var bufs [idChunk][36]byte
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), idChunk)]
		ids = ids[len(chunk):]
		sh := shape{kind: kind, types: padded(len(chunk))}
		stmt, err := t.conn.Prepare(t.s.q.get(sh))
		if err != nil {
			return err
		}
		for i := range sh.types {
			j := min(i, len(chunk)-1)
			encodeUUID(bufs[j][:], chunk[j])
			stmt.BindText(i+1, bytesText(bufs[j][:]))
		}
		has, err := stmt.Step()
		var found string
		if has {
			found = stmt.ColumnText(0)
		}
		if rerr := stmt.Reset(); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("sqlitestore: append: %w", err)
		}
		if has {
			return fmt.Errorf("sqlitestore: append: message id %s is already %s: %w", found, where, driver.ErrDuplicateID)
		}
	}
	return nil
}

// insertMessage inserts one message into the log and links it to its key
// pairs; created overrides the created_at text when not nil.
//
// Every statement inserts one row: a multi-row INSERT into a table with a
// unique or foreign key constraint makes SQLite keep a statement journal
// (to undo a half-done statement), which measured slower than the steps
// it saves.
func (t *tx) insertMessage(m *core.Message, p *prepared, created []byte) (int64, error) {
	stmt, err := t.conn.Prepare(t.s.q.insertMessage)
	if err != nil {
		return 0, err
	}
	var idBuf, causBuf, corrBuf [36]byte
	var tbuf [timeWidth]byte
	encodeUUID(idBuf[:], m.ID)
	encodeUUID(causBuf[:], m.CausationID)
	encodeUUID(corrBuf[:], m.CorrelationID)
	if created == nil {
		created = appendTime(tbuf[:0], m.CreatedAt)
	}
	stmt.BindText(1, bytesText(idBuf[:]))
	stmt.BindText(2, p.typ.Name)
	stmt.BindInt64(3, int64(p.version))
	stmt.BindText(4, bytesText(causBuf[:]))
	stmt.BindText(5, bytesText(corrBuf[:]))
	stmt.BindText(6, bytesText(p.payload))
	if p.metadata != nil {
		stmt.BindText(7, bytesText(p.metadata))
	} else {
		stmt.BindNull(7)
	}
	stmt.BindText(8, bytesText(created))
	_, err = stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, duplicateOr(err, m.ID, "append")
	}
	pos := t.conn.LastInsertRowID()
	t.kpIDs = t.kpIDs[:0]
	for _, k := range p.keys {
		id, err := t.link(pos, k)
		if err != nil {
			return 0, fmt.Errorf("sqlitestore: append: index %s under %s: %w", m.ID, k, err)
		}
		t.kpIDs = append(t.kpIDs, id)
	}
	if groups := t.gs.byType[p.typ.Name]; len(groups) > 0 {
		if err := t.eager(groups, pos, m, p.keys, t.kpIDs); err != nil {
			return 0, fmt.Errorf("sqlitestore: append: offsets of %s: %w", m.ID, err)
		}
	}
	return pos, nil
}

// link links the message at pos to key pair k, creating the key pair if
// it is new, and returns the key pair's id.
func (t *tx) link(pos int64, k codec.KeyPair) (int64, error) {
	for attempt := 0; ; attempt++ {
		id, err := t.keyPairForWrite(k)
		if err != nil {
			return 0, err
		}
		stmt, err := t.conn.Prepare(t.s.q.insertLink)
		if err != nil {
			return 0, err
		}
		stmt.BindInt64(1, pos)
		stmt.BindInt64(2, id)
		_, err = stmt.Step()
		if rerr := stmt.Reset(); err == nil {
			err = rerr
		}
		if err != nil && attempt == 0 && sqlite.ErrCode(err) == sqlite.ResultConstraintForeignKey {
			// A cached id went stale (the key pair was pruned): resolve again.
			t.w.forget(keyPair{k.Name, k.Value})
			continue
		}
		return id, err
	}
}

// keyPairForWrite returns the id of key pair k, inserting it if needed.
func (t *tx) keyPairForWrite(k codec.KeyPair) (int64, error) {
	kp := keyPair{k.Name, k.Value}
	if id, ok := t.w.lookup(kp); ok {
		return id, nil
	}
	stmt, err := t.conn.Prepare(t.s.q.insertKeyPair)
	if err != nil {
		return 0, err
	}
	stmt.BindText(1, k.Name)
	stmt.BindText(2, k.Value)
	_, err = stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	if t.conn.Changes() == 1 {
		id := t.conn.LastInsertRowID()
		t.w.remember(kp, id)
		return id, nil
	}
	id, ok, err := t.s.keyPairID(t.conn, t.w, k.Name, k.Value)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("key pair %s vanished", k)
	}
	return id, nil
}

// insertScheduled puts one future-dated message into the schedule.
func (t *tx) insertScheduled(m *core.Message, p *prepared, nowText []byte) error {
	stmt, err := t.conn.Prepare(t.s.q.insertScheduled)
	if err != nil {
		return err
	}
	var idBuf, causBuf, corrBuf [36]byte
	var tbuf [timeWidth]byte
	encodeUUID(idBuf[:], m.ID)
	encodeUUID(causBuf[:], m.CausationID)
	encodeUUID(corrBuf[:], m.CorrelationID)
	stmt.BindText(1, bytesText(idBuf[:]))
	stmt.BindText(2, p.typ.Name)
	stmt.BindInt64(3, int64(p.version))
	stmt.BindText(4, bytesText(causBuf[:]))
	stmt.BindText(5, bytesText(corrBuf[:]))
	stmt.BindText(6, bytesText(p.payload))
	if p.metadata != nil {
		stmt.BindText(7, bytesText(p.metadata))
	} else {
		stmt.BindNull(7)
	}
	stmt.BindText(8, bytesText(appendTime(tbuf[:0], m.CreatedAt)))
	stmt.BindText(9, bytesText(nowText))
	_, err = stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	if err != nil {
		return duplicateOr(err, m.ID, "schedule")
	}
	return nil
}

// duplicateOr maps a uniqueness failure on a message id (the unique
// indexes) to driver.ErrDuplicateID.
func duplicateOr(err error, id uuid.UUID, op string) error {
	switch sqlite.ErrCode(err) {
	case sqlite.ResultConstraintUnique, sqlite.ResultConstraintPrimaryKey:
		return fmt.Errorf("sqlitestore: %s: message id %s: %w (%v)", op, id, driver.ErrDuplicateID, err)
	}
	return fmt.Errorf("sqlitestore: %s message %s: %w", op, id, err)
}

// prepare validates, stamps and encodes one message, and extracts the key
// pairs it is indexed under (appended to keyBuf).
//
// A message holding an empty value for a partition key of a group that
// handles its type is refused (driver.CheckPartitionValues), scheduled or
// not.
func (s *Store) prepare(m core.Message, now time.Time, keyBuf []codec.KeyPair, gs *groupSet) (core.Message, prepared, error) {
	fresh := !m.Stamped()
	pm, err := driver.PrepareMessage(s.reg, m, now)
	if err != nil {
		return m, prepared{}, err
	}
	m, typ := pm.Message, pm.Type
	p := prepared{typ: typ, version: typ.Version, payload: pm.Payload, metadata: pm.Metadata, scheduled: pm.Scheduled, fresh: fresh}
	keys := keysOf(typ, &m, keyBuf, gs.basis)
	if err := driver.CheckPartitionValues(typ.Name, keys, gs.partitionKeys(typ.Name)); err != nil {
		return m, prepared{}, err
	}
	if !p.scheduled {
		p.keys = keys
	}
	return m, p, nil
}

// keysOf appends to dst the key pairs a message is indexed under, sorted:
// its payload's, and, for the handled types of an id-partitioned group (a
// delete-on-ack queue), core.IDKey with its id too, so that the queue
// claims it by id while reads and guards still see its payload. (Indexing
// queue types by id alone made a guard on their attributes guard nothing,
// and messages appended before the queue was registered match where later
// ones did not.)
func keysOf(typ *codec.Type, m *core.Message, dst []codec.KeyPair, basis map[string]indexBasis) []codec.KeyPair {
	start := len(dst)
	dst = typ.Keys(m.Payload, dst)
	if basis[typ.Name] != indexID {
		return dst
	}
	id := codec.KeyPair{Name: core.IDKey, Value: m.ID.String()}
	i, _ := slices.BinarySearchFunc(dst[start:], id, codec.KeyPair.Compare)
	return slices.Insert(dst, start+i, id)
}

// timeLayout is how times are stored: UTC, fixed width, microseconds, so
// that text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000Z"

const timeWidth = len(timeLayout)

func appendTime(dst []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(dst, timeLayout)
}

func formatTime(t time.Time) string { return string(appendTime(nil, t)) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeLayout, s) }

// encodeUUID writes the canonical 36-character form of id into dst.
func encodeUUID(dst []byte, id uuid.UUID) {
	const hex = "0123456789abcdef"
	j := 0
	for i, b := range id {
		switch i {
		case 4, 6, 8, 10:
			dst[j] = '-'
			j++
		}
		dst[j] = hex[b>>4]
		dst[j+1] = hex[b&0x0f]
		j += 2
	}
}

// bytesText views b as a string without copying, for binding: SQLite
// copies bound text before the call returns.
func bytesText(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
