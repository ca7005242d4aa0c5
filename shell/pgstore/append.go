package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// A standalone append (Store.Append) is one round trip: every statement
// of it is sent in one pipeline, which PostgreSQL runs as one implicit
// transaction ending at the pipeline's end. The store's lock is taken by
// the pipeline's first statement and released by that commit, so it is
// held only while the server works, never while it waits for the client.
// The checks that may refuse the append (the cached group configuration
// still current, no id stored yet, the guard) are statements that raise
// (<prefix>_refuse, SQLSTATE refuseState) before anything is written; a
// raise ends the pipeline and rolls back the implicit transaction, and
// which statement raised says which check failed.

// refuseState is the SQLSTATE that <prefix>_refuse raises (schema
// version 6).
const refuseState = "SR001"

// refusePrefix starts the message of <prefix>_refuse; the reason follows.
const refusePrefix = "sourced: append refused: "

// The reasons <prefix>_refuse is given (its first argument).
const (
	refuseConfig    = "configuration"
	refuseDuplicate = "duplicate"
	refuseConflict  = "conflict"
	// refuseBusy is the refusal of an append that only tried its
	// boundary locks and found one held (see queueLock).
	refuseBusy = "busy"
)

// errBusy is sendAlone's error for an append that tried its boundary
// locks and found one held: nothing was written.
var errBusy = errors.New("pgstore: append: a boundary is held by another transaction")

// isBusy reports whether err is the refusal refuseBusy.
func isBusy(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == refuseState && pe.Message == refusePrefix+refuseBusy
}

// appendQueries are the statements of the one-round-trip append.
type appendQueries struct {
	// ids refuses when a message id ($1) is in the log or the schedule,
	// with "id<TAB>where" as the detail: <prefix>_lock with the ids alone,
	// whose probes of the unique indexes no cached plan turns into scans
	// (see TestIDCheckNeverScansTheLog).
	ids string
	// insert writes a message at the next position of the sequence and
	// returns it; upsert creates or wakes an offset at the position of
	// the message whose id is $5 (written before it in the transaction).
	insert, upsert string
	// insertMany writes several messages at the sequence's next
	// positions, in the order of its array parameters, and returns them
	// in that order.
	insertMany string
	// lock takes an append's locks and checks the group configuration
	// and the ids (<prefix>_lock; see queueLock).
	lock string
	// raise moves the stored horizon inside an appending transaction,
	// just before its COMMIT, and returns it (<prefix>_raise, up to $1
	// or, in a standalone append, the session's last position); the
	// ...After twins do so after the COMMIT, in a transaction of their
	// own whose commit does not wait for the disk (see inlineAdvance).
	raise, raiseLast, raiseAfter, raiseAfterLast string
	// fill puts tombstones at abandoned positions ($1).
	fill string
	// settle waits for the appends in flight below $1 to end, fills the
	// positions none will write, and advances the horizon to $1,
	// waiting at most $2 milliseconds (<prefix>_settle); heal advances
	// the stored horizon as far as the committed messages go (marked by
	// healMark, which tests that count round trips leave out).
	settle, heal string
	// guards checks several guards, without and with ($7) positions to
	// ignore (guardsCheckText).
	guards [2]string
}

func newAppendQueries(n names, q queries) appendQueries {
	return appendQueries{
		ids: fmt.Sprintf(`SELECT %s_lock(NULL, false, 0, NULL, NULL, false, NULL, $1::uuid[])`, n.prefix),
		insert: fmt.Sprintf(`INSERT INTO %s (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, $8, $9, $10) RETURNING position`, n.messages),
		insertMany: fmt.Sprintf(`INSERT INTO %s (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
SELECT u.id, u.typ, u.ver, u.cau, u.cor, u.payload::json, u.meta::json, u.at,
	ARRAY(SELECT json_array_elements_text(u.keys)), ARRAY(SELECT json_array_elements_text(u.names))
FROM unnest($1::uuid[], $2::text[], $3::int[], $4::uuid[], $5::uuid[], $6::text[], $7::text[], $8::timestamptz[], $9::json[], $10::json[])
	WITH ORDINALITY AS u(id, typ, ver, cau, cor, payload, meta, at, keys, names, ord)
ORDER BY u.ord RETURNING position`, n.messages),
		upsert: fmt.Sprintf(`INSERT INTO %[1]s AS o (consumer_group_id, partition_key, keys, message_id, next_position)
SELECT $1, $2, $3, $4, m.position FROM %[2]s m WHERE m.message_id = $5
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET next_position =
	CASE WHEN excluded.next_position > o.last_position THEN least(o.next_position, excluded.next_position) ELSE o.next_position END`, n.offsets, n.messages),
		lock:           fmt.Sprintf(`SELECT %s_lock($1, $2, $3, $4::int[], $5::bool[], $6, $7, $8::uuid[])`, n.prefix),
		raise:          fmt.Sprintf(`SELECT %s_raise($1)`, n.prefix),
		raiseLast:      fmt.Sprintf(`SELECT %[1]s_raise(currval('%[1]s_positions'))`, n.prefix),
		raiseAfter:     fmt.Sprintf(`SELECT %s_raise($1) FROM set_config('synchronous_commit', 'off', true)`, n.prefix),
		raiseAfterLast: fmt.Sprintf(`SELECT %[1]s_raise(currval('%[1]s_positions')) FROM set_config('synchronous_commit', 'off', true)`, n.prefix),
		fill:           fmt.Sprintf(`SELECT %s_fill($1::bigint[])`, n.prefix),
		settle:         fmt.Sprintf(`SELECT horizon, beyond, coalesce(types, '{}') FROM %s_settle($1, $2)`, n.prefix),
		heal:           fmt.Sprintf(`SELECT horizon, beyond, '{}'::text[] FROM %s_advance(9223372036854775807, 9223372036854775807) %s`, n.prefix, healMark),
		guards:         [2]string{guardsCheckText(n, false), guardsCheckText(n, true)},
	}
}

