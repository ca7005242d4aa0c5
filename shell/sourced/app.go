package sourced

import (
	"context"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// Store is an open store: shell/sqlitestore (a SQLite file),
// shell/pgstore (PostgreSQL) or shell/memstore (memory, for tests). Open
// one with its package (sqlitestore.Install, sqlitestore.Open,
// pgstore.Open) and hand it to Handle, Load and NewRuntime. What an
// application calls on it is Append, Read, All, Update, Stats and Close;
// the rest of its methods serve the runtime and the operator tools
// (shell.Store documents them all).
type Store = shell.Store

// Tx is a store transaction, as Store.Update runs a function in one
// (shell.Tx): appends and reads that commit together, or not at all.
type Tx = shell.Tx

// AppendOptions tune Store.Append; Guard makes it conditional on the read
// the guard came from (see Load).
type AppendOptions = shell.AppendOptions

// ReadAllOptions page through the whole log with Store.All or
// Store.ReadAll (After, Before, From, Limit, Order).
type ReadAllOptions = shell.ReadAllOptions

// Guard is the consistency guard of a read: the conditions read and the
// last position seen. An append with it (AppendOptions.Guard) fails with
// ErrConcurrentAppend if a message matching those conditions arrived since.
type Guard = core.Guard

// ErrConcurrentAppend matches the error of an append whose guard saw a
// conflicting message arrive after its read: read again and decide again.
var ErrConcurrentAppend = core.ErrConcurrentAppend

// ErrBusy matches the error of a store too busy to take the write lock in
// time: nothing was written, try again (a web handler answers 503).
var ErrBusy = shell.ErrBusy

// CommandResult is what deciding a command returns: the command as stored
// (stamped) and its position, the events appended with it, and the guard
// of the read it was decided on.
type CommandResult = shell.CommandResult

// HandleResult is what Handle returns: the CommandResult and the decider's
// state after the events.
type HandleResult[S any] = shell.HandleResult[S]

// Handle decides cmd with the decider d, synchronously, as a web handler
// does: it validates the command, reads the decider's partition, decides,
// and appends the command and its events, all in one write transaction
// that no concurrent append can come into (Handle never returns
// ErrConcurrentAppend). Nothing is written when it fails: an invalid
// command (ErrInvalid, a *ValidationError naming every field), the
// decider's own error as it returned it, a busy store (ErrBusy).
// Reactions to the events run on the runtime's workers. For options (a
// command time, metadata, a state cache, an observer) see shell.Handle.
func Handle[S any](ctx context.Context, store Store, d Decider[S], cmd any) (HandleResult[S], error) {
	return shell.Handle(ctx, store, d, cmd, nil)
}

// Load reads the state of a decider, projector or projection for a
// partition (every partition key given a value) straight from the log, with
// the guard of the read: append with it to decide on that state yourself.
// shell.Load reads it as it was at a past position (ReadOptions.Upto).
func Load[S any](ctx context.Context, store Store, e core.Evolver[S], partition Partition) (S, Guard, error) {
	return shell.Load(ctx, store, e, partition, nil)
}

// Config tunes the runtime: workers, batch sizes, poll and heartbeat
// intervals, the logger. Start from DefaultConfig.
type Config = shell.Config

// DefaultConfig returns the runtime's defaults (the environment may set the
// number of workers, see shell.EnvWorkers).
func DefaultConfig() Config { return shell.DefaultConfig() }

// Runtime runs the reactors in the background: workers that claim each
// partition's new messages and run the deciders' reactions, the
// projectors' syncs and the machines and workflows, and the periodic tasks
// (catch-up poll, stale-claim reaper, scheduled-message promotion). Start,
// WaitIdle and Stop it, or hand it to Supervise.
type Runtime = shell.Runtime

// NewRuntime checks the reactors (deciders, projectors, machines,
// workflows, hand-written effects.Reactor values and Modules of them)
// against the store's registry and builds the runtime that runs them on
// store. It starts nothing.
func NewRuntime(store Store, cfg Config, reactors ...any) (*Runtime, error) {
	return shell.NewRuntime(store, cfg, reactors...)
}

// Module is a bounded context's reactors of every kind as one value, which
// NewRuntime expands: sourced.Module{Courses, Enrolments, Rosters}.
type Module = shell.Module

// Supervise starts rt and runs it until ctx ends or the process receives
// SIGINT or SIGTERM, then stops it gracefully: the workers finish their
// current batch, and every finished batch is acknowledged. It is what a
// worker process's main calls; shell.Supervise takes options (other
// signals, a hard stop after a grace period).
func Supervise(ctx context.Context, rt *Runtime) error { return shell.Supervise(ctx, rt, nil) }
