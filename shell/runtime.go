package shell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell/driver"
)

// ErrStopTimeout is returned by a stop that gave up waiting for running
// batches or ticks after the configured StopTimeout.
var ErrStopTimeout = errors.New("sourced: stop timed out")

// ErrStillRunning is returned by Runtime.Start after a stop that timed
// out (ErrStopTimeout), while the workers or periodic tasks of that run
// have not exited yet: a new run must not share the store with them. Wait
// for the stuck batch (or cancel it: StopAndCancel), then start again.
var ErrStillRunning = errors.New("sourced: runtime still running: the workers of a stop that timed out have not exited yet")

// Runtime is the background side of Sourced: worker goroutines that claim
// and process the reactors' partitions, woken by the store's notifier, and
// periodic tasks (catch-up poll, heartbeats and stale-claim reaping,
// scheduled-message promotion, planner statistics).
//
// A runtime can be started and stopped again (for instance only while the
// process holds a leader lock). Stop waits for the workers to finish their
// current batch.
type Runtime struct {
	router *Router
	store  Store
	cfg    Config
	log    *slog.Logger

	byType map[string][]*reactor
	queue  *workQueue

	periodic periodicTasks

	failMu   sync.Mutex
	failures []error // *GroupFailedError, since WaitIdle last reported them

	mu      sync.Mutex
	running bool
	quit    chan struct{}
	// runCtx is the context of the run's batches, cancelled by a hard
	// stop (StopAndCancel) or once the run's workers are gone.
	runCtx    context.Context
	cancelRun context.CancelFunc
	// lingering is closed once the workers and tasks of a run whose stop
	// timed out have exited (nil: none lingers).
	lingering chan struct{}
	workers   sync.WaitGroup
	unsub     func()
	batches   atomic.Int64
	busy      atomic.Int64
	// started makes the catch-up poll's first tick of a run come at once.
	started atomic.Bool
	// optimizedAtStart is set when Start refreshed the planner
	// statistics itself (see warm): the optimizer's first tick is then
	// an interval later.
	optimizedAtStart atomic.Bool
	schedule         chan struct{}
	// scheduledSeen is the store's ScheduledCommits at the scheduler's
	// last wake (see notified).
	scheduledSeen atomic.Int64
	ids           []string
}

// NewRuntime validates cfg and the reactors (see NewRouter) and returns a
// runtime for them. Zero settings of cfg take their defaults (see Config).
// Nothing runs until Start or Run.
func NewRuntime(store Store, cfg Config, reactors ...any) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = storeLogger(store)
	}
	switch sc := storeClock(store); {
	case sc != nil && cfg.Clock == nil:
		cfg.Clock = sc
	case sc != nil && !sameClock(cfg.Clock, sc):
		return nil, fmt.Errorf("%w: Config.Clock is a %T, the store keeps a %T (driver.Clocked): give the clock once, to the store, and leave Config.Clock nil", ErrClockMismatch, cfg.Clock, sc)
	case cfg.Clock == nil:
		cfg.Clock = SystemClock{}
	}
	if cfg.ProcessID == "" {
		host, _ := os.Hostname()
		cfg.ProcessID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	router, err := NewRouter(store, RouterOptions{BatchSize: cfg.BatchSize, BatchesPerHandle: cfg.BatchesPerHandle, InlineBudget: cfg.InlineBudget, ErrorStrategy: cfg.ErrorStrategy, Now: cfg.Clock.Now, Logger: cfg.Logger, Observer: cfg.Observer, StateCache: cfg.StateCache, CacheStates: cfg.CacheStates, BatchTimeout: cfg.MaxClaimAge}, reactors...)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{router: router, store: store, cfg: cfg, log: cfg.Logger, byType: map[string][]*reactor{}, schedule: make(chan struct{}, 1)}
	for _, re := range router.reactors {
		for _, t := range re.info.Handled {
			rt.byType[t] = append(rt.byType[t], re)
		}
	}
	rt.queue = newWorkQueue(len(router.reactors), cfg.WakeCooldown)
	for i := range cfg.Workers {
		rt.ids = append(rt.ids, fmt.Sprintf("%s-worker-%d", cfg.ProcessID, i+1))
	}
	rt.periodic.CatchUp = newTask("catch-up poll", cfg.CatchUpInterval, cfg.Clock, rt.catchUp)
	rt.periodic.CatchUp.next = func(t *periodicTask) time.Duration {
		if rt.started.Swap(false) {
			return 0 // at once: the hooks of transitions made while no runtime ran
		}
		return t.Interval
	}
	router.claimant = hookClaimant(cfg.ProcessID)
	rt.periodic.Reaper = newTask("stale-claim reaper", cfg.HeartbeatInterval, cfg.Clock, rt.reap)
	rt.periodic.Optimizer = newTask("planner statistics", cfg.OptimizeInterval, cfg.Clock, store.Optimize)
	rt.periodic.Optimizer.next = func(t *periodicTask) time.Duration {
		if rt.optimizedAtStart.Load() {
			return t.Interval // its first tick was Start's (see warm)
		}
		return firstTickNow(t)
	}
	rt.periodic.Scheduler = newScheduler(rt)
	for _, t := range rt.tasks() {
		t.log = cfg.Logger
	}
	return rt, nil
}

