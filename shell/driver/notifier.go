package driver

import (
	"slices"
	"sync"
)

// InlineNotifier is the in-process Notifier: Notify calls every subscriber
// synchronously, in subscription order, in the goroutine that committed the
// append. Subscribers should return quickly (wake a worker, do not work).
// The zero value is ready to use and safe for concurrent use.
type InlineNotifier struct {
	mu     sync.Mutex
	nextID int
	subs   []inlineSub
}

type inlineSub struct {
	id int
	fn func(types []string)
}

// Subscribe registers fn; the returned function unsubscribes it.
func (n *InlineNotifier) Subscribe(fn func(types []string)) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextID++
	id := n.nextID
	n.subs = append(n.subs, inlineSub{id: id, fn: fn})
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.subs = slices.DeleteFunc(n.subs, func(s inlineSub) bool { return s.id == id })
	}
}

// Notify calls every subscriber with types.
func (n *InlineNotifier) Notify(types []string) {
	if len(types) == 0 {
		return
	}
	n.mu.Lock()
	subs := slices.Clone(n.subs)
	n.mu.Unlock()
	for _, s := range subs {
		s.fn(types)
	}
}
