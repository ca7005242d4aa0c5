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

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
)

// Workflow is a run as its function sees it: the handle that Step, Sleep,
// Receive and Context take. It is only valid inside the function's call.
type Workflow struct {
	ctx   context.Context
	name  string
	types durable.Types
	cur   *durable.Cursor
	now   time.Time
	out   []core.Message

	ctxSpec *contextSpec
	ctxVal  any    // *C
	ctxJSON []byte // the context as last persisted (or seeded)

	suspended bool
	fatal     error
	delivered bool        // a signal was delivered to a receive waiting before this handling
	withdraw  []uuid.UUID // the scheduled timeouts the handling withdraws (effects.Unschedule)
	inStep    string      // the step whose function is running, if any
	errTypes  errTypes
}

// ErrStepInStep is matched by the error of a run whose step called Step,
// Sleep or Receive: a step cannot contain steps (it is one memoised call:
// call the others from the workflow function, before or after it). The
// run fails with it (a programming error: it is not retried).
var ErrStepInStep = errors.New("workflow: a step cannot contain steps")

// ErrNilStep is matched by the error of a run that called Step with a nil
// function (a programming error: the run fails at once, nothing retried).
var ErrNilStep = errors.New("workflow: a step with a nil function")

// outsideSteps fails the run when an operation is called inside a step.
func (w *Workflow) outsideSteps(kind durable.Kind, name string) {
	if w.inStep != "" {
		w.abort(fmt.Errorf("%w: workflow %s: %s %q was called inside step %q; call it from the workflow function", ErrStepInStep, w.name, kind, name, w.inStep))
	}
}

// ID is the run's id (its workflow_id).
func (w *Workflow) ID() string { return w.cur.Run().ID }

// Name is the workflow's name.
func (w *Workflow) Name() string { return w.name }

// emit records an event for the log and folds it into the replayed run.
func (w *Workflow) emit(typ string, payload any) {
	m := core.Message{Type: typ, Payload: payload, CreatedAt: w.now}
	w.out = append(w.out, m)
	w.cur.Record(core.PositionedMessage{Message: m})
}

// schedule records an event for the log dated at, not folded: it only
// enters the log at at. id is its message id (uuid.Nil: the store's).
func (w *Workflow) schedule(id uuid.UUID, typ string, payload any, at time.Time) {
	w.out = append(w.out, core.Message{ID: id, Type: typ, Payload: payload, CreatedAt: at})
}

// newID is the id of a message the run schedules for what (recorded in
// its event, so that the run can withdraw it).
func (w *Workflow) newID(what string) uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		w.abort(fmt.Errorf("workflow %s: %s: an id for its scheduled message: %w", w.name, what, err))
	}
	return id
}

// suspend stops the function: the run waits for an event.
func (w *Workflow) suspend() {
	w.suspended = true
	panic(suspended{})
}

// abort fails the run with err (a definition problem found while running).
func (w *Workflow) abort(err error) {
	if w.fatal == nil {
		w.fatal = err
	}
	w.suspend()
}

// persistContext appends ContextUpdated after the operation at seq when the
// context differs from the one last persisted.
func (w *Workflow) persistContext(seq int) {
	if w.ctxSpec == nil {
		return
	}
	data, err := json.Marshal(w.ctxVal)
	if err != nil {
		w.abort(fmt.Errorf("workflow %s: encoding the context: %w", w.name, err))
	}
	if string(data) == string(w.ctxJSON) {
		return
	}
	w.ctxJSON = data
	w.emit(w.types.ContextUpdated, durable.ContextUpdated{WorkflowID: w.ID(), Seq: seq, Context: data})
}

// restoreContext loads data (a persisted context) into the context.
func (w *Workflow) restoreContext(data []byte) {
	if w.ctxSpec == nil || len(data) == 0 {
		return
	}
	if err := w.ctxSpec.load(w.ctxVal, data); err != nil {
		w.abort(fmt.Errorf("workflow %s: decoding the context: %w", w.name, err))
	}
	w.ctxJSON = data
}

