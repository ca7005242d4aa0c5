package shell

import (
	"container/list"
	"reflect"
	"sync"

	"github.com/samber/lo"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell/driver"
)

// StateCache keeps deciders' folded states per partition in memory, so
// that Handle reads and folds only the messages appended to a partition
// since its last decision instead of the partition's whole history: a
// decision then costs the same on a partition of ten events and of ten
// thousand. Pass one to Handle with HandleOptions.Cache; share it between
// the goroutines handling commands (it is safe for concurrent use). A
// Router (and a Runtime) keeps one of its own for the batches of its pure
// deciders and projectors, the same way (see RouterOptions.StateCache and
// CachePolicy); give Handle that one (Router.StateCache) to share it.
// The router also keeps there the partition histories of the impure
// reactors that allow it (HistoryKeeper: a workflow's runs), so that
// their batches read only the messages appended since the last one.
//
// An entry is the state a decider folded from a partition and the log's
// position it was folded up to (the read's guard position). Handle takes
// the entry out of the cache for the length of its transaction, reads the
// partition's messages after that position, folds them onto the state and
// decides; the state goes back into the cache only once the transaction
// committed. So a decision on a cached state is exactly the decision on a
// full fold, and a failed or rolled-back decision (a rejection, a
// conflict, a busy store) leaves nothing cached for the partition: the
// next one folds it from the log. Two commands decided on one partition at
// once each see the whole history (one of them folds it in full).
//
// What a cache needs from the decider: states are values. The state a
// decision starts from is the one a previous decision left, so the
// decider's Evolve and Decide must not change the state they are given in
// place (return a new value; copy a map or a slice before changing it),
// and a caller must not change the State a Handle returned. States of
// scalars, strings and structs of them are values already.
//
// What a cache needs from the log: messages are only appended. It holds
// for every store, except for messages deleted by a delete-on-ack queue
// (effects.Ack with Delete): do not cache the deciders whose partitions
// hold such messages. After resetting a group (or changing its upcasters
// in a running process), call Drop with the group.
//
// The cache is bounded: it holds at most the number of entries given to
// NewStateCache and, when full, drops the entry used least recently.
type StateCache struct {
	mu      sync.Mutex
	max     int
	entries map[stateKey]*list.Element
	lru     list.List // of *stateEntry, most recently used first
	hits    int64
	misses  int64
	// gen counts the calls of Drop: a state folded before a Drop is not
	// cached after it (see putAt).
	gen uint64
}

// stateKey identifies one cached state: the store, the decider's group,
// the partition (its core.Partition Key) and the decider's state type (two
// deciders of one group with different state types never share).
type stateKey struct {
	store     Store
	group     string
	partition string
	state     reflect.Type
	// fold identifies the projection of a query decision's part
	// (core.QueryFolding.PartKey), whose partition is its conditions
	// (conditionsKey); nil for a partition's state.
	fold any
}

type stateEntry struct {
	key      stateKey
	state    any
	position int64
	// unsaved counts the events folded into state since its last
	// persisted snapshot (see core.Snapshots).
	unsaved int
}

// NewStateCache returns a cache of at most maxEntries states (at least 1).
func NewStateCache(maxEntries int) *StateCache {
	return &StateCache{max: max(maxEntries, 1), entries: make(map[stateKey]*list.Element)}
}

