package effects

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/textclip"
)

// Queue is a work queue of jobs of type T as a reactor: each job is a
// message of the log whose payload is a T, done once by one of the
// runtime's workers (jobs run concurrently and in no particular order),
// and deleted from the log in the transaction that acknowledges it.
//
// Enqueue a job by appending a T, in a transaction of its own or with the
// events that call for it (a job due later: a message dated in the
// future, core.Message.At, or a reaction's core.After). The queue's
// consumer group is the only one handling T (it is exclusive) and is
// partitioned by message id, so each job is claimed on its own, and a
// failing job holds up no other. As many jobs run at once as the runtime
// has workers (shell.Config.Workers); a worker claims several at a time
// (RouterOptions.ClaimPartitions) and does them one after another.
//
// Work does a job. A job that is not ready yet returns Snooze(d): it is
// done again after d, the attempt uncounted. A job whose Work fails
// (returns another error or panics) is
// tried again after Backoff, as a new job of the same payload and
// metadata that counts its attempts (Job.Attempt) and records the last
// error (metadata "attempt" and "error"): it is enqueued, dated when it is
// due, in the transaction that deletes the failed one. When the attempts
// run out, or the error is permanent (core.Permanent), the failure goes to
// the group's error strategy, which by default parks the job: it is set
// aside with its failure while the other jobs flow, until an operator
// retries or skips it (shell.Parking, the dashboard, the CLI).
//
// Delivery is at least once: a worker that dies while doing a job, or a
// transaction that fails after Work returned, leaves the job to be done
// again, so Work must tolerate doing a job twice (an idempotency key: the
// job's Message.ID, or its CorrelationID across attempts).
//
// Hand the queue to the runtime as a pointer (NewQueue returns one):
// NewRuntime resolves T's registered type name, which the queue handles,
// and refuses a T that is not registered.
type Queue[T any] struct {
	// Group is the queue's consumer group id: how the operator's commands
	// (pause, parked jobs) and the log's offsets name the queue. Required.
	Group string
	// Work does one job; its error fails the attempt. The context ends
	// when the runtime stops hard or the job runs past Timeout.
	Work func(ctx context.Context, job Job[T]) error
	// Attempts is how many times a job is tried before its failure goes to
	// the error strategy: 0 means DefaultQueueAttempts, 1 no retries.
	Attempts int
	// Backoff is the delay before the job's attempt-th retry (attempt ≥ 1,
	// the number of attempts made). Nil: DefaultQueueBackoff.
	Backoff func(attempt int) time.Duration
	// Keep keeps done jobs in the log, acknowledged, instead of deleting
	// them (an audit trail of what was done; the log grows with it).
	Keep bool
	// ErrorStrategy decides what happens to a job whose attempts ran out.
	// Nil: it is parked (core.ErrorStrategy{Park: true}). A strategy with
	// group retries (Retries > 0) pauses the whole queue between them.
	ErrorStrategy *core.ErrorStrategy
	// Timeout is how long one job may run before its context ends and
	// the attempt fails (core.Hooks.Timeout): 0 the runtime's default
	// (Config.MaxClaimAge), negative none.
	Timeout time.Duration

	// typeName is T's registered name, resolved by Register.
	typeName atomic.Pointer[string]
}

// Job is one job as Work receives it.
type Job[T any] struct {
	// Payload is the job's data.
	Payload T
	// Message is the job's message as the log holds it: its id, position,
	// metadata and time. A retry is a new message: its CorrelationID is
	// the first attempt's id.
	Message core.PositionedMessage
	// Attempt counts the attempts, this one included: 1 the first time.
	Attempt int
}

// DefaultQueueAttempts is how many times a Queue tries a job when its
// Attempts is 0.
const DefaultQueueAttempts = 10

// DefaultQueueBackoff is a Queue's delay before a job's attempt-th retry
// when its Backoff is nil: one second, doubled with each attempt, at most
// an hour (1 s, 2 s, 4 s, ...: the ten default attempts span about eight
// and a half minutes).
func DefaultQueueBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 12 { // 2^12 s, attempt 13, is past the hour already (and no shift overflows)
		return time.Hour
	}
	return min(time.Second<<(attempt-1), time.Hour)
}

