package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// queries holds the store's constant SQL, with the table names spliced in.
type queries struct {
	readHead, writeHead, headPosition string
	fillHoles                         string
	lastPosition, countScheduled      string
	advanceTo                         string
	insertMessage, insertScheduled    string
	probeIDs                          string
	correlation                       string
	dueScheduled, deleteScheduled     string
	nextScheduled                     string
	g                                 groupQueries
	snap                              snapshotSQL
	a                                 appendQueries
}

// messageColumns are the columns decodeRow reads, in its order.
const messageColumns = `position, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at`

func newQueries(n names) queries {
	q := queries{
		// fillHoles gives a tombstone to every position between the read
		// horizon and the newest row: run under the store's exclusive
		// lock, when no append is in flight, so that every position no
		// row holds is one that no append will write (a rolled-back
		// append's, whose fill has not come yet). Without it the horizon
		// would stop below them, and the exclusive transaction read
		// (and decide) without the messages committed past them.
		fillHoles: fmt.Sprintf(`INSERT INTO %[1]s (position, message_id, message_type, payload, created_at)
SELECT p, gen_random_uuid(), '', 'null', now() FROM generate_series(%[2]s_horizon() + 1, (SELECT max(position) FROM %[1]s)) p
ON CONFLICT DO NOTHING`, n.messages, n.prefix),
		readHead:       fmt.Sprintf(`SELECT %s_last(), config_version FROM %s WHERE id = 1`, n.prefix, n.head),
		advanceTo:      fmt.Sprintf(`SELECT horizon, beyond, coalesce(types, '{}') FROM %s_advance(9223372036854775807, $1)`, n.prefix),
		writeHead:      fmt.Sprintf(`UPDATE %s SET last_position = $1 WHERE id = 1`, n.head),
		headPosition:   fmt.Sprintf(`SELECT last_position FROM %s WHERE id = 1`, n.head),
		lastPosition:   fmt.Sprintf(`SELECT %s_last()`, n.prefix),
		countScheduled: fmt.Sprintf(`SELECT count(*) FROM %s`, n.scheduled),
		insertMessage: fmt.Sprintf(`INSERT INTO %s (position, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
VALUES ($1, $2, $3, $4, $5, $6, $7::json, $8::json, $9, $10, $11)`, n.messages),
		insertScheduled: fmt.Sprintf(`INSERT INTO %s (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, available_at, scheduled_at)
VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, $8, $9)`, n.scheduled),
		probeIDs: fmt.Sprintf(`SELECT message_id, 'in the log' FROM %s WHERE message_id = ANY($1::uuid[])
UNION ALL SELECT message_id, 'scheduled' FROM %s WHERE message_id = ANY($1::uuid[]) LIMIT 1`, n.messages, n.scheduled),
		correlation: fmt.Sprintf(`SELECT %s FROM %s WHERE correlation_id = (SELECT correlation_id FROM %s WHERE message_id = $1) ORDER BY position`,
			messageColumns, n.messages, n.messages),
		dueScheduled: fmt.Sprintf(`SELECT id, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, available_at
FROM %s WHERE available_at <= $1 AND id > $2 ORDER BY id LIMIT %d`, n.scheduled, promotionBatch),
		deleteScheduled: fmt.Sprintf(`DELETE FROM %s WHERE id = ANY($1::bigint[])`, n.scheduled),
		nextScheduled:   fmt.Sprintf(`SELECT min(available_at) FROM %s`, n.scheduled),
		g:               newGroupQueries(n),
		snap:            snapshotQueriesFor(n),
	}
	q.a = newAppendQueries(n, q)
	return q
}

// sqlArgs builds a parameter list alongside SQL text.
type sqlArgs []any

// add appends v and returns its placeholder.
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// typeFilter is the message type as a predicate combined with a more
// selective one (key pairs, a message id) compares it: an expression no
// index serves, so that the planner finds the messages by their key pairs
// (or the id) and checks the type on the rows, instead of intersecting
// with the type index's every message of that type.
const typeFilter = "(message_type || '')"

