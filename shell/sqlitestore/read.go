package sqlitestore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// row is a message row as read, before decoding: reads merge and cut rows
// and decode only the ones they return. The fixed-width columns (ids,
// time) are parsed as they are scanned, from the column's bytes: no
// string per column (a column that does not parse fails the decode).
type row struct {
	pos      int64
	id       uuid.UUID
	typ      string
	version  int
	caus     uuid.UUID
	corr     uuid.UUID
	payload  []byte
	metadata []byte // nil when NULL
	created  time.Time
	bad      *badColumn // the first column that did not parse
}

// badColumn is a message column that did not parse.
type badColumn struct {
	what, text string
	err        error
}

// scanner scans message rows (messageColumns) into rows, sharing one
// buffer for their payloads and metadata and the strings of their types.
type scanner struct {
	types []string // type names seen (or expected), reused by every row
	arena []byte
}

// scan reads the messageColumns of the current result row.
func (sc *scanner) scan(stmt *sqlite.Stmt) row {
	r := row{pos: stmt.ColumnInt64(0), version: stmt.ColumnInt(3)}
	r.typ = sc.typeName(stmt, 2)
	r.id = sc.uuid(stmt, 1, "id", false, &r)
	r.caus = sc.uuid(stmt, 4, "causation id", true, &r)
	r.corr = sc.uuid(stmt, 5, "correlation id", true, &r)
	r.created = sc.time(stmt, 8, &r)
	r.payload = sc.bytes(stmt, 6)
	if stmt.ColumnType(7) != sqlite.TypeNull {
		r.metadata = sc.bytes(stmt, 7)
	}
	return r
}

// typeName returns the text of column col, as one of the type names seen.
func (sc *scanner) typeName(stmt *sqlite.Stmt, col int) string {
	var buf [128]byte
	n := stmt.ColumnLen(col)
	if n > len(buf) {
		return stmt.ColumnText(col)
	}
	b := buf[:stmt.ColumnBytes(col, buf[:n])]
	for _, name := range sc.types {
		if name == string(b) {
			return name
		}
	}
	name := string(b)
	sc.types = append(sc.types, name)
	return name
}

// bytes copies column col into the arena.
func (sc *scanner) bytes(stmt *sqlite.Stmt, col int) []byte {
	n := stmt.ColumnLen(col)
	if cap(sc.arena)-len(sc.arena) < n {
		// A new block, twice the last (a few rows' payloads fit in the
		// first); the earlier rows keep theirs.
		sc.arena = make([]byte, 0, max(n, min(2*cap(sc.arena), 64<<10), 512))
	}
	start := len(sc.arena)
	sc.arena = sc.arena[:start+n]
	b := sc.arena[start : start+n : start+n]
	stmt.ColumnBytes(col, b)
	return b
}

// uuid parses column col, a message id in canonical form (anything else
// uuid.Parse accepts too); empty is the zero id when optional.
func (sc *scanner) uuid(stmt *sqlite.Stmt, col int, what string, optional bool, r *row) uuid.UUID {
	var buf [36]byte
	if stmt.ColumnLen(col) == len(buf) {
		stmt.ColumnBytes(col, buf[:])
		if id, ok := decodeUUID(&buf); ok {
			return id
		}
	}
	text := stmt.ColumnText(col)
	if text == "" && optional {
		return uuid.UUID{}
	}
	id, err := uuid.Parse(text)
	if err != nil && r.bad == nil {
		r.bad = &badColumn{what: what, text: text, err: err}
	}
	return id
}

// time parses column col, a time as the store writes it (timeLayout).
func (sc *scanner) time(stmt *sqlite.Stmt, col int, r *row) time.Time {
	var buf [timeWidth]byte
	if stmt.ColumnLen(col) == len(buf) {
		stmt.ColumnBytes(col, buf[:])
		if t, ok := decodeTime(&buf); ok {
			return t
		}
	}
	text := stmt.ColumnText(col)
	t, err := parseTime(text)
	if err != nil && r.bad == nil {
		r.bad = &badColumn{what: "created_at", text: text, err: err}
	}
	return t
}

// decodeUUID parses the canonical, lower- or upper-case, form of a UUID.
func decodeUUID(b *[36]byte) (id uuid.UUID, ok bool) {
	if b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return id, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, lo := unhex(b[i]), unhex(b[i+1])
		if hi > 15 || lo > 15 {
			return uuid.UUID{}, false
		}
		id[j] = hi<<4 | lo
		j++
		i += 2
	}
	return id, true
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// decodeTime parses a time in timeLayout (2006-01-02T15:04:05.000000Z);
// false when b is not one, for time.Parse to explain.
func decodeTime(b *[timeWidth]byte) (time.Time, bool) {
	num := func(from, to int) (int, bool) {
		n := 0
		for _, c := range b[from:to] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = 10*n + int(c-'0')
		}
		return n, true
	}
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[26] != 'Z' {
		return time.Time{}, false
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	d, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	us, ok7 := num(20, 26)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, us*1000, time.UTC)
	if t.Day() != d { // past the month's end
		return time.Time{}, false
	}
	return t, true
}

