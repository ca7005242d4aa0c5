package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/effects"
)

// Definition is a durable workflow: a function from In to Out whose
// steps, waits and receives are checkpointed in the log. Build it with
// Define and register it with the runtime like any reactor
// (shell.NewRuntime(store, cfg, greeting)); start runs with Start.
//
// A Definition is an effects.Reactor: its consumer group is its name, its
// partition key is the run id (workflow_id), it handles and reads as
// history its own lifecycle events, and it is not pure (steps do I/O).
type Definition[In, Out any] struct {
	name     string
	fn       func(w *Workflow, in In) (Out, error)
	types    durable.Types
	ctx      *contextSpec
	now      func() time.Time
	hooks    core.Hooks
	errTypes errTypes
	err      error
}

// Option configures a Definition.
type Option func(*options)

type options struct {
	ctx      *contextSpec
	now      func() time.Time
	hooks    core.Hooks
	err      error
	errTypes errTypes
}

// WithStepError registers E, an error type with a JSON encoding (exported
// fields), as one a step may fail with: a failed attempt whose error is,
// or wraps, an E records the E's JSON with the failure, and the
// *StepError of that step unwraps to an E decoded from it, live and on
// replay alike, so that errors.As(err, &declined) works on Step's error
// and on the *RunError Wait returns. Errors of types not registered are
// kept as their Go type's name and message (StepError.Type, .Message).
func WithStepError[E error]() Option {
	return func(o *options) {
		name := reflect.TypeFor[E]().String()
		o.errTypes = append(o.errTypes, errType{
			name: name,
			find: func(err error) ([]byte, bool) {
				var target E
				if !errors.As(err, &target) {
					return nil, false
				}
				data, merr := json.Marshal(target)
				return data, merr == nil
			},
			decode: func(data []byte) (error, bool) {
				var v E
				if err := json.Unmarshal(data, &v); err != nil {
					return nil, false
				}
				return v, true
			},
		})
	}
}

// errType is an error type registered with WithStepError.
type errType struct {
	name   string
	find   func(err error) ([]byte, bool)
	decode func(data []byte) (error, bool)
}

type errTypes []errType

// encode returns the type name and JSON of the first registered type err
// is, or wraps.
func (ts errTypes) encode(err error) (string, []byte) {
	for _, t := range ts {
		if data, ok := t.find(err); ok {
			return t.name, data
		}
	}
	return "", nil
}

// decode rebuilds a recorded error value; nil when its type is not
// registered (any more) or its JSON does not decode.
func (ts errTypes) decode(f *durable.Failure) error {
	if f == nil || f.DataType == "" {
		return nil
	}
	for _, t := range ts {
		if t.name == f.DataType {
			if v, ok := t.decode(f.Data); ok {
				return v
			}
		}
	}
	return nil
}

// WithHooks gives the workflow's consumer group lifecycle hooks (OnStop,
// OnStart, OnReset, called by the router's operator commands) and an
// error strategy of its own, as a definition's Hooks field does (see
// core.Hooks).
func WithHooks(h core.Hooks) Option {
	return func(o *options) { o.hooks = h }
}

// Clock sets the clock that dates sleeps and retries. Without it they
// are dated by the clock of the router that handles the run (the
// runtime's clock, or the store's for a bare router; time.Now when the
// claim carries no time). A runtime given no Config.Clock takes the
// store's (driver.Clocked), so one simulated clock, given once to the
// store (memstore.WithSharedClock, sqlitestore's Options.Clock), drives
// workflows too.
func Clock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// contextSpec is a workflow's typed context: how to make a fresh seeded
// one and how to load a persisted one into it.
type contextSpec struct {
	typ  reflect.Type
	seed func() any                     // a *C holding the seed
	load func(p any, data []byte) error // *p = decoded data
}

// WithContext gives the workflow a context of type C, seeded by seed once
// per run (the seed is stored with WorkflowStarted), read and changed
// through Context[C]. A change made inside a step is persisted as
// ContextUpdated after the step, and replayed from there on re-entry
// instead of re-running the step; changes made by the workflow function
// itself between steps are re-made by the replay and persisted with the
// next step's, or at the end. The changes of a step's failed attempt are
// dropped: the next attempt starts from the context as it was before the
// step (see the package doc).
func WithContext[C any](seed func() C) Option {
	return func(o *options) {
		if seed == nil {
			o.err = errors.New("WithContext: nil seed")
			return
		}
		o.ctx = &contextSpec{
			typ:  reflect.TypeFor[C](),
			seed: func() any { c := seed(); return &c },
			load: func(p any, data []byte) error {
				c := p.(*C)
				var zero C
				*c = zero
				return json.Unmarshal(data, c)
			},
		}
	}
}