// positionFilter is the position as typeFilter is the type, for reads
// whose messages the key pairs (or the id) find (a partition, a claim's
// fetch, conditions that all name attributes): so that the planner,
// which cannot tell how few messages a key pair has (prepared statements
// get generic plans), does not walk the primary key after the cursor
// testing every message instead of fetching the positions the table of
// key pairs gives (keyRange).
const positionFilter = "(position + 0)"

// positionFor is positionFilter when every condition names attributes
// (the table of key pairs finds the messages), else the plain position,
// whose range the type index serves.
func positionFor(conds []core.Condition) string {
	for _, c := range conds {
		if len(c.Attrs) == 0 {
			return "position"
		}
	}
	return positionFilter
}

// keyRange is a lookup of messages by key pairs through the table of key
// pairs (<p>_message_keys, one row per pair and message, by key and
// position): the positions after after and, when upto is set, at or below
// upto (SQL expressions). Its btree walks only the positions after the
// one asked for, so that a claim, a read after a position or a guard's
// check cost what follows the position, not the partition's history.
//
// Each key pair is looked up on its own (a subquery per pair that the
// planner may not merge into a join: OFFSET 0), so that the planner
// weighs one probe of the primary key against a scan of the whole table
// for each pair, and always chooses the probe. Asked for the pairs at
// once (key = ANY(keys)), it weighed ten probes (it assumes an array of
// ten) against one scan, and above 16 pages it chose the scan about as
// often as not, by a few cost units either way: a generic plan, which
// the sessions then kept. BenchmarkPostgresEndToEnd's acknowledgements
// and claims so scanned the table once for each offset they moved, 20-35
// ms a statement in the run's first seconds (auto_explain), while the
// workers fell behind. Looked up pair by pair, the lookups cost the same
// (pg_stat_statements over BenchmarkPostgresHandle: 57-64 µs a partition
// read either way).
type keyRange struct {
	table, after, upto string
}

// positions is the statement of the positions of the messages carrying
// the key pairs keys (an SQL text[] expression of distinct pairs) in the
// range: all n of them when n > 1 (the pairs of one condition), else any
// of them (a partition under conditional AND, n 0 or 1).
func (r keyRange) positions(keys string, n int) string {
	all := ""
	if n > 1 {
		all = strconv.Itoa(n)
	}
	return r.carrying(keys, all)
}

// carrying is positions with the number of pairs a message must carry
// given as an SQL expression (all; every pair of keys, as the guards
// checked together pass it), or "" for any of them.
func (r keyRange) carrying(keys, all string) string {
	sql := fmt.Sprintf(`SELECT mk.position FROM unnest(%s) AS kp(key) CROSS JOIN LATERAL (SELECT position FROM %s WHERE key = kp.key AND position > %s`, keys, r.table, r.after)
	if r.upto != "" {
		sql += " AND position <= " + r.upto
	}
	sql += " OFFSET 0) mk"
	if all != "" {
		sql += " GROUP BY mk.position HAVING count(*) = " + all
	}
	return sql
}

// in is the predicate that a message's position is among r.positions: a
// lookup of the primary key by the array of those positions, which the
// statement computes once before it reads the log.
func (r keyRange) in(keys string, n int) string {
	return "position = ANY(ARRAY(" + r.positions(keys, n) + "))"
}

