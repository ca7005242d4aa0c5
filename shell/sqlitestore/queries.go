package sqlitestore

import (
	"fmt"
	"strings"
	"sync"
)

// queries holds the SQL text of one store. Every statement is built once
// from the table names (the prefix is an identifier, never a value) and
// then reused verbatim, so zombiezen's per-connection statement cache
// (keyed by SQL text) always hits. Statements over variable-length lists
// come in a fixed set of shapes: type lists are padded to the next power of
// two by repeating their last element, and attribute counts are small; the
// shapes are built on first use and memoised.
//
// Parameters are written "+?N" wherever SQLite's planner could look at the
// bound value: a LIMIT (sqlite3ExprIsInteger) or a comparison with an
// indexed column once sqlite_stat4 has samples (ANALYZE, PRAGMA optimize;
// this SQLite is built with STAT4). A bare "?N" there marks the statement
// to be recompiled on every new binding, which measured 15% of a guarded
// append; the unary plus changes neither the value nor its affinity, and
// the column keeps using its index.
type queries struct {
	n names
	g *groupQueries

	insertMessage   string
	insertKeyPair   string
	selectKeyPair   string
	insertLink      string
	insertScheduled string
	lastPosition    string
	anyScheduled    string
	logEmpty        string
	countScheduled  string
	nextScheduled   string
	selectDue       string
	listScheduled   string
	deleteScheduled string
	unscheduleID    string
	readAllAsc      string
	readAllDesc     string
	readByID        string

	mu     sync.Mutex
	shapes map[shape]string
}

// shape identifies one variable statement.
type shape struct {
	kind  shapeKind
	attrs int  // key pairs (AND for conditions, conditional AND for partitions)
	types int  // padded number of types
	desc  bool // descending order
}

type shapeKind uint8

const (
	shapeTypes        shapeKind = iota // type-only condition group
	shapeKeys                          // condition group with attributes (AND)
	shapePartition                     // conditional-AND partition, 2+ attributes
	shapeLoggedIDs                     // which of some message ids are in the log
	shapeScheduledIDs                  // which of some message ids are scheduled
	shapeWake                          // the first message waking a partition (full AND)
	shapeDiscover                      // partition key pairs of messages of some types
	shapeTyped                         // positions and ids of messages of some types
)

// messageColumns are the columns every message read selects, in the order
// scanRow reads them.
const messageColumns = `m.position, m.message_id, m.message_type, m.payload_version, m.causation_id, m.correlation_id, m.payload, m.metadata, m.created_at`

