package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Appends sent together: see the package doc's section of that name.

// defaultConcurrentAppends is Options.ConcurrentAppends' default: one
// transaction in flight, measured ahead of two to four with 16 writers
// on a Unix socket, and within a seventh of them through the 0.5 ms
// proxy (BenchmarkPostgresAppendParallel; see the package doc, "Appends
// sent together").
const defaultConcurrentAppends = 1

// maxGroupMessages bounds the messages of a group.
const maxGroupMessages = 256

// appendGroups is a store's standalone appends in flight, and those
// waiting to go together.
type appendGroups struct {
	s *Store
	// limit is how many go at once; 0 sends every append alone.
	limit int

	mu sync.Mutex
	// flying are the groups in flight (at most limit), waiting the
	// appends waiting for one to land.
	flying  []*flight
	waiting []*appendMember
}

// flight is a group in flight: its appends (the first sends it) and the
// keys they lock.
type flight struct {
	group []*appendMember
	keys  boundarySet
}

// append sends m's append, alone or in a group.
func (g *appendGroups) append(ctx context.Context, m *appendMember) (driver.AppendResult, bool, error) {
	if g.limit <= 0 || m.keys == nil || m.plan.n == 0 || len(m.plan.scheduledTypes) > 0 {
		return g.s.sendAlone(ctx, m, nil, false)
	}
	g.mu.Lock()
	if len(g.flying) < g.limit {
		f := &flight{group: []*appendMember{m}, keys: m.keys}
		g.flying = append(g.flying, f)
		g.mu.Unlock()
		return g.lead(ctx, m, f)
	}
	for _, f := range g.flying {
		if compatible(f.keys, m.keys) == conflicting {
			// It would wait in the server for the keys of that group:
			// sent at once, it waits there, as with no groups.
			g.mu.Unlock()
			return g.s.sendAlone(ctx, m, nil, false)
		}
	}
	m.lead, m.done = make(chan *flight, 1), make(chan struct{})
	g.waiting = append(g.waiting, m)
	g.mu.Unlock()
	select {
	case f := <-m.lead:
		return g.lead(ctx, m, f)
	case <-m.done:
		return m.outcome(ctx, g.s)
	case <-ctx.Done():
	}
	g.mu.Lock()
	if i := slices.Index(g.waiting, m); i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
		g.mu.Unlock()
		return driver.AppendResult{}, false, fmt.Errorf("pgstore: append: %w (nothing was written)", ctx.Err())
	}
	g.mu.Unlock()
	select { // taken into a group already
	case f := <-m.lead:
		return g.lead(ctx, m, f)
	case <-m.done:
		return m.outcome(ctx, g.s)
	}
}

// lead sends the flight f (its first append m, the caller's), hands its
// place on once the round trip is over, and returns the caller's
// outcome. A nil flight sends m alone, beside the groups in flight.
func (g *appendGroups) lead(ctx context.Context, m *appendMember, f *flight) (driver.AppendResult, bool, error) {
	if f == nil {
		return g.s.sendAlone(ctx, m, nil, false)
	}
	once := sync.OnceFunc(func() { g.next(f) })
	group := f.group
	if len(group) == 1 {
		// Its keys only tried: one held elsewhere refuses it, and it
		// waits for it out of the place it held, which the others need.
		res, again, err := g.s.sendAlone(ctx, m, once, true)
		if errors.Is(err, errBusy) {
			return g.s.sendAlone(ctx, m, nil, false)
		}
		return res, again, err
	}
	g.s.sendGroup(f, once)
	for _, m := range group[1:] {
		close(m.done)
	}
	return group[0].outcome(ctx, g.s)
}

// next gives the place of a group that landed to the appends waiting,
// sent together by the first of them, or frees it. The waiting appends
// that may not go with that group (a key one guards the other takes)
// are sent alone at once, beside it, as they would be with no groups:
// held back, guarded appends to one boundary would read and append again
// one behind another.
func (g *appendGroups) next(landed *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.flying, landed)
	if len(g.waiting) == 0 {
		g.flying = slices.Delete(g.flying, i, i+1)
		return
	}
	group, alone, keys := g.pick()
	f := &flight{group: group, keys: keys}
	g.flying[i] = f
	group[0].lead <- f
	for _, m := range alone {
		m.lead <- nil
	}
}

