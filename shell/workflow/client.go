package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// Status is where a run is: NotStarted, Running, Complete, Failed or
// Cancelled.
type Status = durable.Status

// The statuses of a run.
const (
	NotStarted = durable.NotStarted
	Running    = durable.Running
	Complete   = durable.Complete
	Failed     = durable.Failed
	Cancelled  = durable.Cancelled
)

var (
	// ErrNotFound is matched by the error of Load, Wait, Cancel or Send
	// for a run id that was never started.
	ErrNotFound = errors.New("workflow: no such run")
	// ErrFinished is matched by the error of Cancel for a run that had
	// already ended.
	ErrFinished = errors.New("workflow: the run already ended")
	// ErrCancelled is matched by the error Wait returns for a cancelled run.
	ErrCancelled = errors.New("workflow: the run was cancelled")
)

// RunError is the error Wait returns for a run that failed or was
// cancelled (errors.Is ErrCancelled): what its WorkflowFailed recorded.
//
// Its cause is rebuilt from the log, for errors.Is and errors.As: a
// *durable.NonDeterminismError for a run whose function no longer matched
// its history; a *StepError (the step's name, attempts, and its error's Go
// type and message) for a run failed by a step's failure; ErrStepInStep
// or ErrNilStep for a run failed by those programming errors.
type RunError struct {
	Workflow, RunID string
	Status          Status
	// Step names the step whose failure failed the run, if any.
	Step    string
	Failure durable.Failure

	cause error
}

// Unwrap returns the cause of the failure, when the log recorded one (see
// RunError): errors.As(err, &nd) with nd a *durable.NonDeterminismError,
// or with a *StepError.
func (e *RunError) Unwrap() error { return e.cause }

func (e *RunError) Error() string {
	if e.Status == Cancelled {
		return fmt.Sprintf("workflow %s run %s was cancelled: %s", e.Workflow, e.RunID, e.Failure.Message)
	}
	if e.Step != "" {
		return fmt.Sprintf("workflow %s run %s failed in step %s: %s", e.Workflow, e.RunID, e.Step, e.Failure.Message)
	}
	return fmt.Sprintf("workflow %s run %s failed: %s (%s)", e.Workflow, e.RunID, e.Failure.Message, e.Failure.Type)
}

// Is matches ErrCancelled for a cancelled run.
func (e *RunError) Is(target error) bool { return target == ErrCancelled && e.Status == Cancelled }

// Run is the handle of one run of a workflow.
type Run[In, Out any] struct {
	// ID is the run's id, its workflow_id.
	ID    string
	store shell.Store
	wf    *Definition[In, Out]
}

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct{ id string }

// WithID gives the run its id instead of a fresh "workflow-<uuid>": a
// start with the id of a run that exists starts nothing and returns that
// run (idempotent starts, for instance keyed by an order id).
func WithID(id string) StartOption { return func(o *startOptions) { o.id = id } }