// decode rebuilds a message from its row, decoding the payload with the
// registry (upcasting old versions).
func (s *Store) decode(r *row) (core.PositionedMessage, error) {
	fail := func(what string, err error) (core.PositionedMessage, error) {
		return core.PositionedMessage{}, &driver.DecodeError{MessageType: r.typ, MessageID: r.id, Position: r.pos,
			Err: fmt.Errorf("sqlitestore: decode %s of message %s at position %d: %w", what, r.id, r.pos, err)}
	}
	if r.bad != nil {
		return core.PositionedMessage{}, &driver.DecodeError{MessageType: r.typ, MessageID: r.id, Position: r.pos,
			Err: fmt.Errorf("sqlitestore: decode %s %q of the message at position %d: %w", r.bad.what, r.bad.text, r.pos, r.bad.err)}
	}
	var payload any
	var err error
	if s.raw {
		payload = json.RawMessage(slices.Clone(r.payload))
	} else if payload, err = s.reg.Decode(r.typ, r.version, r.payload); err != nil {
		return fail("payload", err)
	}
	m := core.PositionedMessage{Position: r.pos}
	m.Type = r.typ
	m.Payload = payload
	m.ID, m.CausationID, m.CorrelationID, m.CreatedAt = r.id, r.caus, r.corr, r.created
	if r.metadata != nil {
		if err := json.Unmarshal(r.metadata, &m.Metadata); err != nil {
			return fail("metadata", err)
		}
	}
	return m, nil
}

func (s *Store) decodeRows(rows []row) ([]core.PositionedMessage, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]core.PositionedMessage, len(rows))
	for i := range rows {
		m, err := s.decode(&rows[i])
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// typed returns the registry conditions are checked against, or nil for
// a store reading payloads raw (Options.RawPayloads), whose registry need
// not know the stored types.
func (s *Store) typed() *codec.Registry {
	if s.raw {
		return nil
	}
	return s.reg
}

// queryInt runs a constant query returning one integer.
func queryInt(conn *sqlite.Conn, query string, args ...any) (int64, error) {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return 0, err
	}
	bindArgs(stmt, 1, args...)
	defer stmt.Reset()
	has, err := stmt.Step()
	if err != nil || !has {
		return 0, err
	}
	return stmt.ColumnInt64(0), nil
}

func bindArgs(stmt *sqlite.Stmt, from int, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			stmt.BindInt64(from+i, v)
		case int:
			stmt.BindInt64(from+i, int64(v))
		case string:
			stmt.BindText(from+i, v)
		case nil:
			stmt.BindNull(from + i)
		default:
			panic(fmt.Sprintf("sqlitestore: bind %T", a))
		}
	}
}

func lastPosition(conn *sqlite.Conn, q *queries) (int64, error) {
	return queryInt(conn, q.lastPosition)
}

// keyPairID resolves the id of a key pair, through the writer's cache when
// w is not nil. ok is false when the key pair does not exist.
func (s *Store) keyPairID(conn *sqlite.Conn, w *writer, name, value string) (id int64, ok bool, err error) {
	k := keyPair{name, value}
	if w != nil {
		if id, ok := w.lookup(k); ok {
			return id, true, nil
		}
	}
	stmt, err := conn.Prepare(s.q.selectKeyPair)
	if err != nil {
		return 0, false, err
	}
	stmt.BindText(1, name)
	stmt.BindText(2, value)
	has, err := stmt.Step()
	if err != nil {
		stmt.Reset()
		return 0, false, err
	}
	if has {
		id = stmt.ColumnInt64(0)
	}
	if err := stmt.Reset(); err != nil {
		return 0, false, err
	}
	if has && w != nil {
		// Journaled: the id may have been inserted by the open transaction.
		w.remember(k, id)
	}
	return id, has, nil
}

// bound is a position range: lo exclusive, hi inclusive.
type bound struct{ lo, hi int64 }

// conditionGroup is the conditions sharing one attribute set: one query.
type conditionGroup struct {
	attrs [][2]string // sorted by name
	types []string
}

