package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
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
)

// appendQueries are the statements of the one-round-trip append.
type appendQueries struct {
	// head reads the last position under the lock and refuses a stale
	// group configuration ($1, the version the client built upserts from).
	head string
	// ids refuses when a message id ($1) is in the log or the schedule,
	// with "id<TAB>where" as the detail.
	ids string
	// insert and upsert are insertMessage and upsertOffset with the
	// position relative to the head read in the same transaction ($1 or
	// $5 is the message's ordinal, 1 for the first of the log).
	insert, upsert string
	// advance moves the head by $1 positions.
	advance string
}

func newAppendQueries(n names, q queries) appendQueries {
	refuse := n.prefix + "_refuse"
	headPos := fmt.Sprintf("((SELECT last_position FROM %s WHERE id = 1) + $%%d)", n.head)
	return appendQueries{
		head: fmt.Sprintf(`SELECT last_position, CASE WHEN config_version <> $1 THEN %s('%s', config_version::text) END FROM %s WHERE id = 1`,
			refuse, refuseConfig, n.head),
		ids: fmt.Sprintf(`SELECT %[1]s('%[2]s', d.message_id::text || E'\t' || d.place) FROM (
	SELECT message_id, 'in the log' AS place FROM %[3]s WHERE message_id = ANY($1::uuid[])
	UNION ALL SELECT message_id, 'scheduled' FROM %[4]s WHERE message_id = ANY($1::uuid[]) LIMIT 1) d`,
			refuse, refuseDuplicate, n.messages, n.scheduled),
		insert:  strings.Replace(q.insertMessage, "VALUES ($1,", "VALUES ("+fmt.Sprintf(headPos, 1)+",", 1),
		upsert:  strings.Replace(q.g.upsertOffset, "$4, $5)", "$4, "+fmt.Sprintf(headPos, 5)+")", 1),
		advance: fmt.Sprintf(`UPDATE %s SET last_position = last_position + $1 WHERE id = 1`, n.head),
	}
}

// guardWindow is how many messages after a guard's position its check
// scans in position order before it looks further through the key
// pairs' index (see refuseConflictSQL).
const guardWindow = 1000

// refuseConflictSQL is the guard's check as a statement that refuses when
// a message matching the guard follows its position. It runs under the
// lock, so its cost is every append's: found through the key pairs' GIN
// index, the messages of the guard's boundary are all visited, however
// few follow the guard (1.7 ms and 893 buffers for a boundary of 2,500
// messages, against 0.03 ms and 3 buffers in position order). So it reads
// the next guardWindow messages after the guard's position in position
// order (a guard's position is nearly always recent: the read it comes
// from), and only when there are more does it look past them through the
// index, a branch PostgreSQL skips whole otherwise (a one-time filter).
func (s *Store) refuseConflictSQL(g *core.Guard) (string, []any) {
	var args sqlArgs
	after := args.add(g.LastPosition)
	window := args.add(int64(guardWindow))
	near := condSQL(g.Conditions, &args)
	far := condSQL(g.Conditions, &args)
	m := s.names.messages
	sql := fmt.Sprintf(`SELECT %[1]s_refuse('%[2]s', c.position::text) FROM (
	(SELECT r.position FROM (SELECT position, message_type, keys FROM %[3]s WHERE position > %[4]s ORDER BY position LIMIT %[5]s) r WHERE %[6]s LIMIT 1)
	UNION ALL
	(SELECT position FROM %[3]s WHERE (SELECT count(*) FROM (SELECT 1 FROM %[3]s WHERE position > %[4]s ORDER BY position LIMIT %[5]s) n) = %[5]s
		AND (position + 0) > %[4]s AND %[7]s LIMIT 1)
) c LIMIT 1`, s.names.prefix, refuseConflict, m, after, window, near, far)
	return sql, args
}

// appendTimeout bounds a standalone append once sent. The caller's
// context does not break its round trip (which commits): a done context
// sends a cancel request instead (see cancelOnDone), so that a context
// error means nothing was written.
const appendTimeout = time.Minute