// guardWindow is how many messages after a guard's position its check
// scans in position order before it looks further through the table of
// key pairs (see refuseConflictSQL).
const guardWindow = 1000

// windowAfter is the statement of the next n messages of the log after
// position after (SQL), in position order: what a lookup that most often
// concerns recent messages reads first, before the table of key pairs
// (the guard's check, refuseConflictsSQL; a pending marker's
// recomputation, see markWindow): near the log's end a few rows of the
// primary key, cheaper than the table's index probes. Only when all n
// are there and none answers does the lookup go on through the table.
func windowAfter(messages, after string, n int) string {
	return fmt.Sprintf(`SELECT position, message_type, keys FROM %s WHERE position > %s ORDER BY position LIMIT %d`, messages, after, n)
}

// refuseConflictSQL is the guard's check as a statement that refuses when
// a message matching the guard follows its position. It runs under the
// lock, so its cost is every append's. It reads the next guardWindow
// messages after the guard's position in position order (a guard's
// position is nearly always recent: the read it comes from, so that the
// window is a few rows of the primary key, 4-5 µs a check in
// BenchmarkPostgresHandle), and only when there are more does it look
// past them through the table of key pairs (keyRange), a branch
// PostgreSQL skips whole otherwise (a one-time filter). The window came
// first, when the key pairs' GIN index visited every message of the
// guard's boundary, however few followed the guard (1.7 ms and 893
// buffers for a boundary of 2,500 messages, against 0.03 ms and 3
// buffers in position order); the table's lookup costs what follows the
// position too, but a few index probes more than the window's rows.
//
// own are positions the check ignores: a transaction's own messages,
// which its reads returned (an append's own guard sees them, as on every
// store: the check of an explicit guard passes none).
func (s *Store) refuseConflictSQL(g *core.Guard, own []int64) (string, []any) {
	return s.refuseConflictsSQL([]*core.Guard{g}, own)
}

// refuseConflictsSQL is refuseConflictSQL for any number of guards (the
// appends of a group, see together.go; the reads a transaction checks,
// see tx.queueReadChecks): one statement that reads the window after the
// oldest of their positions once, each guard's conditions matching the
// messages after its own position. Their conditions are given as arrays
// (one row per condition: its guard's position, its type, and the slice
// of a flat array of key pairs it requires), so that the text is the same
// whatever the guards (guardsCheckText): a session prepares and plans it
// once. Written out guard by guard, it was a statement for each number
// of guards, arrangement of their positions and shape of their
// conditions: in a run of BenchmarkPostgresAppendParallel's 16 guarded
// writers, 17-32 statements and 49-58 plans of 0.7-1.3 ms, and the bind
// of a prepared one grew with its guards (a median of 34 µs for one, 154
// µs for 15); with one text, 10-14 plans, and 16 guarded writers at
// 0.82-0.87 of unguarded ones (8000 appends) against 0.73-0.78 in the
// same runs. A single guard's check costs the server 4.8 µs this way
// against 4.1-4.2 µs written out (BenchmarkPostgresHandle, 3000 checks,
// pg_stat_statements), its throughput even.
func (s *Store) refuseConflictsSQL(guards []*core.Guard, own []int64) (string, []any) {
	var (
		positions []int64
		types     []string
		from, to  []int32
		keys      = []string{} // an empty array, never NULL, when no condition names attributes
	)
	oldest := guards[0].LastPosition
	for _, g := range guards {
		oldest = min(oldest, g.LastPosition)
		for _, c := range g.Conditions {
			positions = append(positions, g.LastPosition)
			types = append(types, c.Type)
			from = append(from, int32(len(keys)+1)) // an empty slice (from > to) for a condition without attributes
			for name, value := range c.Attrs {
				keys = append(keys, keyString(name, value))
			}
			slices.Sort(keys[from[len(from)-1]-1:])
			to = append(to, int32(len(keys)))
		}
	}
	args := []any{oldest, positions, types, from, to, keys}
	if len(own) > 0 {
		return s.q.a.guards[1], append(args, own)
	}
	return s.q.a.guards[0], args
}

