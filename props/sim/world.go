package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Setup is what a run is made of besides its actions: the store, the
// processes and their runtime settings. Plan draws it from the seed; a
// regression test states it.
type Setup struct {
	// Store is "memory" (memstore) or "sqlite" (sqlitestore on a file in
	// Dir; a crash closes it without committing and opens it again).
	Store string
	// Dir is where the SQLite file goes (a test's t.TempDir()).
	Dir string
	// Processes is how many runtimes share the store, each with Workers
	// workers.
	Processes, Workers int
	// BatchSize and BatchesPerHandle are the runtimes' settings.
	BatchSize, BatchesPerHandle int
	// Domains names the domains (see Domains); empty: all of them.
	Domains []string
}

// The runtimes' timing, in simulated time.
const (
	HeartbeatInterval = 10 * time.Second
	ClaimTTL          = 30 * time.Second
	// MaxClaimAge is above InlineBudget, which is real time: an hour,
	// so that no real-time budget ends a transaction early (that would
	// make runs differ).
	MaxClaimAge  = 2 * time.Hour
	InlineBudget = time.Hour
)

// process is one simulated runtime: a shell.Runtime that is never started;
// the simulator runs its workers' rounds and its periodic tasks.
type process struct {
	id      string
	rt      *shell.Runtime
	workers []string
}

// World is one run: the store, the processes, the clock, the domains and
// what the simulator knows (the model the invariants compare with).
type World struct {
	setup   Setup
	clock   *Clock
	reg     *codec.Registry
	inner   driver.Store // the real store
	store   *faultStore
	domains []Domain
	procs   []*process
	gen     int // process generations (ids are p<slot>.<gen>)
	path    string

	// The fault of the action under way.
	fault   *Fault
	calls   int
	fired   bool
	dead    bool // the process doing the action crashed
	pending bool // a crash after the current call
	nest    int

	// The model.
	acked      map[uuid.UUID]core.Message // acknowledged appends
	ackedOrder []uuid.UUID
	handled    map[uuid.UUID]bool // acked by Handle: in the log at once
	heartbeats map[string]time.Time
	liveWorker map[string]bool
	reaps      []reap // reaper runs during the step
	offsets    map[string]int64
	status     map[string]driver.Status
	deletes    map[string]bool // types deleted on ack
	high       int64           // the highest position known given

	log []string // the run log (hashed)
}

type reap struct {
	now time.Time
	ttl time.Duration
}

