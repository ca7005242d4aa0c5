package sim

import (
	"context"
	"sync"
	"time"
)

// faultCtx is the context of one simulated call: it is cancelled at the
// k-th time anyone looks at it (Done or Err), so a cancellation lands at a
// chosen moment inside the call, the same moment on every run. Contexts
// derived from it (context.WithCancel and friends) hear of the
// cancellation through AfterFunc, synchronously: no goroutine, no timing.
type faultCtx struct {
	mu     sync.Mutex
	at     int // cancel at this observation (0: never)
	seen   int
	done   chan struct{}
	err    error
	afters map[int]func()
	next   int
	late   []func() // registered after the cancellation: run at the next look
}

func newFaultCtx(at int) *faultCtx {
	return &faultCtx{at: at, done: make(chan struct{}), afters: map[int]func(){}}
}

// observe counts one look at the context and cancels it at the chosen one.
// Functions registered with AfterFunc after the cancellation run here.
func (c *faultCtx) observe() {
	c.mu.Lock()
	c.seen++
	fire := c.at > 0 && c.seen == c.at && c.err == nil
	late := c.late
	c.late = nil
	c.mu.Unlock()
	for _, f := range late {
		if f != nil {
			f()
		}
	}
	if fire {
		c.cancel()
	}
}

// cancel cancels the context and runs the functions registered with
// AfterFunc, in the order they were registered.
func (c *faultCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	close(c.done)
	var fs []func()
	for i := 0; i < c.next; i++ {
		if f, ok := c.afters[i]; ok {
			fs = append(fs, f)
		}
	}
	c.afters = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// fired reports whether the cancellation happened.
func (c *faultCtx) fired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *faultCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *faultCtx) Value(any) any               { return nil }

func (c *faultCtx) Done() <-chan struct{} {
	c.observe()
	return c.done
}

func (c *faultCtx) Err() error {
	c.observe()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is what context.WithCancel uses to propagate a cancellation
// from a parent that is not one of the standard library's (the
// context.afterFuncer interface): f runs when c is cancelled.
func (c *faultCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		// Already cancelled (the look that cancelled it may be the one
		// context.WithCancel takes just before it registers f, holding the
		// child's lock): f runs at the next look at c, not here, where it
		// would deadlock, nor in a goroutine, whose timing no run chooses.
		i := len(c.late)
		c.late = append(c.late, f)
		c.mu.Unlock()
		return func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			if i < len(c.late) && c.late[i] != nil {
				c.late[i] = nil
				return true
			}
			return false
		}
	}
	id := c.next
	c.next++
	c.afters[id] = f
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.afters[id]; !ok {
			return false
		}
		delete(c.afters, id)
		return true
	}
}