// groupConditions groups conditions by their attribute sets; type-only
// conditions come back as typeOnly.
func groupConditions(conds []core.Condition) (typeOnly []string, groups []conditionGroup) {
	index := make(map[string]int)
	for _, c := range conds {
		if len(c.Attrs) == 0 {
			if !slices.Contains(typeOnly, c.Type) {
				typeOnly = append(typeOnly, c.Type)
			}
			continue
		}
		attrs := make([][2]string, 0, len(c.Attrs))
		for k, v := range c.Attrs {
			attrs = append(attrs, [2]string{k, v})
		}
		slices.SortFunc(attrs, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
		var key strings.Builder
		for _, a := range attrs {
			key.WriteString(a[0])
			key.WriteByte(0)
			key.WriteString(a[1])
			key.WriteByte(0)
		}
		i, ok := index[key.String()]
		if !ok {
			i = len(groups)
			index[key.String()] = i
			groups = append(groups, conditionGroup{attrs: attrs})
		}
		if !slices.Contains(groups[i].types, c.Type) {
			groups[i].types = append(groups[i].types, c.Type)
		}
	}
	return typeOnly, groups
}

// queryConditions returns the rows matching any of conds within b, in
// position order (descending if desc), at most limit (0: all).
func (s *Store) queryConditions(conn *sqlite.Conn, w *writer, conds []core.Condition, b bound, limit int, desc bool) ([]row, error) {
	typeOnly, groups := groupConditions(conds)
	var rows []row
	var err error
	queries := 0
	if len(typeOnly) > 0 {
		sh := shape{kind: shapeTypes, types: padded(len(typeOnly)), desc: desc}
		rows, err = s.queryShape(conn, sh, b, limit, nil, nil, typeOnly, rows)
		if err != nil {
			return nil, err
		}
		queries++
	}
	ids := make([]int64, 0, 4)
group:
	for _, g := range groups {
		ids = ids[:0]
		for _, a := range g.attrs {
			id, ok, err := s.keyPairID(conn, w, a[0], a[1])
			if err != nil {
				return nil, err
			}
			if !ok {
				continue group // nothing was ever indexed under this pair
			}
			ids = append(ids, id)
		}
		sh := shape{kind: shapeKeys, attrs: len(ids), types: padded(len(g.types)), desc: desc}
		rows, err = s.queryShape(conn, sh, b, limit, ids, nil, g.types, rows)
		if err != nil {
			return nil, err
		}
		queries++
	}
	if queries > 1 {
		rows = mergeRows(rows, desc)
	}
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, nil
}

// mergeRows sorts rows of several queries into one position order without
// duplicates.
func mergeRows(rows []row, desc bool) []row {
	slices.SortFunc(rows, func(a, b row) int {
		if desc {
			return cmp.Compare(b.pos, a.pos)
		}
		return cmp.Compare(a.pos, b.pos)
	})
	return slices.CompactFunc(rows, func(a, b row) bool { return a.pos == b.pos })
}

// queryShape runs a shape statement and appends its rows to dst. The
// types list is padded by repeating its last element.
func (s *Store) queryShape(conn *sqlite.Conn, sh shape, b bound, limit int, ids []int64, nms []string, types []string, dst []row) ([]row, error) {
	stmt, err := s.bindShape(conn, sh, b, limit, ids, nms, types)
	if err != nil {
		return dst, err
	}
	return appendRows(dst, stmt, types...)
}

// bindShape prepares a shape statement and binds its parameters.
func (s *Store) bindShape(conn *sqlite.Conn, sh shape, b bound, limit int, ids []int64, nms []string, types []string) (*sqlite.Stmt, error) {
	stmt, err := conn.Prepare(s.q.get(sh))
	if err != nil {
		return nil, err
	}
	stmt.BindInt64(1, b.lo)
	stmt.BindInt64(2, b.hi)
	if limit > 0 {
		stmt.BindInt64(3, int64(limit))
	} else {
		stmt.BindInt64(3, -1)
	}
	p := firstListParam
	for _, id := range ids {
		stmt.BindInt64(p, id)
		p++
	}
	for _, n := range nms {
		stmt.BindText(p, n)
		p++
	}
	for i := range sh.types {
		stmt.BindText(p, types[min(i, len(types)-1)])
		p++
	}
	return stmt, nil
}

// appendRows steps a bound statement of message rows to its end, appending
// them to dst, and resets it.
func appendRows(dst []row, stmt *sqlite.Stmt, types ...string) ([]row, error) {
	sc := scanner{types: types[:len(types):len(types)]}
	if dst == nil {
		dst = make([]row, 0, 4) // a partition's few rows in one or two allocations, not four
	}
	for {
		has, err := stmt.Step()
		if err != nil {
			stmt.Reset()
			return dst, err
		}
		if !has {
			break
		}
		dst = append(dst, sc.scan(stmt))
	}
	return dst, stmt.Reset()
}

// readBound returns the store's last position and the range a read with
// opts covers.
func readBound(conn *sqlite.Conn, q *queries, opts driver.ReadOptions) (last int64, b bound, err error) {
	last, err = lastPosition(conn, q)
	if err != nil {
		return 0, b, err
	}
	b = bound{lo: opts.After, hi: last}
	if opts.Upto > 0 && opts.Upto < last {
		b.hi = opts.Upto
	}
	return last, b, nil
}

// finish decodes rows into a ReadResult with the guard of driver.Tx.Read.
func (s *Store) finish(rows []row, conds []core.Condition, b bound, limit int) (driver.ReadResult, error) {
	msgs, err := s.decodeRows(rows)
	if err != nil {
		return driver.ReadResult{}, err
	}
	g := core.Guard{Conditions: conds, LastPosition: b.hi}
	if limit > 0 && len(msgs) == limit {
		g.LastPosition = msgs[len(msgs)-1].Position
	}
	return driver.ReadResult{Messages: msgs, Guard: g}, nil
}

// read implements Read on conn (a reader in a snapshot, or the writer in
// its transaction when w is set).
func (s *Store) read(conn *sqlite.Conn, w *writer, conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := driver.CheckConditions(s.typed(), conds); err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: read: %w", err)
	}
	if err := driver.CheckReadOptions(opts); err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	_, b, err := readBound(conn, s.q, opts)
	if err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: read: %w", err)
	}
	var rows []row
	if len(conds) > 0 && b.lo < b.hi {
		if rows, err = s.queryConditions(conn, w, conds, b, opts.Limit, false); err != nil {
			return driver.ReadResult{}, fmt.Errorf("sqlitestore: read: %w", err)
		}
	}
	return s.finish(rows, conds, b, opts.Limit)
}

