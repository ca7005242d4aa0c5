package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// holeGrace is how long a hole below the horizon may stay before the
// store fills it: an append in flight commits (and advances the horizon
// past its positions itself) within it nearly always, so only an
// abandoned position (a rolled-back append, a session gone) is filled;
// one still being written makes the fill wait a few milliseconds and
// give up (see <prefix>_fill), and the store tries again later, backing
// off to holeMaxWait.
const (
	holeGrace   = 10 * time.Millisecond
	holeMaxWait = time.Second
	// holeBatch bounds the positions one fill writes.
	holeBatch = 1000
)

// holes fills the holes that this store's advances of the horizon met
// (see the package doc, "Ordering and locking"): positions that were
// drawn from the sequence but are neither committed nor known to be in
// flight. One goroutine at most runs per store; any store of any process
// that meets the hole may fill it (a fill is idempotent).
type holes struct {
	s  *Store
	mu sync.Mutex
	// upto is the highest position a hole holds back (the filler runs
	// until the horizon reaches it).
	upto    int64
	running bool
	closed  bool
	done    sync.WaitGroup
}

func newHoles(s *Store) *holes { return &holes{s: s} }

// seen records that the horizon stopped below upto, and starts the
// filler unless it runs.
func (h *holes) seen(horizon, upto int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || upto <= horizon+1 {
		return
	}
	h.upto = max(h.upto, upto-1)
	if !h.running {
		h.running = true
		h.done.Add(1)
		go h.run()
	}
}

// run advances the horizon after holeGrace, fills what still holds it
// back, and goes on (backing off while nothing moves) until it reaches
// the highest position seen held back.
func (h *holes) run() {
	defer h.done.Done()
	wait := holeGrace
	for {
		time.Sleep(wait)
		h.mu.Lock()
		upto, closed := h.upto, h.closed
		h.mu.Unlock()
		if closed {
			h.stop()
			return
		}
		horizon, err := h.fillOnce(upto)
		h.mu.Lock()
		if err == nil && horizon >= h.upto {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		if err != nil {
			h.s.log.Debug("pgstore: filling a hole below the horizon failed (tried again later)", "err", err)
		}
		wait = min(2*wait, holeMaxWait)
	}
}

func (h *holes) stop() {
	h.mu.Lock()
	h.running = false
	h.mu.Unlock()
}

// fillOnce advances the horizon toward upto, filling the positions
// missing between it and the next visible one, and returns the horizon.
func (h *holes) fillOnce(upto int64) (int64, error) {
	s := h.s
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var adv advanced
	if err := adv.scan(s.pool.QueryRow(ctx, s.q.advanceTo, upto)); err != nil {
		return 0, err
	}
	s.afterAdvance(adv)
	if adv.horizon >= upto {
		return adv.horizon, nil
	}
	if _, err := s.pool.Exec(ctx, s.q.a.fill, adv.holes(upto)); err != nil {
		return adv.horizon, err
	}
	if err := adv.scan(s.pool.QueryRow(ctx, s.q.advanceTo, upto)); err != nil {
		return 0, err
	}
	s.afterAdvance(adv)
	return adv.horizon, nil
}

// visibleWait bounds how long an append waits, after its commit, for the
// horizon to reach its positions (see awaitHorizon).
const visibleWait = 2 * time.Second

// awaitHorizon waits, after a commit that appended up to last, until the
// horizon reaches last, so that an append returns once every reader sees
// it (a read after Append returns sees the append, as on every store):
// it waits for the appends in flight below it to commit and advance the
// horizon themselves, advancing it again on c as they do, and fills a
// hole that stays past holeGrace (an abandoned position). It gives up
// after visibleWait, leaving the hole to the filler.
func (s *Store) awaitHorizon(c *pgxpool.Conn, adv *advanced, last int64) {
	if adv.horizon >= last {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), visibleWait+5*time.Second)
	defer cancel()
	start := time.Now()
	wait, fillAt, grace := 50*time.Microsecond, start.Add(holeGrace), holeGrace
	for adv.horizon < last && time.Since(start) < visibleWait {
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Millisecond)
		if time.Now().After(fillAt) {
			if _, err := c.Exec(ctx, s.q.a.fill, adv.holes(last)); err != nil {
				break
			}
			grace = min(2*grace, holeMaxWait)
			fillAt = time.Now().Add(grace)
		}
		var next advanced
		if err := next.scan(c.QueryRow(ctx, s.q.advanceTo, last)); err != nil {
			break
		}
		next.types = append(adv.types, next.types...)
		*adv = next
	}
}

// holes are the positions an advance stopped at, up to upto: after the
// horizon and before the first visible position past it (at most
// holeBatch). A position that holds a row is skipped by the fill.
func (adv *advanced) holes(upto int64) []int64 {
	end := upto + 1
	if adv.beyond > 0 {
		end = min(end, adv.beyond)
	}
	var missing []int64
	for p := adv.horizon + 1; p < end && len(missing) < holeBatch; p++ {
		missing = append(missing, p)
	}
	return missing
}

// afterAdvance announces the types an advance newly covered.
func (s *Store) afterAdvance(adv advanced) {
	if len(adv.types) > 0 {
		s.notifier.Notify(adv.types)
		s.wakes.add(adv.horizon, adv.types)
	}
}

// close stops the filler: a hole left is filled by the next store that
// meets it.
func (h *holes) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.done.Wait()
}
