package driver

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Store is the message log: appends with consistency guards, condition and
// partition reads, paging of the whole log, and scheduled messages. The
// SQLite store (package sqlitestore) is the production implementation and
// the in-memory store (package memstore) its twin for tests; both pass the
// conformance suite in package storetest, which is how a new implementation
// proves it behaves the same.
//
// Every method that may block takes a context first. Messages are stamped
// (id, time, causation, correlation; see core.Message.Stamp) by the store
// when they are appended, with the store's clock and UUID v7 ids.
type Store interface {
	// Registry is the codec registry the store encodes and decodes with.
	Registry() *codec.Registry
	// Now is the store's clock: what it stamps messages with and compares
	// scheduled times to.
	Now() time.Time
	// Notifier is where the store announces committed appends.
	Notifier() Notifier

	// Update runs fn in one write transaction (BEGIN IMMEDIATE on SQLite).
	// If fn returns an error or panics, nothing it did is kept and the
	// error is returned. Appends are announced to the notifier only after
	// the outermost transaction commits. fn must not retain tx.
	Update(ctx context.Context, fn func(tx Tx) error) error

	// Append appends msgs in one transaction; see Tx.Append.
	Append(ctx context.Context, msgs []core.Message, opts AppendOptions) (AppendResult, error)
	// Read returns the messages matching any of conds; see Tx.Read.
	Read(ctx context.Context, conds []core.Condition, opts ReadOptions) (ReadResult, error)
	// ReadPartition reads one partition under conditional AND; see Tx.ReadPartition.
	ReadPartition(ctx context.Context, partition core.Partition, types []string, opts ReadOptions) (ReadResult, error)
	// ReadAll returns one page of the whole log; see Tx.ReadAll.
	ReadAll(ctx context.Context, opts ReadAllOptions) (Page, error)
	// ReadCorrelation returns, in position order, every message of the log
	// sharing the correlation id of the message whose id is messageID: the
	// whole causal chain of one command or event (see core.Message.Correlate),
	// that message included. An id not in the log (unknown, or of a message
	// still scheduled) gives no messages and no error.
	ReadCorrelation(ctx context.Context, messageID uuid.UUID) ([]core.PositionedMessage, error)
	// All iterates the whole log (or the messages matching opts.Conditions)
	// from opts.From in opts.Order, fetching pages of opts.Limit lazily. The
	// iteration stops at the first error, which it yields.
	All(ctx context.Context, opts ReadAllOptions) iter.Seq2[core.PositionedMessage, error]

	// PromoteScheduled moves scheduled messages due at or before now into
	// the log, in the order they were scheduled, and returns how many. A
	// due message that cannot be appended as it is (its type unregistered,
	// its payload no longer decoding or validating: see CheckPromotable)
	// is set aside, left in the schedule, while every other due message is
	// promoted: the error is then an *UnpromotedError listing it, beside
	// the count of those promoted.
	PromoteScheduled(ctx context.Context, now time.Time) (int, error)
	// NextScheduled returns when the earliest scheduled message is due, and
	// false when none is scheduled.
	NextScheduled(ctx context.Context) (time.Time, bool, error)

	// Stats returns figures about the store.
	Stats(ctx context.Context) (Stats, error)
	// Optimize refreshes the query planner's statistics (a bounded ANALYZE
	// on SQLite). Stores without a planner do nothing.
	Optimize(ctx context.Context) error
	// Close releases the store's resources.
	Close() error

	// Groups is the consumer-group side of the store.
	Groups
}

// ScheduleReader is implemented by the stores that list their scheduled
// messages (sqlitestore, pgstore, memstore): ReadScheduled returns up to
// limit of them (all when limit <= 0), soonest due first, each with its
// id and dated when it is due (CreatedAt). The dashboard's schedule page,
// the CLI's schedule command, pgstore.Copy and the conformance suite use
// it.
type ScheduleReader interface {
	ReadScheduled(ctx context.Context, limit int) ([]core.Message, error)
}

