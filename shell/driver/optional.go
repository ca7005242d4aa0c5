package driver

import (
	"context"
	"log/slog"
	"time"
)

// ChangeDetector is implemented by stores that can tell cheaply whether
// anyone else wrote since the last call (PRAGMA data_version on SQLite):
// the catch-up poll then polls only when something changed.
type ChangeDetector interface {
	Changed(ctx context.Context) (bool, error)
}

// LoggerProvider is the optional interface of a Store that logs: the
// runtime, the router and Handle's snapshots log through the store's
// logger (unless Config.Logger sets one), so one logger setting serves
// the store and the runtime. The SQLite, PostgreSQL and in-memory stores
// implement it (their Options.Logger); a nil logger means slog.Default().
type LoggerProvider interface {
	Logger() *slog.Logger
}

// ScheduleCounter is implemented by stores that count the commits of
// theirs that scheduled messages (sqlitestore): a runtime's scheduler is
// then woken by the notifications of those commits only, rather than by
// every append, each of which made it read when the next message is due.
// A store whose notifier announces commits it did not make (another
// process's, through a shared notifier) reports a negative count.
type ScheduleCounter interface {
	// ScheduledCommits counts the commits that scheduled messages; a
	// commit's count is taken before its notification goes out. A
	// negative count means the store does not count them now (its
	// notifier may announce commits it did not make).
	ScheduledCommits() int64
}

// ClaimRenewer is implemented by stores whose claims a live worker can
// renew (memstore, sqlitestore and pgstore do; storetest holds them to
// it). A Runtime renews, on every heartbeat, the claims of the batches its
// workers are running, so that ReleaseClaimsOlderThan (the reaper's
// MaxClaimAge) never takes a running batch's claim away: only a claim
// nobody renews (leaked, or held by a process that stopped renewing) is
// released by its age. On a store without it, a claim is released at
// MaxClaimAge whoever holds it, as before.
type ClaimRenewer interface {
	// RenewClaims sets the claim time of each claim still held by its
	// worker (ClaimedPartition.WorkerID holds ClaimedPartition.OffsetID's claim) to at, in one
	// transaction, and returns how many it renewed: a claim released, or
	// taken by another worker, is left as it is.
	RenewClaims(ctx context.Context, claims []*ClaimedPartition, at time.Time) (int, error)
}