// Append appends msgs in a transaction of its own (see shell.Tx.Append),
// in one round trip to the server.
//
// An append that fails with a network error (the connection broke while
// it was on its way) may have committed. Retrying it is safe when its
// messages carry their ids (stamp them before the first attempt, see
// core.Message.Stamp): if the first attempt committed, the retry is
// refused whole with shell.ErrDuplicateID, saying the id is already in
// the log, and writes nothing a second time; otherwise it appends.
func (s *Store) Append(ctx context.Context, msgs []core.Message, opts shell.AppendOptions) (res shell.AppendResult, err error) {
	if len(msgs) == 0 {
		return shell.AppendResult{}, ctx.Err()
	}
	if s.unorderedPositions { // tests only: the broken allocation lives in Update
		err = s.Update(ctx, func(tx shell.Tx) error {
			res, err = tx.Append(msgs, opts)
			return err
		})
		return res, err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return shell.AppendResult{}, err
		}
		gs, err := s.currentGroups(ctx, attempt > 0)
		if err != nil {
			return shell.AppendResult{}, s.wrap(ctx, "append", err)
		}
		res, again, err := s.appendOnce(ctx, gs, msgs, opts)
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

// appendOnce sends the append's pipeline. again reports a refusal that
// the next attempt may not meet: the group configuration changed since
// it was cached, or a guard conflict whose messages were deleted before
// they could be read back.
func (s *Store) appendOnce(ctx context.Context, gs *groupSet, msgs []core.Message, opts shell.AppendOptions) (res shell.AppendResult, again bool, err error) {
	now := s.now()
	stamped, preps, err := s.prepareAll(msgs, now, gs, opts)
	if err != nil {
		return shell.AppendResult{}, false, err
	}
	plan := planAppend(stamped, preps, opts.Guard)
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock($1)", s.lockKey)
	b.Queue(s.q.a.head, gs.version)
	s.queueChecks(b, plan)
	s.queueWrites(b, gs, plan, preps, now, 0, true)

	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return shell.AppendResult{}, false, s.wrap(ctx, "append", err)
	}
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	stop := s.cancelOnDone(ctx, c)
	br := c.SendBatch(sendCtx, b)
	var base int64
	_, err = br.Exec()
	if err == nil {
		var stale *int64
		err = br.QueryRow().Scan(&base, &stale)
	}
	for i := 2; err == nil && i < b.Len(); i++ {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if stop() {
		s.discard(c) // a cancel request may still reach its session
	} else {
		c.Release()
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && isCanceled(err) {
			return shell.AppendResult{}, false, fmt.Errorf("pgstore: append: %w (nothing was written)", cerr)
		}
		if !isRefusal(err) {
			return shell.AppendResult{}, false, s.wrap(ctx, "append", err)
		}
		return s.refused(ctx, s.pool, err, plan.guard)
	}
	res = plan.result(base)
	if len(plan.types) > 0 {
		s.notifier.Notify(plan.types)
		s.wakes.add(res.Last, plan.types)
	} else if len(plan.scheduledTypes) > 0 {
		s.notifier.Notify(plan.scheduledTypes)
	}
	return res, false, nil
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
	// ordinals are each message's place among those written to the log
	// (1 for the first, 0 for a scheduled one), n their number.
	ordinals []int64
	n        int64
	// writes is the number of write statements (inserts, offset upserts,
	// the head's advance).
	writes                int
	types, scheduledTypes []string
	// guard is the append's guard, nil when it has no conditions.
	guard *core.Guard
}

func planAppend(stamped []core.Message, preps []prepared, guard *core.Guard) *appendPlan {
	p := &appendPlan{stamped: stamped, ordinals: make([]int64, len(stamped))}
	if guard != nil && len(guard.Conditions) > 0 {
		p.guard = guard
	}
	for i := range stamped {
		if preps[i].scheduled {
			p.scheduledTypes = appendDistinct(p.scheduledTypes, stamped[i].Type)
			continue
		}
		p.n++
		p.ordinals[i] = p.n
		p.types = appendDistinct(p.types, stamped[i].Type)
	}
	return p
}

// result is the append's result once its first position follows base.
func (p *appendPlan) result(base int64) shell.AppendResult {
	res := shell.AppendResult{Positions: make([]int64, len(p.stamped)), Messages: p.stamped}
	for i, o := range p.ordinals {
		if o > 0 {
			res.Positions[i] = base + o
			res.Last = res.Positions[i]
		}
	}
	return res
}

// queueChecks queues the statements that refuse the append before it
// writes (a stored id, the guard), and returns how many they are.
func (s *Store) queueChecks(b *pgx.Batch, p *appendPlan) int {
	ids := make([]uuid.UUID, len(p.stamped))
	for i := range p.stamped {
		ids[i] = p.stamped[i].ID
	}
	b.Queue(s.q.a.ids, ids)
	if p.guard == nil {
		return 1
	}
	sql, args := s.refuseConflictSQL(p.guard)
	b.Queue(sql, args...)
	return 2
}

// queueWrites queues the append's writes: the messages, scheduled or at
// the positions after base (relative: after the head row, which the last
// statement then advances), and the offsets they create or wake.
func (s *Store) queueWrites(b *pgx.Batch, gs *groupSet, p *appendPlan, preps []prepared, now time.Time, base int64, relative bool) {
	insert, upsert := s.q.insertMessage, s.q.g.upsertOffset
	if relative {
		insert, upsert, base = s.q.a.insert, s.q.a.upsert, 0
	}
	ups := newUpserts()
	start := b.Len()
	for i := range p.stamped {
		m, pr := &p.stamped[i], &preps[i]
		if pr.scheduled {
			b.Queue(s.q.insertScheduled, m.ID, m.Type, pr.version, m.CausationID, m.CorrelationID,
				string(pr.payload), jsonArg(pr.metadata), m.CreatedAt, now)
			continue
		}
		pos := base + p.ordinals[i]
		keys, keyNames := keyStrings(pr.keys)
		b.Queue(insert, pos, m.ID, m.Type, pr.version, m.CausationID, m.CorrelationID,
			string(pr.payload), jsonArg(pr.metadata), m.CreatedAt, keys, keyNames)
		for _, g := range gs.byType[m.Type] {
			for _, tp := range g.tuples(pr.keys, m.ID) {
				ups.add(g.row, tp, pos)
			}
		}
	}
	for _, k := range ups.order {
		up := ups.first[k]
		b.Queue(upsert, k.group, up.tp.key, up.tp.keys, up.tp.msgID, up.pos)
	}
	if relative && p.n > 0 {
		b.Queue(s.q.a.advance, p.n)
	}
	p.writes = b.Len() - start
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
	return errors.Is(err, shell.ErrDuplicateID) || errors.As(err, &ce)
}

// refused translates a refusal of an append's checks (isRefusal) into the
// store's error for it; q reads the conflicting messages back.
func (s *Store) refused(ctx context.Context, q querier, err error, guard *core.Guard) (shell.AppendResult, bool, error) {
	var pe *pgconn.PgError
	errors.As(err, &pe)
	switch strings.TrimPrefix(pe.Message, refusePrefix) {
	case refuseConfig:
		return shell.AppendResult{}, true, nil
	case refuseDuplicate:
		id, where, _ := strings.Cut(pe.Detail, "\t")
		return shell.AppendResult{}, false, fmt.Errorf("pgstore: append: message id %s is already %s (if this retries an append whose outcome was unknown, the first attempt committed): %w", id, where, shell.ErrDuplicateID)
	case refuseConflict:
		conflicts, cerr := s.conflicts(ctx, q, guard)
		if cerr != nil {
			return shell.AppendResult{}, false, s.wrap(ctx, "append: guard check", cerr)
		}
		if len(conflicts) == 0 { // deleted since: the guard may hold now
			return shell.AppendResult{}, true, &core.ConflictError{Guard: *guard}
		}
		return shell.AppendResult{}, false, &core.ConflictError{Guard: *guard, Conflicts: conflicts}
	}
	return shell.AppendResult{}, false, s.wrap(ctx, "append", err)
}
