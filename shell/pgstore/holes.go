package pgstore

import (
	"context"
	"sync"
	"time"
)

// After its commit, an append waits until the stored horizon covers its
// positions (see the package doc, "Ordering and locking"), so that a
// read, a claim or a catch-up after Append returns sees it, as on every
// store. An append that is its store's only one in flight moves the
// stored horizon in its own transaction, just before COMMIT, the others
// just after it (<prefix>_raise; see inlineAdvance): one that so moved it
// over its positions, or that another's move covered, waits for nothing.
// The others (the head row held by another transaction, positions below
// their own still in flight) hand their last position to the store's
// advancer and wait for it.
//
// The advancer is one goroutine per store: it advances the stored
// horizon for every append waiting on it at once, with one statement
// (<prefix>_settle) that waits in the server for the appends in flight
// below the positions it must cover (on the rows they wrote, so the wait
// ends with their commit, without polling), fills with tombstones the
// positions none will write (an append rolled back, a session gone), and
// stores the horizon. Appends of one process so never queue on the head
// row: a first version had each append advance the horizon after its
// commit itself, and at 16 writers most backends waited on the head
// row's lock (Lock:tuple and Lock:transactionid in pg_stat_activity).

// inFlightGrace is how long the advancer leaves the appends waiting on
// it to the advances of this store's appends still in flight (see run).
var inFlightGrace = 2 * time.Millisecond

// visibleWait bounds how long an append waits, after its commit, for the
// stored horizon to cover it; the advancer goes on after it returns.
const visibleWait = 2 * time.Second

// settleRetry is the first pause after a failed settle (a hole held
// longer than visibleWait by a transaction still open, a lost
// connection); the pauses double up to settleMaxRetry.
const (
	settleRetry    = 10 * time.Millisecond
	settleMaxRetry = time.Second
)

// advancer moves the stored horizon for the appends waiting on it, and
// announces their types (to the notifier and other processes) once it
// covers them: a worker woken before would claim below the horizon and
// find nothing.
type advancer struct {
	s  *Store
	mu sync.Mutex
	// stored is the highest stored horizon this store has seen.
	stored int64
	// moved is closed (and replaced) when stored moves or the store
	// closes.
	moved chan struct{}
	// pending are the appends waiting, want the highest position among
	// them.
	pending []pendingAppend
	want    int64
	running bool
	closed  bool
	done    sync.WaitGroup
	// gen counts Clears: a horizon read before one is not raised to.
	gen int
	// ctx ends the advancer's statement when the store closes.
	ctx  context.Context
	stop context.CancelFunc
}

// pendingAppend is an append committed up to last, whose types are
// announced once the stored horizon covers it.
type pendingAppend struct {
	last  int64
	types []string
}

func newAdvancer(s *Store) *advancer {
	ctx, stop := context.WithCancel(context.Background())
	a := &advancer{s: s, moved: make(chan struct{}), ctx: ctx, stop: stop}
	a.done.Add(1)
	go a.heal()
	return a
}

// healMark ends the statement of heal.
const healMark = "/* heal */"

// healInterval is how often a store checks that the stored horizon is not
// behind the log (see heal).
const healInterval = time.Second

// healEvery is healInterval, but for the tests that must see what a store
// does between its ticks (SetHealEvery).
var healEvery = healInterval

// heal moves the stored horizon every healInterval when it lags behind
// the messages committed after it: those of a process that died between
// its commit and its advancer's statement, which no other append has
// covered since. Claims read up to the stored horizon, so without it
// their messages would wait for the next append; reads, which probe past
// the stored horizon, are not held back meanwhile. It costs an idle store
// a statement of a few index probes a second, and another that reads the
// sizes of its tables (refreshStats, which analyses those that grew).
func (a *advancer) heal() {
	defer a.done.Done()
	t := time.NewTicker(healEvery)
	defer t.Stop()
	stats := newStatsWatch(a.s.names)
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.s.statsNow: // the log doubled (see growing)
			ctx, cancel := context.WithTimeout(a.ctx, healInterval)
			a.s.refreshStats(ctx, stats)
			cancel()
			continue
		case <-t.C:
		}
		a.mu.Lock()
		gen := a.gen
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(a.ctx, healInterval)
		var adv advanced
		err := adv.scan(a.s.pool.QueryRow(ctx, a.s.q.a.heal))
		if err == nil {
			a.s.refreshStats(ctx, stats)
		}
		cancel()
		if err == nil {
			a.mu.Lock()
			var last int64
			var types []string
			if a.gen == gen {
				last, types = a.raise(adv.horizon)
			}
			a.mu.Unlock()
			a.s.announce(last, types)
		}
	}
}

// AppendsWaiting reports whether an append of this store waits for the
// stored horizon to cover it (driver.AppendWaiter): the router then ends
// its transactions that hold positions in flight at the end of a batch.
func (s *Store) AppendsWaiting() bool {
	a := s.adv
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending) > 0
}