// Router returns the runtime's router (for Handle, Stop/Start/Reset...).
func (rt *Runtime) Router() *Router { return rt.router }

// StateCache returns the cache of the runtime's folded states (nil when
// it caches none), for HandleOptions.Cache.
func (rt *Runtime) StateCache() *StateCache { return rt.router.StateCache() }

// storeLogger is the store's logger, when it has one, else
// slog.Default(): one logger setting for the store and the runtime.
func storeLogger(store Store) *slog.Logger {
	if l, ok := store.(driver.LoggerProvider); ok {
		if log := l.Logger(); log != nil {
			return log
		}
	}
	return slog.Default()
}

// Start registers the consumer groups, subscribes to the store's notifier
// and starts the workers and the periodic tasks. A busy store (ErrBusy:
// another process holds the write lock) is waited for, with back-off,
// until ctx ends; then the error matches both ctx's error and ErrBusy.
func (rt *Runtime) Start(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.running {
		return errors.New("sourced: runtime already started")
	}
	if rt.lingering != nil {
		select {
		case <-rt.lingering:
			rt.lingering = nil
		default:
			return ErrStillRunning
		}
	}
	err := rt.whileBusy(ctx, "start", func() error {
		if err := rt.router.Setup(ctx); err != nil {
			return err
		}
		// Before any claim: the reaper judges a claim stale by its
		// worker's heartbeat, so a worker must have one from the start.
		if err := rt.heartbeat(ctx); err != nil {
			return err
		}
		return rt.warm(ctx)
	})
	if err != nil {
		return err
	}
	if n := rt.store.Notifier(); n != nil {
		rt.unsub = n.Subscribe(rt.notified)
	}
	rt.quit = make(chan struct{})
	rt.runCtx, rt.cancelRun = context.WithCancel(context.Background())
	rt.running = true
	for _, id := range rt.ids {
		rt.workers.Add(1)
		go rt.work(id, rt.quit, rt.runCtx)
	}
	rt.started.Store(true)
	for _, t := range rt.tasks() {
		t.Start()
	}
	rt.enqueueAll()
	return nil
}

