package core

import (
	"context"
	"slices"
	"time"
)

// Hooks are what a definition declares about how the shell runs its
// consumer group, beside its handlers: lifecycle hooks, which the shell
// calls after an operator command moved the group (whoever gave it:
// shell.Router's Stop, Start and Reset, `sourced groups`, the dashboard,
// a store call; for every kind of reactor), and an error strategy of its
// own. Every definition kind has a Hooks field (Decider, Projector,
// statechart.Machine; workflow.WithHooks for workflows), copied into its
// Spec. Zero fields do nothing.
//
// A projector that clears its read model when its group is reset:
//
//	core.Projector[Board]{
//		Group: "boards", PartitionBy: []string{"board_id"},
//		Hooks: core.Hooks{OnReset: func(ctx context.Context) error { return db.ClearBoards(ctx) }},
//	}
//
// The hooks run in the application's processes, once per command across
// them: in the process that issues the command through the router, else
// in a runtime running the group's reactor, which observes the command in
// the store at its next catch-up poll. The group's work waits for them: a
// reset replays nothing before OnReset ran. A hook that fails runs again
// (see the shell package doc, "Lifecycle hooks").
type Hooks struct {
	// OnStart runs after the group was started (from stopped or failed,
	// or a retrying group retried now).
	OnStart func(ctx context.Context) error
	// OnStop runs after the group was stopped, with the operator's reason.
	OnStop func(ctx context.Context, reason string) error
	// OnReset runs after the group's offsets were cleared: the group
	// replays the log once started. A read model built by sync work is the
	// place to clear here.
	OnReset func(ctx context.Context) error
	// ErrorStrategy, when set, is the group's error strategy instead of
	// the router's default.
	ErrorStrategy *ErrorStrategy
	// RefusalsFail makes a decider's business refusals in a background
	// worker fail the batch, as any other error (to its error strategy),
	// instead of being recorded as CommandRejected while the group goes
	// on (see CommandRejected): for a decider whose commands are never
	// expected to be refused, where a refusal means a bug upstream.
	RefusalsFail bool
	// Timeout is how long one batch of the group may run (a workflow's
	// run of steps, a hand-written reactor's batch). While it runs, the
	// worker's heartbeat renews its claim, so no other worker takes the
	// partition over however long it runs; past Timeout the batch's
	// context is cancelled, and a batch that then fails goes to the
	// group's error strategy (shell.BatchTimeoutError). 0: the router's
	// default (in a shell.Runtime, Config.MaxClaimAge: 10 minutes unless
	// set); negative: no timeout. It applies to reactors that do I/O, not
	// to pure ones (deciders, event-sourced projectors), which are handled
	// inside their write transaction.
	Timeout time.Duration
}

// ErrorStrategy decides what happens to a consumer group when a batch
// fails. The zero value fails the group at once (the default strategy): the
// group stops being claimed until an operator starts it again, and its
// Failure records the error's type, message and stack.
//
// With Retries > 0 the group moves to retrying instead, and is claimed
// again after Backoff(After, n) for the n-th retry (default: After*n,
// After defaulting to 3 s); when the retries run out it fails (or, with
// Park, the partition is parked). A group recovers (its retry count back
// to 0) once the partition that failed is processed.
//
// A strategy that decides from the error, its message and the attempt
// sets Decide (or is made with ErrorStrategyFunc): it returns RetryAt,
// ParkPartition, FailGroup or SkipMessage, and may defer to the fixed
// policy above (Fixed) for the failures it has no opinion on. An error
// marked Permanent is never retried by the fixed policy.
//
// Listeners hear about each retry and failure, in the order they were
// added (OnRetry, OnFail, Report). An ErrorStrategy is a value: adding a
// listener returns a copy, and copies share nothing mutable.
type ErrorStrategy struct {
	Retries int
	After   time.Duration
	Backoff func(after time.Duration, retry int) time.Duration
	// Park, when set, parks the failing partition once the retries run
	// out, instead of failing the group (the parking strategy): the
	// partition is set aside with its failure (see shell.Parking), the
	// group is active again and its other partitions flow, and an
	// operator retries the partition, skips its failed message or resets
	// it. The retries before that are the group's, as without Park. Off by
	// default: the manual's behaviour.
	Park bool
	// Decide, when set, decides each failure from its error, message and
	// attempt, instead of the fixed policy of the fields above (see
	// DecideFailure and ErrorStrategyFunc). It runs in the transaction
	// that records the decision: keep it quick, with no I/O.
	Decide func(FailedAttempt) ErrorDecision

	reporters []Reporter
}

