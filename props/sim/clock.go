package sim

import (
	"sync"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
)

// Clock is the simulated clock every component reads (the stores, the
// runtimes, the router, the error strategies): it moves only when the
// simulator steps it, forwards or back (a clock jump). It arms no timers:
// the simulator runs the periodic tasks itself (enginehooks.Task.RunOnce).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Epoch is when every simulation starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Step moves the clock by d (negative: back).
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// NewTimer returns a timer that never fires: nothing in a simulation
// waits on a timer, the simulator runs each task when it chooses.
func (c *Clock) NewTimer(time.Duration) driver.Timer { return idleTimer{} }

type idleTimer struct{}

func (idleTimer) C() <-chan time.Time { return nil }
func (idleTimer) Stop() bool          { return true }
