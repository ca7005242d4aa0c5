package driver

import (
	"context"
	"log/slog"
	"time"

	"github.com/sourced-go/sourced/core"
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

// PartitionRead is one read of a PartitionsReader: the arguments of a
// Tx.ReadPartition.
type PartitionRead struct {
	Partition core.Partition
	Types     []string
	Opts      ReadOptions
}

// PartitionsReader is implemented by a store's Tx that reads several
// partitions in one round trip (pgstore): a worker's transaction that
// claimed several partitions reads their histories together rather than
// one after another. Each read is what Tx.ReadPartition with its
// arguments returns, as if called in the order given (each with a
// statement's view of its own; a transaction that checks its reads
// checks each), and a read that fails ends the call with its error: the
// transaction is then in the state that read's failure leaves it in. A
// store without it is read one partition at a time.
type PartitionsReader interface {
	ReadPartitions(reads []PartitionRead) ([]ReadResult, error)
}

// Warmer is implemented by stores whose new connections are slow at
// their first statements (pgstore: a PostgreSQL session reads the
// catalogs and plans each statement at its first execution, 10-30 ms a
// statement on a busy server). A Runtime's Start warms the store for the
// sessions its workers and appends will use before it returns, so that
// its first commands do not wait for that. Warming is an optimisation:
// a store that could not warm everything still works, slower at first.
type Warmer interface {
	// Warm readies the store for the work w describes, leaving no trace
	// in it. It returns an error only when ctx ended or the store could
	// not be reached at all.
	Warm(ctx context.Context, w Warmup) error
}

// Warmup is the work a Warmer readies the store for.
type Warmup struct {
	// Sessions is how many connections work at once: a runtime's
	// workers, one for the appends beside them and one for its upkeep.
	Sessions int
	// BatchSize is how many messages a claim takes from a partition.
	BatchSize int
	// Claims are the numbers of partitions the runtime's claims take at
	// most (one for a reactor that claims one at a time).
	Claims []int
}