// Tx is a write transaction of a Store: everything done through it commits
// or rolls back together. Reads through a Tx see its own writes.
type Tx interface {
	// Append stamps and appends msgs. Messages dated after the store's now
	// are scheduled instead (see Store.PromoteScheduled). The appended
	// messages get consecutive positions (increasing ones on a store that
	// implements SkippingPositions), returned in AppendResult aligned
	// with msgs (0 for a scheduled message). Each message is indexed under
	// the key pairs of its payload.
	//
	// With a guard, if any message matching the guard's conditions has a
	// position after the guard's LastPosition, nothing is written and the
	// error is a *core.ConflictError (errors.Is ErrConcurrentAppend) that
	// carries those messages.
	//
	// A payload of an unregistered type, an invalid payload (see
	// codec.Registry.Validate; indexed text must be valid UTF-8), an empty
	// value for a partition key of a registered group handling the
	// message's type (see CheckPartitionValues), a guard condition that
	// could never match (see CheckConditions) or a message id already in
	// the log or the schedule fails the whole append: nothing is written.
	Append(msgs []core.Message, opts AppendOptions) (AppendResult, error)
	// Read returns, in position order, the messages matching any of conds
	// (after opts.After, at most opts.Limit, at most up to opts.Upto), and
	// the guard for them: the conditions, and as LastPosition the position
	// of the last message returned when the read was cut short by Limit,
	// min(Upto, last position) when Upto bounds it, else the store's last
	// position at read time (so an empty read still guards). A condition
	// that could never match (an empty or unregistered type, an attribute
	// the type does not declare or index) is refused with an
	// *InvalidConditionError (see CheckConditions).
	Read(conds []core.Condition, opts ReadOptions) (ReadResult, error)
	// ReadPartition reads the messages of the given types that belong to
	// the partition under conditional AND (see core.InPartition), in position
	// order. The guard's conditions are core.ConditionsFor(partition,
	// types...), built even when the partition has no messages yet, and its
	// LastPosition follows the rules of Read. The partition {core.IDKey: id}
	// (an id-partitioned group's) holds exactly the message with that id,
	// if its type is among types. A partition that would not read what it
	// names (an attribute no type declares, for one) is refused with an
	// *InvalidPartitionError (see CheckReadPartition).
	ReadPartition(partition core.Partition, types []string, opts ReadOptions) (ReadResult, error)
	// ReadAll returns one page of the log; see ReadAllOptions.
	ReadAll(opts ReadAllOptions) (Page, error)
	// LastPosition returns the position of the newest message in the log (0
	// when empty).
	LastPosition() (int64, error)
	// Context is the transaction handed to sync work (core.SyncTx). The SQLite
	// store's exposes the connection so sync work writes its own tables in
	// the same transaction.
	Context() core.SyncTx

	// GroupTx is the consumer-group side of the transaction.
	GroupTx
}

// ContextProvider is what gives the transaction handed to sync work
// (core.SyncTx): every Tx, and a wrapper of one (a test's fault-injecting
// transaction, an instrumented one) that has no other method of Tx. A
// store's typed way into its transaction (sqlitestore.Conn,
// pgstore.Conn) accepts, besides its own transaction and its sync
// context, any ContextProvider whose Context is its own.
type ContextProvider interface {
	Context() core.SyncTx
}

// AppendOptions tune an append.
type AppendOptions struct {
	// Guard, when set, makes the append fail with a *core.ConflictError
	// if a message matching its conditions arrived after its position.
	Guard *core.Guard
	// Deferred tells a transaction's Append that the caller needs no
	// positions: a store over a network may then send the append with
	// the transaction's next statement or its COMMIT instead of in a
	// round trip of its own (pgstore does, for an append with no Guard
	// and no ids of its own, on boundaries it can lock side by side),
	// which also keeps the positions it draws in flight for one round
	// trip only. The result of a deferred append has the stamped
	// Messages and no Positions (nil, Last 0); a failure of it fails the
	// transaction (Update returns it) instead of the Append. A store that
	// writes at once ignores it, as does a standalone append.
	Deferred bool
}