// Define defines the workflow name running fn. name is its consumer group
// and the prefix of its lifecycle events ("greeting_task" stores
// "greeting_task.step_complete"...): lower-case letters, digits and '_'
// or '.'. A bad name or option is reported when the definition is
// registered (shell.NewRouter, Start, Load), not here.
//
// fn must be deterministic given its input and the outcomes of its
// operations: the same calls, in the same order, every time it is
// replayed. Side effects, clocks and randomness belong in steps.
func Define[In, Out any](name string, fn func(w *Workflow, in In) (Out, error), opts ...Option) *Definition[In, Out] {
	d := &Definition[In, Out]{name: name, fn: fn, types: durable.TypesOf(name)}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	d.ctx, d.now, d.hooks, d.errTypes = o.ctx, o.now, o.hooks, o.errTypes
	switch {
	case o.err != nil:
		d.err = o.err
	case fn == nil:
		d.err = errors.New("nil workflow function")
	default:
		if g, err := core.NormalizeGroup(name); err != nil {
			d.err = err
		} else if g != name {
			d.err = fmt.Errorf("the name must be in normal form (%q): it is the consumer group and the type prefix", g)
		}
	}
	if d.err != nil {
		d.err = &core.DefinitionError{Group: name, Problem: "workflow: " + d.err.Error()}
	}
	return d
}

// Hooks are the workflow's lifecycle hooks and error strategy (see
// WithHooks); the router calls them (shell.HooksProvider).
func (d *Definition[In, Out]) Hooks() core.Hooks { return d.hooks }

// Name is the workflow's name: its consumer group and type prefix.
func (d *Definition[In, Out]) Name() string { return d.name }

// Types are the type strings of its lifecycle events.
func (d *Definition[In, Out]) Types() durable.Types { return d.types }

// Register registers the workflow's lifecycle events in reg (done by
// NewRouter through Check, and by Start, Load, Send and Cancel); it
// reports the definition's errors.
func (d *Definition[In, Out]) Register(reg *codec.Registry) error {
	if d.err != nil {
		return d.err
	}
	if err := durable.Register(reg, d.name); err != nil {
		return &core.DefinitionError{Group: d.name, Problem: err.Error()}
	}
	return nil
}

// Check registers the lifecycle events (effects.Checker).
func (d *Definition[In, Out]) Check(reg *codec.Registry) error { return d.Register(reg) }

// HandledTypes are the lifecycle events (effects.Reactor).
func (d *Definition[In, Out]) HandledTypes() []string { return d.types.All() }

// HistoryTypes are the lifecycle events: a run is replayed from them.
func (d *Definition[In, Out]) HistoryTypes() []string { return d.types.All() }

// GroupID is the workflow's name.
func (d *Definition[In, Out]) GroupID() string { return d.name }

// PartitionKeys is workflow_id: each run is a partition.
func (d *Definition[In, Out]) PartitionKeys() []string { return []string{durable.PartitionKey} }

// Pure is false: steps do I/O outside the store's transaction.
func (d *Definition[In, Out]) Pure() bool { return false }

// KeepsHistory reports true (shell.HistoryKeeper): a handling folds the
// run's history (durable.Fold) and never changes it, so a router with a
// StateCache keeps each run's history between handlings and reads only
// the events appended since its last one, instead of the whole run again
// for every step.
func (d *Definition[In, Out]) KeepsHistory() bool { return true }

// HandleClaim re-enters the claimed run: its history is replayed through
// the workflow function up to the first operation with something to do,
// which is done (a step run, a wait begun, a signal delivered), and the
// events recording it are appended under a guard on the runner's own
// events, so two workers can never both record one run's progress. The
// workflow's failures are recorded as events, never returned: an error
// from HandleClaim is the store's.
func (d *Definition[In, Out]) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	pairs := make([]effects.Pair, len(c.Messages))
	for i, m := range c.Messages {
		pairs[i] = effects.Pair{Signals: []effects.Signal{effects.Ack{}}, Source: m}
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	run := durable.Fold(c.History)
	if run.Status != durable.Running {
		return pairs, nil
	}
	now := c.Now
	if d.now != nil {
		now = d.now()
	} else if now.IsZero() {
		now = time.Now()
	}
	events, delivered, withdraw := d.advance(ctx, run, now)
	if len(events) == 0 {
		return pairs, nil
	}
	// The guard: the runner's own events, but WaitEnded only when this
	// handling delivered a signal to a waiting receive (its timeout may have
	// come meanwhile). A late WaitEnded of a wait that ended before must
	// not conflict with a step's outcome: the step would run again.
	conds := make([]core.Condition, 0, 9)
	for _, t := range d.types.Runner() {
		if t == d.types.WaitEnded && !delivered {
			continue
		}
		conds = append(conds, core.Condition{Type: t, Attrs: map[string]string{durable.PartitionKey: run.ID}})
	}
	guard := core.Guard{Conditions: conds, LastPosition: c.HistoryGuard.LastPosition}
	last := &pairs[len(pairs)-1]
	last.Signals = []effects.Signal{effects.Append{Messages: events, Guard: &guard}}
	if len(withdraw) > 0 {
		// The timeout of a receive whose signal came first leaves the
		// schedule in the transaction that records the signal.
		last.Signals = append(last.Signals, effects.Unschedule{IDs: withdraw})
	}
	last.Signals = append(last.Signals, effects.Ack{})
	return pairs, nil
}