// Len returns the number of states cached.
func (c *StateCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Stats returns how many decisions found their partition's state cached
// (hits) and how many folded it from the log (misses).
func (c *StateCache) Stats() (hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Drop removes every state cached for a group (all of them when group is
// empty): call it after resetting the group, so that its next decisions
// fold their partitions from the log again.
func (c *StateCache) Drop(group string) {
	if g, err := core.NormalizeGroup(group); err == nil {
		group = g
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if group == "" {
		clear(c.entries)
		c.lru.Init()
		return
	}
	for k, e := range c.entries {
		if group == "" || k.group == group {
			c.lru.Remove(e)
			delete(c.entries, k)
		}
	}
}

// peek returns the position of k's entry, if there is one, leaving it
// cached and its use uncounted.
func (c *StateCache) peek(k stateKey) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		return e.Value.(*stateEntry).position, true
	}
	return 0, false
}

// take removes and returns the entry of k, if there is one.
func (c *StateCache) take(k stateKey) (*stateEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.lru.Remove(e)
	delete(c.entries, k)
	return e.Value.(*stateEntry), true
}

// put caches a state folded up to position, evicting the least recently
// used entry when the cache is full. An entry cached meanwhile (by a
// decision that folded the partition in full while this one held the
// entry) is kept if it was folded further.
func (c *StateCache) put(k stateKey, state any, position int64) {
	c.putUnsaved(k, state, position, 0)
}

// putUnsaved is put of a state that folded unsaved events since its last
// persisted snapshot.
func (c *StateCache) putUnsaved(k stateKey, state any, position int64, unsaved int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, state, position, unsaved)
}

// generation returns the number of Drop calls so far, for putAt.
func (c *StateCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// putAt is putUnsaved of a state whose fold began at generation gen: it
// caches nothing if the cache was dropped since (a deletion from the log,
// a reset, may have come between the fold's read and now).
func (c *StateCache) putAt(gen uint64, k stateKey, state any, position int64, unsaved int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	c.putLocked(k, state, position, unsaved)
}

func (c *StateCache) putLocked(k stateKey, state any, position int64, unsaved int) {
	if e, ok := c.entries[k]; ok {
		if e.Value.(*stateEntry).position >= position {
			return
		}
		c.lru.Remove(e)
		delete(c.entries, k)
	}
	for len(c.entries) >= c.max {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.entries, last.Value.(*stateEntry).key)
	}
	c.entries[k] = c.lru.PushFront(&stateEntry{key: k, state: state, position: position, unsaved: unsaved})
}

// StateCacheKeeper is implemented by a Store that keeps a StateCache of
// its own for Handle, dropped whenever messages are deleted from its log
// by any process that opened it (a delete-on-ack queue's ack, a Clear):
// with the guard position of each cached state, which Handle reads the
// partition after, a cached state is then always the one a full fold of
// the log gives, whoever appended or deleted. Handle uses that cache by
// default for the deciders whose state types hold no references (see
// CacheValueStates and HandleOptions.NoCache). sqlitestore.Store is one.
type StateCacheKeeper interface {
	// StateCache returns the store's cache (never nil).
	StateCache() *StateCache
}

// cacheable reports whether a store can key a cache (its dynamic type is
// comparable: every store of this module is a pointer).
func cacheable(store Store) bool {
	return store != nil && reflect.TypeOf(store).Comparable()
}

// cachedReactors picks the reactors whose states the router keeps in its
// StateCache (see CachePolicy): pure deciders and event-sourced projectors
// (effects.Folding reactors with a core.Folder definition) whose state
// type the policy admits, and whose history no hand-written reactor of the
// router handles (such a reactor may delete the messages it acknowledges,
// effects.Ack.Delete, and a cached state would keep what a full fold no
// longer reads).
func (rt *Router) cachedReactors() {
	if rt.opts.StateCache == nil || rt.opts.CacheStates == CacheNoStates || !cacheable(rt.store) {
		return
	}
	for _, re := range rt.reactors {
		if hk, ok := re.r.(HistoryKeeper); ok && hk.KeepsHistory() && !re.info.Pure && len(re.info.PartitionBy) > 0 && len(re.info.History) > 0 && !rt.deletable(re) {
			re.keepsHistory = true
			re.historyHandled = sameTypes(re.info.History, re.info.Handled)
			continue
		}
		fr, ok := re.r.(effects.Folding)
		if !ok || !re.info.Pure || len(re.info.History) == 0 {
			continue
		}
		f := fr.Folder()
		if f == nil || rt.opts.CacheStates == CacheValueStates && !valueType(f.StateType()) || rt.deletable(re) {
			continue
		}
		re.folding, re.folder, re.stateType = fr, f, f.StateType()
		re.historyHandled = sameTypes(re.info.History, re.info.Handled)
	}
}

// deletable tells whether a hand-written reactor of the router handles
// one of re's history types.
func (rt *Router) deletable(re *reactor) bool {
	for _, o := range rt.reactors {
		if o != re && o.def == nil && len(lo.Intersect(o.info.Handled, re.info.History)) > 0 {
			return true
		}
	}
	return false
}

// valueType tells whether values of t hold no reference at any depth (no
// map, slice, pointer, interface, channel, function or unsafe pointer),
// so that no code can change a value of t in place.
func valueType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return valueType(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !valueType(t.Field(i).Type) {
				return false
			}
		}
		return true
	case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	default: // booleans, numbers, strings
		return true
	}
}