// condSQL renders conditions (OR across, AND within) as a predicate on
// the messages table: the messages of a condition that names attributes
// are those the table of key pairs gives in r's range (see keyRange),
// carrying every pair (nothing to check on the row).
func condSQL(conds []core.Condition, args *sqlArgs, r keyRange) string {
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		if len(c.Attrs) == 0 {
			parts = append(parts, "message_type = "+args.add(c.Type))
			continue
		}
		keys := make([]string, 0, len(c.Attrs))
		for name, value := range c.Attrs {
			keys = append(keys, keyString(name, value))
		}
		slices.Sort(keys)
		match := r.in(args.add(keys)+"::text[]", len(keys))
		parts = append(parts, "("+typeFilter+" = "+args.add(c.Type)+" AND "+match+")")
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// partitionSQL renders membership of a partition under conditional AND
// (core.InPartition) for messages of the given types: the message carries
// one of the partition's key pairs (found through the table of key pairs
// in r's range), and no other value for an attribute of the partition.
func partitionSQL(partition core.Partition, types []string, args *sqlArgs, r keyRange) string {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range partition {
			if !yield(k) {
				return
			}
		}
	})
	if len(names) == 1 && names[0] == core.IDKey {
		if id, err := uuid.Parse(partition[core.IDKey]); err == nil {
			// A queue's partition is one message, found by its id
			// whatever it was indexed under when appended.
			return typeFilter + " = ANY(" + args.add(types) + "::text[]) AND message_id = " + args.add(id)
		}
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = keyString(n, partition[n])
	}
	var b strings.Builder
	b.WriteString(typeFilter + " = ANY(" + args.add(types) + "::text[]) AND " + r.in(args.add(keys)+"::text[]", 0))
	if len(names) > 1 {
		for i, n := range names {
			b.WriteString(" AND (keys @> " + args.add([]string{keys[i]}) + "::text[] OR NOT key_names @> " + args.add([]string{n}) + "::text[])")
		}
	}
	return b.String()
}

// withLast wraps a query of messages so that every row also carries the
// read horizon (see the package doc, "Ordering and locking"), read in the
// same statement (one snapshot), and an empty result still gives one row
// (of NULL messages). inner bounds its messages with visible(), which
// refers to the horizon as h.last. The horizon is MATERIALIZED: computed
// once per statement (inlined, PostgreSQL evaluated it again for every
// row the read's index found, a dozen index probes each).
func (s *Store) withLast(inner, order string) string {
	return fmt.Sprintf(`WITH h AS MATERIALIZED (SELECT %s AS last)
SELECT h.last, m.* FROM h LEFT JOIN LATERAL (%s) m ON true ORDER BY m.position %s`, s.horizonExpr(), inner, order)
}

// horizonExpr is the read horizon as a statement sees it; on a store
// broken on purpose (BreakPositionOrder, tests only) the newest position
// committed, as a store without the horizon would read.
//
// It is the newest message at or below the horizon: a tombstone (see
// fill) is no message, so the newest position a reader is told of, and a
// guard's, is always a message's (or 0).
func (s *Store) horizonExpr() string {
	if s.unorderedPositions {
		return fmt.Sprintf(`coalesce((SELECT position FROM %s WHERE message_type <> '' ORDER BY position DESC LIMIT 1), 0)`, s.names.messages)
	}
	return s.names.prefix + "_last()"
}

// visible bounds a read of a query built by withLast to the horizon,
// and the transaction's own messages (own, uncommitted, may lie beyond
// it when another append's position is still in flight below them).
func visible(pos string, own []int64, args *sqlArgs) string {
	if len(own) == 0 {
		return pos + " <= h.last"
	}
	return "(" + pos + " <= h.last OR position = ANY(" + args.add(own) + "::bigint[]))"
}

// queryLast runs a query built by withLast: the messages and the newest
// position.
func (s *Store) queryLast(ctx context.Context, q querier, sql string, args []any) ([]core.PositionedMessage, int64, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, err
	}
	return s.scanLast(rows)
}

// scanLast reads the rows of a statement built by withLast (the horizon's
// newest message, and the messages) and closes them.
func (s *Store) scanLast(rows pgx.Rows) ([]core.PositionedMessage, int64, error) {
	defer rows.Close()
	var out []core.PositionedMessage
	var last int64
	for rows.Next() {
		var r msgRow
		var pos *int64
		if err := rows.Scan(&last, &pos, &r.id, &r.typ, &r.version, &r.causation, &r.correlation, &r.payload, &r.metadata, &r.created); err != nil {
			return nil, 0, err
		}
		if pos == nil {
			continue
		}
		r.position = *pos
		m, err := s.decode(&r)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, m)
	}
	return out, last, rows.Err()
}