// warm readies a driver.Warmer store for the sessions of the workers, of
// the appends beside them and of the runtime's own upkeep, before the
// first claim. Its planner statistics are refreshed first (the optimizer's
// first tick, taken here rather than after Start): refreshed statistics
// make a PostgreSQL session plan its statements again, and would undo
// the warm-up. A store that could not warm up works all the same: only
// a done ctx fails Start.
func (rt *Runtime) warm(ctx context.Context) error {
	w, ok := rt.store.(driver.Warmer)
	if !ok || len(rt.ids) == 0 {
		return nil
	}
	if err := rt.store.Optimize(ctx); err != nil && ctx.Err() == nil {
		rt.log.WarnContext(ctx, "sourced: planner statistics", "error", err)
	}
	rt.optimizedAtStart.Store(true)
	if err := w.Warm(ctx, rt.router.warmup(len(rt.ids)+2)); err != nil {
		if ctx.Err() != nil {
			return err
		}
		rt.log.WarnContext(ctx, "sourced: warming the store up failed; its first statements will be slower", "error", err)
	}
	return nil
}

func (rt *Runtime) tasks() []*periodicTask {
	return []*periodicTask{rt.periodic.CatchUp, rt.periodic.Reaper, rt.periodic.Scheduler, rt.periodic.Optimizer}
}

// Stop stops the periodic tasks and the workers, waiting for the batches
// they are processing to finish (up to StopTimeout, or until ctx ends),
// then returns; ErrStopTimeout if they did not finish in time. Then the
// stuck workers still run: Start refuses to start again (ErrStillRunning)
// until they exited.
func (rt *Runtime) Stop(ctx context.Context) error { return rt.stop(ctx, -1) }

// StopAndCancel is a hard stop: it stops like Stop, and once grace has
// passed it cancels the contexts of the batches still running, so that a
// reactor blocked in I/O that honours its context returns. A cancelled
// batch is not the reactor's failure: its claim is released and its
// messages are handled again by the next run (an impure reactor's work
// for it may be done again). It then waits for the workers as Stop does
// (up to StopTimeout from the start, or until ctx ends).
func (rt *Runtime) StopAndCancel(ctx context.Context, grace time.Duration) error {
	return rt.stop(ctx, max(grace, 0))
}

// stop stops the run; grace >= 0 cancels the running batches after it.
func (rt *Runtime) stop(ctx context.Context, grace time.Duration) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.running {
		return nil
	}
	rt.running = false
	if rt.unsub != nil {
		rt.unsub()
		rt.unsub = nil
	}
	rt.queue.stopWaking()
	close(rt.quit)
	ctx, cancel := context.WithTimeout(ctx, rt.cfg.StopTimeout)
	defer cancel()
	var hard <-chan time.Time
	if grace >= 0 {
		t := time.NewTimer(grace) // real time: batches run in real time
		defer t.Stop()
		hard = t.C
	}
	var errs []error
	tasks := make(chan error, len(rt.tasks()))
	for _, t := range rt.tasks() {
		go func() { tasks <- t.Stop(ctx) }()
	}
	done := make(chan struct{})
	cancelRun := rt.cancelRun
	go func() {
		rt.workers.Wait()
		for _, t := range rt.tasks() {
			t.wait()
		}
		cancelRun()
		close(done)
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-hard:
			hard = nil
			rt.log.Warn("sourced: hard stop: cancelling the batches still running", "grace", grace)
			cancelRun()
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("%w: workers still busy after %v", ErrStopTimeout, rt.cfg.StopTimeout))
			rt.lingering = done
			waiting = false
		}
	}
	for range rt.tasks() {
		if err := <-tasks; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && len(rt.ids) > 0 {
		// A clean stop: the workers are gone, so are their heartbeats,
		// and the claims a busy store kept them from releasing go back
		// (else they wait for the reaper, a claim TTL).
		for _, id := range rt.ids {
			if err := rt.router.releasePending(ctx, id); err != nil {
				rt.log.Warn("sourced: releasing a stopped worker's claims failed (they are freed after the claim TTL)", "worker", id, "error", err)
			}
		}
		if err := rt.store.RemoveWorkers(ctx, rt.ids); err != nil {
			rt.log.Warn("sourced: removing the stopped workers' heartbeats failed (they expire after the claim TTL)", "error", err)
		}
	}
	return errors.Join(errs...)
}