// Metadata keys of a retried job (see Queue).
const (
	// AttemptKey holds the number of attempts a retried job made before.
	AttemptKey = "attempt"
	// ErrorKey holds the error of a retried job's last attempt.
	ErrorKey = "error"
)

// NewQueue returns a queue of jobs of type T named group, done by work,
// with the default attempts, backoff and error strategy; set the Queue's
// fields to change them before handing it to the runtime.
func NewQueue[T any](group string, work func(ctx context.Context, job Job[T]) error) *Queue[T] {
	return &Queue[T]{Group: group, Work: work}
}

// Register resolves the name under which T is registered in reg (the
// shell calls it when the queue is handed to NewRuntime or NewRouter),
// and checks the queue: a group, a Work function, T registered.
func (q *Queue[T]) Register(reg *codec.Registry) error {
	t := reflect.TypeFor[T]()
	var errs []error
	if q.Group == "" {
		errs = append(errs, errors.New("no Group: name the queue's consumer group"))
	}
	if q.Work == nil {
		errs = append(errs, errors.New("no Work function"))
	}
	if q.Attempts < 0 {
		errs = append(errs, fmt.Errorf("negative Attempts (%d): 0 for the default (%d), 1 for no retries", q.Attempts, DefaultQueueAttempts))
	}
	names, err := reg.Names(t)
	if err != nil {
		errs = append(errs, fmt.Errorf("its job type %v: %w (register it with the registry the store was opened with)", t, err))
	}
	if len(errs) > 0 {
		return &core.DefinitionError{Group: q.Group, Problem: "queue: " + errors.Join(errs...).Error()}
	}
	q.typeName.Store(&names[0])
	return nil
}

// HandledTypes is T's registered name, once Register resolved it.
func (q *Queue[T]) HandledTypes() []string {
	if n := q.typeName.Load(); n != nil {
		return []string{*n}
	}
	return nil
}

// GroupID is the queue's Group.
func (q *Queue[T]) GroupID() string { return q.Group }

// Exclusive is true: a queue is the only reactor handling its jobs' type,
// partitioned by message id (one job a partition).
func (q *Queue[T]) Exclusive() bool { return true }

// Hooks gives the group's error strategy (parking by default) and batch
// timeout.
func (q *Queue[T]) Hooks() core.Hooks {
	s := core.ErrorStrategy{Park: true}
	if q.ErrorStrategy != nil {
		s = *q.ErrorStrategy
	}
	return core.Hooks{ErrorStrategy: &s, Timeout: q.Timeout}
}

// HandleClaim does each claimed job and acknowledges it: deleted (kept,
// with Keep) when done, deleted and enqueued again for its next attempt
// when it failed with attempts left. A job that failed for good ends the
// batch with a *core.BatchError naming it, after the pairs of the jobs
// before it. Jobs claimed again after the group was reset (a replay of
// kept jobs) are acknowledged without running.
func (q *Queue[T]) HandleClaim(ctx context.Context, c Claim) ([]Pair, error) {
	pairs := make([]Pair, 0, len(c.Messages))
	for i, m := range c.Messages {
		if m.Position <= c.ReplayUpto {
			pairs = append(pairs, Pair{Source: m, Signals: []Signal{Ack{}}})
			continue
		}
		job, err := q.job(m)
		if err == nil {
			err = q.do(ctx, job)
		}
		if err == nil {
			pairs = append(pairs, Pair{Source: m, Signals: []Signal{Ack{Delete: !q.Keep}}})
			continue
		}
		var snooze *SnoozeError
		if errors.As(err, &snooze) && ctx.Err() == nil {
			// Not ready yet: again after the delay, this attempt uncounted.
			pairs = append(pairs, Pair{Source: m, Signals: []Signal{
				Ack{Delete: !q.Keep},
				Append{Messages: []core.Message{q.again(job, job.Attempt-1, "", c.Now, snooze.After)}},
			}})
			continue
		}
		attempts := q.Attempts
		if attempts == 0 {
			attempts = DefaultQueueAttempts
		}
		if job.Attempt >= attempts || core.IsPermanent(err) || errors.Is(ctx.Err(), context.Canceled) {
			// Out of attempts, or not worth another; or the runtime
			// stops, which releases the job as it is (a job that ran past
			// Timeout ends with context.DeadlineExceeded: a failed attempt).
			return pairs, &core.BatchError{Message: m, Index: i, Err: err}
		}
		pairs = append(pairs, Pair{Source: m, Signals: []Signal{
			Ack{Delete: !q.Keep},
			Append{Messages: []core.Message{q.retry(job, err, c.Now)}},
		}})
	}
	return pairs, nil
}

