package shell

import (
	"runtime/debug"

	"github.com/sourced-go/sourced/core"
)

// ErrorStrategy decides what happens to a consumer group when a batch
// fails: core.ErrorStrategy (retries, back-off, parking, listeners),
// repeated here for callers of the shell. A reactor declares a strategy
// of its own in its definition's Hooks (core.Hooks.ErrorStrategy), or, for
// a hand-written reactor, by implementing StrategyProvider or
// HooksProvider; otherwise the router's (RouterOptions.ErrorStrategy,
// Config.ErrorStrategy) applies.
type ErrorStrategy = core.ErrorStrategy

// The reports an error strategy's listeners receive (core's, repeated).
type (
	RetryReport   = core.RetryReport
	FailureReport = core.FailureReport
	Reporter      = core.Reporter
)

// StrategyProvider is implemented by hand-written reactors that handle
// their own errors with a strategy of their own.
type StrategyProvider interface {
	ErrorStrategy() ErrorStrategy
}

// PanicError is the error of user code that panicked (core's, repeated
// here for callers of the shell).
type PanicError = core.PanicError

// protect runs fn, turning a panic into a *PanicError.
func protect(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return fn()
}