// msgRow is one message row as scanned: into pgtype values, which take
// a NULL (an outer join's missing message) without a pointer to allocate,
// and a uuid from its 16 bytes, not through its text.
type msgRow struct {
	position    int64
	id          pgtype.UUID
	typ         pgtype.Text
	version     pgtype.Int4
	causation   pgtype.UUID
	correlation pgtype.UUID
	payload     []byte
	metadata    []byte
	created     pgtype.Timestamptz
}

func (r *msgRow) dest() []any {
	return []any{&r.position, &r.id, &r.typ, &r.version, &r.causation, &r.correlation, &r.payload, &r.metadata, &r.created}
}

// decode rebuilds a message from its row.
func (s *Store) decode(r *msgRow) (core.PositionedMessage, error) {
	var payload any
	var err error
	if s.raw {
		payload = json.RawMessage(slices.Clone(r.payload))
	} else if payload, err = s.reg.Decode(r.typ.String, int(r.version.Int32), r.payload); err != nil {
		return core.PositionedMessage{}, &driver.DecodeError{MessageType: r.typ.String, MessageID: r.id.Bytes, Position: r.position,
			Err: fmt.Errorf("pgstore: decode message %s at position %d: %w", uuid.UUID(r.id.Bytes), r.position, err)}
	}
	var md map[string]any
	if r.metadata != nil {
		if err := json.Unmarshal(r.metadata, &md); err != nil {
			return core.PositionedMessage{}, &driver.DecodeError{MessageType: r.typ.String, MessageID: r.id.Bytes, Position: r.position,
				Err: fmt.Errorf("pgstore: decode metadata of message %s: %w", uuid.UUID(r.id.Bytes), err)}
		}
	}
	m := core.Message{ID: r.id.Bytes, Type: r.typ.String, Payload: payload, Metadata: md, CreatedAt: r.created.Time.UTC(),
		CausationID: r.causation.Bytes, CorrelationID: r.correlation.Bytes} // zero when NULL
	return core.PositionedMessage{Message: m, Position: r.position}, nil
}

// queryMessages runs a query of messageColumns.
func (s *Store) queryMessages(ctx context.Context, q querier, sql string, args ...any) ([]core.PositionedMessage, error) {
	return s.scanMessages(q.Query(ctx, sql, args...))
}

