// Package workflow runs durable workflows: ordinary Go functions whose
// steps are checkpointed as events in the log, so that a run survives
// restarts, moves between processes, sleeps for days and waits for
// signals, without re-running the side effects of the steps it finished.
//
//	greeting := workflow.Define("greeting_task", func(w *workflow.Workflow, name string) (string, error) {
//		ip, err := workflow.Step(w, "resolve_ip", resolveIP)
//		if err != nil {
//			return "", err
//		}
//		loc, err := workflow.Step(w, "geolocate", func(ctx context.Context) (string, error) {
//			return geolocate(ctx, ip)
//		}, workflow.Args(ip), workflow.Retries(3))
//		...
//	})
//	rt, _ := shell.NewRuntime(store, cfg, greeting) // a reactor like any other
//	run, _ := workflow.Start(ctx, store, greeting, "Ada")
//	out, err := run.Wait(ctx)
//
// A decision (or a reaction) starts a run as one of its messages with
// Starting: the run's start is stored in the decision's transaction, so a
// booking and its payment run are both stored or neither, with no gap
// between two writes.
//
// # How a run moves
//
// A Definition is a reactor (effects.Reactor) with its own consumer group
// (its name), partitioned by workflow_id: each run is a partition, its id
// auto-assigned ("workflow-<uuid>") or given (WithID, for idempotent
// starts). Every time the run's partition has new events, a worker claims
// it, folds its history (package core/durable) and calls the function
// again from the top (the runtime keeps each run's history between its
// handlings and reads only the events appended since: see
// shell.HistoryKeeper). Each Step, Sleep and Receive looks itself up in the
// history: a memoised step returns its recorded result without running; the
// first operation with something to do does it, and the function stops
// there (it is unwound, so do not recover() panics you did not raise).
// One handling of a run does at most one step:
//
//	WorkflowStarted                     -> StepStarted(1)
//	StepStarted(k)                      -> run step k -> StepComplete(k) [ContextUpdated] StepStarted(k+1)
//	                                                  or StepFailed(k, retry at t) + StepStarted(k, attempt+1) scheduled for t
//	                                                  or StepFailed(k) and the function gets a *StepError
//	Sleep(d)                            -> WaitStarted + WaitEnded scheduled for now+d
//	Receive(name, timeout)              -> WaitStarted [+ WaitEnded{timed_out} scheduled]; WaitEnded{signal} when a SignalSent arrives [timeout withdrawn]
//	function returns                    -> WorkflowComplete(output) or WorkflowFailed(error)
//
// A step's StepStarted is committed before the step runs, and its
// StepComplete (with the next step's StepStarted) in one transaction
// after, guarded against any other writer of the run's progress: a step
// runs at least once, and a step whose StepComplete committed never runs
// again, whichever process picks the run up. Retries and sleeps are
// scheduled messages, promoted by the runtime's scheduler: no goroutine
// sleeps, and no process needs to stay up.
//
// # Rules and failures
//
//   - A step cannot contain steps: Step, Sleep or Receive called inside a
//     step's function fails the run with ErrStepInStep, naming both (a
//     step is one memoised call; call the others from the workflow
//     function). A nil step function fails the run with ErrNilStep. Neither
//     is retried: they are programming errors, not transient failures.
//   - Send to a run never started returns ErrNotFound and writes nothing
//     (a signal kept for it would be received by a run started later with
//     that id): start the run, then send.
//   - Failures come back typed, rebuilt from the log: the *RunError that
//     Wait returns unwraps to a *durable.NonDeterminismError (the position,
//     the operation recorded and the one called) for a run whose function
//     no longer matches its history, and to the *StepError of the step
//     whose failure failed the run (its name, attempts, and its error's Go
//     type and message). The error value itself is kept only for the types
//     registered with WithStepError (their JSON is recorded with the
//     failure): the *StepError, in the function and from Wait, unwraps to
//     the value decoded from the log, so that a function branching on it
//     behaves the same live and replayed.
//   - A failed attempt's changes to the context are dropped (the original
//     persisted them): the next attempt, or the function when the step
//     fails for good, sees the context as it was before the step, and only
//     a successful attempt's changes are persisted (ContextUpdated). An
//     attempt that failed is as if it had not run, so every attempt starts
//     from the same context, live or replayed.
//   - A timed Receive whose signal is there when it begins schedules no
//     timeout. One whose signal comes while it waits withdraws its timeout
//     from the schedule (effects.Unschedule, by the id its WaitStarted
//     records) in the transaction that records the signal: nothing is left
//     to promote. A timeout promoted before that withdrawal committed is
//     ignored (only a wait's first WaitEnded counts) and conflicts with no
//     step's outcome. A timeout that fires first ends the Receive with
//     ErrTimeout; a signal sent afterwards is kept for the run's next
//     Receive of its name, as one sent before any Receive is.
//   - What a run scheduled (its sleeps' ends, its receives' timeouts, its
//     steps' retries, each under an id its event records) is withdrawn
//     by Cancel in the transaction that records the cancellation: a
//     cancelled run leaves nothing in the schedule.
//   - One clock: sleeps and retries are dated by the clock of the router
//     that handles the run (effects.Claim.Now: the runtime's clock), and a
//     runtime given no Config.Clock takes its store's (driver.Clocked). So
//     a simulation gives its clock once, to the store
//     (memstore.WithSharedClock(clk), sqlitestore's Options{Clock: clk}),
//     and the store's stamps and schedule, the runtime's promotions and
//     timers and the workflows all follow it; the Clock option still
//     overrides it for one workflow.
//
// # Compared with the manual, DBOS and Temporal
//
//   - The manual's Sourced::DurableWorkflow: same lifecycle events (plus
//     SignalSent and WorkflowCancelled), same re-entry from the top with
//     memoised steps, same context persisted as ContextUpdated. Differences:
//     steps are keyed by name and canonical arguments or position, not by a
//     per-process hash, so memoisation survives restarts;
//     Retries(n) means n retries after the first attempt (n+1 attempts),
//     with exponential back-off through scheduled messages, where the
//     original's retries: n meant n attempts and no retries meant retrying
//     forever with no back-off; a step's final failure is returned to the
//     function as a *StepError (it may compensate) rather than raised; and
//     a function that no longer matches its history fails with a
//     NonDeterminismError instead of silently running other steps.
//   - DBOS Transact (Go): Define and registering with the runtime are
//     RegisterWorkflow; Step is RunAsStep; Start, Run.Wait and Load are
//     RunWorkflow's handle, GetResult and GetWorkflowStatus; Sleep, Send and
//     Receive are its Sleep, Send and Recv; WithID is its workflow id for
//     idempotency. DBOS checkpoints in its own Postgres tables and runs a
//     workflow in one goroutine from start to end, replaying only after a
//     crash; here the checkpoints are events of the one log every other
//     reactor reads, and every step is a re-entry by whichever worker claims
//     the run (slower per step, but a sleeping or waiting run holds no
//     goroutine and no process).
//   - Temporal: the same rule that a workflow function must be
//     deterministic (steps are activities), the same detection of code that
//     no longer matches the history (its non-determinism error); but no
//     server, task queues or workers of another process model: the runtime
//     that runs deciders and projectors runs workflows too, on an embedded
//     SQLite file. Temporal blocks a non-deterministic workflow task until
//     fixed code is deployed; here the run fails, saying which step.
//
// Operating: Runs and Stats read the runs of a workflow (status, current
// step) without its types; the sourced CLI's "workflows" and "workflow ID"
// commands are built on them.
package workflow