// whileBusy runs fn until it does not fail with ErrBusy, backing off
// between tries (real time: it waits for another process's lock), until
// ctx ends. Busy tries are logged at DEBUG, and at WARN from the
// busyWarnAfter-th in a row.
func (rt *Runtime) whileBusy(ctx context.Context, what string, fn func() error) error {
	wait := busyBackoff / 2
	for n := int64(1); ; n++ {
		err := fn()
		if !errors.Is(err, ErrBusy) {
			return err
		}
		rt.log.Log(ctx, busyLevel(n), "sourced: store busy, trying again", "during", what, "tries", n, "error", err)
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sourced: %s: the store stayed busy (%d tries): %w (%w)", what, n, ctx.Err(), err)
		}
		wait = min(2*wait, maxBusyBackoff)
	}
}

// busyLevel is the level of the n-th busy failure in a row: DEBUG, then
// WARN from busyWarnAfter on (busy is transient: never ERROR).
func busyLevel(n int64) slog.Level {
	if n >= busyWarnAfter {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// busyWarnAfter is how many busy failures in a row are logged at DEBUG
// before they are logged at WARN.
const busyWarnAfter = 5

// maxBusyBackoff caps the back-off of a retry on a busy store.
const maxBusyBackoff = time.Second

// Run starts the runtime, runs it until ctx is cancelled, then stops it
// gracefully.
func (rt *Runtime) Run(ctx context.Context) error {
	if err := rt.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return rt.Stop(context.WithoutCancel(ctx))
}

// notified wakes the reactors handling the appended types, and the
// scheduler (a new scheduled message may be due sooner) unless the store
// tells that no commit scheduled anything since the last wake (see
// driver.ScheduleCounter).
func (rt *Runtime) notified(types []string) {
	for _, t := range types {
		for _, re := range rt.byType[t] {
			rt.queue.push(re)
		}
	}
	if sc, ok := rt.store.(driver.ScheduleCounter); ok {
		if n := sc.ScheduledCommits(); n >= 0 && rt.scheduledSeen.Swap(n) == n {
			return
		}
	}
	select {
	case rt.schedule <- struct{}{}:
	default:
	}
}

func (rt *Runtime) enqueueAll() {
	for _, re := range rt.router.reactors {
		rt.queue.push(re)
	}
}

// work is a worker: it takes a reactor with pending work, processes up to
// MaxDrainRounds rounds of its batches, and requeues it if it still has work, so
// one busy reactor cannot starve the others.
func (rt *Runtime) work(id string, quit <-chan struct{}, ctx context.Context) {
	defer rt.workers.Done()
	var busy int64 // busy failures in a row
	for {
		var re *reactor
		select {
		case <-quit:
			return
		case re = <-rt.queue.ch:
			rt.queue.taken(re)
		}
		rt.busy.Add(1)
		more := false
		for round := 0; round < rt.cfg.MaxDrainRounds; round++ {
			select {
			case <-quit:
				rt.busy.Add(-1)
				return
			default:
			}
			if !rt.queue.start(re) {
				more = false // queued again when its cooldown ends
				break
			}
			end, failed, err := rt.router.handleRound(ctx, re, id)
			rt.queue.ended(re, end)
			did := end != roundIdle
			rt.failed(failed)
			if errors.Is(err, ErrBusy) {
				// Another process holds the write lock: back off, then
				// try this reactor again later.
				busy++
				rt.log.Log(context.Background(), busyLevel(busy), "sourced: store busy, backing off", "worker", id, "group", re.info.Group, "tries", busy)
				rt.backoff(quit)
				more = true
				break
			}
			busy = 0
			if err != nil && ctx.Err() != nil {
				// A hard stop cancelled the batch: its claim is released.
				rt.busy.Add(-1)
				return
			}
			if err != nil {
				rt.log.Error("sourced: worker failed to process a batch", "worker", id, "group", re.info.Group, "error", err)
			}
			if !did {
				more = false
				break
			}
			rt.batches.Add(1)
			more = true
		}
		rt.busy.Add(-1)
		if more {
			rt.queue.push(re)
		}
	}
}

// backoff waits a short random time (real time, not the configured clock:
// it waits for another process's lock) or until the runtime stops.
func (rt *Runtime) backoff(quit <-chan struct{}) {
	t := time.NewTimer(busyBackoff/2 + rand.N(busyBackoff))
	defer t.Stop()
	select {
	case <-t.C:
	case <-quit:
	}
}

// busyBackoff is the mean wait of a worker that found the store busy.
const busyBackoff = 20 * time.Millisecond

// catchUp runs the lifecycle hooks of operator transitions no process
// ran yet (see runHooks), then polls every reactor: cheap for idle groups
// (the claim-scan latch), and skipped when the store tells nothing
// changed.
func (rt *Runtime) catchUp(ctx context.Context) error {
	if rt.runHooks(ctx) {
		rt.enqueueAll()
	}
	if cd, ok := rt.store.(driver.ChangeDetector); ok {
		changed, err := cd.Changed(ctx)
		if err != nil {
			return err
		}
		if !changed {
			return nil
		}
	}
	rt.enqueueAll()
	return nil
}

// runHooks runs, for every reactor with lifecycle hooks, the hooks of
// its group's operator transitions that no process ran yet, whoever made
// them (the CLI, the dashboard, another process's router): the runtime
// observes the transitions (see Router.runHooks and the package doc,
// "Lifecycle hooks"). A hook that fails is logged, and runs again at the
// next catch-up poll. It reports whether a hook ran (their groups' work
// may be claimed again).
func (rt *Runtime) runHooks(ctx context.Context) bool {
	ran := false
	for _, re := range rt.router.reactors {
		did, err := rt.router.runHooks(ctx, re)
		ran = ran || did
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, ErrBusy):
			rt.log.Debug("sourced: store busy while running lifecycle hooks; they run at the next catch-up poll", "group", re.info.Group, "error", err)
		default:
			rt.log.Error("sourced: a lifecycle hook failed; it runs again at the next catch-up poll, and its group's work waits for it", "group", re.info.Group, "error", err)
		}
	}
	return ran
}