// Context returns the run's context (see WithContext): a pointer the
// function and its steps read and change. C must be the type given to
// WithContext; another fails the run.
func Context[C any](w *Workflow) *C {
	if w.ctxSpec == nil {
		w.abort(fmt.Errorf("workflow %s: Context[%v] called, but the workflow was defined without WithContext", w.name, reflect.TypeFor[C]()))
	}
	c, ok := w.ctxVal.(*C)
	if !ok {
		w.abort(fmt.Errorf("workflow %s: Context[%v] called, but its context is a %v (WithContext)", w.name, reflect.TypeFor[C](), w.ctxSpec.typ))
	}
	return c
}

// StepError is what Step returns for a step that failed for good: every
// attempt failed, or its error was Permanent. It is rebuilt from the log
// on replay, so it carries the error's type and message, not the error
// value itself: a workflow function branching on it behaves the same live
// and replayed.
//
// For an error of a type registered with WithStepError, the value itself
// is recorded too: the StepError unwraps to it (errors.As).
type StepError struct {
	Step     string
	Attempts int
	// Type is the Go type of the step's error ("*net.OpError"), or "panic".
	Type    string
	Message string

	err error // the recorded value of a registered error type
}

func (e *StepError) Error() string {
	return fmt.Sprintf("workflow step %s failed after %d attempt(s): %s", e.Step, e.Attempts, e.Message)
}

// Unwrap returns the step's error value, rebuilt from the log, when its
// type was registered with WithStepError; nil otherwise.
func (e *StepError) Unwrap() error { return e.err }

// StepOption configures one call of Step.
type StepOption func(*stepOptions)

type stepOptions struct {
	retries          int
	backoff, maxWait time.Duration
	args             []any
}

// Retries lets a failing step be retried n times after its first attempt:
// at most n+1 attempts in all ("retry up to n times", as the manual says;
// the original's retries: n meant n attempts). Without it a step runs once
// and its failure is returned at once (no silent retrying).
func Retries(n int) StepOption { return func(o *stepOptions) { o.retries = max(n, 0) } }

// Backoff sets the wait before the first retry (default 1 s), doubled for
// each further one, up to max (default 1 min). The retry is a scheduled
// message (its StepStarted, dated then): no goroutine sleeps, and the
// process may stop meanwhile.
func Backoff(first, max time.Duration) StepOption {
	return func(o *stepOptions) { o.backoff, o.maxWait = first, max }
}

// Args keys the step by its arguments instead of its position: the memo
// key is the step's name and the canonical JSON of args, so the same step
// called again with the same arguments returns the first call's result
// without running (it is the same operation), wherever it is called.
func Args(args ...any) StepOption { return func(o *stepOptions) { o.args = args } }

// Permanent marks a step's error as not worth retrying: the step fails at
// once whatever its Retries. It is core.Permanent, the marker the error
// strategies share (core.IsPermanent tells it; the fixed strategy does
// not retry a batch that failed with it either).
func Permanent(err error) error { return core.Permanent(err) }

