package shell

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// ErrorStrategy decides what happens to a consumer group when a batch
// fails. The zero value fails the group at once (the default strategy): the
// group stops being claimed until an operator starts it again, and its
// Failure records the error's type, message and stack.
//
// With Retries > 0 the group moves to retrying instead, and is claimed
// again after Backoff(After, n) for the n-th retry (default: After*n,
// After defaulting to 3 s); when the retries run out it fails. A group
// recovers (its retry count back to 0) once the partition that failed is
// processed.
type ErrorStrategy struct {
	Retries int
	// Park, when set, parks the failing partition once the retries run
	// out, instead of failing the group (the parking strategy): the
	// partition is set aside with its failure (see Parking), the group is
	// active again and its other partitions flow, and an operator retries
	// the partition, skips its failed message or resets it. The retries
	// before that are the group's, as without Park. Off by default: the
	// manual's behaviour.
	Park    bool
	After   time.Duration
	Backoff func(after time.Duration, retry int) time.Duration
	// OnRetry is called after the group moved to retrying.
	OnRetry func(ctx context.Context, group string, err error, retry int, at time.Time)
	// OnFail is called after the group failed.
	OnFail func(ctx context.Context, group string, err error)
}

// StrategyProvider is implemented by reactors that handle their own
// errors with a strategy of their own.
type StrategyProvider interface {
	ErrorStrategy() ErrorStrategy
}

func (s ErrorStrategy) delay(retry int) time.Duration {
	after := s.After
	if after <= 0 {
		after = 3 * time.Second
	}
	if s.Backoff != nil {
		return s.Backoff(after, retry)
	}
	return after * time.Duration(retry)
}

// PanicError is the error of user code that panicked.
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

// protect runs fn, turning a panic into a *PanicError.
func protect(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return fn()
}