func (rt *Runtime) heartbeat(ctx context.Context) error {
	if len(rt.ids) == 0 {
		return nil
	}
	return rt.store.Heartbeat(ctx, rt.ids, rt.cfg.Clock.Now())
}

// reap heartbeats this process's workers (one write for all of them),
// renews the claims of the batches they are running, releases the claims
// of workers gone silent and the claims older than MaxClaimAge (leaked:
// nobody renews them), and reaps drained offsets.
func (rt *Runtime) reap(ctx context.Context) error {
	if err := rt.heartbeat(ctx); err != nil {
		return err
	}
	now := rt.cfg.Clock.Now()
	if r, ok := rt.store.(driver.ClaimRenewer); ok {
		if held := rt.router.holding.held(); len(held) > 0 {
			if _, err := r.RenewClaims(ctx, held, now); err != nil {
				return err
			}
		}
	}
	n, err := rt.store.ReleaseStaleClaims(ctx, now, rt.cfg.ClaimTTL)
	if err != nil {
		return err
	}
	if n > 0 {
		rt.log.Warn("sourced: released stale claims", "count", n)
	}
	old, err := rt.store.ReleaseClaimsOlderThan(ctx, now.Add(-rt.cfg.MaxClaimAge))
	if err != nil {
		return err
	}
	for _, o := range old {
		rt.log.Warn("sourced: released a claim older than MaxClaimAge that no running batch renewed (leaked, or its process stopped renewing it): another worker processes the partition",
			"group", o.Group, "partition", core.Partition(o.Partition).String(), "worker", o.ClaimedBy, "claimed_at", o.ClaimedAt, "max_claim_age", rt.cfg.MaxClaimAge)
	}
	if n > 0 || len(old) > 0 {
		rt.enqueueAll()
	}
	if _, err := rt.store.ReleaseDrainedOffsets(ctx); err != nil {
		return err
	}
	if _, err = rt.store.PruneOrphanKeyPairs(ctx); err != nil {
		return err
	}
	return housekeep(ctx, rt.store)
}

