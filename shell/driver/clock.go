package driver

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// Clock is where every component of the shell takes its time from: the
// system clock in production, a SimClock in tests that advance time
// without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed.
	NewTimer(d time.Duration) Timer
}

// Clocked is implemented by a store that can keep a Clock of its own
// (memstore.WithSharedClock, sqlitestore's Options.Clock): Clock returns
// it, and the store's Now is that clock's; nil when the store was given
// none (it reads time.Now, or a bare now function such as
// memstore.WithClock's).
//
// A Runtime whose Config.Clock is nil takes the store's clock, so one
// clock, given once to the store, dates everything: the store's stamps
// and what it schedules, the runtime's promotions, heartbeats, claim
// expiry and timers, the router's claims (effects.Claim.Now) and so a
// workflow's sleeps and retries. A Config.Clock that is not the store's
// is refused (ErrClockMismatch): two clocks would drift apart.
type Clocked interface {
	Clock() Clock
}

// ErrClockMismatch is matched by the error of NewRuntime given a
// Config.Clock other than the clock its store keeps (Clocked): give the
// clock once, to the store, and leave Config.Clock nil.
var ErrClockMismatch = errors.New("sourced: the runtime's clock is not the store's")

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }

// SimClock is a simulated clock: time stands still until Advance moves it,
// firing the timers that come due in order. Tests use it to run scheduled
// messages, retries with backoff, stale-claim expiry and timers
// deterministically, without sleeping. It is safe for concurrent use.
type SimClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*simTimer
	seq    int
	// waiters are notified when a timer is created (see BlockUntil).
	waiters []chan struct{}
}

// NewSimClock returns a simulated clock at start.
func NewSimClock(start time.Time) *SimClock { return &SimClock{now: start} }

// Now returns the simulated time.
func (c *SimClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when Advance reaches now+d (at once
// for d <= 0).
func (c *SimClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &simTimer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1), seq: c.seq}
	if d <= 0 {
		t.ch <- c.now
		t.fired = true
		return t
	}
	c.timers = append(c.timers, t)
	for _, w := range c.waiters {
		close(w)
	}
	c.waiters = nil
	return t
}

// Advance moves the clock forward by d, firing every timer due on the way
// in time order (each sees Now at its own due time while it fires).
func (c *SimClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool {
			if c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].seq < c.timers[j].seq
			}
			return c.timers[i].at.Before(c.timers[j].at)
		})
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		if t.at.After(c.now) {
			c.now = t.at
		}
		t.fired = true
		t.ch <- c.now
	}
	c.now = end
	c.mu.Unlock()
}

// Set moves the clock to t (forward only), firing due timers.
func (c *SimClock) Set(t time.Time) {
	if d := t.Sub(c.Now()); d > 0 {
		c.Advance(d)
	}
}

// Timers returns how many timers are pending.
func (c *SimClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are pending, so a test can
// let the goroutines under test arm their timers before it advances the
// clock.
func (c *SimClock) WaitForTimers(n int) {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return
		}
		w := make(chan struct{})
		c.waiters = append(c.waiters, w)
		c.mu.Unlock()
		<-w
	}
}

type simTimer struct {
	clock *SimClock
	at    time.Time
	ch    chan time.Time
	seq   int
	fired bool
}

func (t *simTimer) C() <-chan time.Time { return t.ch }

func (t *simTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			t.fired = true
			return true
		}
	}
	return false
}
