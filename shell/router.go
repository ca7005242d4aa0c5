package shell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"github.com/samber/lo"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

// RouterOptions configure a Router. Zero values take the defaults.
type RouterOptions struct {
	// BatchSize caps the messages of one claim (default 50).
	BatchSize int
	// BatchesPerHandle caps how many batches one HandleNext handles
	// (default DefaultBatchesPerHandle): a pure reactor's (see
	// effects.Pure) claimed, handled and acknowledged in one write
	// transaction; any other's one after another, each acknowledged in the
	// transaction that claims the next.
	BatchesPerHandle int
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
	// Logger receives after-sync failures and strategy decisions (default
	// slog.Default()).
	Logger *slog.Logger
	// WorkerID names the router's claims in HandleNext and Drain (default
	// "router").
	WorkerID string
}

// Defaults of RouterOptions (and Config).
const (
	DefaultBatchesPerHandle = 32
	DefaultInlineBudget     = 20 * time.Millisecond
)

// Router runs reactors on a store: it registers their consumer groups,
// claims their partitions, hands the batches to them, and executes the
// signals they return in one transaction per batch.
type Router struct {
	store    Store
	opts     RouterOptions
	reactors []*reactor
	byGroup  map[string]*reactor
}

type reactor struct {
	r    effects.Reactor
	info effects.Info
	def  core.Definition
}