// AppendResult reports what an append did.
type AppendResult struct {
	// Positions holds, for each appended message in order, its position in
	// the log, or 0 when it was scheduled for later; nil when the append
	// was deferred (AppendOptions.Deferred).
	Positions []int64
	// Messages are the messages as stored, stamped, aligned with Positions.
	Messages []core.Message
	// Last is the highest position written (0 when everything was
	// scheduled or msgs was empty).
	Last int64
}

// ReadOptions bound a read.
type ReadOptions struct {
	// After skips messages at or before this position.
	After int64
	// Upto skips messages after this position (0: no bound), for
	// point-in-time loads.
	Upto int64
	// Limit caps the number of messages returned (0: no cap; negative:
	// refused, see CheckReadOptions).
	Limit int
}

// ReadResult is what a condition or partition read returns.
type ReadResult struct {
	Messages []core.PositionedMessage
	Guard    core.Guard
}

// Order is the direction of a ReadAll.
type Order int

const (
	// Ascending pages from old to new.
	Ascending Order = iota
	// Descending pages from new to old.
	Descending
)

// ReadAllOptions page the whole log.
//
// A page starts at one of three cursors, at most one of them given:
//
//   - From is INCLUSIVE: Ascending returns positions >= From, Descending
//     positions <= From (0: from the start, or from the newest). Passing
//     the position of the last message of a page repeats that message
//     on the next page; Page.Next gives the cursor of the next page.
//   - After is exclusive, for Ascending: positions > After. Pass the
//     position of the last message of the previous page, as the
//     manual's from_position.
//   - Before is exclusive, for Descending: positions < Before. Pass the
//     position of the last (oldest) message of the previous page.
//
// Giving two of them, After with Descending, Before with Ascending or a
// negative After or Before is refused with an error matching ErrInvalidCursor.
type ReadAllOptions struct {
	// From is the inclusive cursor: Ascending returns positions >= From,
	// Descending positions <= From (0: from the start, or from the newest).
	From int64
	// After is the exclusive cursor of an Ascending read: positions > After
	// (0: from the start).
	After int64
	// Before is the exclusive cursor of a Descending read: positions <
	// Before (0: from the newest; 1: nothing).
	Before int64
	// Conditions, when given, restrict the page to matching messages.
	Conditions []core.Condition
	// Limit is the page size (0: DefaultPageSize; at most MaxPageSize, and
	// not negative: see CheckReadAll).
	Limit int
	// Order is the direction: Ascending or Descending (anything else is
	// refused, see CheckReadAll).
	Order Order
}

// DefaultPageSize is the page size of ReadAll and All when none is given.
const DefaultPageSize = 50

// Page is one page of ReadAll.
type Page struct {
	Messages []core.PositionedMessage
	// LastPosition is the store's newest position when the page was read.
	LastPosition int64
}

// Cursor returns the inclusive position a read of opts starts at (0: the
// start, or the newest for Descending), whichever of From, After and
// Before opts gives, and false when the read returns nothing whatever the
// log holds (Before 1). Stores read from it; CheckReadAll refuses the
// options first.
func (o ReadAllOptions) Cursor() (from int64, ok bool) {
	switch {
	case o.After > 0:
		return o.After + 1, true
	case o.Before == 1:
		return 0, false
	case o.Before > 1:
		return o.Before - 1, true
	}
	return o.From, true
}

// Next returns the options that fetch the page after p (the same order,
// limit and conditions, and the same kind of cursor: From, After or
// Before), and false when p was the last page.
func (p Page) Next(opts ReadAllOptions) (ReadAllOptions, bool) {
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	if len(p.Messages) < limit {
		return opts, false
	}
	last := p.Messages[len(p.Messages)-1].Position
	if opts.Order == Descending {
		if last <= 1 {
			return opts, false
		}
		if opts.Before > 0 {
			opts.Before = last
		} else {
			opts.From = last - 1
		}
	} else {
		if last >= p.LastPosition {
			return opts, false
		}
		if opts.After > 0 {
			opts.After = last
		} else {
			opts.From = last + 1
		}
	}
	return opts, true
}

