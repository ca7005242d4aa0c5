package durable

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sourced-go/sourced/core"
)

// Status is where a run is.
type Status string

// The statuses of a run.
const (
	// NotStarted: no WorkflowStarted for the id.
	NotStarted Status = ""
	Running    Status = "running"
	Complete   Status = "complete"
	Failed     Status = "failed"
	Cancelled  Status = "cancelled"
)

// Terminal reports whether the run ended.
func (s Status) Terminal() bool { return s == Complete || s == Failed || s == Cancelled }

// Kind is the kind of an operation of a run.
type Kind string

// The kinds of operations.
const (
	KindStep    Kind = "step"
	KindSleep   Kind = "sleep"
	KindReceive Kind = "receive"
)

// OpStatus is where an operation is.
type OpStatus string

// The statuses of an operation.
const (
	// OpStarted: an attempt is due (its StepStarted committed, no outcome).
	OpStarted OpStatus = "started"
	// OpRetrying: the last attempt failed and the next is scheduled.
	OpRetrying OpStatus = "retrying"
	// OpComplete: a step's result is memoised.
	OpComplete OpStatus = "complete"
	// OpFailed: a step failed for good; its error is memoised.
	OpFailed OpStatus = "failed"
	// OpWaiting: a sleep or a receive has not ended.
	OpWaiting OpStatus = "waiting"
	// OpEnded: a sleep or a receive ended (its outcome is memoised).
	OpEnded OpStatus = "ended"
)