// NewRouter validates reactors together and returns a router for them.
// Each reactor is an effects.Reactor or a core.Definition (a Decider or a
// Projector). Definition errors, two reactors with one group id, and an
// exclusive reactor sharing a type with another are reported here, all at
// once. Call Setup to register the groups with the store.
func NewRouter(store Store, opts RouterOptions, reactors ...any) (*Router, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 50
	}
	if opts.BatchesPerHandle <= 0 {
		opts.BatchesPerHandle = DefaultBatchesPerHandle
	}
	if opts.InlineBudget <= 0 {
		opts.InlineBudget = DefaultInlineBudget
	}
	if opts.MaxConflictRetries <= 0 {
		opts.MaxConflictRetries = 3
	}
	if opts.Now == nil {
		opts.Now = store.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WorkerID == "" {
		opts.WorkerID = "router"
	}
	rt := &Router{store: store, opts: opts, byGroup: map[string]*reactor{}}
	reg := store.Registry()
	var errs []error
	for _, x := range expand(reactors) {
		var re reactor
		switch v := x.(type) {
		case effects.Reactor:
			re.r = v
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
		if prev, dup := rt.byGroup[info.Group]; dup {
			errs = append(errs, &core.DefinitionError{Group: info.Group, Problem: fmt.Sprintf("two reactors share the group id (%T and %T)", prev.r, re.r)})
			continue
		}
		rt.byGroup[info.Group] = &re
		rt.reactors = append(rt.reactors, &re)
	}
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
	return rt, nil
}

// Bundle is implemented by values that stand for several reactors: a
// statechart machine with the child machines it starts (recursively), or a
// bounded context's module. Registering a Bundle registers every
// definition Reactors returns; a group reached twice is registered once.
type Bundle interface {
	Reactors() []core.Definition
}

// expand replaces bundles by their reactors.
func expand(xs []any) []any {
	var out []any
	seen := map[string]bool{}
	for _, x := range xs {
		b, ok := x.(Bundle)
		if !ok {
			out = append(out, x)
			continue
		}
		for _, d := range b.Reactors() {
			if d == nil || seen[d.Spec().Group] {
				continue
			}
			seen[d.Spec().Group] = true
			out = append(out, d)
		}
	}
	return out
}

// Setup registers every reactor's consumer group with the store.
func (rt *Router) Setup(ctx context.Context) error {
	for _, re := range rt.reactors {
		spec := GroupSpec{ID: re.info.Group, Label: re.info.Label, PartitionBy: re.info.PartitionBy, Exclusive: re.info.Exclusive, Handled: re.info.Handled}
		if err := rt.store.RegisterGroup(ctx, spec); err != nil {
			return fmt.Errorf("sourced: registering %s: %w", re.info.Group, err)
		}
	}
	return nil
}

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
// If the reactor fails part-way, the messages before the failure are
// committed and acknowledged and the failure goes to the error strategy.
// A batch whose guarded append conflicts is handled again on a fresh
// history, up to MaxConflictRetries times, then goes to the error strategy.
//
// A pure reactor's batch (effects.Pure: deciders, event-sourced projectors,
// projections) is handled inside the transaction that commits it, which
// then claims and handles further partitions of the group, up to
// BatchesPerHandle or until the transaction has run InlineBudget: one
// commit for many batches. A failure among them rolls them all back, and
// the first is handled again on its own, as above.
//
// A batch that fails because the store is busy (ErrBusy) or ctx ended is
// released and the error returned: it is not the reactor's failure, and
// the group's error strategy is not applied.
func (rt *Router) HandleNext(ctx context.Context, target any, workerID string) (bool, error) {
	re, err := rt.lookup(target)
	if err != nil {
		return false, err
	}
	return rt.handleNext(ctx, re, workerID)
}

func (rt *Router) handleNext(ctx context.Context, re *reactor, workerID string) (bool, error) {
	if re.info.Pure {
		did, err := rt.handleInline(ctx, re, workerID)
		if err == nil || transient(ctx, err) {
			return did, err
		}
		// Rolled back, nothing claimed: the failure is met again on the
		// one-claim path below, which commits the pairs before it and
		// applies the error strategy.
	}
	claim, err := rt.store.ClaimNext(ctx, re.info.Group, workerID, rt.opts.BatchSize)
	if err != nil || claim == nil {
		return false, err
	}
	for n := 1; ; n++ {
		pairs, handleErr, err := rt.handle(ctx, re, claim, rt.readPartition(ctx))
		if err != nil {
			return true, rt.settle(ctx, re, claim, err)
		}
		// Commit this batch in the transaction that claims the next one.
		var next *Claim
		err = rt.commit(ctx, re, claim, pairs, handleErr, func(tx Tx) (err error) {
			if handleErr == nil && n < rt.opts.BatchesPerHandle {
				next, err = tx.ClaimNext(re.info.Group, workerID, rt.opts.BatchSize)
			}
			return err
		})
		if err != nil && handleErr == nil && len(pairs) > 0 && !errors.Is(err, core.ErrConcurrentAppend) && !transient(ctx, err) {
			// Rolled back, the next claim with it: commit this batch on its
			// own, so that a failing claim does not undo it.
			next = nil
			err = rt.commit(ctx, re, claim, pairs, nil, nil)
		}
		if err != nil {
			return true, rt.settle(ctx, re, claim, err)
		}
		if next == nil {
			return true, nil
		}
		claim = next
	}
}

// settle meets a claim's failure: a conflicting append is handled again
// on a fresh history (up to MaxConflictRetries times); a transient failure
// releases the claim and is returned; any other goes to the error
// strategy.
func (rt *Router) settle(ctx context.Context, re *reactor, claim *Claim, err error) error {
	for attempt := 1; errors.Is(err, core.ErrConcurrentAppend) && attempt <= rt.opts.MaxConflictRetries; attempt++ {
		err = rt.process(ctx, re, claim)
	}
	if err == nil {
		return nil
	}
	var handled *batchFailure
	if errors.As(err, &handled) {
		return rt.fail(ctx, re, claim, handled.err)
	}
	if transient(ctx, err) {
		// Not the reactor's failure: free the partition for the next try
		// (if the store is still busy, the reaper frees it after the
		// claim's TTL) and report the error to the caller.
		if relErr := rt.store.Release(context.WithoutCancel(ctx), claim); relErr != nil && !errors.Is(relErr, ErrNotClaimant) {
			return errors.Join(err, relErr)
		}
		return err
	}
	// Apply the strategy before releasing the claim, so that no other
	// worker claims the partition of a group that is about to retry later.
	failErr := rt.fail(ctx, re, claim, err)
	if relErr := rt.store.Release(ctx, claim); relErr != nil && !errors.Is(relErr, ErrNotClaimant) {
		return errors.Join(failErr, relErr)
	}
	return failErr
}

// transient tells whether err is the store's or the caller's, not the
// reactor's: a busy store or a canceled context. Such a batch wrote
// nothing and is handled again later; it does not count against the
// group's error strategy.
func transient(ctx context.Context, err error) bool {
	if errors.Is(err, ErrBusy) {
		return true
	}
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// batchFailure is a failure after which the claim was already settled (the
// pairs before it committed and acknowledged).
type batchFailure struct{ err error }

func (b *batchFailure) Error() string { return b.err.Error() }
func (b *batchFailure) Unwrap() error { return b.err }

// handleInline claims, handles and acknowledges up to
// BatchesPerHandle batches of a pure reactor in one write transaction:
// for each, the history read in the transaction, the reactor, the signals
// and the ack. Any failure rolls the whole transaction back, claims
// included, and is returned.
func (rt *Router) handleInline(ctx context.Context, re *reactor, workerID string) (bool, error) {
	var afters []func(context.Context) error
	did, err := rt.store.ClaimUpdate(ctx, re.info.Group, workerID, rt.opts.BatchSize, func(tx Tx, c *Claim) error {
		start := time.Now() // real time: the lock is held for real
		for n := 1; ; n++ {
			pairs, handleErr, err := rt.handle(ctx, re, c, tx.ReadPartition)
			if err != nil {
				return err
			}
			if handleErr != nil {
				return handleErr
			}
			if len(pairs) == 0 {
				return errNoPairs // released on the one-claim path
			}
			a, err := rt.execute(ctx, tx, c, pairs)
			if err != nil {
				return err
			}
			afters = append(afters, a...)
			if n == rt.opts.BatchesPerHandle || time.Since(start) >= rt.opts.InlineBudget {
				return nil
			}
			if c, err = tx.ClaimNext(re.info.Group, workerID, rt.opts.BatchSize); err != nil || c == nil {
				return err
			}
		}
	})
	if err != nil {
		return did, err
	}
	rt.afterSync(ctx, re, afters)
	return did, nil
}

var errNoPairs = errors.New("sourced: no pairs for a claim")

// process handles the claim once: history, reactor, signals, ack.
func (rt *Router) process(ctx context.Context, re *reactor, claim *Claim) error {
	pairs, handleErr, err := rt.handle(ctx, re, claim, rt.readPartition(ctx))
	if err != nil {
		return err
	}
	return rt.commit(ctx, re, claim, pairs, handleErr, nil)
}

// partitionReader reads a partition's history: the store's (outside any
// transaction) or a transaction's.
type partitionReader func(partition map[string]string, types []string, opts ReadOptions) (ReadResult, error)

// readPartition reads through the store, outside any transaction.
func (rt *Router) readPartition(ctx context.Context) partitionReader {
	return func(partition map[string]string, types []string, opts ReadOptions) (ReadResult, error) {
		return rt.store.ReadPartition(ctx, partition, types, opts)
	}
}

// handle reads the claim's history through read, when the reactor wants
// one, and runs the reactor on the claim. err is the store's (the history
// read); handleErr the reactor's, with the pairs of the messages before it.
func (rt *Router) handle(ctx context.Context, re *reactor, claim *Claim, read partitionReader) (pairs []effects.Pair, handleErr, err error) {
	if len(re.info.PartitionBy) > 0 && len(claim.Messages) > 0 {
		// A partition with an empty key value was made by a message that
		// carries the key empty: refuse it rather than decide every such
		// message in one shared partition.
		if _, err := core.PartitionOf(claim.Messages[0].Type, re.info.PartitionBy, core.PartitionPairs(claim.Partition)); err != nil {
			return nil, &core.BatchError{Message: claim.Messages[0], Err: err}, nil
		}
	}
	ec := effects.Claim{Group: claim.Group, Partition: claim.Partition, Messages: claim.Messages, Guard: claim.Guard, Replaying: claim.Replaying}
	if len(re.info.History) > 0 {
		res, err := read(claim.Partition, re.info.History, ReadOptions{})
		if err != nil {
			return nil, nil, err
		}
		ec.History, ec.HistoryGuard = res.Messages, res.Guard
	}
	handleErr = protect(func() error {
		var err error
		pairs, err = re.r.HandleClaim(ctx, ec)
		return err
	})
	return pairs, handleErr, nil
}

// commit executes a handled claim's pairs and acknowledges it in one
// transaction, then (in the same transaction) runs then, if any; after the
// commit it runs the after-sync work. A claim without pairs is released. A
// reactor's failure after some pairs comes back as a *batchFailure: those
// pairs are committed.
func (rt *Router) commit(ctx context.Context, re *reactor, claim *Claim, pairs []effects.Pair, handleErr error, then func(Tx) error) error {
	if len(pairs) == 0 && handleErr == nil {
		return rt.store.Release(ctx, claim)
	}
	if len(pairs) > 0 {
		var afters []func(context.Context) error
		err := rt.store.Update(ctx, func(tx Tx) error {
			var err error
			if afters, err = rt.execute(ctx, tx, claim, pairs); err != nil || then == nil {
				return err
			}
			return then(tx)
		})
		if err != nil {
			return err
		}
		rt.afterSync(ctx, re, afters)
	}
	if handleErr != nil {
		if len(pairs) > 0 {
			return &batchFailure{err: handleErr}
		}
		return handleErr
	}
	return nil
}

// execute runs a batch's pairs in tx and acknowledges the claim.
func (rt *Router) execute(ctx context.Context, tx Tx, claim *Claim, pairs []effects.Pair) ([]func(context.Context) error, error) {
	start, err := tx.LastPosition()
	if err != nil {
		return nil, err
	}
	var (
		afters  []func(context.Context) error
		deletes []int64
		last    int64
		wrote   bool
	)
	for _, p := range pairs {
		for _, s := range p.Signals {
			switch s := s.(type) {
			case effects.Append:
				msgs := effects.Correlate(s, p.Source.Message)
				opts := AppendOptions{Guard: s.Guard}
				if s.Guard != nil && wrote {
					// Messages after start are this batch's own: check the
					// guard against the others only, so a batch never
					// conflicts with itself.
					if err := checkGuardUpto(tx, *s.Guard, start); err != nil {
						return nil, err
					}
					opts.Guard = nil
				}
				if len(msgs) == 0 {
					continue
				}
				if _, err := tx.Append(msgs, opts); err != nil {
					return nil, err
				}
				wrote = true
			case effects.Sync:
				if err := protect(func() error { return s.Work(ctx, tx.Context()) }); err != nil {
					return nil, err
				}
			case effects.AfterSync:
				afters = append(afters, s.Work)
			case effects.Ack:
				if s.Delete {
					deletes = append(deletes, p.Source.Position)
				}
			case nil:
				return nil, fmt.Errorf("sourced: a nil signal for message at position %d", p.Source.Position)
			default:
				return nil, fmt.Errorf("sourced: unknown signal %T", s)
			}
		}
		last = max(last, p.Source.Position)
	}
	if len(deletes) > 0 {
		if err := tx.Delete(deletes...); err != nil {
			return nil, err
		}
	}
	if last == 0 {
		return afters, nil // nothing processed: the claim is released by the caller
	}
	return afters, tx.Ack(claim, last)
}

// checkGuardUpto fails with a *core.ConflictError if a message matching g
// lies in (g.LastPosition, upto].
func checkGuardUpto(tx Tx, g core.Guard, upto int64) error {
	if len(g.Conditions) == 0 || upto <= g.LastPosition {
		return nil
	}
	res, err := tx.Read(g.Conditions, ReadOptions{After: g.LastPosition, Upto: upto})
	if err != nil {
		return err
	}
	if len(res.Messages) > 0 {
		return &core.ConflictError{Guard: g, Conflicts: res.Messages}
	}
	return nil
}

func (rt *Router) afterSync(ctx context.Context, re *reactor, afters []func(context.Context) error) {
	for _, w := range afters {
		if err := protect(func() error { return w(ctx) }); err != nil {
			rt.opts.Logger.ErrorContext(ctx, "sourced: after-sync work failed", "group", re.info.Group, "error", err)
		}
	}
}

// fail applies the error strategy to a failed batch.
func (rt *Router) fail(ctx context.Context, re *reactor, claim *Claim, cause error) error {
	strategy := rt.opts.ErrorStrategy
	if sp, ok := re.r.(StrategyProvider); ok {
		strategy = sp.ErrorStrategy()
	}
	info, err := rt.store.Group(ctx, re.info.Group)
	if err != nil {
		return errors.Join(cause, err)
	}
	f := failureOf(cause)
	f.OffsetID = claim.OffsetID
	f.RetryCount = info.Failure.RetryCount + 1
	if f.RetryCount <= strategy.Retries {
		at := rt.opts.Now().Add(strategy.delay(f.RetryCount))
		f.RetryAt = &at
		if err := rt.store.RetryGroup(ctx, re.info.Group, at, f); err != nil {
			return errors.Join(cause, err)
		}
		rt.opts.Logger.WarnContext(ctx, "sourced: batch failed, retrying", "group", re.info.Group, "retry", f.RetryCount, "at", at, "error", cause)
		if strategy.OnRetry != nil {
			strategy.OnRetry(ctx, re.info.Group, cause, f.RetryCount, at)
		}
		return nil
	}
	f.RetryCount = info.Failure.RetryCount
	if err := rt.store.FailGroup(ctx, re.info.Group, f); err != nil {
		return errors.Join(cause, err)
	}
	rt.opts.Logger.ErrorContext(ctx, "sourced: batch failed, group failed", "group", re.info.Group, "error", cause)
	if strategy.OnFail != nil {
		strategy.OnFail(ctx, re.info.Group, cause)
	}
	return nil
}

// failureOf records an error: its type, message and stack.
func failureOf(err error) Failure {
	f := Failure{ErrorType: fmt.Sprintf("%T", err), Error: err.Error()}
	var be *core.BatchError
	if errors.As(err, &be) {
		f.ErrorType = fmt.Sprintf("%T", be.Err)
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		f.Stack = pe.Stack
	} else {
		f.Stack = string(debug.Stack())
	}
	return f
}

// Drain processes batches of every reactor until none has work left. It
// takes turns between reactors so that one busy reactor does not starve
// the others.
func (rt *Router) Drain(ctx context.Context) error {
	for {
		worked := false
		for _, re := range rt.reactors {
			if err := ctx.Err(); err != nil {
				return err
			}
			did, err := rt.handleNext(ctx, re, rt.opts.WorkerID)
			if err != nil {
				return err
			}
			worked = worked || did
		}
		if !worked {
			return nil
		}
	}
}

// Hooks a reactor may implement to hear about operator commands.
type (
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

// Stop stops the group of the reactor named by target, then calls its
// OnStop hook.
func (rt *Router) Stop(ctx context.Context, target any, reason string) error {
	re, err := rt.lookup(target)
	if err != nil {
		return err
	}
	if err := rt.store.StopGroup(ctx, re.info.Group, reason); err != nil {
		return err
	}
	if h, ok := re.r.(Stopper); ok {
		return h.OnStop(ctx, reason)
	}
	return nil
}

// Start starts the group of the reactor named by target again, then calls
// its OnStart hook.
func (rt *Router) Start(ctx context.Context, target any) error {
	re, err := rt.lookup(target)
	if err != nil {
		return err
	}
	if err := rt.store.StartGroup(ctx, re.info.Group); err != nil {
		return err
	}
	if h, ok := re.r.(Starter); ok {
		return h.OnStart(ctx)
	}
	return nil
}

// Reset clears the offsets of the group of the reactor named by target,
// then calls its OnReset hook. The group replays the log once started.
func (rt *Router) Reset(ctx context.Context, target any) error {
	re, err := rt.lookup(target)
	if err != nil {
		return err
	}
	if err := rt.store.ResetGroup(ctx, re.info.Group); err != nil {
		return err
	}
	if h, ok := re.r.(Resetter); ok {
		return h.OnReset(ctx)
	}
	return nil
}