// guardsCheckText is the statement of refuseConflictsSQL: the oldest
// position ($1), one row per condition ($2-$5: its guard's position, its
// type, and the slice of the key pairs $6 it requires), and with own the
// positions to ignore ($7). Each condition matches the window's rows
// after its position by type and key pairs, and past a full window, the
// log's messages after its position: through the table of key pairs when
// it names attributes (all of them carried), by type otherwise.
func guardsCheckText(n names, own bool) string {
	const pairs = "($6::text[])[c.f:c.t]"
	var ownNear, ownFar string
	if own { // the transaction's own messages are no conflict
		ownNear, ownFar = " AND r.position <> ALL($7::bigint[])", " AND position <> ALL($7::bigint[])"
	}
	return fmt.Sprintf(`WITH w AS (%[1]s), c AS (SELECT * FROM unnest($2::bigint[], $3::text[], $4::int[], $5::int[]) AS c(pos, type, f, t))
SELECT %[2]s_refuse('%[3]s', x.position::text) FROM (
	(SELECT r.position FROM w r JOIN c ON r.position > c.pos AND r.message_type = c.type AND r.keys @> %[4]s%[5]s LIMIT 1)
	UNION ALL
	(SELECT y.position FROM c CROSS JOIN LATERAL (
		(SELECT position FROM %[6]s WHERE c.f > c.t AND message_type = c.type AND (position + 0) > c.pos%[7]s LIMIT 1)
		UNION ALL
		(SELECT position FROM %[6]s WHERE c.f <= c.t AND %[8]s = c.type AND (position + 0) > c.pos
			AND position = ANY(ARRAY(%[9]s))%[7]s LIMIT 1)
	) y WHERE (SELECT count(*) FROM w) = %[10]d LIMIT 1)
) x LIMIT 1`, windowAfter(n.messages, "$1", guardWindow), n.prefix, refuseConflict, pairs, ownNear, n.messages, ownFar, typeFilter,
		keyRange{table: n.keys, after: "c.pos"}.carrying(pairs, "c.t - c.f + 1"), guardWindow)
}

// appendTimeout bounds a standalone append once sent. The caller's
// context does not break its round trip (which commits): a done context
// sends a cancel request instead (see cancelOnDone), so that a context
// error means nothing was written.
const appendTimeout = time.Minute

// Append appends msgs in a transaction of its own (see driver.Tx.Append),
// in one round trip to the server.
//
// An append that fails with a network error (the connection broke while
// it was on its way) may have committed. Retrying it is safe when its
// messages carry their ids (stamp them before the first attempt, see
// core.Message.Stamp): if the first attempt committed, the retry is
// refused whole with driver.ErrDuplicateID, saying the id is already in
// the log, and writes nothing a second time; otherwise it appends.
func (s *Store) Append(ctx context.Context, msgs []core.Message, opts driver.AppendOptions) (res driver.AppendResult, err error) {
	if len(msgs) == 0 {
		return driver.AppendResult{}, ctx.Err()
	}
	if s.unorderedPositions { // tests only: the broken allocation lives in Update
		err = s.Update(ctx, func(tx driver.Tx) error {
			res, err = tx.Append(msgs, opts)
			return err
		})
		return res, err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return driver.AppendResult{}, err
		}
		gs, err := s.currentGroups(ctx, attempt > 0)
		if err != nil {
			return driver.AppendResult{}, s.wrap(ctx, "append", err)
		}
		m, err := s.prepareMember(gs, msgs, opts)
		if err != nil {
			return driver.AppendResult{}, err
		}
		var again bool
		if attempt == 0 {
			res, again, err = s.appends.append(ctx, m)
		} else {
			res, again, err = s.sendAlone(ctx, m, nil, false)
		}
		if !again || attempt >= 10 {
			return res, err
		}
	}
}

// currentGroups returns the cached group configuration, reading it (and
// its version) when there is none or fresh is set.
func (s *Store) currentGroups(ctx context.Context, fresh bool) (*groupSet, error) {
	if gs := s.groups.Load(); gs != nil && !fresh {
		return gs, nil
	}
	var last, version int64
	if err := s.pool.QueryRow(ctx, s.q.readHead).Scan(&last, &version); err != nil {
		return nil, err
	}
	if gs := s.groups.Load(); gs != nil && gs.version == version {
		return gs, nil
	}
	return s.loadGroups(ctx, s.pool, version)
}