// generation returns the number of Clears so far: a horizon read after
// it is passed to covered with it.
func (a *advancer) generation() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen
}

// covered records that the stored horizon reached h (an append's commit
// moved it), read in generation gen, and announces the waiting appends
// it covers; a horizon read before a Clear is ignored.
func (a *advancer) covered(gen int, h int64) {
	a.mu.Lock()
	var last int64
	var types []string
	if a.gen == gen {
		last, types = a.raise(h)
	}
	a.mu.Unlock()
	a.s.announce(last, types)
}

// cleared forgets the stored horizon and the appends waiting: Clear
// started positions at 1 again.
func (a *advancer) cleared() {
	a.mu.Lock()
	a.gen++
	a.stored, a.want = 0, 0
	clear(a.pending)
	a.pending = a.pending[:0]
	a.mu.Unlock()
}

// raise (mu held) raises stored to h, and returns the waiting appends it
// now covers: their newest position and the union of their types.
func (a *advancer) raise(h int64) (last int64, types []string) {
	if h <= a.stored {
		return 0, nil
	}
	a.stored = h
	if !a.closed { // (closed once by close)
		close(a.moved)
		a.moved = make(chan struct{})
	}
	kept := a.pending[:0]
	for _, p := range a.pending {
		if p.last > h {
			kept = append(kept, p)
			continue
		}
		last = max(last, p.last)
		for _, t := range p.types {
			types = appendDistinct(types, t)
		}
	}
	clear(a.pending[len(kept):])
	a.pending = kept
	return last, types
}

// await hands an append committed up to last (in generation gen) to the advancer and waits
// until the stored horizon covers it (or visibleWait passes, or the store
// closes); types are announced when it does.
func (a *advancer) await(gen int, last int64, types []string) {
	a.mu.Lock()
	if last <= a.stored || a.closed || a.gen != gen { // (a Clear removed it)
		a.mu.Unlock()
		a.s.announce(last, types)
		return
	}
	a.pending = append(a.pending, pendingAppend{last: last, types: types})
	a.want = max(a.want, last)
	if !a.running {
		a.running = true
		a.done.Add(1)
		go a.run()
	}
	timeout := time.NewTimer(visibleWait)
	defer timeout.Stop()
	for a.stored < last && !a.closed {
		moved := a.moved
		a.mu.Unlock()
		select {
		case <-moved:
		case <-timeout.C:
			return // the advancer goes on
		}
		a.mu.Lock()
	}
	a.mu.Unlock()
}

// run settles until the stored horizon covers every waiting append,
// pausing after a failure (doubling up to settleMaxRetry).
func (a *advancer) run() {
	defer a.done.Done()
	pause := settleRetry
	grace := time.Now().Add(inFlightGrace)
	for {
		a.mu.Lock()
		want, gen := a.want, a.gen
		if a.closed || want <= a.stored {
			a.running = false
			a.mu.Unlock()
			return
		}
		if a.s.appending.Load() > 0 && time.Now().Before(grace) {
			// Appends of this store in flight advance the horizon
			// after their commits (inlineAdvance): the last to commit
			// covers those that committed before it, most likely the
			// ones waiting, without a statement of the advancer's.
			moved := a.moved
			a.mu.Unlock()
			t := time.NewTimer(time.Until(grace))
			select {
			case <-moved:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		a.mu.Unlock()
		h, err := a.settle(want)
		a.mu.Lock()
		var last int64
		var types []string
		if a.gen == gen {
			last, types = a.raise(h)
		}
		a.mu.Unlock()
		a.s.announce(last, types)
		if err == nil {
			pause = settleRetry
			continue
		}
		a.s.log.Debug("pgstore: advancing the horizon failed (tried again)", "upto", want, "err", err)
		time.Sleep(pause)
		pause = min(2*pause, settleMaxRetry)
	}
}

// settle runs <prefix>_settle up to upto, returning the horizon it
// stored.
func (a *advancer) settle(upto int64) (int64, error) {
	ctx, cancel := context.WithTimeout(a.ctx, visibleWait+5*time.Second)
	defer cancel()
	var adv advanced
	err := adv.scan(a.s.pool.QueryRow(ctx, a.s.q.a.settle, upto, visibleWait.Milliseconds()))
	return adv.horizon, err
}

// close stops the advancer, releasing the appends waiting on it: a hole
// left is settled by the next store that meets it.
func (a *advancer) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.moved)
	}
	a.mu.Unlock()
	a.stop()
	a.done.Wait()
}

// announce tells the notifier and other processes of appends up to last
// with the given types, once the stored horizon covers them.
func (s *Store) announce(last int64, types []string) {
	if len(types) > 0 {
		s.notifier.Notify(types)
		s.wakes.add(last, types)
	}
}