// Failure is a recorded error: its Go type, its message and, for a panic,
// its stack.
type Failure struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
	// DataType and Data are a step's error value, when its type was
	// registered with the workflow: the type's name and its JSON.
	DataType string          `json:"data_type,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// Op is one operation of a run (a step, a sleep or a receive), in the
// order the run first reached it (Seq).
type Op struct {
	Seq  int
	Kind Kind
	Name string
	Key  string
	// Status is where the operation is.
	Status OpStatus
	// Attempts is the number of the last attempt started (steps).
	Attempts int
	// Result is a complete step's memoised result (JSON).
	Result json.RawMessage
	// Failure is the last failed attempt's error (steps).
	Failure *Failure
	// RetryAt is when a retrying step's next attempt is due, RetryID the
	// id of its scheduled StepStarted (see StepFailed).
	RetryAt time.Time
	RetryID string
	// Context is the run's context after the operation, when it changed.
	Context json.RawMessage
	// Until is when a wait ends (zero: a receive without timeout).
	Until time.Time
	// Signal is the signal name a receive waits for.
	Signal string
	// TimeoutID is the id of a wait's scheduled end (a sleep's, a timed
	// receive's timeout; see WaitStarted).
	TimeoutID string
	// TimedOut, SignalID and Payload are an ended wait's outcome.
	TimedOut bool
	SignalID string
	Payload  json.RawMessage
	// StartedAt and EndedAt are when the operation was first started and
	// when it ended (zero while it runs).
	StartedAt, EndedAt time.Time
}

// Signal is a message sent to a run.
type Signal struct {
	ID       string
	Name     string
	Payload  json.RawMessage
	SentAt   time.Time
	Consumed bool
}

// Run is a run's state, folded from its lifecycle events (see Fold).
type Run struct {
	ID     string
	Status Status
	Input  json.RawMessage
	// Context is the latest persisted context, Seed the one the run started with.
	Context, Seed json.RawMessage
	Output        json.RawMessage
	// Failure and FailedStep are a failed run's error and the step it came from.
	Failure    *Failure
	FailedStep string
	// NonDeterminism is the mismatch that failed a run whose function no
	// longer matches its history, when one did.
	NonDeterminism *NonDeterminismError
	// CancelReason is a cancelled run's reason.
	CancelReason string
	Ops          []Op
	Signals      []Signal
	// StartedAt and EndedAt are the times of the first and the terminal event.
	StartedAt, EndedAt time.Time
	// Last is the position of the last event folded.
	Last int64

	byKey map[string]int
}

// Fold folds a run's lifecycle events, in position order, into its state.
// Messages that are no lifecycle event are skipped; events after the
// terminal one change nothing but Last. A WaitEnded of a wait already
// ended (a timeout after the signal came) is ignored, as is an event for
// an operation the run never started.
func Fold(history []core.PositionedMessage) *Run {
	r := &Run{byKey: map[string]int{}}
	for _, m := range history {
		r.Apply(m)
	}
	return r
}

// Apply folds one more event into the run.
func (r *Run) Apply(m core.PositionedMessage) {
	if r.byKey == nil {
		r.byKey = map[string]int{}
	}
	r.Last = max(r.Last, m.Position)
	ev, ok := Event(m.Message)
	if !ok {
		return
	}
	if r.Status.Terminal() {
		return
	}
	at := m.CreatedAt
	switch e := ev.(type) {
	case WorkflowStarted:
		if r.Status != NotStarted {
			return
		}
		r.ID, r.Status, r.Input, r.Seed, r.Context, r.StartedAt = e.WorkflowID, Running, e.Input, e.Context, e.Context, at
	case StepStarted:
		op := r.op(e.Seq, KindStep, e.Name, e.Key, at)
		if op == nil {
			return
		}
		if op.Status != OpComplete && op.Status != OpFailed && e.Attempt > op.Attempts {
			op.Attempts, op.Status = e.Attempt, OpStarted
		}
	case StepComplete:
		if op := r.existing(e.Seq, e.Key); op != nil && op.Status != OpComplete && op.Status != OpFailed {
			op.Status, op.Result, op.EndedAt = OpComplete, e.Result, at
			op.Attempts = max(op.Attempts, e.Attempt)
		}
	case StepFailed:
		if op := r.existing(e.Seq, e.Key); op != nil && op.Status != OpComplete && op.Status != OpFailed {
			op.Failure = &Failure{Type: e.ErrorType, Message: e.Error, Stack: e.Stack, DataType: e.ErrorDataType, Data: e.ErrorData}
			op.Attempts = max(op.Attempts, e.Attempt)
			if e.RetryAt != nil {
				op.Status, op.RetryAt, op.RetryID = OpRetrying, *e.RetryAt, e.RetryID
			} else {
				op.Status, op.EndedAt = OpFailed, at
			}
		}
	case ContextUpdated:
		r.Context = e.Context
		if e.Seq >= 0 && e.Seq < len(r.Ops) {
			r.Ops[e.Seq].Context = e.Context
		}
	case WaitStarted:
		kind := KindSleep
		if e.Signal != "" {
			kind = KindReceive
		}
		if op := r.op(e.Seq, kind, e.Name, e.Key, at); op != nil && op.Status == "" {
			op.Status, op.Until, op.Signal, op.TimeoutID = OpWaiting, e.Until, e.Signal, e.TimeoutID
		}
	case WaitEnded:
		if op := r.existing(e.Seq, e.Key); op != nil && op.Status == OpWaiting {
			op.Status, op.TimedOut, op.SignalID, op.Payload, op.EndedAt = OpEnded, e.TimedOut, e.SignalID, e.Payload, at
			for i := range r.Signals {
				if r.Signals[i].ID == e.SignalID && e.SignalID != "" {
					r.Signals[i].Consumed = true
				}
			}
		}
	case SignalSent:
		r.Signals = append(r.Signals, Signal{ID: m.ID.String(), Name: e.Name, Payload: e.Payload, SentAt: at})
	case WorkflowCancelled:
		if r.Status == NotStarted {
			return
		}
		r.Status, r.CancelReason, r.EndedAt = Cancelled, e.Reason, at
	case WorkflowComplete:
		r.Status, r.Output, r.EndedAt = Complete, e.Output, at
	case WorkflowFailed:
		r.Status, r.FailedStep, r.EndedAt, r.NonDeterminism = Failed, e.Step, at, e.NonDeterminism
		r.Failure = &Failure{Type: e.ErrorType, Message: e.Error, Stack: e.Stack}
	}
}

// op returns the operation at seq, adding it when seq is the next one;
// nil for a seq out of order or a key that contradicts the one recorded.
func (r *Run) op(seq int, kind Kind, name, key string, at time.Time) *Op {
	switch {
	case seq == len(r.Ops):
		r.Ops = append(r.Ops, Op{Seq: seq, Kind: kind, Name: name, Key: key, StartedAt: at})
		if _, dup := r.byKey[key]; !dup {
			r.byKey[key] = seq
		}
		return &r.Ops[seq]
	case seq >= 0 && seq < len(r.Ops) && r.Ops[seq].Key == key:
		return &r.Ops[seq]
	}
	return nil
}

func (r *Run) existing(seq int, key string) *Op {
	if seq >= 0 && seq < len(r.Ops) && r.Ops[seq].Key == key {
		return &r.Ops[seq]
	}
	return nil
}

// Current is the operation the run is at: the last one reached, nil
// before the first.
func (r *Run) Current() *Op {
	if len(r.Ops) == 0 {
		return nil
	}
	return &r.Ops[len(r.Ops)-1]
}

// Available returns the first signal named name that no receive took yet.
func (r *Run) Available(name string) (Signal, bool) {
	for _, s := range r.Signals {
		if s.Name == name && !s.Consumed {
			return s, true
		}
	}
	return Signal{}, false
}

// Call is what a workflow function asks for: the kind, name and key of an
// operation.
type Call struct {
	Kind Kind   `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	Key  string `json:"key,omitempty"`
}