// readPartition implements ReadPartition.
func (s *Store) readPartition(conn *sqlite.Conn, w *writer, partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if err := driver.CheckReadPartition(s.typed(), partition, types); err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	if err := driver.CheckReadOptions(opts); err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	typs := make([]*codec.Type, 0, len(types))
	var names []string
	for _, name := range types {
		t, err := s.reg.ByName(name)
		if err != nil {
			return driver.ReadResult{}, fmt.Errorf("sqlitestore: read partition: %w", err)
		}
		if !slices.Contains(names, name) {
			typs = append(typs, t)
			names = append(names, name)
		}
	}
	conds := core.ConditionsFor(partition, typs...)
	_, b, err := readBound(conn, s.q, opts)
	if err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: read partition: %w", err)
	}
	if id, ok := partition[core.IDKey]; ok {
		rows, err := s.queryByID(conn, id, names, b)
		if err != nil {
			return driver.ReadResult{}, fmt.Errorf("sqlitestore: read partition: %w", err)
		}
		return s.finish(rows, conds, b, opts.Limit)
	}
	buf := rowBuffers.Get().(*[]row)
	defer func() {
		if cap(*buf) > 1024 {
			return // a long partition's rows are not kept for the short ones
		}
		clear(*buf) // the pool keeps no payloads alive
		*buf = (*buf)[:0]
		rowBuffers.Put(buf)
	}()
	*buf, err = s.appendPartition((*buf)[:0], conn, w, partition, names, b, opts.Limit)
	if err != nil {
		return driver.ReadResult{}, fmt.Errorf("sqlitestore: read partition: %w", err)
	}
	return s.finish(*buf, conds, b, opts.Limit)
}

// queryByID reads the partition {core.IDKey: id} (an id-partitioned
// group's): the message with that id if its type is among types, whatever
// it was indexed under when appended (its type's group may have been
// registered after it, or in another process, or it may be of no queue's
// type at all).
func (s *Store) queryByID(conn *sqlite.Conn, id string, types []string, b bound) ([]row, error) {
	if len(types) == 0 || b.lo >= b.hi {
		return nil, nil
	}
	u, err := uuid.Parse(id) // checked by CheckReadPartition
	if err != nil {
		return nil, err
	}
	stmt, err := conn.Prepare(s.q.readByID)
	if err != nil {
		return nil, err
	}
	stmt.BindText(1, u.String()) // the canonical form ids are stored in
	stmt.BindInt64(2, b.lo)
	stmt.BindInt64(3, b.hi)
	rows, err := appendRows(nil, stmt)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rows, func(r row) bool { return !slices.Contains(types, r.typ) }), nil
}