func newQueries(n names) *queries {
	return &queries{
		n: n,
		g: newGroupQueries(n),
		insertMessage: fmt.Sprintf(`INSERT OR FAIL INTO %s (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`, n.messages),
		insertKeyPair:   fmt.Sprintf(`INSERT INTO %s (name, value) VALUES (?1, ?2) ON CONFLICT (name, value) DO NOTHING`, n.keyPairs),
		selectKeyPair:   fmt.Sprintf(`SELECT id FROM %s WHERE name = +?1 AND value = +?2`, n.keyPairs),
		insertLink:      fmt.Sprintf(`INSERT INTO %s (message_position, key_pair_id) VALUES (?1, ?2)`, n.messageKeyPairs),
		lastPosition:    fmt.Sprintf(`SELECT coalesce(max(position), 0) FROM %s`, n.messages),
		countScheduled:  fmt.Sprintf(`SELECT count(*) FROM %s`, n.scheduled),
		anyScheduled:    fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s)`, n.scheduled),
		logEmpty:        fmt.Sprintf(`SELECT NOT EXISTS (SELECT 1 FROM %s)`, n.messages),
		nextScheduled:   fmt.Sprintf(`SELECT min(available_at) FROM %s`, n.scheduled),
		deleteScheduled: fmt.Sprintf(`DELETE FROM %s WHERE id = ?1`, n.scheduled),
		unscheduleID:    fmt.Sprintf(`DELETE FROM %s WHERE message_id = ?1`, n.scheduled),
		insertScheduled: fmt.Sprintf(`INSERT INTO %s (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, available_at, scheduled_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`, n.scheduled),
		// Due rows come from the available_at index (then sorted by id):
		// scanning by id to skip the sort reads every row not yet due.
		selectDue: fmt.Sprintf(`SELECT id, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, available_at
FROM %s INDEXED BY idx_%s_scheduled_messages_available WHERE available_at <= +?1 AND id > +?3 ORDER BY id LIMIT +?2`, n.scheduled, n.prefix),
		listScheduled: fmt.Sprintf(`SELECT id, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, available_at
FROM %s INDEXED BY idx_%s_scheduled_messages_available ORDER BY available_at, id LIMIT +?1`, n.scheduled, n.prefix),
		readAllAsc: fmt.Sprintf(`SELECT %s FROM %s m WHERE m.position >= +?1 AND m.position <= +?2 ORDER BY m.position LIMIT +?3`,
			messageColumns, n.messages),
		readAllDesc: fmt.Sprintf(`SELECT %s FROM %s m WHERE m.position >= +?1 AND m.position <= +?2 ORDER BY m.position DESC LIMIT +?3`,
			messageColumns, n.messages),
		// readByID reads one message by id from the unique message_id
		// index, within position bounds: ?1 message id, ?2 exclusive
		// lower bound, ?3 inclusive upper bound.
		readByID: fmt.Sprintf(`SELECT %s FROM %s m WHERE m.message_id = ?1 AND m.position > ?2 AND m.position <= ?3`,
			messageColumns, n.messages),
		shapes: make(map[shape]string),
	}
}

// padded returns the number of slots a list of n values is bound into: the
// next power of two.
func padded(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// placeholders returns "?from, ?from+1, ..." for n parameters.
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "+?%d", from+i)
	}
	return b.String()
}

// Parameters common to the shapes: ?1 exclusive lower position bound, ?2
// inclusive upper bound, ?3 limit (-1: none); then the shape's lists.
const firstListParam = 4

// get returns the SQL text of a shape, building it on first use.
func (q *queries) get(sh shape) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if sql, ok := q.shapes[sh]; ok {
		return sql
	}
	var sql string
	switch sh.kind {
	case shapeTypes:
		sql = q.buildTypes(sh)
	case shapeKeys:
		sql = q.buildKeys(sh)
	case shapePartition:
		sql = q.buildPartition(sh)
	case shapeLoggedIDs:
		sql = fmt.Sprintf(`SELECT message_id FROM %s WHERE message_id IN (%s) LIMIT 1`, q.n.messages, placeholders(1, sh.types))
	case shapeScheduledIDs:
		sql = fmt.Sprintf(`SELECT message_id FROM %s WHERE message_id IN (%s) LIMIT 1`, q.n.scheduled, placeholders(1, sh.types))
	case shapeWake:
		sql = q.buildWake(sh)
	case shapeDiscover:
		sql = q.buildDiscover(sh)
	case shapeTyped:
		sql = q.buildTyped(sh)
	}
	q.shapes[sh] = sql
	return sql
}

func order(desc bool) string {
	if desc {
		return "DESC"
	}
	return "ASC"
}

// buildTypes: messages of any of the types. Params: ?1 lo, ?2 hi, ?3
// limit, ?4.. types.
func (q *queries) buildTypes(sh shape) string {
	return fmt.Sprintf(`SELECT %s FROM %s m
WHERE m.message_type IN (%s) AND m.position > +?1 AND m.position <= +?2
ORDER BY m.position %s LIMIT +?3`,
		messageColumns, q.n.messages, placeholders(firstListParam, sh.types), order(sh.desc))
}

// buildKeys: messages of any of the types linked to every one of the key
// pairs (AND). The first key pair drives the read through the (key pair,
// position) index in position order, so a LIMIT stops the scan early; the
// others are probed on the (position, key pair) primary key. CROSS JOIN
// pins that join order. Params: ?1 lo, ?2 hi, ?3 limit, ?4.. key pair ids
// (attrs), then types.
func (q *queries) buildKeys(sh shape) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT %s FROM %s l1", messageColumns, q.n.messageKeyPairs)
	for i := 2; i <= sh.attrs; i++ {
		fmt.Fprintf(&b, "\nCROSS JOIN %[1]s l%[2]d ON l%[2]d.message_position = l1.message_position AND l%[2]d.key_pair_id = +?%[3]d",
			q.n.messageKeyPairs, i, firstListParam+i-1)
	}
	fmt.Fprintf(&b, "\nCROSS JOIN %s m ON m.position = l1.message_position", q.n.messages)
	fmt.Fprintf(&b, "\nWHERE l1.key_pair_id = +?%d AND l1.message_position > +?1 AND l1.message_position <= +?2", firstListParam)
	fmt.Fprintf(&b, "\nAND m.message_type IN (%s)", placeholders(firstListParam+sh.attrs, sh.types))
	fmt.Fprintf(&b, "\nORDER BY l1.message_position %s LIMIT +?3", order(sh.desc))
	return b.String()
}

// buildPartition: the conditional-AND fetch (see Conditional AND in
// shell/storetest's package doc) for a
// partition of 2+ attributes. A candidate is a message of one of the types
// linked to at least one partition key pair; it is kept when the number of
// partition key pairs it is linked to equals the number of distinct
// partition attribute names it carries any key pair for (so it matches on
// every partition attribute it has, and ignores those it lacks; an
// attribute with several values matches when one of them does). A missing
// key pair is bound as id -1: nothing links to it, but its name still
// counts. Params: ?1 lo, ?2 hi, ?3 limit, ?4.. ids (attrs), names (attrs),
// types.
func (q *queries) buildPartition(sh shape) string {
	ids := placeholders(firstListParam, sh.attrs)
	nms := placeholders(firstListParam+sh.attrs, sh.attrs)
	typs := placeholders(firstListParam+2*sh.attrs, sh.types)
	return fmt.Sprintf(`SELECT %[1]s FROM %[2]s m
WHERE m.position IN (
	SELECT l.message_position FROM %[3]s l
	WHERE l.key_pair_id IN (%[5]s) AND l.message_position > +?1 AND l.message_position <= +?2)
AND m.message_type IN (%[7]s)
AND (SELECT count(DISTINCT k.name) FROM %[3]s x JOIN %[4]s k ON k.id = x.key_pair_id
     WHERE x.message_position = m.position AND k.name IN (%[6]s))
  = (SELECT count(*) FROM %[3]s y WHERE y.message_position = m.position AND y.key_pair_id IN (%[5]s))
ORDER BY m.position %[8]s LIMIT +?3`,
		messageColumns, q.n.messages, q.n.messageKeyPairs, q.n.keyPairs, ids, nms, typs, order(sh.desc))
}