// Idle reports whether no worker is processing a batch and no reactor is
// queued for one, nor waiting out its cooldown (Config.WakeCooldown) to be
// (a runtime without workers is always idle).
func (rt *Runtime) Idle() bool {
	queued, waking := rt.queue.len()
	return rt.busy.Load() == 0 && (queued+waking == 0 || len(rt.ids) == 0)
}

// quiet is Idle but for the reactors waiting out their cooldown, which
// WaitIdle polls itself rather than wait for.
func (rt *Runtime) quiet() bool {
	queued, _ := rt.queue.len()
	return rt.busy.Load() == 0 && (queued == 0 || len(rt.ids) == 0)
}

// failed records a failure that went to the error strategy, for WaitIdle.
func (rt *Runtime) failed(f *GroupFailedError) {
	if f == nil {
		return
	}
	rt.failMu.Lock()
	defer rt.failMu.Unlock()
	if len(rt.failures) == maxRecordedFailures {
		// Nobody calls WaitIdle in production: keep the latest only.
		rt.failures = slices.Delete(rt.failures, 0, 1)
	}
	rt.failures = append(rt.failures, f)
}

// maxRecordedFailures bounds the failures kept for WaitIdle.
const maxRecordedFailures = 64

// reportFailures returns the failures recorded since the last call,
// joined, and forgets them.
func (rt *Runtime) reportFailures() error {
	rt.failMu.Lock()
	defer rt.failMu.Unlock()
	err := errors.Join(rt.failures...)
	rt.failures = nil
	return err
}