// pick takes the next group off the waiting list: the first waiting
// append, and after it every one that may go with those taken (the same
// configuration, no key that one guards taken by another), up to
// maxBoundaryKeys keys and maxGroupMessages messages. It takes off too,
// as alone, the waiting appends whose keys conflict with the group's;
// the others wait for the next group.
func (g *appendGroups) pick() (group, alone []*appendMember, keys boundarySet) {
	first := g.waiting[0]
	group = []*appendMember{first}
	keys = boundarySet{}
	for k, x := range first.keys {
		keys.add(k, x)
	}
	n := len(first.stamped)
	kept := g.waiting[:0]
	for _, m := range g.waiting[1:] {
		switch fits := compatible(keys, m.keys); {
		case m.gs != first.gs || n+len(m.stamped) > maxGroupMessages || fits == tooMany:
			kept = append(kept, m)
		case fits == conflicting:
			alone = append(alone, m)
		default:
			group = append(group, m)
			n += len(m.stamped)
			for k, x := range m.keys {
				keys.add(k, x)
			}
		}
	}
	clear(g.waiting[len(kept):])
	g.waiting = kept
	return group, alone, keys
}

// How an append's keys fit with a group's (compatible).
const (
	fitting = iota
	conflicting
	tooMany
)

// compatible says whether an append locking keys b may go in one
// transaction with appends locking a: fitting, conflicting when a key
// that one takes exclusively (a guard's) is taken by the other, tooMany
// when their union passes maxBoundaryKeys.
func compatible(a, b boundarySet) int {
	extra := 0
	for k, x := range b {
		held, ok := a[k]
		if !ok {
			extra++
			continue
		}
		if held || x {
			return conflicting
		}
	}
	if len(a)+extra > maxBoundaryKeys {
		return tooMany
	}
	return fitting
}

// outcome is m's result once its group was sent: the group's, or m sent
// again alone when the group wrote nothing.
func (m *appendMember) outcome(ctx context.Context, s *Store) (driver.AppendResult, bool, error) {
	if !m.alone {
		return m.res, false, m.err
	}
	if err := ctx.Err(); err != nil {
		return driver.AppendResult{}, false, fmt.Errorf("pgstore: append: %w (nothing was written)", err)
	}
	return s.sendAlone(ctx, m, nil, false)
}

// sendGroup sends the appends of flight f in one transaction (see "Appends
// sent together"), calls sent once its round trip is over, and sets each
// member's outcome. Its context is none of the members': no one member's
// end cancels the others' appends.
func (s *Store) sendGroup(f *flight, sent func()) {
	ctx := context.Background()
	gen := s.adv.generation()
	group, first := f.group, f.group[0]
	var stamped []core.Message
	var preps []prepared
	var ids []uuid.UUID
	for _, m := range group {
		stamped = append(stamped, m.stamped...)
		preps = append(preps, m.preps...)
		ids = append(ids, m.plan.ids()...)
	}
	plan := planAppend(stamped, preps, nil)
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	s.queueLock(b, true, false, f.keys.missing(nil), true, &first.gs.version, ids)
	var guards []*core.Guard
	for _, m := range group {
		if m.plan.guard != nil {
			guards = append(guards, m.plan.guard)
		}
	}
	if guards != nil {
		sql, args := s.refuseConflictsSQL(guards, nil)
		b.Queue(sql, args...)
	}
	s.queueWrites(b, first.gs, plan, preps, first.now)
	positions, horizon, err := s.commitBatch(ctx, b, plan)
	sent()
	if err != nil {
		// An error the server reported with the session going on rolled
		// the transaction back; a session that ended (a FATAL error, a
		// broken connection) may have ended after its COMMIT.
		var pe *pgconn.PgError
		rolledBack := errors.As(err, &pe) && pe.Severity == "ERROR"
		for _, m := range group {
			if rolledBack {
				m.alone = true
			} else {
				m.err = s.wrap(ctx, "append", err)
			}
		}
		return
	}
	res := plan.result(positions)
	s.afterCommit(gen, horizon, res.Last, plan.types, nil)
	off := 0
	for _, m := range group {
		n := len(m.stamped)
		m.res = driver.AppendResult{Positions: res.Positions[off : off+n : off+n], Messages: m.stamped}
		for _, p := range m.res.Positions {
			m.res.Last = max(m.res.Last, p)
		}
		off += n
	}
}