// appendMember is one Append call's messages, prepared: sent alone in a
// transaction of its own, or in one with other calls' (see appendGroups).
type appendMember struct {
	gs      *groupSet
	now     time.Time
	stamped []core.Message
	preps   []prepared
	plan    *appendPlan
	// keys are the boundary keys the append locks; nil when they are too
	// many (it takes the store's lock in exclusive mode instead).
	keys boundarySet

	// For a member waiting to be sent with others: lead receives the
	// flight it is to send (its group, itself first), or nil when it is
	// to go alone; done is closed once another member sent it, and res
	// and err are then its outcome, or alone says that the group was
	// refused as a whole (nothing was written), so that it goes again
	// alone.
	lead  chan *flight
	done  chan struct{}
	res   driver.AppendResult
	err   error
	alone bool
}

// prepareMember prepares an append of msgs with the configuration gs.
func (s *Store) prepareMember(gs *groupSet, msgs []core.Message, opts driver.AppendOptions) (*appendMember, error) {
	now := s.now()
	stamped, preps, err := s.prepareAll(msgs, now, gs, opts)
	if err != nil {
		return nil, err
	}
	plan := planAppend(stamped, preps, opts.Guard)
	return &appendMember{gs: gs, now: now, stamped: stamped, preps: preps, plan: plan, keys: plan.locks(preps, nil)}, nil
}

// sendAlone sends m's append in a transaction of its own: one pipeline.
// again reports a refusal that the next attempt may not meet: the group
// configuration changed since it was cached, a guard conflict whose
// messages were deleted before they could be read back, or a position
// taken by a tombstone while the append was being written (see fill).
// sent, when not nil, is called once the pipeline's round trip is over,
// before the append waits for the read horizon to cover it. With try,
// the append only tries its boundary locks, and one held elsewhere
// refuses it with errBusy.
func (s *Store) sendAlone(ctx context.Context, m *appendMember, sent func(), try bool) (res driver.AppendResult, again bool, err error) {
	gen := s.adv.generation()
	plan := m.plan
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	s.queueLock(b, true, m.keys == nil, m.keys.missing(nil), try, &m.gs.version, plan.ids())
	if plan.guard != nil {
		sql, args := s.refuseConflictSQL(plan.guard, nil)
		b.Queue(sql, args...)
	}
	s.queueWrites(b, m.gs, plan, m.preps, m.now)
	positions, horizon, err := s.commitBatch(ctx, b, plan)
	if sent != nil {
		sent()
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && isCanceled(err) {
			return driver.AppendResult{}, false, fmt.Errorf("pgstore: append: %w (nothing was written)", cerr)
		}
		if again, derr := s.uniqueViolation(err); derr != nil || again {
			return driver.AppendResult{}, again, derr
		}
		if try && isBusy(err) {
			return driver.AppendResult{}, false, errBusy
		}
		if !isRefusal(err) {
			return driver.AppendResult{}, false, s.wrap(ctx, "append", err)
		}
		return s.refused(ctx, s.pool, err, plan.guard)
	}
	res = plan.result(positions)
	s.afterCommit(gen, horizon, res.Last, plan.types, plan.scheduledTypes)
	return res, false, nil
}

// commitBatch sends b, an append's transaction up to its writes (plan's),
// with the inline advance of the horizon when it pays and the COMMIT
// (else the advance after it), and reads its results: the positions the
// inserts drew, in message order, and the stored horizon the advance
// left (0: unknown).
// A transaction that failed is rolled back, and the positions it drew
// filled, before it returns the error. ctx's end sends the server a
// cancel request (see cancelOnDone).
func (s *Store) commitBatch(ctx context.Context, b *pgx.Batch, plan *appendPlan) (positions []int64, horizon int64, err error) {
	inline, after := false, false
	if plan.n > 0 {
		s.appending.Add(1)
		defer s.appending.Add(-1)
		if inline = s.inlineAdvance(); inline {
			b.Queue(s.q.a.raiseLast)
			plan.commitAt++
		}
	}
	b.Queue("COMMIT")
	if after = plan.n > 0 && !inline; after {
		b.Queue(s.q.a.raiseAfterLast)
	}

	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	stop := s.cancelOnDone(ctx, c)
	br := s.sendBatch(sendCtx, c.Conn(), b)
	positions = make([]int64, 0, plan.n)
	failedAt := -1
	for i := 0; i < b.Len(); i++ {
		switch {
		case plan.isInsert(i):
			positions, err = readPositions(br, positions)
		case inline && i == plan.commitAt-1:
			err = br.QueryRow().Scan(&horizon) // valid once committed
		case after && i == b.Len()-1:
			// Committed: a failed advance leaves it to the advancer.
			if aerr := br.QueryRow().Scan(&horizon); aerr != nil {
				s.log.Debug("pgstore: advancing the horizon after a commit failed", "err", aerr)
			}
		default:
			_, err = br.Exec()
		}
		if err != nil {
			failedAt = i
			break
		}
	}
	if cerr := br.Close(); err == nil && !after { // committed: the advance's error is no failure
		err = cerr
	}
	committed := err == nil
	if !committed {
		// The session is in a failed transaction: roll it back, and fill
		// the positions the append drew (those it was given, and the
		// one its failed insert drew) so that no reader waits for them.
		drew := failedAt >= plan.firstInsert && plan.n > 0
		if aerr := s.abandon(sendCtx, c, positions, drew); aerr != nil {
			stop()
			s.discard(c)
			c = nil
		}
	}
	if c != nil {
		if stop() {
			s.discard(c) // a cancel request may still reach its session
		} else {
			c.Release()
		}
	}
	if !committed {
		return nil, 0, err
	}
	return positions, horizon, nil
}