// Start starts a run of wf with input: it appends WorkflowStarted (with
// the seeded context) and returns the run's handle. The runtime's workers
// drive it from there. With WithID, a run that already exists is returned
// as it is.
func Start[In, Out any](ctx context.Context, store shell.Store, wf *Definition[In, Out], input In, opts ...StartOption) (*Run[In, Out], error) {
	if err := wf.Register(store.Registry()); err != nil {
		return nil, err
	}
	var o startOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	start, err := starting(wf, input, o.id)
	if err != nil {
		return nil, err
	}
	o.id = start.Payload.(durable.WorkflowStarted).WorkflowID
	run := &Run[In, Out]{ID: o.id, store: store, wf: wf}
	for {
		res, err := store.ReadPartition(ctx, partition(o.id), []string{wf.types.WorkflowStarted}, shell.ReadOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(res.Messages) > 0 {
			return run, nil // started already
		}
		_, err = store.Append(ctx, []core.Message{start}, shell.AppendOptions{Guard: &res.Guard})
		if errors.Is(err, core.ErrConcurrentAppend) {
			continue // someone else started it: read it
		}
		if err != nil {
			return nil, err
		}
		return run, nil
	}
}

// starting returns the WorkflowStarted message of a run of wf with input
// and id (a fresh "workflow-<uuid>" when empty), the seeded context with
// it.
func starting[In, Out any](wf *Definition[In, Out], input In, id string) (core.Message, error) {
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return core.Message{}, err
		}
		id = "workflow-" + u.String()
	}
	data, err := json.Marshal(input)
	if err != nil {
		return core.Message{}, fmt.Errorf("workflow %s: encoding the input %T: %w", wf.name, input, err)
	}
	started := durable.WorkflowStarted{WorkflowID: id, Input: data}
	if wf.ctx != nil {
		if started.Context, err = json.Marshal(wf.ctx.seed()); err != nil {
			return core.Message{}, fmt.Errorf("workflow %s: encoding the seeded context: %w", wf.name, err)
		}
	}
	return core.Message{Type: wf.types.WorkflowStarted, Payload: started}, nil
}

// Starting returns the message that starts a run of wf with input, for a
// decider or a reaction to return among its messages: the run then starts
// in the transaction that stores the decision (both are stored, or
// neither), instead of a Start after it with a gap between the two. The
// run's id is WithID's, else a fresh "workflow-<uuid>"; derive it from the
// decision (an order's id) to find the run again with Attach. Unlike
// Start, Starting does not look for a run with that id: the decision's own
// guard is what makes it happen once, so an id must not be reused. wf
// must be among the runtime's reactors (which registers its types) for
// the run to be driven.
//
//	core.Decide(func(s Booking, c Book) ([]any, error) {
//		pay, err := workflow.Starting(payment, Charge{Booking: c.ID}, workflow.WithID("payment-"+c.ID))
//		if err != nil {
//			return nil, err
//		}
//		return []any{Booked{ID: c.ID}, pay}, nil
//	})
func Starting[In, Out any](wf *Definition[In, Out], input In, opts ...StartOption) (core.Message, error) {
	var o startOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return starting(wf, input, o.id)
}

func partition(id string) map[string]string { return map[string]string{durable.PartitionKey: id} }

// Attach returns the handle of the run id of wf (started or not), as
// Start returns it: for a run started elsewhere (by Starting in a
// decision, by another process). It reads nothing.
func Attach[In, Out any](store shell.Store, wf *Definition[In, Out], id string) *Run[In, Out] {
	return &Run[In, Out]{ID: id, store: store, wf: wf}
}

// Info is a run as Load reads it.
type Info[Out any] struct {
	ID, Workflow string
	Status       Status
	// Output is a complete run's output.
	Output Out
	// Failure and FailedStep are a failed run's error and the step it
	// came from; CancelReason a cancelled run's reason.
	Failure      *durable.Failure
	FailedStep   string
	CancelReason string
	// NonDeterminism is what failed a run whose function no longer
	// matched its history, when that is what failed it.
	NonDeterminism *durable.NonDeterminismError
	// Context is the run's latest persisted context (JSON; decode it with
	// json.Unmarshal into the WithContext type).
	Context json.RawMessage
	// Steps are the run's operations (steps, sleeps, receives) in order.
	Steps []durable.Op
	// Current is the operation the run is at (nil before the first).
	Current            *durable.Op
	StartedAt, EndedAt time.Time

	errTypes errTypes // the workflow's, to rebuild a step's error value
}