// job is m as a Job.
func (q *Queue[T]) job(m core.PositionedMessage) (Job[T], error) {
	job := Job[T]{Message: m, Attempt: attemptOf(m.Metadata) + 1}
	p, ok := m.Payload.(T)
	if !ok {
		return job, core.Permanent(fmt.Errorf("sourced: queue %s: job %s has a %T payload, not a %v", q.Group, m.ID, m.Payload, reflect.TypeFor[T]()))
	}
	job.Payload = p
	return job, nil
}

// do runs Work on job, a panic becoming the attempt's error.
func (q *Queue[T]) do(ctx context.Context, job Job[T]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &core.PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return q.Work(ctx, job)
}

// retry is the message of job's next attempt, after err, due after the
// backoff from now.
func (q *Queue[T]) retry(job Job[T], err error, now time.Time) core.Message {
	backoff := q.Backoff
	if backoff == nil {
		backoff = DefaultQueueBackoff
	}
	return q.again(job, job.Attempt, clipError(err.Error()), now, backoff(job.Attempt))
}

// again is job enqueued again, due after delay from now, counting made
// attempts and recording errMsg (when not empty).
func (q *Queue[T]) again(job Job[T], made int, errMsg string, now time.Time, delay time.Duration) core.Message {
	meta := maps.Clone(job.Message.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	if made > 0 {
		meta[AttemptKey] = made
	} else {
		delete(meta, AttemptKey)
	}
	if errMsg != "" {
		meta[ErrorKey] = errMsg
	}
	if now.IsZero() { // a claim handed over by hand, not by the shell
		now = time.Now()
	}
	next := core.NewMessage(job.Payload)
	next.Metadata = meta
	return next.At(now.Add(max(delay, 0)))
}

// Snooze is what Work returns for a job that is not ready yet (a resource
// still being prepared, a rate limit): the job is done again after d, as a
// new job of the same payload and metadata, and the attempt is not
// counted (Job.Attempt is the same next time). A snoozed job never goes
// to the error strategy; Work decides when to stop snoozing.
func Snooze(d time.Duration) error { return &SnoozeError{After: d} }

// SnoozeError is Snooze's error: the job is done again After from now.
type SnoozeError struct{ After time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("sourced: job snoozed for %v", e.After) }

// maxErrorBytes bounds the error a retried job's metadata records: an
// error that carries a whole response body is not copied into the log at
// every attempt.
const maxErrorBytes = 2048

// clipError cuts msg to maxErrorBytes, at a rune boundary, marking the cut.
func clipError(msg string) string {
	head, cut := textclip.Head(msg, maxErrorBytes)
	if cut == 0 {
		return msg
	}
	return head + fmt.Sprintf("... (%d bytes more)", cut)
}

// attemptOf reads the attempts a job's metadata counts (0 for a first
// attempt): an int before the message was stored, a JSON number after.
func attemptOf(meta map[string]any) int {
	switch n := meta[AttemptKey].(type) {
	case int:
		return max(n, 0)
	case int64:
		return int(max(n, 0))
	case float64:
		if n >= 1 && n < math.MaxInt32 {
			return int(n)
		}
	}
	return 0
}