// abandon rolls back c's failed transaction and, when the append drew
// positions (drew: its inserts were reached), fills them with
// tombstones: positions, and the session's last one, which the insert
// that failed drew.
func (s *Store) abandon(ctx context.Context, c *pgxpool.Conn, positions []int64, drew bool) error {
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		return err
	}
	if !drew {
		return nil
	}
	return s.fillOn(ctx, c, positions, true)
}

// fillOn puts tombstones at positions (and, with current, at the
// session's last position too) on c, and advances the horizon past them.
func (s *Store) fillOn(ctx context.Context, c *pgxpool.Conn, positions []int64, current bool) error {
	fill := s.q.a.fill
	if current {
		fill = strings.Replace(fill, "$1::bigint[]", fmt.Sprintf("$1::bigint[] || currval('%s_positions')", s.names.prefix), 1)
	}
	gen := s.adv.generation()
	b := &pgx.Batch{}
	b.Queue(fill, positions)
	b.Queue(s.q.advanceTo, int64(math.MaxInt64)) // as far as it goes
	br := s.sendBatch(ctx, c.Conn(), b)
	_, err := br.Exec()
	var adv advanced
	if err == nil {
		err = adv.scan(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		s.adv.covered(gen, adv.horizon)
	}
	return err
}

// uniqueViolation translates a unique violation of an append's insert:
// its position taken by a tombstone (again: the append goes again, with
// new positions), or its message id by a concurrent append of the same
// id (driver.ErrDuplicateID, as the id check says when the other append
// committed first).
func (s *Store) uniqueViolation(err error) (again bool, _ error) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		return false, nil
	}
	switch pe.ConstraintName {
	case s.names.messages + "_pkey":
		return true, nil
	case "idx_" + s.names.messages + "_id":
		return false, fmt.Errorf("pgstore: append: a message id is already in the log (appended at the same time by another writer): %w", driver.ErrDuplicateID)
	case "idx_" + s.names.scheduled + "_id":
		return false, fmt.Errorf("pgstore: append: a message id is already scheduled (by another writer at the same time): %w", driver.ErrDuplicateID)
	}
	return false, nil
}

// advanced is what <prefix>_advance returned: the horizon, the first
// visible position past it when a hole stops it (0: none), and the types
// it newly covered.
type advanced struct {
	horizon, beyond int64
	types           []string
}

func (a *advanced) scan(r pgx.Row) error {
	var beyond *int64
	if err := r.Scan(&a.horizon, &beyond, &a.types); err != nil {
		return err
	}
	if beyond != nil {
		a.beyond = *beyond
	}
	return nil
}

// inlineAdvance reports whether an append about to commit should move
// the stored horizon in its own transaction (<prefix>_raise): when
// it is this store's only one in flight. Beside others, the head row it
// would update is likely held by one of them.
//
// An append that does not move it in its transaction tries after its
// COMMIT, in the same round trip, in a transaction of its own
// (raiseAfter): its snapshot sees the appends that committed before it,
// so of appends in flight together the last to commit covers them all,
// and none waits for the advancer unless a position below it is still
// in flight when its advance runs. That transaction changes derived
// state only (the horizon, which heal restores), so its commit does not
// wait for the disk.
func (s *Store) inlineAdvance() bool { return s.appending.Load() <= 1 }

// afterCommit tells the notifier and other processes of a commit that
// appended up to last (0: nothing to the log) the given types, once the
// stored horizon covers it: at once when the horizon the commit left
// (0: unknown) covers it, else once the advancer has (see holes.go),
// which the caller waits for; the appends of the store that horizon
// covers stop waiting. A commit that appended nothing may still tell
// types (a group resumed); the types of scheduled messages are told only
// of a commit that appended nothing to the log (their promotion tells
// them again).
func (s *Store) afterCommit(gen int, horizon, last int64, types, scheduled []string) {
	s.growing(last)
	if len(scheduled) > 0 {
		// Counted before any notification (driver.ScheduleCounter), and
		// told to other processes' schedulers at once: the scheduled
		// messages are committed, and no read horizon bounds them.
		s.scheduledCommits.Add(1)
		s.wakes.add(0, []string{scheduledMark})
	}
	switch {
	case last == 0 && len(types) > 0: // a group resumed (tx.announce)
		s.announce(0, types)
	case last == 0:
		if len(scheduled) > 0 {
			s.notifier.Notify(scheduled)
		}
	default:
		if horizon > 0 {
			s.adv.covered(gen, horizon)
		}
		if horizon >= last {
			s.announce(last, types)
		} else {
			s.adv.await(gen, last, types)
		}
	}
}