// Err returns a failed or cancelled run's *RunError, nil otherwise.
func (i Info[Out]) Err() error {
	switch i.Status {
	case Failed:
		e := &RunError{Workflow: i.Workflow, RunID: i.ID, Status: Failed, Step: i.FailedStep, Failure: *i.Failure}
		switch {
		case i.NonDeterminism != nil:
			e.cause = i.NonDeterminism
		case strings.HasPrefix(i.Failure.Message, ErrStepInStep.Error()+":"):
			e.cause = ErrStepInStep
		case strings.HasPrefix(i.Failure.Message, ErrNilStep.Error()+":"):
			e.cause = ErrNilStep
		case i.FailedStep != "":
			for _, op := range slices.Backward(i.Steps) {
				if op.Kind == durable.KindStep && op.Name == i.FailedStep && op.Status == durable.OpFailed {
					e.cause = stepError(&op, i.errTypes)
					break
				}
			}
		}
		return e
	case Cancelled:
		return &RunError{Workflow: i.Workflow, RunID: i.ID, Status: Cancelled, Failure: durable.Failure{Type: "cancelled", Message: i.CancelReason}}
	}
	return nil
}

// Load reads the run id of wf from the log: its status, output, error,
// context and steps.
func Load[In, Out any](ctx context.Context, store shell.Store, wf *Definition[In, Out], id string) (Info[Out], error) {
	if err := wf.Register(store.Registry()); err != nil {
		return Info[Out]{ID: id, Workflow: wf.name, errTypes: wf.errTypes}, err
	}
	return load(ctx, store, wf, id, wf.types.All())
}

// load is Load folding only the run's events of the given types (its
// start and its end suffice for the status and output of a run that
// ended, but a failure's steps).
func load[In, Out any](ctx context.Context, store shell.Store, wf *Definition[In, Out], id string, types []string) (Info[Out], error) {
	info := Info[Out]{ID: id, Workflow: wf.name, errTypes: wf.errTypes}
	res, err := store.ReadPartition(ctx, partition(id), types, shell.ReadOptions{})
	if err != nil {
		return info, err
	}
	run := durable.Fold(res.Messages)
	if run.Status == NotStarted {
		return info, fmt.Errorf("%w: workflow %s has no run %q", ErrNotFound, wf.name, id)
	}
	info.Status, info.Failure, info.FailedStep, info.CancelReason = run.Status, run.Failure, run.FailedStep, run.CancelReason
	info.NonDeterminism = run.NonDeterminism
	info.Context, info.Steps, info.Current = run.Context, run.Ops, run.Current()
	info.StartedAt, info.EndedAt = run.StartedAt, run.EndedAt
	if run.Status == Complete && len(run.Output) > 0 {
		if err := json.Unmarshal(run.Output, &info.Output); err != nil {
			return info, fmt.Errorf("workflow %s run %s: decoding the output as %T: %w", wf.name, id, info.Output, err)
		}
	}
	return info, nil
}

// Load reads the run (see Load).
func (r *Run[In, Out]) Load(ctx context.Context) (Info[Out], error) {
	return Load(ctx, r.store, r.wf, r.ID)
}

// Wait blocks until the run ends and returns its output, or a *RunError
// for a failed or cancelled run, or ctx's error. The waits of a process on
// one store and workflow share one reader of the runs' ends, woken by the
// store's notifications and polling every 50 ms for ends appended by other
// processes: a run that ends costs its own waiters one read of its start
// and end, whatever the number of runs waited on.
func (r *Run[In, Out]) Wait(ctx context.Context) (Out, error) {
	var zero Out
	if err := r.wf.Register(r.store.Registry()); err != nil {
		return zero, err
	}
	ends := [3]string{r.wf.types.WorkflowComplete, r.wf.types.WorkflowFailed, r.wf.types.WorkflowCancelled}
	wake, leave := watchEnds(r.store, ends, r.ID)
	defer leave()
	// The start and the end tell a run's status and output: Wait reads
	// those two events, not the run's history, and loads it whole only for
	// a failure (whose error is its failed step's).
	startEnd := append([]string{r.wf.types.WorkflowStarted}, ends[:]...)
	tick := time.NewTicker(waiterPoll)
	defer tick.Stop()
	for {
		info, err := load(ctx, r.store, r.wf, r.ID, startEnd)
		if err == nil && info.Status == Failed {
			info, err = r.Load(ctx)
		}
		if err != nil {
			return zero, err
		}
		if info.Status.Terminal() {
			return info.Output, info.Err()
		}
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-wake:
		case <-tick.C:
		}
	}
}

