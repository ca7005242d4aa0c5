// Package durable is the pure core of durable workflows: the lifecycle
// events a run is recorded as, the fold of a run's history into its state
// (Fold), and the replay decision (Cursor): given the history, which
// operation a workflow function's next call is, whether its outcome is
// memoised, and what is left to do (Begin, Execute, Deliver, Suspend,
// Replay), or a NonDeterminismError when the function no longer matches
// what the history recorded.
//
// It does no I/O, reads no clock and runs no step: the runner in package
// shell/workflow calls the workflow function, runs the steps Cursor says
// to execute, and appends the events. That split follows the design's
// arrows (codec <- core <- effects <- statechart <- shell): this package
// imports only codec and core, as the other pure reactor kinds (deciders,
// projections) do, so the replay can be tested, and property-tested, with
// no store; shell/workflow imports it and the shell, never the reverse.
//
// # Keys
//
// Every operation of a run has a memo key that depends only on the run's
// code and data, never on the process (the original keyed steps with
// Ruby's per-process seeded Array#hash, so memoisation failed across
// restarts). A step called with arguments is keyed by its name
// and their canonical JSON ("geolocate[\"10.0.0.1\"]"); without, by its name
// and occurrence ("resolve_ip#1"). Sleeps and receives are keyed by kind,
// name and occurrence ("sleep:sleep#1", "receive:approval#1"). Operations
// are numbered in the order the run first reached them (Seq): replaying,
// the n-th new key the function asks for must be the n-th recorded one.
package durable