// txStates are the states one write transaction of the pure path folded,
// kept for the cache until the transaction commits: a rolled-back
// transaction (a failure, a conflict, a busy store) caches nothing, and
// the entries it took out of the cache stay out (the partitions' next
// batches fold them in full).
type txStates struct {
	cache   *StateCache
	pending map[stateKey]stateEntry
}

// txStates returns the states of a transaction of re's pure path (nil
// when re's states are not cached).
func (rt *Router) txStates(re *reactor) *txStates {
	if re.folding == nil || rt.opts.StateCache == nil {
		return nil
	}
	return &txStates{cache: rt.opts.StateCache, pending: map[stateKey]stateEntry{}}
}

// reset forgets the states of an attempt of the transaction.
func (t *txStates) reset() {
	if t != nil {
		clear(t.pending)
	}
}

// commit caches the states of the committed transaction.
func (t *txStates) commit() {
	if t == nil {
		return
	}
	for k, e := range t.pending {
		t.cache.put(k, e.state, e.position)
	}
	clear(t.pending)
}

// read reads claim's history for a cached reactor: only the messages after
// the position of the partition's state folded earlier in this
// transaction, or else cached (taken out of the cache until commit), or
// else all of them. The history in ec is what was read, its guard the
// guard of a full read (the log's last position); fold folds the state up
// to it and keeps it for the commit. When the claim's messages are the
// history after the state's position (see claimCovers: an event-sourced
// projector following its events), they are the history, read from no
// store, and its guard the claim's.
func (t *txStates) read(rt *Router, re *reactor, claim *driver.ClaimedPartition, read historyReader, ec *effects.Claim) (fold func() any, err error) {
	k := rt.claimStateKey(re, claim, re.stateType)
	base, after, found := t.take(k)
	var res ReadResult
	if opts, reads := rt.cachedRead(re, claim, after, found); !reads {
		res = claimAfter(claim, nil, after)
	} else if res, err = read.ReadPartition(claim.Partition, re.info.History, opts); err != nil {
		return nil, err
	} else if found && after > res.Guard.LastPosition {
		// The log ends before the state's position (a store cleared and
		// written again): fold it in full.
		found = false
		if res, err = read.ReadPartition(claim.Partition, re.info.History, ReadOptions{}); err != nil {
			return nil, err
		}
	}
	ec.History, ec.HistoryGuard = res.Messages, res.Guard
	return func() any {
		if !found {
			base = re.folder.InitialState()
		}
		s := re.folder.FoldState(base, res.Messages)
		t.pending[k] = stateEntry{key: k, state: s, position: res.Guard.LastPosition}
		return s
	}, nil
}

// peek returns the position of the state take would return for k,
// leaving it where it is.
func (t *txStates) peek(k stateKey) (position int64, found bool) {
	if e, ok := t.pending[k]; ok {
		return e.position, true
	}
	return t.cache.peek(k)
}

// take returns the state of k folded earlier in the transaction, or else
// the cached one, taken out of the cache.
func (t *txStates) take(k stateKey) (state any, position int64, found bool) {
	if e, ok := t.pending[k]; ok {
		return e.state, e.position, true
	}
	if e, ok := t.cache.take(k); ok {
		return e.state, e.position, true
	}
	return nil, 0, false
}