func (o stepOptions) delay(attempt int) time.Duration {
	d, limit := o.backoff, o.maxWait
	if d <= 0 {
		d = time.Second
	}
	if limit <= 0 {
		limit = time.Minute
	}
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Step runs fn as the step name of the run, once: its result is memoised
// in the log (StepComplete) and returned from there whenever the function
// is replayed; its failures are recorded (StepFailed, with the error's
// type and message, and the stack of a panic) and retried as Retries
// says. T must have a JSON encoding; the value returned is always the
// decoded memo, live as on replay.
//
// The step runs in its own handling of the run, after its StepStarted
// committed: a process dying meanwhile runs it again (at least once); a
// step whose StepComplete committed never runs again. ctx is the worker's.
func Step[T any](w *Workflow, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	var zero T
	w.outsideSteps(durable.KindStep, name)
	if fn == nil {
		w.abort(fmt.Errorf("%w: workflow %s: step %q", ErrNilStep, w.name, name))
	}
	var o stepOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	key, err := w.cur.Key(durable.KindStep, name, o.args)
	if err != nil {
		w.abort(err)
	}
	pos := w.cur.Position()
	op, action, _, err := w.cur.Next(durable.Call{Kind: durable.KindStep, Name: name, Key: key})
	if err != nil {
		w.abort(err)
	}
	id := w.ID()
	switch action {
	case durable.Begin:
		w.emit(w.types.StepStarted, durable.StepStarted{WorkflowID: id, Seq: op.Seq, Name: name, Key: key, Attempt: 1})
		w.suspend()
	case durable.Suspend:
		w.suspend()
	case durable.Replay:
		return replayStep[T](w, op, op.Seq == pos)
	}
	// Execute attempt op.Attempts.
	attempt, seq := op.Attempts, op.Seq
	var before []byte
	if w.ctxSpec != nil {
		before, _ = json.Marshal(w.ctxVal)
	}
	res, ferr, stack := runStep(w, name, fn)
	var data []byte
	if ferr == nil {
		if data, err = json.Marshal(res); err != nil {
			ferr = Permanent(fmt.Errorf("encoding the result %T: %w", res, err))
		}
	}
	if ferr == nil {
		w.emit(w.types.StepComplete, durable.StepComplete{WorkflowID: id, Seq: seq, Name: name, Key: key, Attempt: attempt, Result: data})
		w.persistContext(seq)
		return replayStep[T](w, &w.cur.Run().Ops[seq], true)
	}
	if before != nil { // a failed attempt's changes are dropped
		persisted := w.ctxJSON
		w.restoreContext(before)
		w.ctxJSON = persisted
	}
	errType := fmt.Sprintf("%T", ferr)
	var pe *core.PermanentError
	if errors.As(ferr, &pe) {
		errType = fmt.Sprintf("%T", pe.Err)
	}
	if stack != "" {
		errType = "panic"
	}
	failed := durable.StepFailed{WorkflowID: id, Seq: seq, Name: name, Key: key, Attempt: attempt, ErrorType: errType, Error: ferr.Error(), Stack: stack}
	if stack == "" {
		failed.ErrorDataType, failed.ErrorData = w.errTypes.encode(ferr)
	}
	if attempt <= o.retries && pe == nil {
		at := w.now.Add(o.delay(attempt))
		retryID := w.newID("step " + name)
		failed.RetryAt, failed.RetryID = &at, retryID.String()
		w.emit(w.types.StepFailed, failed)
		w.schedule(retryID, w.types.StepStarted, durable.StepStarted{WorkflowID: id, Seq: seq, Name: name, Key: key, Attempt: attempt + 1}, at)
		w.suspend()
	}
	w.emit(w.types.StepFailed, failed)
	return zero, stepError(&w.cur.Run().Ops[seq], w.errTypes)
}

// runStep runs a step's function, turning its panic into a failure; the
// unwinding of the run itself (an operation called inside the step fails
// the run) goes on past it.
//
//lint:ignore ST1008 the stack goes with the error it explains
func runStep[T any](w *Workflow, name string, fn func(context.Context) (T, error)) (res T, err error, stack string) {
	w.inStep = name
	defer func() {
		w.inStep = ""
		if v := recover(); v != nil {
			if _, ok := v.(suspended); ok {
				panic(v)
			}
			err, stack = fmt.Errorf("panic: %v", v), string(debug.Stack())
		}
	}()
	res, err = fn(w.ctx)
	return res, err, ""
}

// replayStep returns a step's memoised outcome; reached is false for a
// repeated call of a step reached before, which leaves the context alone.
func replayStep[T any](w *Workflow, op *durable.Op, reached bool) (T, error) {
	var v T
	if op.Status == durable.OpFailed {
		return v, stepError(op, w.errTypes)
	}
	if len(op.Result) > 0 {
		if err := json.Unmarshal(op.Result, &v); err != nil {
			w.abort(fmt.Errorf("workflow %s: step %s: decoding its memoised result as %T: %w", w.name, op.Name, v, err))
		}
	}
	if reached {
		w.restoreContext(op.Context)
	}
	return v, nil
}

func stepError(op *durable.Op, types errTypes) *StepError {
	e := &StepError{Step: op.Name, Attempts: op.Attempts}
	if op.Failure != nil {
		e.Type, e.Message = op.Failure.Type, op.Failure.Message
		e.err = types.decode(op.Failure)
	}
	return e
}

// Sleep suspends the run for d: WaitStarted now, and a WaitEnded scheduled
// for now+d, which the runtime's scheduled-message poller promotes when
// due, resuming the run (in this process or another: none needs to stay
// up meanwhile).
func Sleep(w *Workflow, d time.Duration) {
	w.outsideSteps(durable.KindSleep, "sleep")
	key, _ := w.cur.Key(durable.KindSleep, "sleep", nil)
	op, action, _, err := w.cur.Next(durable.Call{Kind: durable.KindSleep, Name: "sleep", Key: key})
	if err != nil {
		w.abort(err)
	}
	switch action {
	case durable.Replay:
		return
	case durable.Begin:
		until := w.now.Add(d)
		// The end, scheduled under an id of its own, recorded, so that a
		// cancellation withdraws it.
		endID := w.newID("sleep")
		w.emit(w.types.WaitStarted, durable.WaitStarted{WorkflowID: w.ID(), Seq: op.Seq, Name: "sleep", Key: key, Until: until, TimeoutID: endID.String()})
		w.schedule(endID, w.types.WaitEnded, durable.WaitEnded{WorkflowID: w.ID(), Seq: op.Seq, Key: key, TimedOut: true}, until)
	}
	w.suspend()
}

// ErrTimeout is returned by Receive when no signal came in time.
var ErrTimeout = errors.New("workflow: receive timed out")

// Receive waits for a signal named name sent to the run (Send), up to
// timeout (zero or less: forever), and returns its payload decoded as T;
// ErrTimeout when none came in time. Signals of one name are received in
// the order they were sent; a signal sent before the run reached its
// Receive waits for it. What was received is recorded (WaitEnded), so a
// replay receives the same.
func Receive[T any](w *Workflow, name string, timeout time.Duration) (T, error) {
	var v T
	w.outsideSteps(durable.KindReceive, name)
	key, _ := w.cur.Key(durable.KindReceive, name, nil)
	op, action, sig, err := w.cur.Next(durable.Call{Kind: durable.KindReceive, Name: name, Key: key})
	if err != nil {
		w.abort(err)
	}
	id := w.ID()
	switch action {
	case durable.Begin:
		ws := durable.WaitStarted{WorkflowID: id, Seq: op.Seq, Name: name, Key: key, Signal: name}
		if timeout > 0 {
			ws.Until = w.now.Add(timeout)
		}
		s, ok := w.cur.Run().Available(name)
		// Only a receive that waits has a timeout to schedule (one whose
		// signal is there ends now), under an id of its own, recorded, so
		// that the signal's delivery withdraws it.
		var timeoutID uuid.UUID
		if !ok && timeout > 0 {
			timeoutID = w.newID("receive " + name)
			ws.TimeoutID = timeoutID.String()
		}
		w.emit(w.types.WaitStarted, ws)
		if !ok {
			if timeout > 0 {
				w.schedule(timeoutID, w.types.WaitEnded, durable.WaitEnded{WorkflowID: id, Seq: op.Seq, Key: key, TimedOut: true}, ws.Until)
			}
			w.suspend()
		}
		w.emit(w.types.WaitEnded, durable.WaitEnded{WorkflowID: id, Seq: op.Seq, Key: key, SignalID: s.ID, Payload: s.Payload})
	case durable.Deliver:
		w.delivered = true
		if tid, err := uuid.Parse(op.TimeoutID); err == nil {
			w.withdraw = append(w.withdraw, tid)
		}
		w.emit(w.types.WaitEnded, durable.WaitEnded{WorkflowID: id, Seq: op.Seq, Key: key, SignalID: sig.ID, Payload: sig.Payload})
	case durable.Suspend:
		w.suspend()
	}
	op = &w.cur.Run().Ops[op.Seq]
	if op.TimedOut {
		return v, ErrTimeout
	}
	if len(op.Payload) > 0 {
		if err := json.Unmarshal(op.Payload, &v); err != nil {
			return v, fmt.Errorf("workflow %s: signal %s: decoding its payload as %T: %w", w.name, name, v, err)
		}
	}
	return v, nil
}