// Send sends the run id of wf a signal named name with payload (any
// value with a JSON encoding), for its Receive of name. A signal for a
// run that ended is kept in its log and received by nothing. A run never
// started gets nothing: Send returns ErrNotFound and writes nothing (a
// signal kept for it would be received by a run started later with that
// id); start the run before sending it signals.
func Send[In, Out any](ctx context.Context, store shell.Store, wf *Definition[In, Out], id, name string, payload any) error {
	if err := wf.Register(store.Registry()); err != nil {
		return err
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("workflow %s: encoding the signal %s (%T): %w", wf.name, name, payload, err)
	}
	// A run, once started, stays started: the signal needs no guard.
	started, err := store.ReadPartition(ctx, partition(id), []string{wf.types.WorkflowStarted}, shell.ReadOptions{Limit: 1})
	if err != nil {
		return err
	}
	if len(started.Messages) == 0 {
		return fmt.Errorf("%w: workflow %s has no run %q to send %s to: start it first", ErrNotFound, wf.name, id, name)
	}
	_, err = store.Append(ctx, []core.Message{{Type: wf.types.SignalSent, Payload: durable.SignalSent{WorkflowID: id, Name: name, Payload: data}}}, shell.AppendOptions{})
	return err
}

// Send sends the run a signal (see Send).
func (r *Run[In, Out]) Send(ctx context.Context, name string, payload any) error {
	return Send(ctx, r.store, r.wf, r.ID, name, payload)
}

// Cancel ends the run id of wf (WorkflowCancelled): nothing of it runs
// afterwards, though a step running at that moment finishes and its
// outcome is recorded. What the run scheduled (a sleep's end, a receive's
// timeout, a step's retry) leaves the schedule in the same transaction,
// on a store whose transactions withdraw scheduled messages
// (driver.UnscheduleTx: the memory, SQLite and PostgreSQL stores).
// ErrFinished for a run that had ended; ErrNotFound for one never
// started.
func Cancel[In, Out any](ctx context.Context, store shell.Store, wf *Definition[In, Out], id, reason string) error {
	if err := wf.Register(store.Registry()); err != nil {
		return err
	}
	for {
		err := store.Update(ctx, func(tx shell.Tx) error {
			res, err := tx.ReadPartition(partition(id), wf.types.All(), shell.ReadOptions{})
			if err != nil {
				return err
			}
			run := durable.Fold(res.Messages)
			switch {
			case run.Status == NotStarted:
				return fmt.Errorf("%w: workflow %s has no run %q", ErrNotFound, wf.name, id)
			case run.Status.Terminal():
				return fmt.Errorf("%w: workflow %s run %s is %s", ErrFinished, wf.name, id, run.Status)
			}
			cancelled := core.Message{Type: wf.types.WorkflowCancelled, Payload: durable.WorkflowCancelled{WorkflowID: id, Reason: reason}}
			if _, err := tx.Append([]core.Message{cancelled}, shell.AppendOptions{Guard: &res.Guard}); err != nil {
				return err
			}
			if u, ok := tx.(driver.UnscheduleTx); ok {
				if ids := scheduledBy(run); len(ids) > 0 {
					_, err = u.Unschedule(ids...)
				}
			}
			return err
		})
		if errors.Is(err, core.ErrConcurrentAppend) {
			continue
		}
		return err
	}
}