// newWorld builds the world of a run.
func newWorld(s Setup) (*World, error) {
	if len(s.Domains) == 0 {
		s.Domains = DomainNames
	}
	w := &World{setup: s, clock: NewClock(), reg: codec.NewRegistry(), acked: map[uuid.UUID]core.Message{}, handled: map[uuid.UUID]bool{},
		heartbeats: map[string]time.Time{}, liveWorker: map[string]bool{}, offsets: map[string]int64{}, status: map[string]driver.Status{}, deletes: map[string]bool{}}
	for _, name := range s.Domains {
		mk, ok := Domains[name]
		if !ok {
			return nil, fmt.Errorf("sim: unknown domain %q", name)
		}
		d := mk(w.clock)
		if err := d.Register(w.reg); err != nil {
			return nil, err
		}
		if dl, ok := d.(AckDeleter); ok {
			for _, t := range dl.Deletes() {
				w.deletes[t] = true
			}
		}
		w.domains = append(w.domains, d)
	}
	if err := w.open(true); err != nil {
		return nil, err
	}
	for i := range s.Processes {
		if err := w.startProcess(i); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

var discard = slog.New(slog.DiscardHandler)

// open opens the store (first: installs it).
func (w *World) open(first bool) error {
	switch w.setup.Store {
	case "memory", "":
		if first {
			w.inner = memstore.New(w.reg, memstore.WithClock(w.clock.Now))
		}
	case "sqlite":
		if first {
			w.path = filepath.Join(w.setup.Dir, "sim.db")
		}
		opts := sqlitestore.Options{Registry: w.reg, Now: w.clock.Now, Logger: discard, PoolSize: 2}
		var (
			s   *sqlitestore.Store
			err error
		)
		if first {
			s, err = sqlitestore.Install(context.Background(), w.path, opts)
		} else {
			s, err = sqlitestore.Open(context.Background(), w.path, opts)
		}
		if err != nil {
			return err
		}
		w.inner = s
	default:
		return fmt.Errorf("sim: unknown store %q (memory or sqlite)", w.setup.Store)
	}
	w.store = &faultStore{inner: w.inner, w: w}
	return nil
}

func (w *World) close() {
	if w.inner != nil {
		w.inner.Close()
	}
}

// reactors are every domain's reactors, in a fixed order.
func (w *World) reactors() []any {
	var out []any
	for _, d := range w.domains {
		out = append(out, d.Reactors()...)
	}
	return out
}

// startProcess starts a fresh process in slot i (its workers are new
// workers: the old ones, if any, are dead).
func (w *World) startProcess(i int) error {
	w.gen++
	id := fmt.Sprintf("p%d.%d", i+1, w.gen)
	cfg := shell.Config{
		Workers: w.setup.Workers, BatchSize: w.setup.BatchSize, BatchesPerHandle: w.setup.BatchesPerHandle,
		InlineBudget: InlineBudget, MaxClaimAge: MaxClaimAge, HeartbeatInterval: HeartbeatInterval, ClaimTTL: ClaimTTL,
		Clock: w.clock, Logger: discard, ProcessID: id,
		ErrorStrategy: shell.ErrorStrategy{Retries: 2, After: time.Second},
	}
	rt, err := shell.NewRuntime(w.store, cfg, w.reactors()...)
	if err != nil {
		return err
	}
	p := &process{id: id, rt: rt}
	for k := range w.setup.Workers {
		p.workers = append(p.workers, fmt.Sprintf("%s-worker-%d", id, k+1))
	}
	// Registering the groups is part of starting: it is not faulted.
	saved := w.fault
	w.fault = nil
	err = rt.Router().Setup(context.Background())
	w.fault = saved
	if err != nil {
		return fmt.Errorf("sim: setting up process %s: %w", id, err)
	}
	if i < len(w.procs) {
		for _, wk := range w.procs[i].workers {
			delete(w.liveWorker, wk)
		}
		w.procs[i] = p
	} else {
		w.procs = append(w.procs, p)
	}
	for _, wk := range p.workers {
		w.liveWorker[wk] = true
	}
	return nil
}

// crash crashes the whole system: every process dies, the store is closed
// without committing what was under way and opened again from its file.
func (w *World) crash() error {
	if w.setup.Store == "sqlite" {
		w.inner.Close()
		if err := w.open(false); err != nil {
			return err
		}
	}
	for i := range w.procs {
		if err := w.startProcess(i); err != nil {
			return err
		}
	}
	return nil
}

// point is called at every store call: see faultStore.
func (w *World) point(name string, inTx, write bool) error {
	if w.dead {
		return errCrash
	}
	f := w.fault
	if f == nil || w.fired || w.nest > 0 {
		return nil
	}
	w.calls++
	if w.calls < f.At {
		return nil
	}
	switch f.Kind {
	case Busy:
		if inTx || !write {
			return nil // the write lock is taken when a write starts
		}
		w.fired = true
		return busy(name)
	case Crash:
		w.fired, w.dead = true, true
		return errCrash
	case CrashAfter:
		if inTx {
			return nil
		}
		w.fired, w.pending = true, true
		return nil
	case Interleave:
		if inTx {
			return nil // a transaction holds the write lock: nothing else runs
		}
		w.fired = true
		w.nest++
		for _, a := range f.Then {
			err := w.do(a)
			w.logf("    | %s -> %s", a, errText(err))
		}
		w.nest--
	}
	return nil
}

// crashed tells whether the process doing the action has crashed, taking
// a crash planned after the call just made.
func (w *World) crashed() bool {
	if w.pending {
		w.pending, w.dead = false, true
	}
	return w.dead
}

func (w *World) heartbeat(ids []string, at time.Time) {
	for _, id := range ids {
		w.heartbeats[id] = at
	}
}

func (w *World) reaped(now time.Time, ttl time.Duration) {
	w.reaps = append(w.reaps, reap{now, ttl})
}

func (w *World) ack(m core.Message) {
	if _, ok := w.acked[m.ID]; !ok {
		w.ackedOrder = append(w.ackedOrder, m.ID)
	}
	w.acked[m.ID] = m
}

func (w *World) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

// Client is what a domain's client operations use: the store (faults
// included) and the appends it acknowledges.
type Client struct {
	Store driver.Store
	w     *World
}

// Append appends msgs and records them as acknowledged when the append
// returns no error.
func (c *Client) Append(ctx context.Context, msgs []core.Message, opts driver.AppendOptions) error {
	res, err := c.Store.Append(ctx, msgs, opts)
	if err != nil {
		return err
	}
	c.w.high = max(c.w.high, res.Last)
	for i, m := range res.Messages {
		c.w.ack(m)
		if res.Positions[i] == 0 {
			return fmt.Errorf("sim: an undated message was scheduled instead of appended: %v", m)
		}
	}
	return nil
}

// Handle decides cmd synchronously with d (shell.HandleCommand) and
// records the command and its events as acknowledged: they must be in the
// log at once.
func (c *Client) Handle(ctx context.Context, d core.CommandDecider, cmd any) error {
	res, err := shell.HandleCommand(ctx, c.Store, d, cmd, nil)
	if err != nil {
		return err
	}
	if res.Position == 0 {
		return &Violation{Invariant: "acked", Err: fmt.Errorf("Handle acknowledged command %s (%v) at position 0: it is not in the log", res.Command.ID, res.Command.Payload)}
	}
	for _, m := range append([]core.Message{res.Command}, res.Events...) {
		c.w.ack(m)
		c.w.handled[m.ID] = true
	}
	return nil
}

// Violation is an invariant that broke.
type Violation struct {
	Invariant string
	Err       error
}

func (v *Violation) Error() string { return v.Invariant + ": " + v.Err.Error() }
func (v *Violation) Unwrap() error { return v.Err }

// do runs one action without a context fault (nested actions, and
// top-level ones whose fault is not a cancellation).
func (w *World) do(a Action) error { return w.doCtx(context.Background(), a) }

// doCtx runs one action with ctx.
func (w *World) doCtx(ctx context.Context, a Action) error {
	switch a.Kind {
	case ClientOp:
		d := w.domains[a.Target%len(w.domains)]
		return d.Do(ctx, &Client{Store: w.store, w: w}, a.Op%d.Ops(), a.N)
	case Work:
		p := w.procs[a.Proc%len(w.procs)]
		rs := p.rt.Router().Reactors()
		_, err := p.rt.Router().HandleNext(ctx, rs[a.Target%len(rs)].Group, p.workers[a.Worker%len(p.workers)])
		return err
	case Reap:
		return enginehooks.RuntimeTasks(w.procs[a.Proc%len(w.procs)].rt).Reaper.RunOnce(ctx)
	case Promote:
		return enginehooks.RuntimeTasks(w.procs[a.Proc%len(w.procs)].rt).Scheduler.RunOnce(ctx)
	case CatchUp:
		return enginehooks.RuntimeTasks(w.procs[a.Proc%len(w.procs)].rt).CatchUp.RunOnce(ctx)
	case ClockStep:
		w.clock.Step(time.Duration(a.N) * time.Millisecond)
		return nil
	case Kill:
		return w.startProcess(a.Proc % len(w.procs))
	case CrashAll:
		return w.crash()
	}
	return fmt.Errorf("sim: unknown action kind %d", a.Kind)
}

// step runs one top-level action with its fault, then the crash it
// caused, and tells whether an error is explained by the fault.
func (w *World) step(a Action) (err error, explained bool) {
	w.fault, w.calls, w.fired, w.dead, w.pending = nil, 0, false, false, false
	w.reaps = w.reaps[:0]
	var fc *faultCtx
	switch a.Fault.Kind {
	case NoFault:
		err = w.do(a)
	case Cancel:
		fc = newFaultCtx(a.Fault.At)
		err = w.doCtx(fc, a)
	default:
		w.fault = &a.Fault
		err = w.do(a)
	}
	crashed := w.crashed()
	w.fault = nil
	w.dead, w.pending = false, false
	explained = w.fired || (fc != nil && fc.fired())
	if crashed {
		if cerr := w.crash(); cerr != nil {
			return cerr, false
		}
	}
	return err, explained
}

// errText renders an error for the run log: by its class when it is one
// of the faults' (how an interrupted SQLite call words its error depends
// on when the interrupt lands, which is the one thing a run does not
// choose), else in full.
func errText(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errCrash):
		return "error: crashed"
	case errors.Is(err, context.Canceled):
		return "error: canceled"
	case errors.Is(err, driver.ErrBusy):
		return "error: busy"
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// expected tells whether an error of an unfaulted action is one the
// simulated program expects.
func expected(err error) bool {
	return err == nil || errors.Is(err, core.ErrConcurrentAppend)
}