// WaitIdle waits until the runtime has settled: every reactor was polled
// after the queue emptied and none had work, and no scheduled message is
// due before now+horizon. It is for tests, examples and scripts, and may be
// called before the runtime starts (it registers the groups then). Once
// settled it returns a *GroupFailedError (joined, one per failure) for
// every batch that failed and went to its group's error strategy since
// the runtime started or WaitIdle last returned: a test must not pass
// while a reactor failed.
func (rt *Runtime) WaitIdle(ctx context.Context, horizon time.Duration) error {
	rt.mu.Lock()
	running := rt.running
	rt.mu.Unlock()
	if !running {
		// Not started yet (WaitIdle right after `go Supervise(ctx, rt)`):
		// register the groups as Start would, so the drain below can claim.
		if err := rt.router.Setup(ctx); err != nil {
			return err
		}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if rt.quiet() {
			next, ok, err := rt.store.NextScheduled(ctx)
			if err != nil {
				return err
			}
			if !ok || next.After(rt.cfg.Clock.Now().Add(horizon)) {
				before := rt.batches.Load()
				if did, err := rt.drainOnce(ctx); err != nil {
					return err
				} else if !did && rt.batches.Load() == before && rt.quiet() {
					return rt.reportFailures()
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// drainOnce runs the lifecycle hooks owed (see runHooks), then asks every
// reactor for one batch, as a worker would.
func (rt *Runtime) drainOnce(ctx context.Context) (bool, error) {
	worked := rt.runHooks(ctx)
	for _, re := range rt.router.reactors {
		did, failed, err := rt.router.handleNext(ctx, re, rt.cfg.ProcessID+"-settle")
		rt.failed(failed)
		if err != nil {
			return worked, err
		}
		worked = worked || did
	}
	return worked, nil
}

// workQueue holds the reactors with pending work, each at most once however
// many notifications arrive.
type workQueue struct {
	ch     chan *reactor
	mu     sync.Mutex
	queued map[*reactor]bool
	// cooldown is Config.WakeCooldown (none when not positive); rounds
	// are the reactors' last rounds, and waking holds the timers of the
	// reactors waiting out their cooldown.
	cooldown time.Duration
	rounds   map[*reactor]lastRound
	waking   map[*reactor]*time.Timer
}

func newWorkQueue(n int, cooldown time.Duration) *workQueue {
	return &workQueue{ch: make(chan *reactor, max(n, 1)), queued: map[*reactor]bool{},
		cooldown: cooldown, rounds: map[*reactor]lastRound{}, waking: map[*reactor]*time.Timer{}}
}

// push queues re (once however often it is pushed; the channel holds
// every reactor, so push never blocks).
func (q *workQueue) push(re *reactor) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pushLocked(re)
}

func (q *workQueue) pushLocked(re *reactor) {
	if q.queued[re] || q.waking[re] != nil {
		return
	}
	q.queued[re] = true
	q.ch <- re
}

// start reports whether a round of re may start now, and records that it
// does: a round after one that handled work starts at least the cooldown
// after it, but for one after a full round (one that stopped at a cap
// with more work waiting), which starts at once. A round that may not
// start yet is queued again when the cooldown ends (real time: the
// appends it waits for come in real time), and the worker goes on to
// other reactors meanwhile.
func (q *workQueue) start(re *reactor) bool {
	if q.cooldown <= 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now, last := time.Now(), q.rounds[re]
	if wait := q.cooldown - now.Sub(last.started); wait > 0 && !last.full {
		if !q.queued[re] && q.waking[re] == nil {
			q.waking[re] = time.AfterFunc(wait, func() {
				q.mu.Lock()
				defer q.mu.Unlock()
				if q.waking[re] != nil {
					delete(q.waking, re)
					q.pushLocked(re)
				}
			})
		}
		return false
	}
	q.rounds[re] = lastRound{started: now}
	return true
}

// ended records how re's round ended: a full one lets the next start at
// once, and so does one that found nothing (only the claims that found
// work are spaced: a catch-up poll's empty round delays no append).
func (q *workQueue) ended(re *reactor, end roundEnd) {
	if q.cooldown <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch end {
	case roundIdle:
		delete(q.rounds, re)
	case roundFull:
		q.rounds[re] = lastRound{started: q.rounds[re].started, full: true}
	}
}

// lastRound is when a reactor's last round started, and whether it ended
// full.
type lastRound struct {
	started time.Time
	full    bool
}

func (q *workQueue) taken(re *reactor) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.queued, re)
}

// len is how many reactors are queued, and of the others how many wait
// out their cooldown.
func (q *workQueue) len() (queued, waking int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued), len(q.waking)
}

// stopWaking stops the cooldowns' timers, the runtime stopping (a restart
// queues every reactor anyway).
func (q *workQueue) stopWaking() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for re, t := range q.waking {
		t.Stop()
		delete(q.waking, re)
	}
}

// periodicTasks are a runtime's periodic tasks; the repository's tests
// and simulator reach them through internal/enginehooks.
type periodicTasks struct {
	CatchUp, Reaper, Scheduler, Optimizer *periodicTask
}

func init() {
	enginehooks.RuntimeTasks = func(rt any) enginehooks.Tasks {
		p := &rt.(*Runtime).periodic
		return enginehooks.Tasks{CatchUp: p.CatchUp, Reaper: p.Reaper, Scheduler: p.Scheduler, Optimizer: p.Optimizer}
	}
}

// periodicTask is a periodic task of the runtime, startable and
// stoppable on its own.
type periodicTask struct {
	Name     string
	Interval time.Duration

	clock Clock
	run   func(ctx context.Context) error
	next  func(t *periodicTask) time.Duration // when to tick next (default Interval)
	wake  <-chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	last   chan struct{} // the done of the latest loop, kept after Stop
	errs   atomic.Int64
	busy   atomic.Int64 // ticks in a row that found the store busy
	ticks  atomic.Int64
	log    *slog.Logger
}