// Action is what the runner is to do about a call.
type Action int

// The actions.
const (
	// Replay: the operation ended; return its memoised outcome (Op.Result,
	// Op.Failure, or the wait's outcome).
	Replay Action = iota + 1
	// Begin: a new operation (Op.Seq is its position): record its start
	// (StepStarted, WaitStarted) and suspend, unless a receive's signal is
	// already there.
	Begin
	// Execute: the step's attempt Op.Attempts is due: run it and record
	// its outcome.
	Execute
	// Deliver: a receive is waiting and a signal for it has come
	// (Cursor.Next returns it): record the delivery and return it.
	Deliver
	// Suspend: the operation waits (a sleep, a receive, a scheduled
	// retry): stop the function here.
	Suspend
)

func (a Action) String() string {
	switch a {
	case Replay:
		return "replay"
	case Begin:
		return "begin"
	case Execute:
		return "execute"
	case Deliver:
		return "deliver"
	case Suspend:
		return "suspend"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// NonDeterminismError is the error of a run whose function no longer
// matches its history: at position Seq the history recorded an operation
// (Recorded) and the function asked for another (Called), or the function
// returned before reaching a recorded one (Called is zero). The run is
// failed with it rather than re-running side effects.
type NonDeterminismError struct {
	Workflow string `json:"workflow"`
	RunID    string `json:"run_id"`
	Seq      int    `json:"seq"`
	Recorded Call   `json:"recorded"`
	Called   Call   `json:"called"`
}

func (e *NonDeterminismError) Error() string {
	rec := fmt.Sprintf("%s %q (key %s)", e.Recorded.Kind, e.Recorded.Name, e.Recorded.Key)
	if e.Called == (Call{}) {
		return fmt.Sprintf("durable: workflow %s run %s is not deterministic: its history has %s at position %d, which the function no longer reaches; deploy the code that started the run, or cancel it", e.Workflow, e.RunID, rec, e.Seq)
	}
	return fmt.Sprintf("durable: workflow %s run %s is not deterministic: at position %d its history has %s but the function called %s %q (key %s) (a step renamed, reordered or given other arguments); deploy the code that started the run, or cancel it", e.Workflow, e.RunID, e.Seq, rec, e.Called.Kind, e.Called.Name, e.Called.Key)
}

// Cursor replays a run: the workflow function's calls, in order, are
// matched against the run's operations, and Next says for each what to do.
// A cursor changes the run it replays only through Record.
type Cursor struct {
	Workflow string
	run      *Run
	next     int
	counts   map[string]int
}

// NewCursor starts a replay of run.
func NewCursor(workflow string, run *Run) *Cursor {
	return &Cursor{Workflow: workflow, run: run, counts: map[string]int{}}
}

// Run is the run the cursor replays.
func (c *Cursor) Run() *Run { return c.run }

// Position is the Seq the next new operation gets: an operation Next
// returns with a lower Seq was reached before (a memoised repeat).
func (c *Cursor) Position() int { return c.next }

// Key returns the memo key of the next call of kind and name: with args,
// the name and the canonical JSON of args (encoding/json: struct fields in
// declaration order, map keys sorted), so the same step with the same
// arguments is one operation however often it is called; without, the
// name and its occurrence in the run ("fetch#2": the second call of fetch).
// Keys depend only on the run's code and data, never on the process.
func (c *Cursor) Key(kind Kind, name string, args []any) (string, error) {
	prefix := name
	if kind != KindStep {
		prefix = string(kind) + ":" + name
	}
	if len(args) > 0 {
		data, err := json.Marshal(args)
		if err != nil {
			return "", fmt.Errorf("durable: the arguments of %s %q have no JSON encoding: %w", kind, name, err)
		}
		return prefix + string(data), nil
	}
	c.counts[prefix]++
	return prefix + "#" + strconv.Itoa(c.counts[prefix]), nil
}

// Next returns the operation for call and what to do about it; a
// NonDeterminismError when the history recorded another operation at this
// point. For Deliver, the signal to deliver is returned as well. A call
// whose key an earlier call of this replay already reached is that same
// operation (memoised: it runs once).
func (c *Cursor) Next(call Call) (*Op, Action, *Signal, error) {
	if i, ok := c.run.byKey[call.Key]; ok && i < c.next {
		op := &c.run.Ops[i]
		return op, c.action(op), nil, nil
	}
	if c.next < len(c.run.Ops) {
		op := &c.run.Ops[c.next]
		if op.Key != call.Key || op.Kind != call.Kind {
			return nil, 0, nil, &NonDeterminismError{Workflow: c.Workflow, RunID: c.run.ID, Seq: c.next, Recorded: Call{op.Kind, op.Name, op.Key}, Called: call}
		}
		c.next++
		a := c.action(op)
		if a == Suspend && op.Kind == KindReceive {
			if s, ok := c.run.Available(op.Signal); ok {
				return op, Deliver, &s, nil
			}
		}
		return op, a, nil, nil
	}
	op := &Op{Seq: c.next, Kind: call.Kind, Name: call.Name, Key: call.Key}
	c.next++
	return op, Begin, nil, nil
}

func (c *Cursor) action(op *Op) Action {
	switch op.Status {
	case OpComplete, OpFailed, OpEnded:
		return Replay
	case OpStarted:
		return Execute
	}
	return Suspend
}

// Done checks the end of the function against the history: every
// recorded operation must have been reached.
func (c *Cursor) Done() error {
	if c.next < len(c.run.Ops) {
		op := c.run.Ops[c.next]
		return &NonDeterminismError{Workflow: c.Workflow, RunID: c.run.ID, Seq: c.next, Recorded: Call{op.Kind, op.Name, op.Key}}
	}
	return nil
}

// Record folds events the runner is about to append into the run, so that
// the rest of this replay sees them (a step executed and then called again
// with the same key returns its result).
func (c *Cursor) Record(events ...core.PositionedMessage) {
	for _, e := range events {
		c.run.Apply(e)
	}
}
