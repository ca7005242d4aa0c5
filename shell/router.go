package shell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/samber/lo"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell/driver"
)

// RouterOptions configure a Router. Zero values take the defaults.
type RouterOptions struct {
	// BatchSize caps the messages of one claim (default 50).
	BatchSize int
	// BatchesPerHandle caps how many batches one HandleNext handles
	// (default DefaultBatchesPerHandle): a pure reactor's (see
	// effects.Pure) claimed, handled and acknowledged in one write
	// transaction; any other's one after another, each acknowledged in the
	// transaction that claims the next (for an impure queue, each of those
	// transactions commits and claims up to ClaimPartitions partitions).
	BatchesPerHandle int
	// ClaimPartitions caps how many partitions one transaction of an
	// impure id-partitioned reactor (a queue: one partition per job)
	// claims (default BatchSize): the reactor handles them one after
	// another, outside any transaction, and their signals and acks commit
	// together in the transaction that claims the next ones. An impure
	// reactor with partition keys claims one partition per transaction.
	// The claims of one transaction are handled by one worker one after
	// another: for jobs slow enough that spreading them across workers
	// matters more than the commits saved, set it lower (1: one job per
	// transaction). On a store whose positions may skip (PostgreSQL) it
	// also caps, with BatchesPerHandle, how many partitions a pure
	// reactor's transaction claims at once (see HandleNext).
	ClaimPartitions int
	// InlineBudget bounds how long one write transaction of a pure reactor
	// goes on claiming further batches (default DefaultInlineBudget): other
	// writers wait for the store's write lock meanwhile, so slow sync work
	// ends the transaction after fewer batches.
	InlineBudget time.Duration
	// ErrorStrategy is the default strategy for failed batches (default:
	// fail the group).
	ErrorStrategy ErrorStrategy
	// MaxConflictRetries is how many times a batch whose append conflicts
	// is handled again (on a fresh history) before it goes through the error
	// strategy (default 3).
	MaxConflictRetries int
	// Now is the clock (default: the store's).
	Now func() time.Time
	// Logger receives after-sync failures and strategy decisions (default:
	// the store's logger, when it has one, else slog.Default()).
	Logger *slog.Logger
	// WorkerID names the router's claims in HandleNext and Drain (default
	// "router").
	WorkerID string
	// Observer hears about batches, claims, conflicts and failures (see
	// Observer); nil: nobody.
	Observer Observer
	// StateCache keeps the folded states of the partitions of the pure
	// deciders and event-sourced projectors between batches (see
	// StateCache), so that a batch reads and folds only the history
	// appended since its partition's last batch instead of all of it.
	// Default: a cache of the router's own, of DefaultStateCacheSize
	// states. Pass the cache the web handlers give Handle
	// (HandleOptions.Cache) to share the states with them. Which
	// reactors are cached: see CacheStates.
	StateCache *StateCache
	// CacheStates chooses the reactors whose states StateCache keeps
	// (default CacheValueStates).
	CacheStates CachePolicy
	// BatchTimeout is how long one batch of an impure reactor may run
	// when the reactor declares no timeout of its own (core.Hooks.Timeout,
	// TimeoutProvider): past it the batch's context is cancelled and, if
	// the batch then fails, it fails with a *BatchTimeoutError that goes
	// to the group's error strategy. 0 (the default of a bare Router): no
	// timeout; a Runtime sets it to Config.MaxClaimAge.
	BatchTimeout time.Duration
	// SyncTimeout is how long the sync work (effects.Sync) of one batch
	// may run, inside the batch's write transaction, when the reactor
	// declares no timeout of its own (core.Hooks.Timeout,
	// TimeoutProvider): past it the work's context is cancelled and, if
	// the work then fails, the batch fails with a *BatchTimeoutError that
	// goes to the group's error strategy. Every other write of the process
	// waits for that transaction meanwhile (on SQLite until its busy
	// timeout, then fails with ErrBusy), so sync work that blocks must not
	// hold it for long. Default DefaultSyncTimeout; negative: none.
	SyncTimeout time.Duration
}

// Defaults of RouterOptions (and Config).
const (
	DefaultBatchesPerHandle = 32
	DefaultInlineBudget     = 20 * time.Millisecond
	// DefaultSyncTimeout bounds the sync work of one batch (see
	// RouterOptions.SyncTimeout): as long as SQLite's default busy timeout.
	DefaultSyncTimeout = 5 * time.Second
	// DefaultStateCacheSize is how many partitions' states the router's
	// own StateCache holds.
	DefaultStateCacheSize = 10_000
)

// CachePolicy chooses which pure reactors a router keeps the states of in
// its StateCache: deciders and event-sourced projectors (core.Folder
// definitions) only, handled inside the write transaction. Hand-written
// reactors fold nothing the router could keep.
type CachePolicy int

const (
	// CacheValueStates, the default, caches the states whose Go type
	// holds no reference at any depth (no map, slice, pointer,
	// interface, channel or function: numbers, strings, and structs and
	// arrays of them). An Evolve or Decide cannot change such a state in
	// place, so a cached state is always the value a full fold gives,
	// whatever the definition's code: caching them is safe without the
	// user's say. States with references are folded in full on every
	// batch, unless CacheAllStates.
	CacheValueStates CachePolicy = iota
	// CacheAllStates caches every decider's and event-sourced
	// projector's state: choose it when every Evolve and Decide of the
	// router's definitions treats states as values (copies a map or a
	// slice before changing it; see StateCache). A definition that
	// changes its state in place would then decide on events folded
	// twice.
	CacheAllStates
	// CacheNoStates caches nothing: every batch folds its partition's
	// whole history.
	CacheNoStates
)

// What a cached state needs from the log besides (see StateCache): that
// messages are only appended. A router does not cache a reactor whose
// history types one of its hand-written reactors handles (it may delete
// them on ack); one of another process it cannot see: run such a
// deleter's process with CacheNoStates, or keep the deleted types out of
// the cached definitions' histories. Router.Reset drops the group's
// states; a reset by another process (the CLI, the dashboard) leaves
// them, which is still correct, the log being unchanged, unless the
// reset came with changed upcasters: restart the process then.

// Router runs reactors on a store: it registers their consumer groups,
// claims their partitions, hands the batches to them, and executes the
// signals they return in one transaction per batch.
type Router struct {
	store    Store
	opts     RouterOptions
	reactors []*reactor
	byGroup  map[string]*reactor
	// pending holds, by worker id, claims whose release met a busy store
	// (see releaseAll), and pendingN counts them.
	pendingMu sync.Mutex
	pending   map[string][]*driver.ClaimedPartition
	pendingN  atomic.Int64
	// recordRefusals is set when the store's registry knows
	// core.CommandRejected: deciders then record their business refusals
	// (see core.CommandRejected) instead of failing their group.
	recordRefusals bool
	// holding is what each worker is handling (see driver.ClaimRenewer).
	holding holding
	// claimant names the router in the claims of operator transitions
	// whose lifecycle hooks it runs (see runHooks): unique per router.
	claimant string
	// noUnschedule is set once the router warned that the store's Tx
	// cannot withdraw scheduled messages (driver.UnscheduleTx).
	noUnschedule atomic.Bool
}

type reactor struct {
	r    effects.Reactor
	info effects.Info
	def  core.Definition
	// src is the value registered (for telling the same reactor
	// registered twice from another with its group id).
	src any
	// hooks are the reactor's lifecycle hooks, and strategy its own error
	// strategy (nil: the router's), resolved when it is registered.
	hooks    core.Hooks
	strategy *ErrorStrategy
	// folding is set when the router keeps the reactor's states in its
	// StateCache (see cachedReactors), and stateType is their type.
	folding   effects.Folding
	folder    core.Folder
	stateType reflect.Type
	// keepsHistory is set when the router keeps the reactor's partition
	// histories in its StateCache between handlings (see HistoryKeeper);
	// historyHandled, for those and for the reactors whose states it
	// caches, when that history is of the types it handles, so that a
	// claim can complete a kept history or state (see claimCovers).
	keepsHistory, historyHandled bool
}

// HistoryKeeper is implemented by an impure reactor (effects.Reactor)
// whose HandleClaim never changes the history it is given
// (effects.Claim.History: neither its elements nor the payloads they
// hold), such as a workflow, which reads its run's whole history on every
// handling. KeepsHistory reporting true lets a router with a StateCache
// keep each partition's history between handlings, up to the position it
// was read to, and read only the messages appended after it: the history
// handed over is the one a full read returns (messages are only
// appended; the same caveat as for cached states holds for deleted ones,
// see StateCache), its guard a full read's guard.
type HistoryKeeper interface {
	KeepsHistory() bool
}

// TypeRegisterer is a reactor with message types of its own (a statechart
// machine's state events, a workflow's internal events): NewRouter (and so
// NewRuntime) and the Handle functions register them in the store's
// registry, so that an application registers its commands and events
// only. Register must be idempotent.
type TypeRegisterer interface {
	Register(reg *codec.Registry) error
}