// Delay is how long the group waits before its retry-th retry.
func (s ErrorStrategy) Delay(retry int) time.Duration {
	after := s.After
	if after <= 0 {
		after = 3 * time.Second
	}
	if s.Backoff != nil {
		return s.Backoff(after, retry)
	}
	return after * time.Duration(retry)
}

// OnRetry returns a copy of s that calls fn after each retry was
// scheduled, after the listeners added before.
func (s ErrorStrategy) OnRetry(fn func(ctx context.Context, r RetryReport)) ErrorStrategy {
	if fn == nil {
		return s
	}
	return s.Report(reporterFuncs{retry: fn})
}

// OnFail returns a copy of s that calls fn after each failure the retries
// did not absorb (the group failed, or the partition was parked), after
// the listeners added before.
func (s ErrorStrategy) OnFail(fn func(ctx context.Context, f FailureReport)) ErrorStrategy {
	if fn == nil {
		return s
	}
	return s.Report(reporterFuncs{fail: fn})
}

// Report returns a copy of s that reports every retry and failure to r
// (an instrumentation adapter), after the listeners added before.
func (s ErrorStrategy) Report(r Reporter) ErrorStrategy {
	if r == nil {
		return s
	}
	s.reporters = append(slices.Clip(s.reporters), r)
	return s
}

// Reporters are the strategy's listeners, in the order they were added
// (for the shell, which calls them).
func (s ErrorStrategy) Reporters() []Reporter { return slices.Clone(s.reporters) }

// Reporter hears about an error strategy's decisions (see
// ErrorStrategy.Report).
type Reporter interface {
	// ReportRetry is called after the group moved to retrying.
	ReportRetry(ctx context.Context, r RetryReport)
	// ReportFailure is called after the group failed, or the partition
	// was parked.
	ReportFailure(ctx context.Context, f FailureReport)
}

// RetryReport describes a failed batch that the group retries.
type RetryReport struct {
	Group string
	// Partition holds the failed batch's partition values.
	Partition Partition
	// Message is the message the batch failed at (Type, ID and Position
	// name it; zero when the failure names none, e.g. a failed history
	// read).
	Message PositionedMessage
	Err     error
	// RetryCount counts the group's retries since it last recovered, this
	// one included.
	RetryCount int
	// RetryAt is when the group is claimed again.
	RetryAt time.Time
}

// FailureReport describes a failed batch the retries did not absorb.
type FailureReport struct {
	Group     string
	Partition Partition
	// Message is the message the batch failed at (see RetryReport).
	Message PositionedMessage
	Err     error
	// RetryCount is how many retries were made before.
	RetryCount int
	// Parked is true when the partition was parked (ErrorStrategy.Park)
	// rather than the group failed.
	Parked bool
	// Skipped is true when the strategy skipped the failed message
	// (SkipMessage): the group went on.
	Skipped bool
}

// reporterFuncs adapts OnRetry and OnFail functions to a Reporter.
type reporterFuncs struct {
	retry func(context.Context, RetryReport)
	fail  func(context.Context, FailureReport)
}

func (r reporterFuncs) ReportRetry(ctx context.Context, rr RetryReport) {
	if r.retry != nil {
		r.retry(ctx, rr)
	}
}

func (r reporterFuncs) ReportFailure(ctx context.Context, f FailureReport) {
	if r.fail != nil {
		r.fail(ctx, f)
	}
}
