package workflow

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// Waiting for runs to end: every Wait of a process on one store and
// workflow shares one endWatcher, which reads the runs' end events
// appended since it last looked (one read, whatever the number of
// waiters) when the store's notifier announces one, or every waitPoll
// (for ends appended by processes whose notifications do not reach this
// one), and wakes the waiters of the runs that ended. A waiter then reads
// its own run's start and end. So N runs waited on at once cost one read
// each time any of them ends, plus one per run that ended, not N.

// waitPoll is how often the watcher reads the ends appended when no
// notification comes (the run may be driven by another process).
const waitPoll = 50 * time.Millisecond

// waiterPoll is how often a waiter reads its run regardless, the safety
// net should the watcher's reads fail.
const waiterPoll = 2 * time.Second

// watcherKey names a watcher: the store and the workflow's end types.
type watcherKey struct {
	store shell.Store
	ends  [3]string
}

var (
	watchersMu sync.Mutex
	watchers   = map[watcherKey]*endWatcher{}
)

// endWatcher wakes the waiters of runs whose end event it reads.
type endWatcher struct {
	key   watcherKey
	conds []core.Condition
	kick  chan struct{}
	// ready is closed once the watcher knows the position it reads
	// after: a waiter reads its run only then, so that an end the watcher
	// will not read is one the waiter's own read sees.
	ready chan struct{}
	// mu guards waiters; the watcher's goroutine exits, and the watcher
	// leaves watchers, when the last waiter leaves.
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

// watchEnds registers a waiter of run id: wake receives when the run may
// have ended. The returned function unregisters it.
func watchEnds(store shell.Store, ends [3]string, id string) (wake <-chan struct{}, leave func()) {
	key := watcherKey{store: store, ends: ends}
	ch := make(chan struct{}, 1)
	watchersMu.Lock()
	w := watchers[key]
	if w == nil {
		w = &endWatcher{key: key, kick: make(chan struct{}, 1), ready: make(chan struct{}), waiters: map[string][]chan struct{}{}}
		for _, t := range ends {
			w.conds = append(w.conds, core.Condition{Type: t})
		}
		watchers[key] = w
		go w.run()
	}
	w.mu.Lock()
	w.waiters[id] = append(w.waiters[id], ch)
	w.mu.Unlock()
	watchersMu.Unlock()
	<-w.ready
	return ch, func() {
		watchersMu.Lock()
		defer watchersMu.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.waiters[id] = slices.DeleteFunc(w.waiters[id], func(c chan struct{}) bool { return c == ch })
		if len(w.waiters[id]) == 0 {
			delete(w.waiters, id)
		}
		if len(w.waiters) == 0 {
			w.nudge() // the goroutine sees no waiters and exits
		}
	}
}

// nudge makes the watcher look now.
func (w *endWatcher) nudge() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run reads the ends appended after the log's newest position when it
// started, on each notification of an end type and each waitPoll, until
// no waiter is left.
func (w *endWatcher) run() {
	ctx := context.Background()
	if n := w.key.store.Notifier(); n != nil {
		unsub := n.Subscribe(func(types []string) {
			for _, t := range types {
				if slices.Contains(w.key.ends[:], t) {
					w.nudge()
					return
				}
			}
		})
		defer unsub()
	}
	// The newest position a read sees now: ends up to it are for the
	// waiters' own first reads, which come after this. Should the read
	// fail, the waiters are woken to read for themselves until it succeeds
	// (never a read of every end in the log).
	after := newest(ctx, w.key.store, w.conds)
	close(w.ready)
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		select {
		case <-w.kick:
		case <-tick.C:
		}
		if w.leftAlone() {
			return
		}
		if after < 0 {
			after = newest(ctx, w.key.store, w.conds)
			w.wakeAll()
			continue
		}
		if res, err := w.key.store.Read(ctx, w.conds, shell.ReadOptions{After: after}); err == nil {
			w.wake(res.Messages)
			after = max(after, res.Guard.LastPosition)
		} else {
			w.wakeAll() // let the waiters read for themselves
		}
	}
}

// newest is the newest position a read of conds sees, or -1 when the read
// fails.
func newest(ctx context.Context, store shell.Store, conds []core.Condition) int64 {
	res, err := store.Read(ctx, conds, shell.ReadOptions{After: math.MaxInt64})
	if err != nil {
		return -1
	}
	return res.Guard.LastPosition
}

// leftAlone reports whether the watcher has no waiter left, and if so
// takes it out of watchers (a later Wait starts another).
func (w *endWatcher) leftAlone() bool {
	watchersMu.Lock()
	defer watchersMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waiters) > 0 {
		return false
	}
	if watchers[w.key] == w {
		delete(watchers, w.key)
	}
	return true
}

// wake wakes the waiters of the runs whose ends are among msgs.
func (w *endWatcher) wake(msgs []core.PositionedMessage) {
	if len(msgs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		for _, ch := range w.waiters[workflowID(m.Payload)] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (w *endWatcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, chs := range w.waiters {
		for _, ch := range chs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