// NewRouter validates reactors together and returns a router for them.
// Each reactor is an effects.Reactor (a workflow, a hand-written reactor)
// or a core.Definition (a Decider, a Projector, a machine), or a Bundle or
// ReactorSet (a Module) of them, expanded recursively (see Expand). Definition errors, two reactors with one group id, and an
// exclusive reactor sharing a type with another are reported here, all at
// once. Call Setup to register the groups with the store.
func NewRouter(store Store, opts RouterOptions, reactors ...any) (*Router, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 50
	}
	if opts.BatchesPerHandle <= 0 {
		opts.BatchesPerHandle = DefaultBatchesPerHandle
	}
	if opts.ClaimPartitions <= 0 {
		opts.ClaimPartitions = opts.BatchSize
	}
	if opts.InlineBudget <= 0 {
		opts.InlineBudget = DefaultInlineBudget
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.MaxConflictRetries <= 0 {
		opts.MaxConflictRetries = 3
	}
	if opts.Now == nil {
		opts.Now = store.Now
	}
	if opts.Logger == nil {
		opts.Logger = storeLogger(store)
	}
	if opts.WorkerID == "" {
		opts.WorkerID = "router"
	}
	if opts.StateCache == nil && opts.CacheStates != CacheNoStates && cacheable(store) {
		opts.StateCache = NewStateCache(DefaultStateCacheSize)
	}
	rt := &Router{store: store, opts: opts, byGroup: map[string]*reactor{}, claimant: hookClaimant(opts.WorkerID)}
	reg := store.Registry()
	var errs []error
	if opts.CacheStates < CacheValueStates || opts.CacheStates > CacheNoStates {
		errs = append(errs, fmt.Errorf("sourced: RouterOptions.CacheStates = %d: not a CachePolicy (CacheValueStates, CacheAllStates or CacheNoStates)", opts.CacheStates))
	}
	for _, x := range expand(reactors) {
		if tr, ok := x.(TypeRegisterer); ok {
			if err := tr.Register(reg); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		var re reactor
		switch v := x.(type) {
		case effects.Reactor:
			re.r = v
			if a, ok := v.(effects.DefinitionProvider); ok {
				re.def = a.Definition() // an adapted definition (effects.FromDefinition)
			}
		case core.Definition:
			r, err := effects.FromDefinition(reg, v)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			re.r, re.def = r, v
		default:
			errs = append(errs, fmt.Errorf("sourced: %T is not a reactor: implement effects.Reactor, or use a core.Decider or core.Projector", x))
			continue
		}
		info, err := effects.Describe(re.r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c, ok := re.r.(effects.Checker); ok && re.def == nil {
			if err := c.Check(reg); err != nil {
				errs = append(errs, err)
			}
		}
		for _, t := range slices.Concat(info.Handled, info.History) {
			if _, err := reg.ByName(t); err != nil {
				errs = append(errs, &core.DefinitionError{Group: info.Group, Message: t, Problem: err.Error()})
			}
		}
		re.info = info
		re.src = x
		re.hooks = hooksOf(&re)
		re.strategy = re.hooks.ErrorStrategy
		if prev, dup := rt.byGroup[info.Group]; dup {
			if !sameReactor(prev.src, x) {
				errs = append(errs, &DuplicateGroupError{Group: info.Group, First: describeReactor(prev), Second: describeReactor(&re)})
			}
			continue // the same reactor registered twice: once is enough
		}
		rt.byGroup[info.Group] = &re
		rt.reactors = append(rt.reactors, &re)
	}
	errs = append(errs, rt.missingChildren()...)
	rt.cachedReactors()
	for i, a := range rt.reactors {
		for _, b := range rt.reactors[i+1:] {
			if !a.info.Exclusive && !b.info.Exclusive {
				continue
			}
			if shared := lo.Intersect(a.info.Handled, b.info.Handled); len(shared) > 0 {
				errs = append(errs, &GroupConflictError{Group: a.info.Group, Other: b.info.Group, Types: shared})
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rt.recordRefusals = registerRejections(store.Registry(), opts.Logger)
	return rt, nil
}

// registerRejections registers core.CommandRejected in reg (unless it is
// there already), so that background deciders record their business
// refusals; it tells whether they can.
func registerRejections(reg *codec.Registry, logger *slog.Logger) bool {
	if reg == nil {
		return false
	}
	if t, err := reg.ByGoType(reflect.TypeFor[core.CommandRejected]()); err == nil {
		return t.Name == core.CommandRejectedType
	}
	if err := codec.Register[core.CommandRejected](reg, core.CommandRejectedType); err != nil {
		logger.Warn("sourced: core.CommandRejected cannot be registered, so a decider's business refusal in a background worker fails its group instead of being recorded", "error", err)
		return false
	}
	return true
}

// Setup registers every reactor's consumer group with the store.
func (rt *Router) Setup(ctx context.Context) error {
	for _, re := range rt.reactors {
		spec := driver.GroupSpec{ID: re.info.Group, Label: re.info.Label, PartitionBy: re.info.PartitionBy, Exclusive: re.info.Exclusive, Handled: re.info.Handled, Hooks: hasLifecycleHooks(re.hooks)}
		if err := rt.store.RegisterGroup(ctx, spec); err != nil {
			return fmt.Errorf("sourced: registering %s: %w", re.info.Group, err)
		}
	}
	return nil
}

// StateCache returns the cache of the router's folded states (nil when it
// caches none), for HandleOptions.Cache: Handle and the router then share
// the partitions' states.
func (rt *Router) StateCache() *StateCache { return rt.opts.StateCache }

// Reactors describes the registered reactors, in registration order.
func (rt *Router) Reactors() []effects.Info {
	out := make([]effects.Info, len(rt.reactors))
	for i, re := range rt.reactors {
		out[i] = re.info
	}
	return out
}

// lookup finds a reactor by group id, label, or the reactor value itself.
func (rt *Router) lookup(target any) (*reactor, error) {
	var id string
	switch v := target.(type) {
	case string:
		id = v
		if n, err := core.NormalizeGroup(v); err == nil && rt.byGroup[n] != nil {
			id = n
		}
		for _, re := range rt.reactors {
			if re.info.Label == v {
				id = re.info.Group
			}
		}
	case core.Definition:
		id = v.Spec().Group
	case effects.Reactor:
		info, err := effects.Describe(v)
		if err != nil {
			return nil, err
		}
		id = info.Group
	default:
		return nil, fmt.Errorf("sourced: %T names no reactor", target)
	}
	if re, ok := rt.byGroup[id]; ok {
		return re, nil
	}
	return nil, &UnknownGroupError{Group: id, Known: slices.Sorted(maps.Keys(rt.byGroup))}
}

// HandleNext claims batches of the reactor named by target (a group id, a
// label, or the reactor itself) for workerID and processes them, up to
// BatchesPerHandle. It reports whether there was a batch.
//
// A batch's signals run in one transaction that also acknowledges it, and
// claims the reactor's next batch, so that a worker draining a reactor
// commits once per batch.
// An impure id-partitioned reactor (a queue: one partition per job)
// claims up to ClaimPartitions partitions per transaction, handles them
// one after another outside any transaction, and commits all their signals
// and acks in the transaction that claims the next ones; each claim still
// succeeds, fails, is lost or is released on its own, as below: a failure
// commits the claims handled before it, and the claims not yet handled are
// released once it is settled; if the combined commit fails, each claim is
// committed on its own.
// If the reactor fails part-way, the messages before the failure are
// committed and acknowledged and the failure goes to the error strategy
// (HandleNext then returns nil: the failure is recorded in the group; Drain
// reports it).
// A batch whose guarded append conflicts is handled again on a fresh
// history, up to MaxConflictRetries times, then goes to the error strategy.
// A batch for which the reactor returns no pairs and no error was handled
// with no effects (see effects.Reactor): it is acknowledged up to its last
// message. A batch whose pairs name no message (no Pair.Source with a
// position) commits its signals and releases its claim in the same
// transaction: its messages are handed to the reactor again.
//
// A pure reactor's batch (effects.Pure: deciders, event-sourced projectors,
// projections) is handled inside the transaction that commits it, which
// then claims and handles further partitions of the group, up to
// BatchesPerHandle or until the transaction has run InlineBudget: one
// commit for many batches. On a store whose positions may skip
// (driver.SkippingPositions: PostgreSQL), where every statement is a round trip,
// the transaction claims up to ClaimPartitions partitions in one
// statement, reads all their histories, then executes their signals; a
// partition to whose history an earlier one's signals appended (or,
// when its decisions read queries of their own, after an earlier one
// appended anything) is decided again first, as one transaction after
// another would have. A failure among them rolls them all back, and the
// first is handled again on its own, as above.
//
// None of these is the reactor's failure, and none goes to the error
// strategy:
//   - a batch that fails because the store is busy (ErrBusy), or while ctx
//     is done (whatever the error: cancellation is never a reactor's
//     failure), is released and the error returned (matching
//     context.Canceled or context.DeadlineExceeded when ctx ended), and so
//     is every other claim the worker holds uncommitted (a queue's claims
//     handled or not yet handled when ctx ends); a release that meets the
//     busy store too is tried again a few times, with a short back-off
//     (not once ctx is done), and a claim still held after that is
//     released by the worker's next HandleNext before it claims anything
//     (which returns ErrBusy while the store stays busy), rather than held
//     until MaxClaimAge. A worker id names one worker: its HandleNext
//     calls come one after another;
//   - a batch whose claim was lost (the worker was frozen past the claim
//     TTL or MaxClaimAge, or a clock jumped, and the reaper gave the
//     partition to another worker: the ack fails with ErrNotClaimant) is
//     abandoned: its transaction is rolled back, the loss logged at WARN
//     (an impure reactor's own work for the batch is done, and may be done
//     again by the new claimant), and the new claimant processes the
//     partition from its offset. HandleNext returns nil.
func (rt *Router) HandleNext(ctx context.Context, target any, workerID string) (bool, error) {
	re, err := rt.lookup(target)
	if err != nil {
		return false, err
	}
	did, _, err := rt.handleNext(ctx, re, workerID)
	return did, err
}

// handleNext is HandleNext for a reactor; failed describes a failure that
// went to the error strategy.
func (rt *Router) handleNext(ctx context.Context, re *reactor, workerID string) (did bool, failed *GroupFailedError, err error) {
	end, failed, err := rt.handleRound(ctx, re, workerID)
	return end != roundIdle, failed, err
}

// roundEnd is how a round of a reactor (handleRound) ended.
type roundEnd int

const (
	roundIdle     roundEnd = iota // nothing was claimed
	roundCaughtUp                 // what there was to claim was handled
	// roundFull: the round stopped at a cap (BatchesPerHandle,
	// InlineBudget, a claim released) with more work likely waiting.
	roundFull
)

// handleRound is handleNext, telling how the round ended: the runtime's
// workers start the next round of a reactor that caught up no sooner than
// its cooldown allows (Config.WakeCooldown), and that of a full one at
// once.
func (rt *Router) handleRound(ctx context.Context, re *reactor, workerID string) (end roundEnd, failed *GroupFailedError, err error) {
	if err := rt.releasePending(ctx, workerID); err != nil {
		return roundIdle, nil, cancelled(ctx, err) // still busy: claim nothing meanwhile
	}
	if re.info.Pure {
		end, err := rt.handleInline(ctx, re, workerID)
		if err == nil || transient(ctx, err) {
			return end, nil, cancelled(ctx, err)
		}
		// Rolled back, nothing claimed: the failure is met again on the
		// one-claim path below, which commits the pairs before it and
		// applies the error strategy.
	}
	k := 1 // a pure reactor's failure is met again on its own
	if !re.info.Pure {
		k = rt.claimsPerTx(re)
	}
	claims, err := rt.claimFirst(ctx, re, workerID, k)
	if failed, ok, ferr := rt.undecodable(ctx, re, err); ok {
		return roundCaughtUp, failed, ferr
	}
	if err != nil || len(claims) == 0 {
		return roundIdle, nil, cancelled(ctx, err)
	}
	defer rt.holding.hold(workerID, nil)
	for round := 1; ; round++ {
		rt.holding.hold(workerID, claims)
		// Handle the claims one after another, outside any transaction,
		// up to the first that fails.
		items := make([]handledClaim, 0, len(claims))
		for _, claim := range claims {
			if ctx.Err() != nil {
				// The worker stops: every claim held goes back, handled or
				// not (nothing of them is committed).
				return roundCaughtUp, nil, errors.Join(cancelled(ctx, ctx.Err()), rt.releaseAll(ctx, claims))
			}
			if rt.opts.Observer != nil { // no observation built when nobody listens
				observe(ctx, rt.opts.Observer, Claimed{Group: claim.Group, Partition: claim.Partition, WorkerID: claim.WorkerID, Messages: len(claim.Messages)})
			}
			it := handledClaim{claim: claim, started: time.Now()}
			it.pairs, it.handleErr, it.err = rt.handleTimed(ctx, re, claim, storeReader{ctx, rt.store})
			items = append(items, it)
			if it.err != nil || it.handleErr != nil {
				break
			}
		}
		last := items[len(items)-1]
		if last.err == nil && last.handleErr == nil {
			// All handled: commit them in the transaction that claims the
			// next ones.
			more := round < rt.opts.BatchesPerHandle
			next, failed, err := rt.commitClaims(ctx, re, workerID, items, k, more)
			if err != nil || failed != nil || len(next) == 0 {
				if !more && err == nil && failed == nil {
					return roundFull, nil, nil
				}
				return roundCaughtUp, failed, err
			}
			claims = next
			continue
		}
		rest := claims[len(items):] // held, not handled
		if transient(ctx, last.err) {
			// The store is busy, or the worker stops (whatever the
			// reactor made of it): every claim held goes back.
			err := last.err
			if err == nil {
				err = last.handleErr
			}
			return roundCaughtUp, nil, errors.Join(cancelled(ctx, err), rt.releaseAll(ctx, claims))
		}
		// The claims before the failing one commit (together, or each on
		// its own), then the failing one is settled as a claim of its own
		// (its pairs before the failure committed), then the claims not
		// handled are released, after the error strategy was applied.
		failed, err := func() (*GroupFailedError, error) {
			var first *GroupFailedError // of the claims before
			if before := items[:len(items)-1]; len(before) > 0 {
				var err error
				if _, first, err = rt.commitClaims(ctx, re, workerID, before, k, false); err != nil {
					return first, errors.Join(err, rt.releaseAll(ctx, []*driver.ClaimedPartition{last.claim}))
				}
			}
			err := last.err
			if err == nil {
				if err = rt.commit(ctx, re, last.claim, last.pairs, last.handleErr, nil); err == nil {
					return first, nil
				}
			}
			failed, err := rt.settle(ctx, re, last.claim, err)
			if first != nil {
				failed = first
			}
			return failed, err
		}()
		return roundCaughtUp, failed, errors.Join(err, rt.releaseAll(ctx, rest))
	}
}

// claimsPerTx is how many partitions one transaction claims for an impure
// reactor: ClaimPartitions for an id-partitioned one (a queue: each
// partition is one job, so its claims are what a keyed reactor's batch
// is), one for a keyed one (its claim is a batch of up to BatchSize
// messages already, and its work is typically slow: holding several
// partitions while handling them one after another would keep them from
// the other workers).
func (rt *Router) claimsPerTx(re *reactor) int {
	if len(re.info.PartitionBy) > 0 {
		return 1
	}
	return rt.opts.ClaimPartitions
}

// claimFirst claims up to k partitions of the reactor in one transaction:
// the first as ClaimNext does (an idle group answers without a write
// transaction), the others in its transaction, or all of them with its
// first statement on a store that claims several so (claimUpdate).
func (rt *Router) claimFirst(ctx context.Context, re *reactor, workerID string, k int) ([]*driver.ClaimedPartition, error) {
	if k <= 1 {
		c, err := rt.store.ClaimNext(ctx, re.info.Group, workerID, rt.opts.BatchSize)
		if err != nil || c == nil {
			return nil, err
		}
		return []*driver.ClaimedPartition{c}, nil
	}
	var claims []*driver.ClaimedPartition
	_, err := rt.claimUpdate(ctx, re, workerID, k, func(tx Tx, first []*driver.ClaimedPartition, more bool) error {
		claims = first
		if !more {
			return nil
		}
		rest, err := rt.claimMore(tx, re, workerID, k-len(first))
		claims = append(claims, rest...)
		return err
	})
	if err != nil {
		return nil, err // rolled back: nothing is claimed
	}
	return claims, nil
}

// claimUpdate runs fn in a write transaction that claimed up to k
// partitions of the reactor's group, and reports whether it claimed any:
// all of them with its first statement on a store that claims several so
// (driver.ClaimManyUpdater), else one with ClaimUpdate; more tells fn
// whether the group may have more to claim now (the one claim of
// ClaimUpdate says nothing of the others; fewer than k claimed at once
// means there were no more).
func (rt *Router) claimUpdate(ctx context.Context, re *reactor, workerID string, k int, fn func(tx Tx, claims []*driver.ClaimedPartition, more bool) error) (bool, error) {
	if m, ok := rt.store.(driver.ClaimManyUpdater); ok && k > 1 {
		return m.ClaimManyUpdate(ctx, re.info.Group, workerID, rt.opts.BatchSize, k, func(tx Tx, claims []*driver.ClaimedPartition) error {
			return fn(tx, claims, len(claims) == k)
		})
	}
	return rt.store.ClaimUpdate(ctx, re.info.Group, workerID, rt.opts.BatchSize, func(tx Tx, c *driver.ClaimedPartition) error {
		return fn(tx, []*driver.ClaimedPartition{c}, true)
	})
}

// claimMore claims up to n partitions of the reactor in tx: with
// driver.ClaimManyTx when the store's Tx has it, else ClaimNext after ClaimNext.
func (rt *Router) claimMore(tx Tx, re *reactor, workerID string, n int) ([]*driver.ClaimedPartition, error) {
	if n <= 0 {
		return nil, nil
	}
	if m, ok := tx.(driver.ClaimManyTx); ok {
		return m.ClaimMany(re.info.Group, workerID, rt.opts.BatchSize, n)
	}
	var out []*driver.ClaimedPartition
	for len(out) < n {
		c, err := tx.ClaimNext(re.info.Group, workerID, rt.opts.BatchSize)
		if err != nil || c == nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// handledClaim is a claim the reactor handled (outside any transaction):
// its pairs, the reactor's failure after them (handleErr), or the store's
// failure to read its history (err).
type handledClaim struct {
	claim          *driver.ClaimedPartition
	pairs          []effects.Pair
	handleErr, err error
	started        time.Time
}

// commitClaims commits handled claims (none of which failed) in one
// transaction: each one's signals and its ack (a claim with no pairs is
// acknowledged whole; one whose pairs name no message, or that has no
// messages, is released), and, when more is true and
// every claim was acknowledged, up to k next claims, which it returns. If
// that transaction fails, nothing of it stands, and each claim is
// committed on its own, so that one bad claim (lost, conflicting, failing
// in its signals) neither undoes nor blocks the others; each failure is
// settled as a claim of its own (see settle), and failed describes the
// first that went to the error strategy. A busy store or cancellation
// releases the claims not committed and is returned.
func (rt *Router) commitClaims(ctx context.Context, re *reactor, workerID string, items []handledClaim, k int, more bool) (next []*driver.ClaimedPartition, failed *GroupFailedError, _ error) {
	afters := make([][]func(context.Context) error, len(items))
	failedAt := -1 // the claim whose signals or ack failed the transaction
	err := rt.store.Update(ctx, func(tx Tx) error {
		next, failedAt = nil, -1
		all := true // every claim acknowledged
		for j, it := range items {
			afters[j] = nil
			a, acked, err := rt.execute(ctx, tx, re, it.claim, it.pairs)
			if err != nil {
				failedAt = j
				return err
			}
			afters[j], all = a, all && acked
		}
		// A released claim ends the chain: its partition would come back.
		if more && all {
			var err error
			next, err = rt.claimMore(tx, re, workerID, k)
			return err
		}
		return nil
	})
	if err == nil {
		for j, it := range items {
			rt.afterSync(ctx, re, afters[j])
			if handled(it.claim, it.pairs) && rt.opts.Observer != nil {
				observe(ctx, rt.opts.Observer, batchHandled(it.claim, appendedBy(it.pairs), it.started, false))
			}
		}
		return next, nil, nil
	}
	next = nil
	if transient(ctx, err) {
		return nil, nil, errors.Join(cancelled(ctx, err), rt.releaseAll(ctx, claimsOf(items)))
	}
	// Rolled back, the next claims with it: commit each claim on its own.
	for j, it := range items {
		var err2 error
		if j == failedAt && (errors.Is(err, core.ErrConcurrentAppend) || errors.Is(err, ErrNotClaimant)) {
			err2 = err // the claim's own failure: committing it again would meet it again
		} else {
			err2 = rt.commit(ctx, re, it.claim, it.pairs, nil, nil)
		}
		if err2 == nil {
			if handled(it.claim, it.pairs) && rt.opts.Observer != nil {
				observe(ctx, rt.opts.Observer, batchHandled(it.claim, appendedBy(it.pairs), it.started, false))
			}
			continue
		}
		f, serr := rt.settle(ctx, re, it.claim, err2)
		if failed == nil {
			failed = f
		}
		if serr != nil {
			return nil, failed, errors.Join(serr, rt.releaseAll(ctx, claimsOf(items[j+1:])))
		}
	}
	return nil, failed, nil
}

// handled tells whether a committed claim was handled (observed as
// BatchHandled): it had pairs, or messages its reactor handled with no
// effects.
func handled(c *driver.ClaimedPartition, pairs []effects.Pair) bool {
	return len(pairs) > 0 || len(c.Messages) > 0
}

// claimsOf returns the claims of handled claims.
func claimsOf(items []handledClaim) []*driver.ClaimedPartition {
	out := make([]*driver.ClaimedPartition, len(items))
	for i, it := range items {
		out[i] = it.claim
	}
	return out
}

// releaseAll releases claims the worker holds (even once ctx is done: a
// claim left held would strand its partition until the reaper frees it),
// in one transaction, else one by one; a claim already lost is skipped.
// A busy store is tried again, up to releaseTries times with a short
// back-off while ctx lasts (once ctx is done, no more waiting); a claim
// still held after that is kept for the worker's next handleNext, which
// releases it before claiming anything (see releasePending): its worker
// heartbeats, so the reaper would free it only after MaxClaimAge.
func (rt *Router) releaseAll(ctx context.Context, claims []*driver.ClaimedPartition) error {
	wait := releaseBackoff
	for try := 1; ; try++ {
		var err error
		if claims, err = rt.releaseOnce(context.WithoutCancel(ctx), claims); err == nil {
			return nil
		}
		if !errors.Is(err, ErrBusy) || try == releaseTries || ctx.Err() != nil {
			rt.pend(claims)
			return err
		}
		t := time.NewTimer(wait/2 + rand.N(wait)) // real time: another process's lock
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		wait *= 2
	}
}

// How often, and after how long a first back-off (doubled each time),
// releaseAll tries a busy release before leaving it to releasePending.
const (
	releaseTries   = 5
	releaseBackoff = 10 * time.Millisecond
)

// releaseOnce releases claims in one transaction, else one by one, and
// returns those whose release failed with ErrBusy (still held), and the
// errors.
func (rt *Router) releaseOnce(ctx context.Context, claims []*driver.ClaimedPartition) (busy []*driver.ClaimedPartition, _ error) {
	if len(claims) == 0 {
		return nil, nil
	}
	err := rt.store.Update(ctx, func(tx Tx) error {
		for _, c := range claims {
			if err := tx.Release(c); err != nil && !errors.Is(err, ErrNotClaimant) {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return nil, nil
	}
	var errs []error
	for _, c := range claims {
		if err := rt.store.Release(ctx, c); err != nil && !errors.Is(err, ErrNotClaimant) {
			errs = append(errs, err)
			if errors.Is(err, ErrBusy) {
				busy = append(busy, c)
			}
		}
	}
	return busy, errors.Join(errs...)
}

// pend keeps claims whose release met a busy store, for their worker's
// next handleNext.
func (rt *Router) pend(claims []*driver.ClaimedPartition) {
	if len(claims) == 0 {
		return
	}
	rt.pendingMu.Lock()
	defer rt.pendingMu.Unlock()
	if rt.pending == nil {
		rt.pending = map[string][]*driver.ClaimedPartition{}
	}
	for _, c := range claims {
		rt.pending[c.WorkerID] = append(rt.pending[c.WorkerID], c)
	}
	rt.pendingN.Add(int64(len(claims)))
}

// releasePending releases the claims of workerID that an earlier busy
// release left held (see releaseAll), in one try; those the store is
// still too busy to release stay kept, and the error is returned. It runs
// in the worker's own handleNext, before it claims: a worker id being one
// worker, handling its claims one after another, the claim released is
// the one kept, never a later claim of the same partition by the same
// worker (that worker claims nothing while it keeps one). A claim the
// reaper freed meanwhile (ErrNotClaimant) is dropped.
func (rt *Router) releasePending(ctx context.Context, workerID string) error {
	if rt.pendingN.Load() == 0 {
		return nil
	}
	rt.pendingMu.Lock()
	claims := rt.pending[workerID]
	delete(rt.pending, workerID)
	rt.pendingN.Add(-int64(len(claims)))
	rt.pendingMu.Unlock()
	busy, err := rt.releaseOnce(context.WithoutCancel(ctx), claims)
	rt.pend(busy)
	return err
}

// settle meets a claim's failure: a conflicting append is handled again
// on a fresh history (up to MaxConflictRetries times); a transient failure
// releases the claim and is returned; a lost claim is abandoned; any other
// goes to the error strategy, described by failed.
func (rt *Router) settle(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, err error) (failed *GroupFailedError, _ error) {
	for attempt := 1; errors.Is(err, core.ErrConcurrentAppend) && !transient(ctx, err); attempt++ {
		retried := attempt <= rt.opts.MaxConflictRetries
		observe(ctx, rt.opts.Observer, GuardConflict{Group: claim.Group, Partition: claim.Partition, Attempt: attempt, Retried: retried, Err: err})
		if !retried {
			break
		}
		err = rt.process(ctx, re, claim)
	}
	if err == nil {
		return nil, nil
	}
	// The strategy is applied, and the claim released, even if ctx ends
	// meanwhile: a half-settled claim would strand its partition.
	bg := context.WithoutCancel(ctx)
	if transient(ctx, err) {
		// Not the reactor's failure: free the partition for the next try
		// and report the error to the caller. If the release meets the
		// busy store too, it is tried again, and at the worker's next
		// handleNext (releaseAll): left held, the claim would stay with
		// this heartbeating worker until MaxClaimAge (found by props/sim).
		if relErr := rt.releaseAll(ctx, []*driver.ClaimedPartition{claim}); relErr != nil {
			return nil, errors.Join(cancelled(ctx, err), relErr)
		}
		return nil, cancelled(ctx, err)
	}
	if errors.Is(err, ErrNotClaimant) {
		rt.abandon(ctx, re, claim, err)
		return nil, nil
	}
	var handled *batchFailure
	if errors.As(err, &handled) {
		// The batches before the failure committed, so the claim was held
		// when the failing message was decided.
		return rt.fail(bg, re, claim, handled.err, handled.processed)
	}
	// A failure decided on a claim the reaper took away meanwhile is the
	// lost claim's, not the reactor's: it may have met the new claimant's
	// work (a decider finding its command already decided). Once lost, a
	// claim cannot come back to this worker while it is busy here, so a
	// claim still held now was held throughout the batch.
	if held, herr := rt.stillHeld(bg, claim); herr == nil && !held {
		rt.abandon(ctx, re, claim, fmt.Errorf("%w (the batch failed afterwards: %w)", ErrNotClaimant, err))
		return nil, nil
	}
	// Apply the strategy before releasing the claim, so that no other
	// worker claims the partition of a group that is about to retry later.
	failed, failErr := rt.fail(bg, re, claim, err, 0)
	if relErr := rt.releaseAll(ctx, []*driver.ClaimedPartition{claim}); relErr != nil {
		return failed, errors.Join(failErr, relErr)
	}
	return failed, failErr
}

// stillHeld tells whether claim's worker still holds its offset.
func (rt *Router) stillHeld(ctx context.Context, claim *driver.ClaimedPartition) (bool, error) {
	page, err := rt.store.ReadOffsets(ctx, OffsetQuery{Group: claim.Group, From: claim.OffsetID, Limit: 1})
	if err != nil {
		return false, err
	}
	if len(page.Offsets) == 0 || page.Offsets[0].ID != claim.OffsetID {
		return false, nil // the offset is gone (a reset, a drained queue)
	}
	o := page.Offsets[0]
	return o.Claimed && o.ClaimedBy == claim.WorkerID, nil
}

// abandon logs a batch whose claim another worker took over.
func (rt *Router) abandon(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, err error) {
	attrs := []any{"group", re.info.Group, "partition", core.Partition(claim.Partition).String(), "worker", claim.WorkerID, "error", err}
	if !re.info.Pure {
		attrs = append(attrs, "impure", "the reactor's own work for this batch is done and may be done again by the new claimant")
	}
	rt.opts.Logger.WarnContext(ctx, "sourced: claim lost (the worker was frozen past the claim TTL, or a clock jumped): batch abandoned and rolled back; the partition's new claimant processes it from its offset", attrs...)
}

// transient tells whether err is the store's or the caller's, not the
// reactor's: a busy store, or any failure once ctx is done (cancellation
// is never a reactor's failure, whatever error the reactor made of it).
// Such a batch is handled again later; it does not count against the
// group's error strategy.
func transient(ctx context.Context, err error) bool {
	return errors.Is(err, ErrBusy) || ctx.Err() != nil
}

// cancelled makes err match ctx's error once ctx is done, for callers
// that check errors.Is(err, context.Canceled).
func cancelled(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (%w)", ctx.Err(), err)
}

// batchFailure is a failure after which the claim was already settled (the
// pairs before it committed and acknowledged, up to processed).
type batchFailure struct {
	err       error
	processed int64
}

func (b *batchFailure) Error() string { return b.err.Error() }
func (b *batchFailure) Unwrap() error { return b.err }

// handleInline claims, handles and acknowledges up to
// BatchesPerHandle batches of a pure reactor in one write transaction:
// for each, the history read in the transaction, the reactor, the signals
// and the ack. Any failure rolls the whole transaction back, claims
// included, and is returned.
//
// On a store whose positions may skip (see inlineAhead) the transaction
// claims several partitions at once and handles them all before it
// executes any: their history reads go before the first append, so that
// the positions its appends draw, holes no reader passes until the
// commit, are held for no further round trip.
func (rt *Router) handleInline(ctx context.Context, re *reactor, workerID string) (roundEnd, error) {
	full := false // the transaction stopped at a cap, not for want of work
	var afters []func(context.Context) error
	var handled []BatchHandled // observed once committed
	states := rt.txStates(re)
	ahead := rt.inlineAhead()
	did, err := rt.claimUpdate(ctx, re, workerID, ahead, func(tx Tx, first []*driver.ClaimedPartition, others bool) error {
		start := time.Now() // real time: the lock is held for real
		full = false
		handled = handled[:0]
		afters = afters[:0]
		states.reset()
		claims := slices.Clone(first)
		for n := 0; ; {
			if k := min(ahead, rt.opts.BatchesPerHandle-n) - len(claims); k > 0 && (n > 0 || others) {
				more, err := rt.claimMore(tx, re, workerID, k)
				if err != nil {
					return err
				}
				claims = append(claims, more...)
			}
			if len(claims) == 0 {
				return nil
			}
			batches := make([]inlineBatch, len(claims))
			read, err := rt.prefetchHistories(tx, re, claims, states)
			if err != nil {
				return err
			}
			// decide handles claim i: its history read, the reactor.
			decide := func(i int) error {
				pairs, handleErr, err := rt.handleWith(ctx, re, claims[i], read, states)
				if err == nil {
					err = handleErr
				}
				batches[i].pairs = pairs
				return err
			}
			for i, c := range claims {
				batches[i].started = time.Now()
				if err := decide(i); err != nil {
					return err
				}
				batches[i].queries = len(claims) > 1 && rt.queries(re, c)
			}
			appended, released := false, false
			for i, c := range claims {
				b := &batches[i]
				if b.stale {
					// A batch before it appended to its partition's history
					// (a transfer's credit): decided again on a history
					// that holds it, as one transaction after the other
					// would have.
					if err := decide(i); err != nil {
						return err
					}
				}
				a, acked, err := rt.execute(ctx, tx, re, c, b.pairs)
				if err != nil {
					return err
				}
				afters = append(afters, a...)
				wrote := appendedBy(b.pairs)
				if rt.opts.Observer != nil {
					handled = append(handled, batchHandled(c, wrote, b.started, true))
				}
				if wrote > 0 {
					appended = true
					if i+1 < len(claims) {
						keys, unknown := rt.historyAppended(re, b.pairs)
						for j := i + 1; j < len(claims); j++ {
							batches[j].stale = batches[j].stale || batches[j].queries || holdsAny(claims[j].Partition, keys, unknown)
						}
					}
				}
				released = released || !acked
			}
			n += len(claims)
			if released || n >= rt.opts.BatchesPerHandle || time.Since(start) >= rt.opts.InlineBudget {
				full = true
				return nil // a released batch ends the chain: its partition would come back
			}
			if appended && holdsBack(rt.store) {
				// Its messages hold back appends that wait for them (see
				// holdsBack): commit now. As many claims as it asked for
				// leave more to claim.
				full = len(claims) >= ahead
				return nil
			}
			claims = claims[:0]
			if ahead == 1 {
				c, err := tx.ClaimNext(re.info.Group, workerID, rt.opts.BatchSize)
				if err != nil || c == nil {
					return err
				}
				claims = append(claims, c)
			}
		}
	})
	end := roundIdle
	switch {
	case did && full:
		end = roundFull
	case did:
		end = roundCaughtUp
	}
	if err != nil {
		return end, err // rolled back: the states folded in it are not kept
	}
	states.commit()
	for _, b := range handled {
		observe(ctx, rt.opts.Observer, Claimed{Group: b.Group, Partition: b.Partition, WorkerID: b.WorkerID, Messages: b.Messages, Inline: true})
		observe(ctx, rt.opts.Observer, b)
	}
	rt.afterSync(ctx, re, afters)
	return end, nil
}

// inlineBatch is a claim of the pure path handled, not yet executed;
// stale when a batch executed before it appended to its partition's
// history, or appended anything when its decisions read queries of
// their own (queries: what they read is not told apart).
type inlineBatch struct {
	pairs          []effects.Pair
	started        time.Time
	stale, queries bool
}

// queries reports whether a message of claim is decided on a query of
// its own (effects.Querier).
func (rt *Router) queries(re *reactor, claim *driver.ClaimedPartition) bool {
	q, ok := re.r.(effects.Querier)
	if !ok {
		return false
	}
	for _, m := range claim.Messages {
		if _, has, err := q.QueryPlan(m.Message); has || err != nil {
			return true
		}
	}
	return false
}

// historyAppended returns the keys of the messages of re's history types
// that pairs append; unknown is set when one's keys cannot be told.
func (rt *Router) historyAppended(re *reactor, pairs []effects.Pair) (keys [][]codec.KeyPair, unknown bool) {
	reg := rt.store.Registry()
	for _, p := range pairs {
		for _, sig := range p.Signals {
			ap, ok := sig.(effects.Append)
			if !ok {
				continue
			}
			for _, m := range ap.Messages {
				typ, err := reg.TypeOf(m.Payload)
				if err != nil {
					return nil, true
				}
				if !slices.Contains(re.info.History, typ.Name) {
					continue
				}
				k, err := reg.Keys(m.Payload, nil)
				if err != nil {
					return nil, true
				}
				keys = append(keys, k)
			}
		}
	}
	return keys, false
}

// holdsAny reports whether partition's history holds a message with one
// of keys (under conditional AND, as a read of the partition finds it),
// or may (unknown). A message's own partition (an id-partitioned
// reactor's) holds none appended since.
func holdsAny(partition core.Partition, keys [][]codec.KeyPair, unknown bool) bool {
	if _, ok := partition[core.IDKey]; ok {
		return false
	}
	if unknown {
		return true
	}
	for _, k := range keys {
		if core.InPartition(partition, k) {
			return true
		}
	}
	return false
}

// inlineAhead is how many partitions one claim of the pure path takes:
// one on a store that serialises its writers (a claim there costs no
// round trip, and claiming one at a time lets the transaction stop at
// its InlineBudget), up to ClaimPartitions (at most BatchesPerHandle) on
// one whose positions may skip (PostgreSQL), where each claim is a round
// trip and each history read after an append would hold that append's
// positions, holes to every reader, for one more. Measured on
// BenchmarkPostgresEndToEnd (an appender beside two workers, commands
// over 1,000 accounts): one partition a transaction handled 1.4 messages
// a claim, and the workers fell behind the appender.
func (rt *Router) inlineAhead() int {
	if !positionsMaySkip(rt.store) {
		return 1
	}
	return max(1, min(rt.opts.ClaimPartitions, rt.opts.BatchesPerHandle))
}

// warmup is the work of the router's claims for a driver.Warmer, with
// sessions connections at work at once.
func (rt *Router) warmup(sessions int) driver.Warmup {
	claims := []int{1, rt.inlineAhead()}
	for _, re := range rt.reactors {
		claims = append(claims, rt.claimsPerTx(re))
	}
	slices.Sort(claims)
	return driver.Warmup{Sessions: sessions, BatchSize: rt.opts.BatchSize, Claims: slices.Compact(claims)}
}

// positionsMaySkip reports whether store hands positions out to
// transactions in flight at once (driver.SkippingPositions).
func positionsMaySkip(store Store) bool {
	sp, ok := store.(driver.SkippingPositions)
	return ok && sp.PositionsMaySkip()
}

// holdsBack reports whether an inline transaction that appended should
// commit at the end of its batch rather than claim more for up to
// InlineBudget. On a store whose positions may skip (PostgreSQL) a
// position drawn by an open transaction is a hole that no reader passes
// until the transaction ends: every message appended after it stays
// invisible, and its append waits, that long. So the transaction ends
// when the store says an append waits (driver.AppendWaiter; always, on a store
// that cannot tell). Measured on BenchmarkPostgresEndToEnd (an appender
// beside the workers): the server-side wait for such holes averaged
// 14.8 ms a statement with transactions of 20 ms, and committing after
// each batch gave 40 % more commands a second; on BenchmarkPostgresDrain
// (nothing else appending) committing after each batch cost 20 %, which
// asking the store avoids. A store that serialises its writers has no
// such holes.
func holdsBack(store Store) bool {
	if !positionsMaySkip(store) {
		return false
	}
	w, ok := store.(driver.AppendWaiter)
	return !ok || w.AppendsWaiting()
}

// process handles the claim once: history, reactor, signals, ack.
func (rt *Router) process(ctx context.Context, re *reactor, claim *driver.ClaimedPartition) error {
	started := time.Now()
	pairs, handleErr, err := rt.handle(ctx, re, claim, storeReader{ctx, rt.store})
	if err != nil {
		return err
	}
	if err := rt.commit(ctx, re, claim, pairs, handleErr, nil); err != nil {
		return err
	}
	if handled(claim, pairs) && rt.opts.Observer != nil {
		observe(ctx, rt.opts.Observer, batchHandled(claim, appendedBy(pairs), started, false))
	}
	return nil
}

// historyReader reads a claim's history and its commands' queries: the
// store's (outside any transaction) or a transaction's (Tx is one).
type historyReader interface {
	ReadPartition(partition core.Partition, types []string, opts ReadOptions) (ReadResult, error)
	Read(conds []core.Condition, opts ReadOptions) (ReadResult, error)
}

// storeReader reads through the store, outside any transaction.
type storeReader struct {
	ctx   context.Context
	store Store
}

func (r storeReader) ReadPartition(partition core.Partition, types []string, opts ReadOptions) (ReadResult, error) {
	return r.store.ReadPartition(r.ctx, partition, types, opts)
}

func (r storeReader) Read(conds []core.Condition, opts ReadOptions) (ReadResult, error) {
	return r.store.Read(r.ctx, conds, opts)
}

// handle reads the claim's history through read, when the reactor wants
// one, and runs the reactor on the claim. err is the store's (the history
// read); handleErr the reactor's, with the pairs of the messages before it.
func (rt *Router) handle(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, read historyReader) (pairs []effects.Pair, handleErr, err error) {
	return rt.handleWith(ctx, re, claim, read, nil)
}

// handleWith is handle; with states (the pure path's, in its write
// transaction) a cached reactor's history is read and folded from the
// state kept for the partition, and the state folded goes to states.
func (rt *Router) handleWith(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, read historyReader, states *txStates) (pairs []effects.Pair, handleErr, err error) {
	if len(re.info.PartitionBy) > 0 && len(claim.Messages) > 0 {
		// A partition with an empty key value was made by a message that
		// carries the key empty: refuse it rather than decide every such
		// message in one shared partition.
		if _, err := core.PartitionOf(claim.Messages[0].Type, re.info.PartitionBy, core.PartitionPairs(claim.Partition)); err != nil {
			return nil, &core.BatchError{Message: claim.Messages[0], Err: err}, nil
		}
	}
	ec := effects.Claim{Group: claim.Group, Partition: claim.Partition, Messages: claim.Messages, Guard: claim.Guard, Replaying: claim.Replaying, ReplayUpto: claim.ReplayUpto, Now: rt.opts.Now(), RecordRefusals: rt.recordRefusals && !re.hooks.RefusalsFail}
	cached := states != nil && re.folding != nil && len(re.info.History) > 0
	var folded func() any // the cached reactor's state, folded from the history read
	if cached {
		if folded, err = states.read(rt, re, claim, read, &ec); err != nil {
			return nil, nil, err
		}
	} else if len(re.info.History) > 0 {
		res, err := rt.readHistory(re, claim, read)
		if err != nil {
			return nil, nil, err
		}
		ec.History, ec.HistoryGuard = res.Messages, res.Guard
	}
	if q, ok := re.r.(effects.Querier); ok {
		if ec.Queries, handleErr, err = rt.readQueries(q, claim.Messages, read); err != nil || handleErr != nil {
			return nil, handleErr, err
		}
	}
	handleErr = protect(func() error {
		var err error
		if cached {
			pairs, err = re.folding.HandleFolded(ctx, ec, folded())
			return err
		}
		pairs, err = re.r.HandleClaim(ctx, ec)
		return err
	})
	return pairs, handleErr, nil
}

// prefetchHistories reads at once, on a store whose Tx reads several
// partitions in one round trip (driver.PartitionsReader), the histories
// that handleWith will read for claims (see historyRead), and returns
// the reader that hands each out once, to the read that asks for it with
// the same arguments, and reads anything else through tx. The reads are
// the transaction's as much as one after another would be (a store
// checks each at its commit); one that no decision asks for (the cache
// changed meanwhile) is only checked.
func (rt *Router) prefetchHistories(tx Tx, re *reactor, claims []*driver.ClaimedPartition, states *txStates) (historyReader, error) {
	pr, ok := tx.(driver.PartitionsReader)
	if !ok || len(claims) < 2 || len(re.info.History) == 0 {
		return tx, nil
	}
	var reads []driver.PartitionRead
	for _, c := range claims {
		if opts, ok := rt.historyRead(re, c, states); ok {
			reads = append(reads, driver.PartitionRead{Partition: c.Partition, Types: re.info.History, Opts: opts})
		}
	}
	if len(reads) < 2 {
		return tx, nil
	}
	res, err := pr.ReadPartitions(reads)
	if err != nil {
		return nil, err
	}
	return &prefetched{historyReader: tx, reads: reads, results: res, used: make([]bool, len(reads))}, nil
}

// historyRead is the partition read handleWith makes for claim's history,
// if it makes one it can tell before deciding: a cached reactor's, after
// its state's position (none when the claim covers the history after
// it); an impure reactor's full read (a kept history's is not foretold).
func (rt *Router) historyRead(re *reactor, claim *driver.ClaimedPartition, states *txStates) (ReadOptions, bool) {
	if states != nil && re.folding != nil {
		after, found := states.peek(rt.claimStateKey(re, claim, re.stateType))
		return rt.cachedRead(re, claim, after, found)
	}
	return ReadOptions{}, !re.keepsHistory
}

// cachedRead is the history read of a cached reactor's claim whose state
// is folded up to after (found): the messages after it, or none when the
// claim's messages are the history after it (claimCovers).
func (rt *Router) cachedRead(re *reactor, claim *driver.ClaimedPartition, after int64, found bool) (ReadOptions, bool) {
	if found && rt.claimCovers(re, claim, after) {
		return ReadOptions{}, false
	}
	return ReadOptions{After: after}, true
}

// claimStateKey is the StateCache key of claim's partition for re's
// state of type state.
func (rt *Router) claimStateKey(re *reactor, claim *driver.ClaimedPartition, state reflect.Type) stateKey {
	return stateKey{store: rt.store, group: re.info.Group, partition: core.Partition(claim.Partition).Key(), state: state}
}

// prefetched is a transaction's reader that hands out reads made ahead
// (prefetchHistories), each once, to the read with the same arguments.
type prefetched struct {
	historyReader
	reads   []driver.PartitionRead
	results []ReadResult
	used    []bool
}

func (p *prefetched) ReadPartition(partition core.Partition, types []string, opts ReadOptions) (ReadResult, error) {
	for i, r := range p.reads {
		if !p.used[i] && r.Opts == opts && maps.Equal(r.Partition, partition) && slices.Equal(r.Types, types) {
			p.used[i] = true
			return p.results[i], nil
		}
	}
	return p.historyReader.ReadPartition(partition, types, opts)
}

// readHistory reads the history of claim's partition for an impure
// reactor: in full, or, for a reactor whose histories the router keeps
// (see HistoryKeeper), the messages after the position of the history
// kept, appended to it. The history read goes (back) into the cache at
// once: it holds committed messages only, whatever becomes of the batch.
func (rt *Router) readHistory(re *reactor, claim *driver.ClaimedPartition, read historyReader) (ReadResult, error) {
	if !re.keepsHistory {
		return read.ReadPartition(claim.Partition, re.info.History, ReadOptions{})
	}
	key := rt.claimStateKey(re, claim, historyType)
	var kept []core.PositionedMessage
	var after int64
	if e, ok := rt.opts.StateCache.take(key); ok {
		kept, after = e.state.([]core.PositionedMessage), e.position
		if res, ok := rt.historyOfClaim(re, claim, kept, after); ok {
			rt.opts.StateCache.put(key, res.Messages, res.Guard.LastPosition)
			return res, nil
		}
	}
	res, err := read.ReadPartition(claim.Partition, re.info.History, ReadOptions{After: after})
	if err != nil {
		return res, err // the entry stays out: the next read is a full one
	}
	if len(kept) > 0 {
		res.Messages = append(slices.Clip(kept), res.Messages...)
	}
	res.Messages = slices.Clip(res.Messages) // a reactor's append never writes into the cached array
	rt.opts.StateCache.put(key, res.Messages, res.Guard.LastPosition)
	return res, nil
}

// historyOfClaim is the history kept up to after, followed by the
// claim's messages after it, when that is the whole history up to the
// claim's last message (claimCovers), so that no read is needed. The
// guard is the claim's (its conditions are those of the history's
// types), at the newest position either covers.
func (rt *Router) historyOfClaim(re *reactor, claim *driver.ClaimedPartition, kept []core.PositionedMessage, after int64) (ReadResult, bool) {
	if !rt.claimCovers(re, claim, after) {
		return ReadResult{}, false
	}
	res := claimAfter(claim, kept, after)
	res.Messages = slices.Clip(res.Messages) // a reactor's append never writes into the cached array
	return res, true
}

// claimAfter is the history claimCovers tells a claim holds: head (a
// history up to after), then the claim's messages after after, with the
// claim's guard at the newest position either covers.
func claimAfter(claim *driver.ClaimedPartition, head []core.PositionedMessage, after int64) ReadResult {
	msgs := slices.Clip(head)
	for _, m := range claim.Messages {
		if m.Position > after {
			msgs = append(msgs, m)
		}
	}
	return ReadResult{Messages: msgs, Guard: core.Guard{Conditions: claim.Guard.Conditions, LastPosition: max(after, claim.Last())}}
}

// claimCovers reports whether claim's messages after position after
// are the whole history of its partition from after to the claim's last
// message: the reactor reads as history exactly the types it handles,
// the claim began at or before after (driver.ClaimedPartition.After: no message between
// the two was handled elsewhere meanwhile), and it was not cut short by
// the batch size. A workflow's run, handled step after step by the same
// process, is so (each handling claims the events its last one
// appended), as is an event-sourced projector following its events.
func (rt *Router) claimCovers(re *reactor, claim *driver.ClaimedPartition, after int64) bool {
	return re.historyHandled && claim.After <= after && len(claim.Messages) > 0 && len(claim.Messages) < rt.opts.BatchSize
}

// sameTypes reports whether a and b name the same set of types.
func sameTypes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// historyType marks the StateCache entries that are kept histories.
var historyType = reflect.TypeFor[[]core.PositionedMessage]()

// readQueries reads, for each claimed message whose decision has a query of
// its own, the union of that query (one read per command, each after the
// last position, so its guard covers exactly what the decision read).
// A query the store refuses (an attribute no event type declares) is the
// reactor's failure, named by its message.
func (rt *Router) readQueries(q effects.Querier, msgs []core.PositionedMessage, read historyReader) ([]*core.QueryRead, error, error) {
	var out []*core.QueryRead
	for i, m := range msgs {
		plan, has, err := q.QueryPlan(m.Message)
		if err != nil {
			return nil, &core.BatchError{Message: m, Index: i, Err: err}, nil
		}
		if !has {
			continue
		}
		if err := driver.CheckConditions(rt.store.Registry(), plan.Union); err != nil {
			return nil, &core.BatchError{Message: m, Index: i, Err: err}, nil
		}
		res, err := read.Read(plan.Union, ReadOptions{})
		if err != nil {
			return nil, nil, err
		}
		if out == nil {
			out = make([]*core.QueryRead, len(msgs))
		}
		out[i] = &core.QueryRead{Plan: plan, Messages: res.Messages, Guard: res.Guard}
	}
	return out, nil, nil
}

// commit executes a handled claim's pairs and acknowledges it in one
// transaction, then (in the same transaction) runs then, if any, telling
// it whether the claim was acknowledged (else released: the pairs named no
// message); after the commit it runs the after-sync work. A claim without
// pairs (and no failure) is acknowledged whole. A reactor's failure after
// some pairs comes back as a *batchFailure: those pairs are committed.
func (rt *Router) commit(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, pairs []effects.Pair, handleErr error, then func(tx Tx, acked bool) error) error {
	var processed int64
	if len(pairs) > 0 || handleErr == nil { // no pairs and no failure: handled with no effects
		var afters []func(context.Context) error
		err := rt.store.Update(ctx, func(tx Tx) error {
			var (
				err   error
				acked bool
			)
			if afters, acked, err = rt.execute(ctx, tx, re, claim, pairs); err != nil || then == nil {
				return err
			}
			return then(tx, acked)
		})
		if err != nil {
			return err
		}
		rt.afterSync(ctx, re, afters)
		processed = lastSource(pairs)
	}
	if handleErr != nil {
		if len(pairs) > 0 {
			return &batchFailure{err: handleErr, processed: processed}
		}
		return handleErr
	}
	return nil
}

// lastSource is the highest position among the pairs' sources (0 when
// none has one).
func lastSource(pairs []effects.Pair) int64 {
	var last int64
	for _, p := range pairs {
		last = max(last, p.Source.Position)
	}
	return last
}

// execute runs a batch's pairs in tx and acknowledges the claim up to the
// last positioned source, reporting acked; no pairs at all acknowledge the
// whole claim (handled with no effects); when pairs name no positioned
// source, nothing of the claim was processed, and execute releases it in
// tx instead (a claim neither acknowledged nor released would strand its
// partition).
func (rt *Router) execute(ctx context.Context, tx Tx, re *reactor, claim *driver.ClaimedPartition, pairs []effects.Pair) (afters []func(context.Context) error, acked bool, err error) {
	if len(pairs) == 0 {
		// No pairs and no failure: the reactor handled the batch with no
		// effects, and it is acknowledged whole (released, it would be
		// claimed again at once, for ever).
		if last := claim.Last(); last > 0 {
			return nil, true, tx.Ack(claim, last)
		}
		return nil, false, tx.Release(claim) // a claim with no messages
	}
	// own are the positions of the batch's appends so far: a guarded
	// append after them is checked against the other messages only (see
	// batchGuards).
	bg := &batchGuards{skips: positionsMaySkip(rt.store)}
	var deletes []int64
	// The batch's sync work runs under its limit (it holds the write
	// transaction every other write waits for).
	sctx, limit := ctx, time.Duration(0)
	if hasSync(pairs) {
		if limit = rt.syncLimit(re); limit > 0 {
			var cancel context.CancelFunc
			sctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
	}
	for _, p := range pairs {
		if err := rt.signals(sctx, tx, p, bg, &afters, &deletes); err != nil {
			if limit > 0 && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
				err = &BatchTimeoutError{Group: re.info.Group, Timeout: limit, Err: err}
			}
			if p.Source.Position > 0 {
				err = &atMessage{msg: p.Source, err: err}
			}
			return nil, false, err
		}
	}
	if len(deletes) > 0 {
		if err := tx.Delete(deletes...); err != nil {
			return nil, false, err
		}
	}
	last := lastSource(pairs)
	if last == 0 {
		rt.opts.Logger.WarnContext(ctx, "sourced: the reactor's pairs name no message it processed (no Pair.Source with a position): its signals are committed and its claim released, so its messages are handed to it again",
			"group", re.info.Group, "partition", core.Partition(claim.Partition).String())
		return afters, false, tx.Release(claim)
	}
	return afters, true, tx.Ack(claim, last)
}

// hasSync tells whether any of the pairs has sync work.
func hasSync(pairs []effects.Pair) bool {
	for _, p := range pairs {
		for _, s := range p.Signals {
			if _, ok := s.(effects.Sync); ok {
				return true
			}
		}
	}
	return false
}

// syncLimit is how long the sync work of one batch of re may run: its
// own timeout, else RouterOptions.SyncTimeout; 0 (or negative) means none.
func (rt *Router) syncLimit(re *reactor) time.Duration {
	if re.hooks.Timeout != 0 {
		return re.hooks.Timeout
	}
	return rt.opts.SyncTimeout
}

// signals runs one pair's signals in tx.
func (rt *Router) signals(ctx context.Context, tx Tx, p effects.Pair, bg *batchGuards, afters *[]func(context.Context) error, deletes *[]int64) error {
	for _, s := range p.Signals {
		switch s := s.(type) {
		case effects.Append:
			msgs := effects.Correlate(s, p.Source.Message)
			// On a store whose positions may skip, the batch knows its
			// own messages by id: their positions are the store's to send
			// with the commit (AppendOptions.Deferred).
			opts := AppendOptions{Guard: s.Guard, Deferred: bg.skips}
			if s.Guard != nil && bg.wrote {
				// Check the guard against the messages that are not the
				// batch's own, so a batch never conflicts with itself.
				if err := bg.check(tx, *s.Guard); err != nil {
					return err
				}
				opts.Guard = nil
			}
			if len(msgs) == 0 {
				continue
			}
			res, err := tx.Append(msgs, opts)
			if err != nil {
				return err
			}
			if s.Guard != nil {
				bg.checked = append(bg.checked, *s.Guard)
			}
			bg.add(res)
		case effects.Sync:
			if err := protect(func() error { return s.Work(ctx, tx.Context()) }); err != nil {
				return err
			}
		case effects.AfterSync:
			*afters = append(*afters, s.Work)
		case effects.Ack:
			if s.Delete {
				*deletes = append(*deletes, p.Source.Position)
			}
		case effects.Unschedule:
			if len(s.IDs) == 0 {
				continue
			}
			u, ok := tx.(driver.UnscheduleTx)
			if !ok {
				if !rt.noUnschedule.Swap(true) {
					rt.opts.Logger.WarnContext(ctx, "sourced: the store's transactions cannot withdraw scheduled messages (driver.UnscheduleTx): they stay scheduled and are promoted when due", "tx", fmt.Sprintf("%T", tx))
				}
				continue
			}
			if _, err := u.Unschedule(s.IDs...); err != nil {
				return err
			}
		case nil:
			return fmt.Errorf("sourced: a nil signal for message at position %d", p.Source.Position)
		default:
			return fmt.Errorf("sourced: unknown signal %T", s)
		}
	}
	return nil
}

// batchGuards checks the guards of a batch's appends after its first
// write, which would conflict with the batch's own messages if the store
// checked them.
type batchGuards struct {
	// own are the positions the batch's appends were given, ownIDs the
	// ids of their messages (on a store whose positions may skip, which
	// may defer the positions); wrote is set after the first append that
	// wrote to the log; checked are the guards its appends passed (checked by the
	// store or by check).
	own     []int64
	ownIDs  map[uuid.UUID]bool
	wrote   bool
	checked []core.Guard
	// skips: the store hands positions out to transactions in flight at
	// once (positionsMaySkip).
	skips bool
}

// add records an append of the batch.
func (bg *batchGuards) add(res AppendResult) {
	for _, pos := range res.Positions {
		if pos > 0 { // 0: scheduled, not in the log yet
			bg.own = append(bg.own, pos)
		}
	}
	if bg.skips {
		if bg.ownIDs == nil {
			bg.ownIDs = make(map[uuid.UUID]bool, len(res.Messages))
		}
		for _, m := range res.Messages {
			bg.ownIDs[m.ID] = true
		}
	}
	// On a store that may defer the positions, an append of messages all
	// scheduled counts as a write too: the check after it only reads.
	bg.wrote = bg.wrote || len(bg.own) > 0 || bg.skips && len(res.Messages) > 0
}

// check fails with a *core.ConflictError if a message matching g follows
// g.LastPosition, other than the batch's own.
//
// A guard with the conditions of one the batch passed, at the same
// position or later, passes as it is: the transaction holds what the
// first check locked (the store's write lock, or on PostgreSQL the
// boundary's lock) until it commits, so nothing but its own messages can
// have joined the boundary since. A decision's batch, whose guards are
// the same read's, so checks its guard once.
//
// Otherwise it reads. On a store whose writers are serialised, every
// message after the batch's first position is the batch's own: the read
// stops before it. On one whose positions may skip, others' messages may
// lie among the batch's own: the read has no upper bound and leaves the
// batch's out (by id: such a store may send the batch's appends, and
// learn their positions, only with its next statement). Such a store (pgstore) checks an unbounded read again under
// the locks of the append that follows, whereas reading the newest
// position first would make its transaction run again under its
// exclusive lock.
func (bg *batchGuards) check(tx Tx, g core.Guard) error {
	if len(g.Conditions) == 0 {
		return nil
	}
	for _, c := range bg.checked {
		if g.LastPosition >= c.LastPosition && sameConditions(g.Conditions, c.Conditions) {
			return nil
		}
	}
	opts := ReadOptions{After: g.LastPosition}
	if !bg.skips {
		if opts.Upto = slices.Min(bg.own) - 1; opts.Upto <= g.LastPosition {
			return nil
		}
	}
	res, err := tx.Read(g.Conditions, opts)
	if err != nil {
		return err
	}
	var conflicts []core.PositionedMessage
	for _, m := range res.Messages {
		if !slices.Contains(bg.own, m.Position) && !bg.ownIDs[m.ID] {
			conflicts = append(conflicts, m)
		}
	}
	if len(conflicts) > 0 {
		return &core.ConflictError{Guard: g, Conflicts: conflicts}
	}
	return nil
}

// sameConditions reports whether a and b are the same conditions, in the
// same order.
func sameConditions(a, b []core.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y core.Condition) bool {
		return x.Type == y.Type && maps.Equal(x.Attrs, y.Attrs)
	})
}

func (rt *Router) afterSync(ctx context.Context, re *reactor, afters []func(context.Context) error) {
	for _, w := range afters {
		if err := protect(func() error { return w(ctx) }); err != nil {
			rt.opts.Logger.ErrorContext(ctx, "sourced: after-sync work failed", "group", re.info.Group, "error", err)
		}
	}
}

// fail applies the error strategy to a failed batch: the strategy's
// decision (ErrorStrategy.DecideFailure) is made on the retry count read
// in the transaction that writes the retry, failure or parking
// (Groups.ChangeGroup), so that partitions failing at once each count. A
// skip parks the partition, then moves its offset past the failed
// message (Parking.SkipFailedMessage). processed is how far the claim was
// processed before the failure. The strategy's listeners are called
// afterwards, in the order they were added; a listener that panics is
// logged and the others still run. A skipped message gives no
// *GroupFailedError: the group goes on.
func (rt *Router) fail(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, cause error, processed int64) (*GroupFailedError, error) {
	strategy := rt.opts.ErrorStrategy
	if re.strategy != nil {
		strategy = *re.strategy
	}
	recorded := failureOf(claim, cause, processed)
	msg := failedMessage(claim, cause, processed)
	attempt := core.FailedAttempt{Group: re.info.Group, Partition: maps.Clone(claim.Partition), Message: msg, Err: cause, Now: rt.opts.Now()}
	var (
		decision core.ErrorDecision
		count    int
	)
	st, err := rt.store.ChangeGroup(ctx, re.info.Group, func(st GroupState) (GroupChange, error) {
		a := attempt
		a.Retries = st.Failure.RetryCount
		decision = rt.decideFailure(ctx, re, strategy, a)
		if decision.Action == core.ActionSkip && !skippable(claim, msg, processed) {
			decision.Action = core.ActionPark // see core.ActionSkip
		}
		f := recorded
		f.RetryCount = st.Failure.RetryCount
		count = f.RetryCount
		switch decision.Action {
		case core.ActionRetry:
			f.RetryCount++
			count = f.RetryCount
			if decision.RetryAt.IsZero() {
				decision.RetryAt = a.Now
			}
			at := decision.RetryAt
			f.RetryAt = &at
			return GroupChange{Command: CmdRetry, RetryAt: at, Failure: f}, nil
		case core.ActionPark, core.ActionSkip:
			return GroupChange{Command: CmdPark, Failure: f}, nil
		}
		return GroupChange{Command: CmdFail, Failure: f}, nil
	})
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	retry, at := decision.Action == core.ActionRetry, decision.RetryAt
	parked, skipped := decision.Action == core.ActionPark, false
	if decision.Action == core.ActionSkip {
		if p, ok := rt.store.(Parking); !ok {
			parked = true
			rt.opts.Logger.ErrorContext(ctx, "sourced: the error strategy skipped a message, but the store cannot skip one (it does not implement shell.Parking): the partition is parked instead", "group", re.info.Group, "partition", recorded.Partition)
		} else if _, err := p.SkipFailedMessage(ctx, re.info.Group, claim.Partition); err != nil {
			parked = true
			rt.opts.Logger.ErrorContext(ctx, "sourced: the error strategy skipped a message, but the skip failed: the partition stays parked (`sourced partitions skip` skips it)", "group", re.info.Group, "partition", recorded.Partition, "error", err)
		} else {
			skipped = true
		}
	}
	failed := groupFailed(re.info.Group, claim, st, cause, processed)
	observe(ctx, rt.opts.Observer, BatchFailed{Group: re.info.Group, Partition: claim.Partition, Err: cause, Retrying: retry, Parked: parked, Skipped: skipped, RetryCount: st.Failure.RetryCount, RetryAt: at})
	attrs := []any{"group", re.info.Group, "partition", recorded.Partition, "message_type", recorded.MessageType, "message_id", recorded.MessageID, "position", recorded.Position, "error", cause}
	reporters := strategy.Reporters()
	report := func(call func(Reporter)) {
		for _, r := range reporters {
			if err := protect(func() error { call(r); return nil }); err != nil {
				rt.opts.Logger.ErrorContext(ctx, "sourced: an error strategy listener panicked", "group", re.info.Group, "error", err)
			}
		}
	}
	if retry {
		rt.opts.Logger.WarnContext(ctx, "sourced: batch failed, retrying", append(attrs, "retry", count, "at", at)...)
		rr := RetryReport{Group: re.info.Group, Partition: maps.Clone(claim.Partition), Message: msg, Err: cause, RetryCount: count, RetryAt: at}
		report(func(r Reporter) { r.ReportRetry(ctx, rr) })
		return failed, nil
	}
	switch {
	case skipped:
		failed = nil
		rt.opts.Logger.WarnContext(ctx, "sourced: batch failed, message skipped by the error strategy (the group goes on after it)", append(attrs, "retries", count)...)
	case parked:
		failed.Parked = true
		rt.opts.Logger.ErrorContext(ctx, "sourced: batch failed, partition parked (the group goes on with its other partitions; `sourced partitions parked` lists it)", append(attrs, "retries", count)...)
	default:
		rt.opts.Logger.ErrorContext(ctx, "sourced: batch failed, group failed", append(attrs, "retries", count)...)
	}
	fr := FailureReport{Group: re.info.Group, Partition: maps.Clone(claim.Partition), Message: msg, Err: cause, RetryCount: count, Parked: parked, Skipped: skipped}
	report(func(r Reporter) { r.ReportFailure(ctx, fr) })
	return failed, nil
}

// decideFailure is the strategy's decision for a failure; a Decide that
// panics fails the group (and is logged).
func (rt *Router) decideFailure(ctx context.Context, re *reactor, strategy ErrorStrategy, a core.FailedAttempt) core.ErrorDecision {
	var d core.ErrorDecision
	if err := protect(func() error { d = strategy.DecideFailure(a); return nil }); err != nil {
		rt.opts.Logger.ErrorContext(ctx, "sourced: the error strategy's Decide panicked: the group fails", "group", re.info.Group, "error", err)
		return core.FailGroup()
	}
	return d
}

// skippable tells whether msg, the message a claim failed at, is the
// first of the claim not processed: skipping it then skips nothing else.
func skippable(claim *driver.ClaimedPartition, msg core.PositionedMessage, processed int64) bool {
	if msg.Position <= 0 {
		return false
	}
	for _, m := range claim.Messages {
		if m.Position > processed && m.Position < msg.Position {
			return false
		}
	}
	return true
}

// DrainOptions tune Drain.
type DrainOptions struct {
	// TolerateFailures makes Drain return nil when a batch failed and went
	// to its group's error strategy (the failure stays recorded in the
	// group), for tests that provoke failures on purpose.
	TolerateFailures bool
}

// Drain processes batches of every reactor until none has work left. It
// takes turns between reactors so that one busy reactor does not starve
// the others. A batch that failed while draining goes to its group's
// error strategy, and Drain goes on with the other groups, then returns a
// *GroupFailedError for each such failure (joined), unless
// opts.TolerateFailures: an integration test must not pass while a
// reactor failed.
//
// opts may be nil: the defaults.
func (rt *Router) Drain(ctx context.Context, opts *DrainOptions) error {
	o := orDefaults(opts)
	var failures []error
	// The hooks of operator transitions made elsewhere (the CLI, the
	// dashboard) first: their groups' work waits for them.
	for _, re := range rt.reactors {
		if _, err := rt.runHooks(ctx, re); err != nil {
			failures = append(failures, err)
		}
	}
	for {
		worked := false
		for _, re := range rt.reactors {
			if err := ctx.Err(); err != nil {
				return errors.Join(append([]error{err}, failures...)...)
			}
			did, failed, err := rt.handleNext(ctx, re, rt.opts.WorkerID)
			if failed != nil && !o.TolerateFailures {
				failures = append(failures, failed)
			}
			if err != nil {
				return errors.Join(append([]error{err}, failures...)...)
			}
			worked = worked || did
		}
		if !worked {
			return errors.Join(failures...)
		}
	}
}

// Hooks a hand-written reactor may implement to hear about operator
// commands (definitions declare them in their Hooks field instead; see
// core.Hooks).
type (
	// HooksProvider gives a reactor's lifecycle hooks and error strategy
	// as one core.Hooks value (workflows implement it).
	HooksProvider interface {
		Hooks() core.Hooks
	}
	// Stopper is called after the reactor's group was stopped.
	Stopper interface {
		OnStop(ctx context.Context, reason string) error
	}
	// Starter is called after the reactor's group was started.
	Starter interface {
		OnStart(ctx context.Context) error
	}
	// Resetter is called after the reactor's group was reset.
	Resetter interface {
		OnReset(ctx context.Context) error
	}
)

// hooksOf resolves a reactor's hooks: a definition's Spec().Hooks, or a
// reactor's HooksProvider, completed by the single-hook interfaces
// (Stopper, Starter, Resetter, StrategyProvider) for what they leave
// unset.
func hooksOf(re *reactor) core.Hooks {
	var h core.Hooks
	if re.def != nil {
		h = re.def.Spec().Hooks
	} else if hp, ok := re.r.(HooksProvider); ok {
		h = hp.Hooks()
	}
	if s, ok := re.r.(Stopper); ok && h.OnStop == nil {
		h.OnStop = s.OnStop
	}
	if s, ok := re.r.(Starter); ok && h.OnStart == nil {
		h.OnStart = s.OnStart
	}
	if s, ok := re.r.(Resetter); ok && h.OnReset == nil {
		h.OnReset = s.OnReset
	}
	if tp, ok := re.r.(TimeoutProvider); ok && h.Timeout == 0 {
		h.Timeout = tp.BatchTimeout()
	}
	if sp, ok := re.r.(StrategyProvider); ok && h.ErrorStrategy == nil {
		s := sp.ErrorStrategy()
		h.ErrorStrategy = &s
	}
	if h.ErrorStrategy != nil {
		s := *h.ErrorStrategy // a copy: the definition's stays its own
		h.ErrorStrategy = &s
	}
	return h
}

// hasLifecycleHooks reports whether h has a hook an operator command
// runs: its group is then registered with driver.GroupSpec.Hooks.
func hasLifecycleHooks(h core.Hooks) bool {
	return h.OnStop != nil || h.OnStart != nil || h.OnReset != nil
}

// hookFailed wraps the error of a lifecycle hook that failed after its
// command took effect.
func hookFailed(group, cmd, hook string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sourced: consumer group %s was %s, but its %s hook failed (the command stands; the hook runs again at the next catch-up poll of a runtime running the group, and the group's work waits until it succeeds): %w", group, cmd, hook, err)
}

// hookClaimant names a router in the claims of the transitions whose
// hooks it runs: the host, the process and a random suffix (two routers
// of one process are two claimants).
func hookClaimant(worker string) string {
	host, _ := os.Hostname()
	if worker == "" {
		worker = "router"
	}
	return fmt.Sprintf("%s-%d-%s-%s", host, os.Getpid(), worker, uuid.NewString()[:8])
}

// DefaultHookLease is how long a lifecycle hook may run when the router
// has no BatchTimeout (a Runtime's is Config.MaxClaimAge): past it the
// hook's context is cancelled, and another process may claim its
// transition and run it again.
const DefaultHookLease = 10 * time.Minute

// hookLease is how long a hook of the router may run (see
// DefaultHookLease).
func (rt *Router) hookLease() time.Duration {
	if rt.opts.BatchTimeout > 0 {
		return rt.opts.BatchTimeout
	}
	return DefaultHookLease
}

// runHooks runs the lifecycle hooks of the operator transitions of re's
// group that no process has run yet, oldest first, whoever made them (the
// router's Stop, Start and Reset, the CLI, the dashboard, a raw store
// call): each is claimed first (Groups.ClaimTransition), so that exactly
// one process runs it, and marked run afterwards (FinishTransition). A
// transition whose reactor has no hook for it is marked at once. A hook
// that fails (or panics, or overruns the lease and is cancelled) releases
// its transition, to run again at the next poll of this process or
// another's, and runHooks returns its error; the group's work waits
// meanwhile. A process that dies while a hook runs leaves its claim to
// expire after the lease; then another process runs the hook again: a
// hook runs exactly once per transition, at least once when a process
// dies in it. ran reports whether a transition was marked run.
func (rt *Router) runHooks(ctx context.Context, re *reactor) (ran bool, err error) {
	if !hasLifecycleHooks(re.hooks) {
		return false, nil
	}
	lease := rt.hookLease()
	for {
		tr, err := rt.store.ClaimTransition(ctx, re.info.Group, rt.claimant, rt.opts.Now(), lease)
		if err != nil || tr == nil {
			return ran, err
		}
		herr := rt.runHook(ctx, re, tr, lease)
		if ferr := rt.finishTransition(ctx, tr, herr == nil); ferr != nil {
			return ran, errors.Join(herr, ferr)
		}
		if herr != nil {
			return ran, herr
		}
		ran = true
	}
}

// finishTransition marks a claimed transition run (or releases it),
// trying again while the store is busy (a busy store must not leave a hook
// that ran to be run again after its lease), up to 50 tries (about a
// second), even when ctx ended: the hook ran.
func (rt *Router) finishTransition(ctx context.Context, tr *driver.GroupTransition, ran bool) error {
	ctx = context.WithoutCancel(ctx)
	for try := 0; ; try++ {
		err := rt.store.FinishTransition(ctx, tr, ran)
		if !errors.Is(err, ErrBusy) || try == 50 {
			return err
		}
		time.Sleep(busyBackoff/2 + rand.N(busyBackoff))
	}
}

// runHook runs the hook of one claimed transition, within the lease.
func (rt *Router) runHook(ctx context.Context, re *reactor, tr *driver.GroupTransition, lease time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, lease)
	defer cancel()
	var run func() error
	var done, name string
	switch tr.Command {
	case CmdStop:
		if h := re.hooks.OnStop; h != nil {
			run = func() error { return h(ctx, tr.Reason) }
		}
		done, name = "stopped", "OnStop"
	case CmdStart:
		if h := re.hooks.OnStart; h != nil {
			run = func() error { return h(ctx) }
		}
		done, name = "started", "OnStart"
	case CmdReset:
		rt.dropStates(re.info.Group)
		if h := re.hooks.OnReset; h != nil {
			run = func() error { return h(ctx) }
		}
		done, name = "reset", "OnReset"
	}
	if run == nil {
		return nil
	}
	rt.opts.Logger.Debug("sourced: running a lifecycle hook", "group", re.info.Group, "hook", name, "transition", tr.Seq, "made_at", tr.At)
	return hookFailed(re.info.Group, done, name, protect(run))
}

// Stop stops the group of the reactor named by target, then calls its
// OnStop hook (see core.Hooks), here unless another process claimed it
// first (see the package doc, "Lifecycle hooks"). A status that does not
// accept the command (an *InvalidTransitionError) runs no hook.
func (rt *Router) Stop(ctx context.Context, target any, reason string) error {
	re, err := rt.lookup(target)
	if err != nil {
		return err
	}
	if err := rt.store.StopGroup(ctx, re.info.Group, reason); err != nil {
		return err
	}
	_, err = rt.runHooks(ctx, re)
	return err
}

// Start starts the group of the reactor named by target again, then calls
// its OnStart hook (see core.Hooks and Stop).
func (rt *Router) Start(ctx context.Context, target any) error {
	re, err := rt.lookup(target)
	if err != nil {
		return err
	}
	if err := rt.store.StartGroup(ctx, re.info.Group); err != nil {
		return err
	}
	_, err = rt.runHooks(ctx, re)
	return err
}

// Reset clears the offsets of the group of the reactor named by target,
// then calls its OnReset hook (see core.Hooks and Stop). The group replays
// the log once started, and not before its OnReset ran.
func (rt *Router) Reset(ctx context.Context, target any) error {
	re, err := rt.lookup(target)
	if err != nil {
		return err
	}
	if err := rt.store.ResetGroup(ctx, re.info.Group); err != nil {
		return err
	}
	// The log is unchanged, but a reset usually comes with a changed
	// definition or upcasters: fold the group's partitions again.
	rt.dropStates(re.info.Group)
	_, err = rt.runHooks(ctx, re)
	return err
}

// dropStates drops the states cached for group: the router's, and those
// Handle keeps in the store's own cache (StateCacheKeeper).
func (rt *Router) dropStates(group string) {
	if rt.opts.StateCache != nil {
		rt.opts.StateCache.Drop(group)
	}
	if k, ok := rt.store.(StateCacheKeeper); ok && k.StateCache() != rt.opts.StateCache {
		k.StateCache().Drop(group)
	}
}
