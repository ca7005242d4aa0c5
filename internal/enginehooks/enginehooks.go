// Package enginehooks reaches into the engine of package shell for the
// repository's own tests and its simulator (props/sim): a runtime's
// periodic tasks, driven one tick at a time. They are test hooks, not
// API: an application starts a Runtime (or drains a Router in its tests)
// and never drives a task itself. Package shell sets RuntimeTasks when it
// is initialised; calling it with a value of another type panics.
package enginehooks

import "context"

// Task is one of a runtime's periodic tasks (the catch-up poll, the
// stale-claim reaper, the scheduler of scheduled messages, the planner's
// statistics), startable and stoppable on its own.
type Task interface {
	// RunOnce runs the task's work once, now, in the caller's goroutine,
	// and returns its error (counted as a tick, whether or not the task's
	// loop runs): a simulation or a test runs the task at the moments it
	// chooses, with no timer and no goroutine.
	RunOnce(ctx context.Context) error
	// Start starts the task's loop (a no-op when running).
	Start()
	// Stop stops the task's loop, waiting for a running tick until ctx
	// ends.
	Stop(ctx context.Context) error
	// Running reports whether the task's loop runs.
	Running() bool
	// Ticks counts the ticks the task ran.
	Ticks() int64
}

// Tasks are a runtime's periodic tasks.
type Tasks struct {
	CatchUp, Reaper, Scheduler, Optimizer Task
}

// RuntimeTasks returns the periodic tasks of rt, a *shell.Runtime.
var RuntimeTasks func(rt any) Tasks