// scheduledBy returns the ids of the messages run has scheduled and not
// yet seen promoted: its waits' ends and its steps' retries (those it
// recorded the ids of).
func scheduledBy(run *durable.Run) []uuid.UUID {
	var ids []uuid.UUID
	for _, op := range run.Ops {
		ref := ""
		switch op.Status {
		case durable.OpWaiting:
			ref = op.TimeoutID
		case durable.OpRetrying:
			ref = op.RetryID
		}
		if id, err := uuid.Parse(ref); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// Cancel cancels the run (see Cancel).
func (r *Run[In, Out]) Cancel(ctx context.Context, reason string) error {
	return Cancel(ctx, r.store, r.wf, r.ID, reason)
}

// Runs reads every run of the workflow named name from the log, newest
// first. It needs none of the workflow's types (the sourced CLI lists runs
// of a store opened with raw payloads), and reads every lifecycle event of
// the workflow: it is for operators, not for request paths.
func Runs(ctx context.Context, store shell.Store, name string) ([]*durable.Run, error) {
	types := durable.TypesOf(name)
	conds := make([]core.Condition, 0, 11)
	for _, t := range types.All() {
		conds = append(conds, core.Condition{Type: t})
	}
	byID := map[string][]core.PositionedMessage{}
	var order []string
	for m, err := range store.All(ctx, shell.ReadAllOptions{Conditions: conds, Limit: 500}) {
		if err != nil {
			return nil, err
		}
		ev, ok := durable.Event(m.Message)
		if !ok {
			continue
		}
		id := workflowID(ev)
		if _, seen := byID[id]; !seen {
			order = append(order, id)
		}
		byID[id] = append(byID[id], m)
	}
	var out []*durable.Run
	for _, id := range slices.Backward(order) {
		if run := durable.Fold(byID[id]); run.Status != NotStarted {
			out = append(out, run)
		}
	}
	return out, nil
}

func workflowID(ev any) string {
	switch e := ev.(type) {
	case durable.WorkflowStarted:
		return e.WorkflowID
	case durable.StepStarted:
		return e.WorkflowID
	case durable.StepComplete:
		return e.WorkflowID
	case durable.StepFailed:
		return e.WorkflowID
	case durable.ContextUpdated:
		return e.WorkflowID
	case durable.WaitStarted:
		return e.WorkflowID
	case durable.WaitEnded:
		return e.WorkflowID
	case durable.SignalSent:
		return e.WorkflowID
	case durable.WorkflowCancelled:
		return e.WorkflowID
	case durable.WorkflowComplete:
		return e.WorkflowID
	case durable.WorkflowFailed:
		return e.WorkflowID
	}
	return ""
}

// Counts are a workflow's runs by status.
type Counts struct {
	Workflow                                    string
	Running, Complete, Failed, Cancelled, Total int
}

// Stats counts the runs of each named workflow (see Runs).
func Stats(ctx context.Context, store shell.Store, names ...string) ([]Counts, error) {
	out := make([]Counts, 0, len(names))
	for _, name := range names {
		runs, err := Runs(ctx, store, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Count(name, runs))
	}
	return out, nil
}

// Count counts the runs of the workflow named name by status.
func Count(name string, runs []*durable.Run) Counts {
	c := Counts{Workflow: name, Total: len(runs)}
	for _, r := range runs {
		switch r.Status {
		case Running:
			c.Running++
		case Complete:
			c.Complete++
		case Failed:
			c.Failed++
		case Cancelled:
			c.Cancelled++
		}
	}
	return c
}

// RunOf reads the run id of the workflow named name, like Load but
// without the workflow's types (for tools: see Runs); ErrNotFound when the
// workflow has no such run.
func RunOf(ctx context.Context, store shell.Store, name, id string) (*durable.Run, error) {
	types := durable.TypesOf(name)
	conds := make([]core.Condition, 0, 11)
	for _, t := range types.All() {
		conds = append(conds, core.Condition{Type: t, Attrs: partition(id)})
	}
	var history []core.PositionedMessage
	for m, err := range store.All(ctx, shell.ReadAllOptions{Conditions: conds, Limit: 500}) {
		if err != nil {
			return nil, err
		}
		history = append(history, m)
	}
	run := durable.Fold(history)
	if run.Status == NotStarted {
		return nil, fmt.Errorf("%w: workflow %s has no run %q", ErrNotFound, name, id)
	}
	return run, nil
}