func newTask(name string, interval time.Duration, clock Clock, run func(context.Context) error) *periodicTask {
	return &periodicTask{Name: name, Interval: interval, clock: clock, run: run}
}

// Start starts the task's loop (a no-op when running).
func (t *periodicTask) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	t.last = t.done
	go t.loop(ctx, t.done)
}

// wait waits for the task's latest loop to exit (at once when it never
// ran, or exited).
func (t *periodicTask) wait() {
	t.mu.Lock()
	last := t.last
	t.mu.Unlock()
	if last != nil {
		<-last
	}
}

func (t *periodicTask) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		d := t.Interval
		if t.next != nil {
			d = t.next(t)
		}
		timer := t.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		case <-t.wake:
			// Something changed (an append): work out when to tick again.
			timer.Stop()
			continue
		}
		t.ticks.Add(1)
		err := protect(func() error { return t.run(ctx) })
		switch {
		case err == nil || ctx.Err() != nil:
			t.busy.Store(0)
		case errors.Is(err, ErrBusy):
			// Transient: the next tick tries again.
			t.errs.Add(1)
			n := t.busy.Add(1)
			t.log.Log(ctx, busyLevel(n), "sourced: periodic task found the store busy; it tries again next tick", "task", t.Name, "ticks", n, "error", err)
		default:
			t.errs.Add(1)
			t.busy.Store(0)
			t.log.Error("sourced: periodic task failed", "task", t.Name, "error", err)
		}
	}
}

// Stop stops the task, waiting for a running tick until ctx ends
// (ErrStopTimeout).
func (t *periodicTask) Stop(ctx context.Context) error {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.cancel, t.done = nil, nil
	t.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: task %s", ErrStopTimeout, t.Name)
	}
}

// RunOnce runs the task's work once, now, in the caller's goroutine, and
// returns its error (counted as a tick, whether or not the task's loop
// runs). It is how a program drives a runtime step by step instead of
// starting it: a simulation (package props/sim) or a test runs the
// stale-claim reaper, the scheduler or the catch-up poll at the moments it
// chooses, with no timer and no goroutine.
func (t *periodicTask) RunOnce(ctx context.Context) error {
	t.ticks.Add(1)
	return protect(func() error { return t.run(ctx) })
}

// Running reports whether the task's loop runs.
func (t *periodicTask) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancel != nil
}

// Ticks counts the ticks the task ran.
func (t *periodicTask) Ticks() int64 { return t.ticks.Load() }

// newScheduler promotes scheduled messages: it sleeps until the next one is
// due (not a fixed tick, so a message due in 1 s is not 5 s late), waking
// early when an append may have scheduled an earlier one. While the store
// keeps due messages set aside (an *UnpromotedError: they cannot be
// appended as they are), the earliest due time is in the past for good:
// the scheduler then ticks once per Interval, reporting them each time,
// instead of spinning.
func newScheduler(rt *Runtime) *periodicTask {
	var aside atomic.Bool // the last promotion set messages aside
	t := newTask("scheduled messages", rt.cfg.CatchUpInterval, rt.cfg.Clock, func(ctx context.Context) error {
		n, err := rt.store.PromoteScheduled(ctx, rt.cfg.Clock.Now())
		aside.Store(errors.Is(err, ErrUnpromoted))
		if n > 0 {
			rt.log.DebugContext(ctx, "sourced: promoted scheduled messages", "count", n)
			observe(ctx, rt.cfg.Observer, ScheduledPromoted{Count: n})
		}
		return err
	})
	t.wake = rt.schedule
	t.next = func(t *periodicTask) time.Duration {
		next, ok, err := rt.store.NextScheduled(context.Background())
		if err != nil || !ok {
			return t.Interval
		}
		d := next.Sub(rt.cfg.Clock.Now())
		if d <= 0 && aside.Load() {
			return t.Interval // what is due may be what was set aside
		}
		return min(max(d, 0), t.Interval)
	}
	return t
}