// scanMessages reads rows of messageColumns.
func (s *Store) scanMessages(rows pgx.Rows, err error) ([]core.PositionedMessage, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.PositionedMessage
	for rows.Next() {
		var r msgRow
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, err
		}
		m, err := s.decode(&r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func uptoArg(upto int64) int64 {
	if upto <= 0 {
		return math.MaxInt64
	}
	return upto
}

// guardFor is the guard a read earns (see driver.Tx.Read).
func guardFor(conds []core.Condition, opts driver.ReadOptions, msgs []core.PositionedMessage, last int64) core.Guard {
	pos := last
	if opts.Upto > 0 && opts.Upto < last {
		pos = opts.Upto
	}
	if opts.Limit > 0 && len(msgs) == opts.Limit {
		pos = msgs[len(msgs)-1].Position
	}
	return core.Guard{Conditions: conds, LastPosition: pos}
}

// typed is the registry conditions are checked against: none for a store
// of raw payloads, which knows no types.
func (s *Store) typed() *codec.Registry {
	if s.raw {
		return nil
	}
	return s.reg
}

func (s *Store) read(ctx context.Context, q querier, conds []core.Condition, opts driver.ReadOptions, own []int64) (driver.ReadResult, error) {
	if err := driver.CheckConditions(s.typed(), conds); err != nil {
		return driver.ReadResult{}, refused(fmt.Errorf("pgstore: read: %w", err))
	}
	if err := driver.CheckReadOptions(opts); err != nil {
		return driver.ReadResult{}, refused(fmt.Errorf("pgstore: %w", err))
	}
	if len(conds) == 0 {
		var last int64
		if err := q.QueryRow(ctx, "SELECT "+s.horizonExpr()).Scan(&last); err != nil {
			return driver.ReadResult{}, s.wrap(ctx, "read", err)
		}
		return driver.ReadResult{Guard: guardFor(conds, opts, nil, last)}, nil
	}
	var args sqlArgs
	pos := positionFor(conds)
	after, upto := args.add(opts.After), args.add(uptoArg(opts.Upto))
	inner := fmt.Sprintf(`SELECT %[1]s FROM %[2]s WHERE %[3]s > %[4]s AND %[3]s <= %[5]s AND %[8]s AND %[6]s ORDER BY %[3]s LIMIT %[7]s`,
		messageColumns, s.names.messages, pos, after, upto, condSQL(conds, &args, keyRange{table: s.names.keys, after: after, upto: upto}), limitSQL(opts.Limit), visible(pos, own, &args))
	msgs, last, err := s.queryLast(ctx, q, s.withLast(inner, ""), args)
	if err != nil {
		return driver.ReadResult{}, s.wrap(ctx, "read", err)
	}
	return driver.ReadResult{Messages: msgs, Guard: guardFor(conds, opts, msgs, last)}, nil
}

// handledTypes resolves type names with the registry.
func (s *Store) handledTypes(names []string) ([]*codec.Type, error) {
	out := make([]*codec.Type, 0, len(names))
	for _, name := range names {
		t, err := s.reg.ByName(name)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (s *Store) readPartition(ctx context.Context, q querier, partition core.Partition, types []string, opts driver.ReadOptions, own []int64) (driver.ReadResult, error) {
	sql, args, conds, one, err := s.partitionQuery(partition, types, opts, own)
	if err != nil {
		return driver.ReadResult{}, err
	}
	if !one {
		res, err := s.read(ctx, q, nil, opts, own)
		res.Guard.Conditions = conds
		return res, err
	}
	msgs, last, err := s.queryLast(ctx, q, sql, args)
	if err != nil {
		return driver.ReadResult{}, s.wrap(ctx, "read partition", err)
	}
	return driver.ReadResult{Messages: msgs, Guard: guardFor(conds, opts, msgs, last)}, nil
}

// partitionQuery checks a partition read's arguments and returns its
// statement (built by withLast) and its guard's conditions; one is false
// for a read of every message (an empty partition or no types), which
// is Read's.
func (s *Store) partitionQuery(partition core.Partition, types []string, opts driver.ReadOptions, own []int64) (sql string, args sqlArgs, conds []core.Condition, one bool, err error) {
	if err := driver.CheckReadPartition(s.typed(), partition, types); err != nil {
		return "", nil, nil, false, refused(fmt.Errorf("pgstore: %w", err))
	}
	if err := driver.CheckReadOptions(opts); err != nil {
		return "", nil, nil, false, refused(fmt.Errorf("pgstore: %w", err))
	}
	typs, err := s.handledTypes(types)
	if err != nil {
		return "", nil, nil, false, refused(fmt.Errorf("pgstore: read partition: %w", err))
	}
	conds = core.ConditionsFor(partition, typs...)
	if len(partition) == 0 || len(types) == 0 {
		return "", nil, conds, false, nil
	}
	after, upto := args.add(opts.After), args.add(uptoArg(opts.Upto))
	inner := fmt.Sprintf(`SELECT %[1]s FROM %[2]s WHERE %[3]s > %[4]s AND %[3]s <= %[5]s AND %[8]s AND %[6]s ORDER BY %[3]s LIMIT %[7]s`,
		messageColumns, s.names.messages, positionFilter, after, upto, partitionSQL(partition, types, &args, keyRange{table: s.names.keys, after: after, upto: upto}), limitSQL(opts.Limit), visible(positionFilter, own, &args))
	return s.withLast(inner, ""), args, conds, true, nil
}

// fetchSQL is the query of up to n messages of the partition after after.
func (s *Store) fetchSQL(partition core.Partition, types []string, after int64, n int) (string, []any) {
	var args sqlArgs
	a := args.add(after)
	sql := fmt.Sprintf(`SELECT %[1]s FROM %[2]s WHERE %[3]s > %[4]s AND %[5]s ORDER BY %[3]s LIMIT %[6]s`,
		messageColumns, s.names.messages, positionFilter, a, partitionSQL(partition, types, &args, keyRange{table: s.names.keys, after: a}), limitSQL(n))
	return sql, args
}

func (s *Store) readAll(ctx context.Context, q querier, opts driver.ReadAllOptions, own []int64) (driver.Page, error) {
	if err := driver.CheckReadAll(s.typed(), opts); err != nil {
		return driver.Page{}, refused(fmt.Errorf("pgstore: %w", err))
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = driver.DefaultPageSize
	}
	var args sqlArgs
	var where, order string
	r := keyRange{table: s.names.keys}
	from, ok := opts.Cursor()
	if opts.Order == driver.Descending {
		if from <= 0 && ok {
			from = math.MaxInt64
		} // !ok (Before 1): position <= 0 reads nothing, and the newest position still
		r.after, r.upto = "0", args.add(from)
		where, order = "position <= "+r.upto, "DESC"
	} else {
		f := args.add(from)
		r.after = f + "::bigint - 1"
		where, order = "position >= "+f, "ASC"
	}
	where += " AND message_type <> '' AND " + visible("position", own, &args) // no tombstone (see fill)
	if len(opts.Conditions) > 0 {
		where += " AND " + condSQL(opts.Conditions, &args, r)
	}
	inner := fmt.Sprintf(`SELECT %s FROM %s WHERE %s ORDER BY position %s LIMIT %s`,
		messageColumns, s.names.messages, where, order, limitSQL(limit))
	msgs, last, err := s.queryLast(ctx, q, s.withLast(inner, order), args)
	if err != nil {
		return driver.Page{}, s.wrap(ctx, "read all", err)
	}
	return driver.Page{Messages: msgs, LastPosition: last}, nil
}

// conflicts returns the messages matching the guard after its position.
func (s *Store) conflicts(ctx context.Context, q querier, g *core.Guard) ([]core.PositionedMessage, error) {
	var args sqlArgs
	after := args.add(g.LastPosition)
	sql := fmt.Sprintf(`SELECT %[1]s FROM %[2]s WHERE %[3]s > %[4]s AND %[5]s ORDER BY %[3]s`,
		messageColumns, s.names.messages, positionFor(g.Conditions), after, condSQL(g.Conditions, &args, keyRange{table: s.names.keys, after: after}))
	return s.queryMessages(ctx, q, sql, args...)
}

// ReadCorrelation returns, in position order, every message sharing the
// correlation id of the message whose id is messageID.
func (s *Store) ReadCorrelation(ctx context.Context, messageID uuid.UUID) ([]core.PositionedMessage, error) {
	msgs, err := s.queryMessages(ctx, s.pool, s.q.correlation, messageID)
	if err != nil {
		return nil, s.wrap(ctx, "read correlation", err)
	}
	return msgs, nil
}

// refusedRead is a read's refusal of its arguments, found before anything
// was sent: a transaction it is made in goes on (see isRefusedRead).
type refusedRead struct{ error }

func (e refusedRead) Unwrap() error { return e.error }

func refused(err error) error { return refusedRead{err} }

// isRefusedRead reports whether err is a refusal of a read's arguments, or
// a message the registry cannot decode (codec.ErrUnregistered): errors of
// the program's, not of the session, which leave its transaction usable.
func isRefusedRead(err error) bool {
	return errors.As(err, new(refusedRead)) || errors.Is(err, codec.ErrUnregistered)
}