// suspended is the panic value that unwinds a workflow function at an
// operation that waits.
type suspended struct{}

// advance replays run through the function and returns the events of
// what it did, whether it delivered a signal to a waiting receive, and the
// scheduled timeouts that delivery withdraws.
func (d *Definition[In, Out]) advance(ctx context.Context, run *durable.Run, now time.Time) ([]core.Message, bool, []uuid.UUID) {
	w := d.replay(ctx, run, now)
	return w.out, w.delivered, w.withdraw
}

func (d *Definition[In, Out]) replay(ctx context.Context, run *durable.Run, now time.Time) *Workflow {
	w := &Workflow{ctx: ctx, name: d.name, types: d.types, cur: durable.NewCursor(d.name, run), now: now, errTypes: d.errTypes}
	fail := func(step string, f durable.Failure, errs ...error) *Workflow {
		failed := durable.WorkflowFailed{WorkflowID: run.ID, Step: step, ErrorType: f.Type, Error: f.Message, Stack: f.Stack}
		for _, err := range errs {
			var nd *durable.NonDeterminismError
			if errors.As(err, &nd) {
				failed.NonDeterminism = nd
			}
		}
		w.emit(d.types.WorkflowFailed, failed)
		return w
	}
	var in In
	if len(run.Input) > 0 {
		if err := json.Unmarshal(run.Input, &in); err != nil {
			return fail("", failureOf(fmt.Errorf("workflow %s: decoding the input as %T: %w", d.name, in, err), ""))
		}
	}
	if d.ctx != nil {
		w.ctxSpec = d.ctx
		w.ctxVal = d.ctx.seed()
		if len(run.Seed) > 0 {
			if err := d.ctx.load(w.ctxVal, run.Seed); err != nil {
				return fail("", failureOf(fmt.Errorf("workflow %s: decoding the context: %w", d.name, err), ""))
			}
		}
		w.ctxJSON, _ = json.Marshal(w.ctxVal)
	}
	var (
		out      Out
		err      error
		panicked *durable.Failure
	)
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(suspended); ok {
					w.suspended = true
					return
				}
				panicked = &durable.Failure{Type: "panic", Message: fmt.Sprint(v), Stack: string(debug.Stack())}
			}
		}()
		out, err = d.fn(w, in)
	}()
	switch {
	case w.fatal != nil:
		return fail("", failureOf(w.fatal, ""), w.fatal)
	case w.suspended:
		return w
	case panicked != nil:
		return fail("", *panicked)
	}
	if derr := w.cur.Done(); derr != nil {
		return fail("", failureOf(derr, ""), derr)
	}
	if err != nil {
		step := ""
		var se *StepError
		if errors.As(err, &se) {
			step = se.Step
		}
		return fail(step, failureOf(err, ""))
	}
	data, merr := json.Marshal(out)
	if merr != nil {
		return fail("", failureOf(fmt.Errorf("workflow %s: encoding the output %T: %w", d.name, out, merr), ""))
	}
	w.persistContext(len(run.Ops))
	w.emit(d.types.WorkflowComplete, durable.WorkflowComplete{WorkflowID: run.ID, Output: data})
	return w
}

func failureOf(err error, stack string) durable.Failure {
	f := durable.Failure{Type: fmt.Sprintf("%T", err), Message: err.Error(), Stack: stack}
	var se *StepError
	if errors.As(err, &se) && se.Type != "" {
		f.Type = se.Type
	}
	return f
}

// Describe tells a topology (package shell/topology) that the definition
// is a workflow: its node consumes the run's client messages and produces
// its lifecycle events (see Types).
func (d *Definition[In, Out]) Describe() core.Description {
	return core.Description{Kind: core.KindWorkflow}
}

var _ core.Describer = (*Definition[struct{}, struct{}])(nil)
