package pgstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sourced-go/sourced/shell/driver"
)

// Sessions that start cold. PostgreSQL plans each prepared statement in
// each session (server process) on its first execution, and a new session
// first reads the catalog entries of every table, index, function and
// operator it touches. For the store's statements both are slow: the claim
// of a fresh session took 5.5 ms to parse and 10 ms to plan and run on an
// idle server (psql, \timing; 0.7 and 2.7 ms in a session that had run
// other statements on the same tables, 0.3 ms once planned), and in a busy
// run every hot statement of a new session 10-30 ms. A runtime's workers
// and its appends each open sessions at their first commands, so the
// first commands waited for all of them: in BenchmarkPostgresEndToEnd the
// first 200 ms of commands were decided 70-180 ms after they were
// appended, against a p99 of 16-20 ms for the rest of the run, and that
// first fifth of a second was the whole of the run's p99 (22-160 ms run to
// run).
//
// So Warm (which shell.Runtime calls at its Start, see driver.Warmer) opens
// the sessions the runtime will use and runs each hot statement once on
// each of them, every parameter NULL, before the first command: a claim
// of no group, an append of no message, a guard of no condition. The
// statements plan as they would for real values (the sessions plan
// generically, see plan.go), and leave nothing: each runs under a
// savepoint rolled back after it (its row and advisory locks released
// with it), in a transaction rolled back at the end, with short lock and
// statement timeouts. None of the store's statements fails so (the
// functions take a NULL for nothing to do); one that fails all the same
// (a lock not had in time) is dropped from the session's statement cache
// by pgx, and plans at its first use. The runtime refreshes the statistics
// (Optimize) just before: an ANALYZE makes every session plan the
// statements on the tables it analysed again, and the runtime's first
// refresh, which came at once after Start, undid the warm-up. The reads
// by condition are not among them: their statements are as many as the deciders' queries, and plan
// at first use, in sessions whose catalogs are warm.

// warmBegin opens a session's rehearsal, its waits bounded: a
// rehearsal never makes the store's work wait long.
const warmBegin = "BEGIN; SET LOCAL lock_timeout = '20ms'; SET LOCAL statement_timeout = '1s'"

// warmAcquireTimeout is how long Warm waits for each session it asks
// the pool for.
const warmAcquireTimeout = time.Second

// Warm readies up to w.Sessions of the store's sessions (at most the
// pool's size) for the statements of its hot paths, as shell.Runtime's
// Start does before its workers claim (see driver.Warmer). It is an
// optimisation: the statements it could not rehearse plan at their first
// use, and it returns an error only when ctx ended or no session could
// be opened.
func (s *Store) Warm(ctx context.Context, w driver.Warmup) error {
	n := max(1, min(w.Sessions, int(s.pool.Config().MaxConns)))
	gs, _ := s.currentGroups(ctx, false) // the groups' kinds choose the claims (nil: all of them)
	texts := s.warmTexts(w, gs)
	// The sessions are asked for at once and held together, so that each
	// is a different one: the pool opens those it lacks side by side.
	// Each is waited for a short while only: a pool whose connections are
	// all in use (another runtime's, the application's) is warmed as far
	// as it gives them, and the work holding them, which may need one
	// more, never waits long for ours.
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, warmAcquireTimeout)
			defer cancel()
			conns[i], errs[i] = s.pool.Acquire(actx)
		})
	}
	wg.Wait()
	warmed := 0
	for _, c := range conns {
		if c != nil {
			warmed++
			wg.Go(func() {
				defer c.Release()
				s.warmSession(ctx, c, texts)
			})
		}
	}
	wg.Wait()
	if warmed == 0 {
		return s.wrap(ctx, "warm", errors.Join(errs...))
	}
	return s.wrap(ctx, "warm", ctx.Err())
}

// warmTexts are the statements Warm rehearses: those of a claim with the
// warm-up's limits, an acknowledgement, an append and its guards' check.
// Not the single message's insert (insert): its position is drawn from
// the sequence before the NULL is refused, a hole the horizon would have
// to fill (TestWarmLeavesNoTrace fails with it); insertMany of no rows
// plans the same table and draws none. The claims are those of the
// kinds of group registered (by key pairs, queues by id; both while the
// configuration is not known), the claims' plans being most of a
// warm-up's cost (7 ms to plan each in a fresh session): 230-270 ms for
// four sessions with both kinds' at three sizes, 200-230 ms with one
// kind's at two (BenchmarkWarm, the sessions opened side by side).
func (s *Store) warmTexts(w driver.Warmup, gs *groupSet) []string {
	q := s.q
	batch := max(w.BatchSize, 1)
	keyed, queues := true, true
	if gs != nil {
		keyed = slices.ContainsFunc(gs.list, func(g *groupConf) bool { return !g.byID() })
		queues = slices.ContainsFunc(gs.list, (*groupConf).byID)
	}
	texts := []string{q.g.probe, q.g.groupRow}
	var bounds []int
	for _, k := range append([]int{1}, w.Claims...) {
		if b := claimBound(max(k, 1)); !slices.Contains(bounds, b) {
			bounds = append(bounds, b)
		}
	}
	for _, b := range bounds {
		if keyed {
			texts = append(texts, s.limited(q.g.claimMany, b, batch), s.limited(q.g.claimManyOwn, b, batch))
		}
		if queues {
			texts = append(texts, s.limited(q.g.claimQueue, b, 0), s.limited(q.g.claimQueueOwn, b, 0))
		}
	}
	return append(texts, q.g.ackMany, q.g.ack,
		q.a.lock, q.a.guards[0], q.a.guards[1], q.a.insertMany, q.a.upsert, q.a.raise, q.a.settle)
}

// warmSession rehearses texts on c (see above). The failures of single
// statements are the rehearsal's business only: c is given back clean
// whatever happened (a connection whose rollback failed is closed).
func (s *Store) warmSession(ctx context.Context, c *pgxpool.Conn, texts []string) {
	conn := c.Conn()
	if _, err := conn.Exec(ctx, warmBegin); err != nil {
		s.warmDone(ctx, c)
		return
	}
	for _, text := range texts {
		if ctx.Err() != nil || !s.rehearse(ctx, conn, text) {
			break
		}
	}
	s.warmDone(ctx, c)
}

// rehearse runs text once on conn with every parameter NULL, under a
// savepoint rolled back after it, in one batch: prepared and planned in
// the session's statement cache, where the store's own calls of it find
// it. false means conn can rehearse nothing more.
func (s *Store) rehearse(ctx context.Context, conn *pgx.Conn, text string) bool {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT warm")
	b.Queue(text, make([]any, params(text))...)
	b.Queue("ROLLBACK TO SAVEPOINT warm")
	if err := conn.SendBatch(ctx, b).Close(); err == nil {
		return true
	}
	_, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT warm")
	return err == nil
}

// params is the number of parameters of text, one of the store's
// statements: the highest $n it names (each names $1 to $n).
func params(text string) int {
	n := 0
	for i := 0; i < len(text); i++ {
		if text[i] != '$' {
			continue
		}
		j := i + 1
		for j < len(text) && text[j] >= '0' && text[j] <= '9' {
			j++
		}
		if k, err := strconv.Atoi(text[i+1 : j]); err == nil {
			n = max(n, k)
		}
		i = j - 1
	}
	return n
}

// warmDone ends c's rehearsal: rolled back, or closed when that fails.
func (s *Store) warmDone(ctx context.Context, c *pgxpool.Conn) {
	if _, err := c.Conn().Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		c.Conn().Close(context.WithoutCancel(ctx))
	}
}