// queryPartition runs the conditional-AND fetch.
func (s *Store) queryPartition(conn *sqlite.Conn, w *writer, partition core.Partition, types []string, b bound, limit int) ([]row, error) {
	return s.appendPartition(nil, conn, w, partition, types, b, limit)
}

// appendPartition runs the conditional-AND fetch, appending to dst.
func (s *Store) appendPartition(dst []row, conn *sqlite.Conn, w *writer, partition core.Partition, types []string, b bound, limit int) ([]row, error) {
	stmt, err := s.partitionStmt(conn, w, partition, types, b, limit)
	if err != nil || stmt == nil {
		return dst, err
	}
	return appendRows(dst, stmt, types...)
}

// rowBuffers recycles the row slices of partition reads (a Handle's, a
// worker's history), which finish decodes into messages and drops: the
// messages hold copies of what the rows hold, never the rows.
var rowBuffers = sync.Pool{New: func() any { return new([]row) }}

// partitionHas reports whether the conditional-AND fetch would return a
// message, reading none.
func (s *Store) partitionHas(conn *sqlite.Conn, w *writer, partition core.Partition, types []string, b bound) (bool, error) {
	stmt, err := s.partitionStmt(conn, w, partition, types, b, 1)
	if err != nil || stmt == nil {
		return false, err
	}
	has, err := stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	return has, err
}

// partitionStmt binds the statement of the conditional-AND fetch; nil when
// nothing can match.
func (s *Store) partitionStmt(conn *sqlite.Conn, w *writer, partition core.Partition, types []string, b bound, limit int) (*sqlite.Stmt, error) {
	if len(partition) == 0 || len(types) == 0 || b.lo >= b.hi {
		return nil, nil
	}
	var attrBuf [4]string
	var idBuf [4]int64
	attrs := attrBuf[:0]
	for k := range partition {
		attrs = append(attrs, k)
	}
	slices.Sort(attrs)
	ids := idBuf[:0]
	found := 0
	for _, a := range attrs {
		id, ok, err := s.keyPairID(conn, w, a, partition[a])
		if err != nil {
			return nil, err
		}
		if ok {
			found++
		} else {
			id = -1 // no message carries this value; its name still counts
		}
		ids = append(ids, id)
	}
	if found == 0 {
		return nil, nil
	}
	if len(attrs) == 1 {
		// One attribute: every message linked to the pair belongs.
		sh := shape{kind: shapeKeys, attrs: 1, types: padded(len(types))}
		return s.bindShape(conn, sh, b, limit, ids, nil, types)
	}
	sh := shape{kind: shapePartition, attrs: len(attrs), types: padded(len(types))}
	return s.bindShape(conn, sh, b, limit, ids, attrs, types)
}

// readAll implements ReadAll.
func (s *Store) readAll(conn *sqlite.Conn, w *writer, opts driver.ReadAllOptions) (driver.Page, error) {
	if err := driver.CheckReadAll(s.typed(), opts); err != nil {
		return driver.Page{}, fmt.Errorf("sqlitestore: %w", err)
	}
	last, err := lastPosition(conn, s.q)
	if err != nil {
		return driver.Page{}, fmt.Errorf("sqlitestore: read all: %w", err)
	}
	page := driver.Page{LastPosition: last}
	limit := opts.Limit
	if limit <= 0 {
		limit = driver.DefaultPageSize
	}
	desc := opts.Order == driver.Descending
	from, ok := opts.Cursor()
	b := bound{lo: max(from, 1) - 1, hi: last}
	if desc {
		b.lo = 0
		if from > 0 && from < last {
			b.hi = from
		}
	}
	if !ok {
		return page, nil // nothing comes before position 1
	}
	var rows []row
	if len(opts.Conditions) > 0 {
		rows, err = s.queryConditions(conn, w, opts.Conditions, b, limit, desc)
	} else {
		rows, err = s.scanAll(conn, b, limit, desc)
	}
	if err != nil {
		return driver.Page{}, fmt.Errorf("sqlitestore: read all: %w", err)
	}
	if page.Messages, err = s.decodeRows(rows); err != nil {
		return driver.Page{}, err
	}
	return page, nil
}

func (s *Store) scanAll(conn *sqlite.Conn, b bound, limit int, desc bool) ([]row, error) {
	query := s.q.readAllAsc
	if desc {
		query = s.q.readAllDesc
	}
	stmt, err := conn.Prepare(query)
	if err != nil {
		return nil, err
	}
	stmt.BindInt64(1, b.lo+1)
	stmt.BindInt64(2, b.hi)
	stmt.BindInt64(3, int64(limit))
	return appendRows(nil, stmt)
}

const maxPosition = math.MaxInt64