// cancelOnDone sends PostgreSQL a cancel request for c's running
// statement if ctx is done before the returned stop is called; stop
// reports whether it sent one. A pipeline cancelled so fails at the
// statement it was running (waiting for the lock, say), and its implicit
// transaction rolls back; one that had committed already returns its
// results as if nothing happened: the caller learns what the server did,
// never a context error for an append that was written.
func (s *Store) cancelOnDone(ctx context.Context, c *pgxpool.Conn) (stop func() bool) {
	if ctx.Done() == nil {
		return func() bool { return false }
	}
	done := make(chan struct{})
	sent := make(chan bool, 1)
	go func() {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.Conn().PgConn().CancelRequest(cctx)
			cancel()
			sent <- true
		case <-done:
			sent <- false
		}
	}()
	return func() bool {
		close(done)
		return <-sent
	}
}

// isCanceled reports whether err is PostgreSQL's "canceling statement due
// to user request" (SQLSTATE 57014).
func isCanceled(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// appendPlan is an append's messages, prepared, and what its statements
// will write.
type appendPlan struct {
	stamped []core.Message
	// logged marks the messages written to the log (not scheduled), n
	// their number.
	logged []bool
	// given marks the messages that came with their ids (see ids).
	given []bool
	n     int64
	// inserts are the batch indexes of the log inserts, in message
	// order; firstInsert the first (or -1), commitAt the COMMIT's index
	// in a standalone append (or -1).
	inserts     map[int]bool
	firstInsert int
	commitAt    int
	// writes is the number of write statements (inserts, offset upserts).
	writes                int
	types, scheduledTypes []string
	// guard is the append's guard, nil when it has no conditions.
	guard *core.Guard
}

func planAppend(stamped []core.Message, preps []prepared, guard *core.Guard) *appendPlan {
	p := &appendPlan{stamped: stamped, logged: make([]bool, len(stamped)), given: make([]bool, len(stamped)), firstInsert: -1, commitAt: -1}
	if guard != nil && len(guard.Conditions) > 0 {
		p.guard = guard
	}
	for i := range stamped {
		p.given[i] = preps[i].givenID
		if preps[i].scheduled {
			p.scheduledTypes = appendDistinct(p.scheduledTypes, stamped[i].Type)
			continue
		}
		p.n++
		p.logged[i] = true
		p.types = appendDistinct(p.types, stamped[i].Type)
	}
	return p
}

// locks returns the boundary keys the append needs (see boundary.go),
// with the guards of reads (extra) to check beside its own; nil asks
// for the store's lock in exclusive mode instead (too many keys).
func (p *appendPlan) locks(preps []prepared, extra []core.Guard) boundarySet {
	set := boundarySet{}
	for i := range p.stamped {
		if p.logged[i] {
			set.write(p.stamped[i].Type, preps[i].keys)
		}
	}
	if p.guard != nil {
		set.guard(p.guard.Conditions)
	}
	for _, g := range extra {
		set.guard(g.Conditions)
	}
	if len(set) > maxBoundaryKeys {
		return nil
	}
	return set
}

func (p *appendPlan) isInsert(i int) bool { return p.inserts[i] }

// result is the append's result, given the positions its inserts
// returned, in message order.
func (p *appendPlan) result(positions []int64) driver.AppendResult {
	res := driver.AppendResult{Positions: make([]int64, len(p.stamped)), Messages: p.stamped}
	j := 0
	for i, logged := range p.logged {
		if logged && j < len(positions) {
			res.Positions[i] = positions[j]
			res.Last = max(res.Last, positions[j])
			j++
		}
	}
	return res
}

// queueLock queues <prefix>_lock: the store's lock (with store; in
// exclusive mode with exclusive), the boundary keys in the order given
// (with try, refusing "busy" rather than waiting), and, when given, the
// check of the group configuration's version and of the ids (none
// stored yet).
func (s *Store) queueLock(b *pgx.Batch, store, exclusive bool, keys []boundaryKey, try bool, config *int64, ids []uuid.UUID) {
	var key any
	if store {
		key = s.lockKey
	}
	var idArg any
	if ids != nil {
		idArg = ids
	}
	ks, xs := lockArgs(keys)
	b.Queue(s.q.a.lock, key, exclusive, s.boundaryNS, ks, xs, try, config, idArg)
}

// The arguments of <prefix>_lock, by position, as queueLock queues them
// and mergeLocks reads them back.
const (
	lockArgStore = iota // the store's lock key, or nil
	lockArgExclusive
	lockArgNS
	lockArgKeys  // []int32, sorted
	lockArgModes // []bool: exclusive, per key
	lockArgTry
	lockArgConfig // *int64: the configuration version to check
	lockArgIDs    // []uuid.UUID to look for, or nil
)

// mergeLocks folds the boundary locks of the later lock statements of a
// batch into its first one, so that a transaction that defers several
// appends and offset advances (a Handle: the command, its offset, the
// events) takes its boundaries in one statement, not one each. A later
// statement is folded only when it takes no store lock, checks no ids
// and checks the same configuration version as the first: then all it
// does is lock keys, and taking them earlier, in the same sorted call,
// only holds them longer. The keys of one call are taken in their sorted
// order (exclusive where either statement wanted it), so two
// transactions never wait on each other in a cycle.
func (s *Store) mergeLocks(pre []queued) []queued {
	first := -1
	for i := range pre {
		if pre[i].sql == s.q.a.lock {
			first = i
			break
		}
	}
	if first < 0 {
		return pre
	}
	var keys boundarySet
	out := pre[:first+1]
	for _, q := range pre[first+1:] {
		if q.sql != s.q.a.lock || !foldable(pre[first].args, q.args) {
			out = append(out, q)
			continue
		}
		if keys == nil {
			keys = boundarySet{}
			addLockArgs(keys, pre[first].args)
		}
		addLockArgs(keys, q.args)
	}
	if keys != nil {
		args := slices.Clone(pre[first].args)
		args[lockArgKeys], args[lockArgModes] = lockArgs(keys.missing(nil))
		out[first].args = args
	}
	return out
}

// foldable reports whether the lock statement of args b does nothing but
// lock keys beside the one of args a (see mergeLocks): no store lock, no
// ids, the same configuration check.
func foldable(a, b []any) bool {
	if b[lockArgStore] != nil || b[lockArgIDs] != nil {
		return false
	}
	ca, _ := a[lockArgConfig].(*int64)
	cb, _ := b[lockArgConfig].(*int64)
	switch {
	case ca == nil || cb == nil:
		return ca == nil && cb == nil
	default:
		return *ca == *cb
	}
}

// addLockArgs adds the keys of a lock statement's arguments to keys.
func addLockArgs(keys boundarySet, args []any) {
	ks, _ := args[lockArgKeys].([]int32)
	xs, _ := args[lockArgModes].([]bool)
	for i, k := range ks {
		keys.add(k, xs[i])
	}
}

// ids are the ids the append's messages came with (nil: none). The ids
// the store gave (version 7 UUIDs, drawn as the message was stamped) are
// not looked for among the stored ones: no append had them before, and
// the unique indexes would refuse one anyway (see uniqueViolation).
func (p *appendPlan) ids() []uuid.UUID {
	var ids []uuid.UUID
	for i := range p.stamped {
		if p.given[i] {
			ids = append(ids, p.stamped[i].ID)
		}
	}
	return ids
}

// checked reports whether the append has checks to run before it writes:
// an id it came with, or a guard.
func (p *appendPlan) checked() bool { return p.guard != nil || slices.Contains(p.given, true) }

// queueChecks queues the statements that refuse the append before it
// writes (a stored id, the guard), and returns how many they are.
func (s *Store) queueChecks(b *pgx.Batch, p *appendPlan) int {
	n := 0
	if ids := p.ids(); ids != nil {
		b.Queue(s.q.a.ids, ids)
		n++
	}
	if p.guard != nil {
		sql, args := s.refuseConflictSQL(p.guard, nil)
		b.Queue(sql, args...)
		n++
	}
	return n
}

// queueWrites queues the append's writes: the messages, scheduled or at
// the sequence's next positions, and the offsets they create or wake,
// each at the position of the first message that wakes it.
func (s *Store) queueWrites(b *pgx.Batch, gs *groupSet, p *appendPlan, preps []prepared, now time.Time) {
	ups := newUpserts()
	start := b.Len()
	p.inserts = map[int]bool{}
	var rows insertRows
	for i := range p.stamped {
		m, pr := &p.stamped[i], &preps[i]
		if pr.scheduled {
			b.Queue(s.q.insertScheduled, m.ID, m.Type, pr.version, m.CausationID, m.CorrelationID,
				string(pr.payload), jsonArg(pr.metadata), m.CreatedAt, now)
			continue
		}
		rows.add(m, pr)
		for _, g := range gs.byType[m.Type] {
			for _, tp := range g.tuples(pr.keys, m.ID) {
				ups.add(g.row, tp, m.ID, 0)
			}
		}
	}
	if p.n > 0 {
		p.firstInsert = b.Len()
		p.inserts[b.Len()] = true
		if p.n == 1 {
			b.Queue(s.q.a.insert, rows.args(0)...)
		} else {
			b.Queue(s.q.a.insertMany, rows.arrays()...)
		}
	}
	ups.queue(b, s)
	p.writes = b.Len() - start
	p.commitAt = b.Len() // where a standalone append queues its COMMIT
}

// insertRows are the columns of an append's messages to the log, in
// message order: one statement inserts them all (insertMany, with a
// parameter per column, each an array), at increasing positions.
type insertRows struct {
	ids, causations, correlations []uuid.UUID
	types                         []string
	versions                      []int32
	payloads                      []string
	metadata                      []*string
	at                            []time.Time
	keys, keyNames                [][]string
}

func (r *insertRows) add(m *core.Message, pr *prepared) {
	keys, keyNames := keyStrings(pr.keys)
	var meta *string
	if pr.metadata != nil {
		s := string(pr.metadata)
		meta = &s
	}
	r.ids = append(r.ids, m.ID)
	r.causations = append(r.causations, m.CausationID)
	r.correlations = append(r.correlations, m.CorrelationID)
	r.types = append(r.types, m.Type)
	r.versions = append(r.versions, int32(pr.version))
	r.payloads = append(r.payloads, string(pr.payload))
	r.metadata = append(r.metadata, meta)
	r.at = append(r.at, m.CreatedAt)
	r.keys = append(r.keys, keys)
	r.keyNames = append(r.keyNames, keyNames)
}

// args are the parameters of the one-message insert for row i.
func (r *insertRows) args(i int) []any {
	var meta any
	if r.metadata[i] != nil {
		meta = *r.metadata[i]
	}
	return []any{r.ids[i], r.types[i], r.versions[i], r.causations[i], r.correlations[i], r.payloads[i], meta, r.at[i], r.keys[i], r.keyNames[i]}
}

// arrays are the parameters of insertMany: the key pairs and names of
// each message go as a JSON array of strings (PostgreSQL's arrays of
// arrays are rectangular).
func (r *insertRows) arrays() []any {
	keys, names := make([]string, len(r.keys)), make([]string, len(r.keys))
	for i := range r.keys {
		k, _ := json.Marshal(r.keys[i])
		n, _ := json.Marshal(r.keyNames[i])
		keys[i], names[i] = string(k), string(n)
	}
	return []any{r.ids, r.types, r.versions, r.causations, r.correlations, r.payloads, r.metadata, r.at, keys, names}
}

// readPositions reads the positions an insert of the batch returned, in
// message order, after those in positions.
func readPositions(br pgx.BatchResults, positions []int64) ([]int64, error) {
	rows, err := br.Query()
	if err != nil {
		return positions, err
	}
	for rows.Next() {
		var pos int64
		if err := rows.Scan(&pos); err != nil {
			rows.Close()
			return positions, err
		}
		positions = append(positions, pos)
	}
	rows.Close()
	return positions, rows.Err()
}

// isRefusal reports whether err is <prefix>_refuse's.
func isRefusal(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == refuseState
}

// isRefusalOutcome reports whether err is the documented outcome of a
// refused append (a stored id, a guard conflict) rather than a failure.
func isRefusalOutcome(err error) bool {
	var ce *core.ConflictError
	return errors.Is(err, driver.ErrDuplicateID) || errors.As(err, &ce)
}

// refused translates a refusal of an append's checks (isRefusal) into the
// store's error for it; q reads the conflicting messages back.
func (s *Store) refused(ctx context.Context, q querier, err error, guard *core.Guard) (driver.AppendResult, bool, error) {
	var pe *pgconn.PgError
	errors.As(err, &pe)
	switch strings.TrimPrefix(pe.Message, refusePrefix) {
	case refuseConfig:
		return driver.AppendResult{}, true, nil
	case refuseDuplicate:
		id, where, _ := strings.Cut(pe.Detail, "\t")
		return driver.AppendResult{}, false, fmt.Errorf("pgstore: append: message id %s is already %s (if this retries an append whose outcome was unknown, the first attempt committed): %w", id, where, driver.ErrDuplicateID)
	case refuseConflict:
		conflicts, cerr := s.conflicts(ctx, q, guard)
		if cerr != nil {
			return driver.AppendResult{}, false, s.wrap(ctx, "append: guard check", cerr)
		}
		if len(conflicts) == 0 { // deleted since: the guard may hold now
			return driver.AppendResult{}, true, &core.ConflictError{Guard: *guard}
		}
		return driver.AppendResult{}, false, &core.ConflictError{Guard: *guard, Conflicts: conflicts}
	}
	return driver.AppendResult{}, false, s.wrap(ctx, "append", err)
}
