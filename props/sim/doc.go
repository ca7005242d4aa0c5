// Package sim is a seeded, deterministic simulation of the whole runtime:
// the real router, the runtimes' periodic tasks (stale-claim reaper,
// scheduler, catch-up poll), synchronous Handle and plain appenders, on
// the in-memory store or the SQLite store (a temporary file), driven step
// by step from one seed, with faults injected at chosen moments and every
// invariant checked after every step. Any failure replays from its seed,
// and is shrunk to a short trace printed as a Go test.
//
// # A run
//
// Plan(seed, store, steps) draws a Setup (how many processes and workers,
// batch sizes) and a list of Actions from the seed, with its own random
// source only; Run(setup, actions) executes them on a fresh World and
// returns a Result whose Hash covers the run log (every action and what it
// returned) and the final state: the same seed gives the same hash, bit for
// bit (TestDeterminism). Message ids are the one thing the stores still draw
// at random (UUIDv7); the run log replaces them by their order of first
// appearance, and nothing a run does depends on their values.
//
// Nothing runs in the background. A simulated process is a shell.Runtime
// that is never started: a worker round is Router.HandleNext by one of its
// workers, and its periodic tasks run when the simulator says so
// (enginehooks.Task.RunOnce). Time is a Clock that moves only when an action
// steps it, forwards or back. Concurrency is interleaving: at a store call
// of one action (an Interleave fault), other actions run first, as another
// process would while this one waits for the store.
//
// The actions (see Kind): a domain's client operation (an append for the
// workers, a synchronous Handle, a decision appended with the guard of its
// read), a worker round, the reaper, the scheduler, the catch-up poll, a
// clock step, killing a process (its claims are left to the reaper), and
// crashing everything (every process dies; the SQLite store is closed
// without committing what was under way and opened again from its file).
// The faults (see FaultKind), each at a chosen store call or context look:
// ErrBusy, a context cancelled mid-call, a crash before or just after a
// call, and an interleaving.
//
// After every step the invariants are checked (World.check), and after the
// last one the system drains (faults stop, time moves on, the reapers, the
// scheduler and every worker run until nothing is left) and liveness is
// checked too:
//
//   - an action's error is explained by its fault or expected (a guarded
//     append's conflict): no unexplained errors;
//   - no acknowledged append is lost; no message is in the log twice;
//     positions increase; causes come before their effects;
//   - guarded appends never succeed over a conflicting message, and every
//     decision is justified by the log before it (the domains re-derive
//     their rules from the log: a course over capacity, a rejection the
//     log does not justify);
//   - every command is decided exactly once, every event reacted to once
//     (at most once at every step, exactly once after the drain);
//   - offsets never move back nor past the highest position given;
//   - no claim of a dead or silent worker survives a run of the reaper
//     past its TTL; after the drain no claim is left;
//   - group statuses move only as the status chart allows
//     (statechart/groupstatus, through driver.Transition), and only the
//     groups of reactors that fail on purpose ever retry or fail; their
//     error strategy counts every failure (retry counts strictly increase).
//
// # Domains
//
// courses (the manual's course and enrolment example: two deciders, a
// reaction, a projector; rejections are events, so the worker path never
// fails), queue (an impure, exclusive, id-partitioned delete-on-ack work
// queue), jobs (an impure reactor whose poisoned tasks always fail, with
// an error strategy of its own: the group must retry, counting every
// failure, then fail), doors (a statechart machine with a timer: every
// stored configuration loads, every command moves its door once, every
// door that opened closes) and flows (a durable workflow of package
// shell/workflow: a step retried with back-off, a sleep, a second step;
// every run completes).
//
// # Failure output
//
// TestSimulation runs fixed seeds, then fresh ones for a while (the seeds
// are printed). A broken invariant reports the seed, the step, the end of
// the run log, and the trace shrunk by Shrink (the prefix up to the step,
// then chunks, single actions and faults removed while it still fails)
// printed by GoTest as a test to paste into regress_test.go. Knobs:
// SOURCED_SIM_SEEDS=1,2,3 runs those seeds only; SOURCED_SIM_DURATION=10m
// runs fresh seeds that long; SOURCED_SIM_STEPS the actions per seed.
//
// # Extending it
//
// To add an action: a Kind (and its name in kindNames), what it does in
// World.doCtx, and its weight in gen.action. To add a fault: a FaultKind
// and what it does at a store call in World.point (faultStore calls it
// before every call of the store and of its transactions), or through the
// context (faultCtx). To add an invariant: a check in World.check on the
// View (the log, groups and offsets read back from the store after the
// step, and what the simulator knows was acknowledged), returning a
// *Violation that names it; a domain's own rules go in its Check. To add a
// domain: a type implementing Domain (its message types, reactors, client
// operations, failing groups and Check), registered in Domains and
// DomainNames; reactors whose effects the outside world sees record them
// in the domain value, which lives for one run.
package sim