// Stats are figures about a store.
type Stats struct {
	// MaxPosition is the newest position in the log.
	MaxPosition int64
	// Scheduled is the number of messages waiting in the schedule.
	Scheduled int64
	// Groups describes every registered consumer group, by id.
	Groups []GroupInfo
	// WALBytes is the size of the store's write-ahead log (SQLite's -wal
	// file) when the figures were taken; 0 for stores without one. It
	// changes with every commit and checkpoint.
	WALBytes int64
}

// Housekeeper is implemented by stores with periodic upkeep of their own
// (the SQLite store checkpoints its write-ahead log so that it stays
// bounded). A Runtime calls Housekeep on every heartbeat.
type Housekeeper interface {
	Housekeep(ctx context.Context) error
}

// Notifier announces appended message types to subscribers. A store calls
// Notify after the outermost transaction that appended commits, never on
// rollback, so a notifier may do I/O. InlineNotifier is the in-process
// default; a notifier that crosses processes lets workers elsewhere wake.
type Notifier interface {
	// Subscribe registers fn to be called with the distinct types of each
	// committed append; the returned function unsubscribes.
	Subscribe(fn func(types []string)) (unsubscribe func())
	// Notify announces the distinct types of a committed append.
	Notify(types []string)
}

var (
	// ErrNotInstalled is returned by opening a store whose tables are
	// missing: install them (sqlitestore.Install, or your migrations).
	ErrNotInstalled = errors.New("sourced: store not installed")
	// ErrSchemaNewer is returned by opening (or installing) a store whose
	// schema was migrated by a newer program than this one: upgrade the
	// program. Nothing is written.
	ErrSchemaNewer = errors.New("sourced: store schema newer than this program")
	// ErrSchemaOutdated is returned by opening a store whose schema is
	// older than this program's: migrate it (sqlitestore.Install, `sourced
	// migrate`, or your migration tool), then open it.
	ErrSchemaOutdated = errors.New("sourced: store schema outdated")
	// ErrDuplicateID is matched by the error of an append whose message id
	// is already stored (in the log or the schedule). Nothing is written.
	ErrDuplicateID = errors.New("sourced: duplicate message id")
	// ErrConcurrentAppend is core.ErrConcurrentAppend, repeated here for
	// callers of the shell.
	ErrConcurrentAppend = core.ErrConcurrentAppend
	// ErrBusy is matched by the error of an operation that could not take
	// the store's write lock in time (another process held it for longer
	// than the store's busy timeout). The operation wrote nothing and may
	// be retried; the router and the runtime treat it as transient, never
	// as a reactor's failure.
	ErrBusy = errors.New("sourced: store busy")
)

// SkippingPositions is implemented by a store whose positions may skip
// numbers: one that hands positions out to appends in flight at once
// (PostgreSQL draws them from a sequence as each message is inserted)
// never hands a position out twice, so the positions of an append that
// rolled back stay unused, and the messages of one append may lie
// between another's. Positions still only increase, and a reader never
// sees a position before a smaller one: code must not assume that
// position p+1 follows p. SQLite and the memory store hand positions out
// one writer at a time, consecutively, a rolled-back append's again.
type SkippingPositions interface {
	// PositionsMaySkip reports whether the store's positions may skip.
	PositionsMaySkip() bool
}

// AppendWaiter is implemented by a store whose positions may skip and
// whose appends, once committed, wait until every position below theirs
// is settled (pgstore: the read horizon). AppendsWaiting reports whether
// an append of this process waits so now: a transaction holding
// positions in flight then holds it back, and the router commits its
// transaction at the end of the batch instead of handling more batches
// in it (see RouterOptions.InlineBudget).
type AppendWaiter interface {
	AppendsWaiting() bool
}
