package core

import (
	"errors"
	"fmt"
	"time"
)

// FailedAttempt is what a deciding error strategy (ErrorStrategy.Decide)
// sees of a failed batch: the error, the message it failed at, and how
// many times the group retried since it last recovered.
type FailedAttempt struct {
	Group string
	// Partition holds the failed batch's partition values.
	Partition Partition
	// Message is the message the batch failed at (zero when the failure
	// names none, e.g. a failed history read).
	Message PositionedMessage
	// Err is the failure (errors.Is and errors.As see through it: match
	// IsPermanent, a sentinel, or an error type).
	Err error
	// Retries is how many retries the group made since it last recovered,
	// before this failure: 0 at the first failure. This failure is attempt
	// Retries+1.
	Retries int
	// Now is the router's clock when the failure is decided, for a retry
	// dated from it (RetryAt(a.Now.Add(time.Minute))).
	Now time.Time
}

// ErrorAction is what an error strategy does with a failed batch.
type ErrorAction int

// The actions of an ErrorDecision.
const (
	// ActionFail fails the group: it is not claimed again until an
	// operator starts it (the zero ErrorStrategy's action).
	ActionFail ErrorAction = iota
	// ActionRetry moves the group to retrying until ErrorDecision.RetryAt,
	// when the failed partition is claimed again.
	ActionRetry
	// ActionPark parks the failed partition (see ErrorStrategy.Park): the
	// group goes on with its other partitions.
	ActionPark
	// ActionSkip skips the message the batch failed at: the partition's
	// offset moves past it and the group goes on, with the message left in
	// the log and its failure logged and reported to the strategy's
	// listeners. Only a failure the reactor's handler returned (Decide,
	// React, Evolve, a workflow's function) names a message that is the
	// first unprocessed of its batch; a failure of the batch's commit (its
	// sync work, a refused append) rolled back the messages before it too,
	// so for such a failure the partition is parked instead, and nothing
	// is skipped unseen.
	ActionSkip
)

func (a ErrorAction) String() string {
	switch a {
	case ActionFail:
		return "fail"
	case ActionRetry:
		return "retry"
	case ActionPark:
		return "park"
	case ActionSkip:
		return "skip"
	}
	return fmt.Sprintf("ErrorAction(%d)", int(a))
}

// ErrorDecision is an error strategy's decision for a failed batch: make
// one with RetryAt, ParkPartition, FailGroup or SkipMessage.
type ErrorDecision struct {
	Action ErrorAction
	// RetryAt is when the group is claimed again (ActionRetry only; a
	// zero or past time retries at once).
	RetryAt time.Time
}

// RetryAt decides to retry the failed batch at t: the group is retrying
// until then, and its retry count goes up by one.
func RetryAt(t time.Time) ErrorDecision { return ErrorDecision{Action: ActionRetry, RetryAt: t} }

// FailGroup decides to fail the group (an operator starts it again).
func FailGroup() ErrorDecision { return ErrorDecision{Action: ActionFail} }

// ParkPartition decides to park the failed partition (see
// ErrorStrategy.Park).
func ParkPartition() ErrorDecision { return ErrorDecision{Action: ActionPark} }

// SkipMessage decides to skip the message the batch failed at (see
// ActionSkip).
func SkipMessage() ErrorDecision { return ErrorDecision{Action: ActionSkip} }

// ErrorStrategyFunc returns a strategy that decides each failure with
// decide, from its error, its message and the attempt. decide is called
// in the transaction that records the decision, so it must be quick and
// do no I/O; it may delegate to the fixed policy of a strategy
// (ErrorStrategy.Fixed) for the failures it has no opinion on. Add
// listeners as to any strategy (OnRetry, OnFail, Report).
func ErrorStrategyFunc(decide func(FailedAttempt) ErrorDecision) ErrorStrategy {
	return ErrorStrategy{Decide: decide}
}

// FixedErrorStrategy returns the fixed policy as a strategy: up to
// retries retries, the n-th after after*n, then the group fails (or, with
// park, the failed partition is parked). A Permanent error is not
// retried. It is ErrorStrategy{Retries: retries, After: after, Park: park}.
func FixedErrorStrategy(retries int, after time.Duration, park bool) ErrorStrategy {
	return ErrorStrategy{Retries: retries, After: after, Park: park}
}

// DecideFailure is the strategy's decision for a failure: Decide's when
// set (a nil Decide, or a decision with an unknown action, is the fixed
// policy's), else Fixed's.
func (s ErrorStrategy) DecideFailure(a FailedAttempt) ErrorDecision {
	if s.Decide != nil {
		d := s.Decide(a)
		if d.Action >= ActionFail && d.Action <= ActionSkip {
			return d
		}
	}
	return s.Fixed(a)
}

// Fixed is the fixed policy's decision for a failure (Retries, After,
// Backoff, Park): a retry while a.Retries < Retries, at a.Now plus
// Delay(a.Retries+1), unless the error is Permanent; then the partition
// parked with Park, else the group failed.
func (s ErrorStrategy) Fixed(a FailedAttempt) ErrorDecision {
	if a.Retries < s.Retries && !IsPermanent(a.Err) {
		return RetryAt(a.Now.Add(s.Delay(a.Retries + 1)))
	}
	if s.Park {
		return ParkPartition()
	}
	return FailGroup()
}

// ErrPermanent is matched (errors.Is) by every error marked Permanent.
var ErrPermanent = errors.New("sourced: permanent error")

// Permanent marks err as not worth retrying: the fixed error strategy
// fails the group (or parks the partition) at once whatever its Retries,
// and a workflow step fails at once whatever its workflow.Retries
// (workflow.Permanent is this marker). The marked error reads as err, and
// errors.Is and errors.As see through it; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// PermanentError is an error marked Permanent.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the marked error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrPermanent) true.
func (e *PermanentError) Is(target error) bool { return target == ErrPermanent }

// IsPermanent tells whether err, or an error it wraps, was marked
// Permanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// PanicError is the error of user code that panicked (a handler, a
// reactor's HandleClaim, a queue's Work): the panic's value and the stack
// where it was recovered. The shell records a failure made of one with its
// stack and an error type "panic(T)" (shell.Failure.Panicked).
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("sourced: panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
