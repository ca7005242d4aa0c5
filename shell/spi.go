// The application's and operator's names of the store contract, whose
// declarations and documentation are in package shell/driver (the store
// implementers' package): the log, its options and results, the consumer
// groups an operator runs, parking, lag, the clock and the errors to match.
// Each is an alias, so values pass freely between shell and driver; the
// names only a store implements or calls (the optional interfaces, the
// argument checks, PrepareMessage) are in driver alone.

package shell

import (
	"time"

	"github.com/sourced-go/sourced/shell/driver"
)

type (
	// AppendOptions tune an append (driver.AppendOptions).
	AppendOptions = driver.AppendOptions
	// AppendResult reports what an append did (driver.AppendResult).
	AppendResult = driver.AppendResult
	// Clock is where every component of the shell takes its time from: the
	// system clock in production, a SimClock in tests that advance time
	// without sleeping (driver.Clock).
	Clock = driver.Clock
	// DecodeError is the error of a store that read a stored message it
	// cannot decode: its type is not registered in the store's registry
	// (codec.ErrUnknownType), or its payload or metadata does not decode
	// into the registered type (an incompatible change of a payload struct
	// without an upcaster) (driver.DecodeError).
	DecodeError = driver.DecodeError
	// Failure is the error context of a consumer group, stored as JSON:
	// which batch failed (partition, message), how (the error, its type, a
	// panic's stack) and what the error strategy made of it (retries)
	// (driver.Failure).
	Failure = driver.Failure
	// GroupChange is a worker command decided on a group's state (see
	// Groups.ChangeGroup): CmdRetry until RetryAt, or CmdFail, recording
	// Failure (driver.GroupChange).
	GroupChange = driver.GroupChange
	// GroupCommand is a change of a consumer group's status, by the status
	// chart of package statechart/groupstatus: an operator's (start, stop,
	// reset) or a worker's (retry, recover, fail, park)
	// (driver.GroupCommand).
	GroupCommand = driver.GroupCommand
	// GroupConflictError is returned when registering a group that claims
	// types an exclusive group owns (or an exclusive group claiming types
	// another group handles) (driver.GroupConflictError).
	GroupConflictError = driver.GroupConflictError
	// GroupInfo is a consumer group's status and figures (driver.GroupInfo).
	GroupInfo = driver.GroupInfo
	// GroupState is a consumer group's status, retry time and error context:
	// what a worker command is decided on (see Groups.ChangeGroup)
	// (driver.GroupState).
	GroupState = driver.GroupState
	// Groups is the consumer-group side of a store: registering groups,
	// claiming partitions with pending work, acknowledging them, the group
	// lifecycle, worker heartbeats and housekeeping (driver.Groups).
	Groups = driver.Groups
	// InvalidConditionError reports a condition that could never match a
	// message: its type is empty or not registered, or it names an attribute
	// the type does not declare or does not index
	// (driver.InvalidConditionError).
	InvalidConditionError = driver.InvalidConditionError
	// InvalidPartitionError reports a partition that ReadPartition refuses
	// (see driver.CheckReadPartition): under conditional AND a message is matched
	// only on the partition attributes it carries, so a misspelt attribute
	// would silently widen the read (or, alone, empty it) and drop out of
	// the guard (driver.InvalidPartitionError).
	InvalidPartitionError = driver.InvalidPartitionError
	// InvalidTransitionError is returned by an operator command that the
	// group's status does not accept (driver.InvalidTransitionError).
	InvalidTransitionError = driver.InvalidTransitionError
	// Lag is a group's pending work as GroupLag counts it (driver.Lag).
	Lag = driver.Lag
	// LagQuery says which of a group's partitions GroupLag counts the
	// pending messages of (driver.LagQuery).
	LagQuery = driver.LagQuery
	// Lagger is implemented by the stores that count a consumer group's
	// pending work at a bounded cost, whatever the size of the log and the
	// number of partitions behind (the SQLite, PostgreSQL and in-memory
	// stores): tools such as the dashboard call it on every page
	// (driver.Lagger).
	Lagger = driver.Lagger
	// NotParkedError is returned by a parked-partition operation on a
	// partition that is not parked; it names the group's parked partitions
	// (driver.NotParkedError).
	NotParkedError = driver.NotParkedError
	// Notifier announces appended message types to subscribers
	// (driver.Notifier).
	Notifier = driver.Notifier
	// Offset is a partition's offset as monitoring shows it (driver.Offset).
	Offset = driver.Offset
	// OffsetPage is a page of offsets (driver.OffsetPage).
	OffsetPage = driver.OffsetPage
	// OffsetQuery selects offsets to page through (driver.OffsetQuery).
	OffsetQuery = driver.OffsetQuery
	// Order is the direction of a ReadAll (driver.Order).
	Order = driver.Order
	// Page is one page of ReadAll (driver.Page).
	Page = driver.Page
	// ParkedPartition is a partition the parking strategy set aside, with
	// the failure that parked it (driver.ParkedPartition).
	ParkedPartition = driver.ParkedPartition
	// ParkedQuery selects a page of parked partitions (see ParkedReader)
	// (driver.ParkedQuery).
	ParkedQuery = driver.ParkedQuery
	// ParkedReader is implemented by the stores that page their parked
	// partitions (the SQLite, PostgreSQL and in-memory stores), so that a
	// tool lists them at a bounded cost however many are parked: one query
	// per page (driver.ParkedReader).
	ParkedReader = driver.ParkedReader
	// Parking is the parked-partition side of a store: what an operator does
	// with the partitions the parking strategy set aside (see
	// ErrorStrategy.Park) (driver.Parking).
	Parking = driver.Parking
	// ReadAllOptions page the whole log (driver.ReadAllOptions).
	ReadAllOptions = driver.ReadAllOptions
	// ReadOptions bound a read (driver.ReadOptions).
	ReadOptions = driver.ReadOptions
	// ReadResult is what a condition or partition read returns
	// (driver.ReadResult).
	ReadResult = driver.ReadResult
	// SimClock is a simulated clock: time stands still until Advance moves
	// it, firing the timers that come due in order (driver.SimClock).
	SimClock = driver.SimClock
	// Snapshot is a decider's folded state for one partition, persisted: the
	// state a full fold of the partition's history up to Position gives,
	// encoded by the decider's snapshot codec (core.Snapshots)
	// (driver.Snapshot).
	Snapshot = driver.Snapshot
	// SnapshotStore is implemented by stores that persist deciders'
	// snapshots (memstore, sqlitestore and pgstore do)
	// (driver.SnapshotStore).
	SnapshotStore = driver.SnapshotStore
	// Stats are figures about a store (driver.Stats).
	Stats = driver.Stats
	// Status is a consumer group's status (driver.Status).
	Status = driver.Status
	// Store is the message log: appends with consistency guards, condition
	// and partition reads, paging of the whole log, and scheduled messages
	// (driver.Store).
	Store = driver.Store
	// SystemClock is the real clock (driver.SystemClock).
	SystemClock = driver.SystemClock
	// Timer is a one-shot timer of a Clock (driver.Timer).
	Timer = driver.Timer
	// Tx is a write transaction of a Store: everything done through it
	// commits or rolls back together (driver.Tx).
	Tx = driver.Tx
	// UnknownGroupError is returned for a group id that is not registered;
	// it names the registered ones (driver.UnknownGroupError).
	UnknownGroupError = driver.UnknownGroupError
	// UnpromotedError lists the due scheduled messages PromoteScheduled set
	// aside (driver.UnpromotedError).
	UnpromotedError = driver.UnpromotedError
	// UnpromotedMessage is a due scheduled message that PromoteScheduled set
	// aside: its type is no longer registered, its payload no longer
	// decodes, or it no longer validates (a rule added, or a limit such as
	// codec.MaxIndexedValueBytes, since it was scheduled)
	// (driver.UnpromotedMessage).
	UnpromotedMessage = driver.UnpromotedMessage
)

// The operator and worker commands of a consumer group (driver.CmdStart ...).
const (
	CmdStart   = driver.CmdStart
	CmdStop    = driver.CmdStop
	CmdReset   = driver.CmdReset
	CmdRetry   = driver.CmdRetry
	CmdRecover = driver.CmdRecover
	CmdFail    = driver.CmdFail
	CmdPark    = driver.CmdPark
)

// The statuses of a consumer group (driver.StatusActive ...).
const (
	StatusActive   = driver.StatusActive
	StatusRetrying = driver.StatusRetrying
	StatusStopped  = driver.StatusStopped
	StatusFailed   = driver.StatusFailed
)

// The directions of ReadAll (driver.Ascending, driver.Descending).
const (
	Ascending  = driver.Ascending
	Descending = driver.Descending
)

// The default and largest page sizes and lag bounds (driver.DefaultPageSize
// ...).
const (
	MaxLagPartitions = driver.MaxLagPartitions
	DefaultLagLimit  = driver.DefaultLagLimit
	MaxLagLimit      = driver.MaxLagLimit
	DefaultPageSize  = driver.DefaultPageSize
	MaxPageSize      = driver.MaxPageSize
	MaxParkedPage    = driver.MaxParkedPage
)

// The errors a store's calls are matched by with errors.Is, documented in
// shell/driver (driver.ErrBusy ...).
var (
	ErrNotClaimant        = driver.ErrNotClaimant
	ErrGroupNotRegistered = driver.ErrGroupNotRegistered
	ErrInvalidCondition   = driver.ErrInvalidCondition
	ErrAckBeyondClaim     = driver.ErrAckBeyondClaim
	ErrInvalidPartition   = driver.ErrInvalidPartition
	ErrNotInstalled       = driver.ErrNotInstalled
	ErrSchemaNewer        = driver.ErrSchemaNewer
	ErrSchemaOutdated     = driver.ErrSchemaOutdated
	ErrDuplicateID        = driver.ErrDuplicateID
	ErrConcurrentAppend   = driver.ErrConcurrentAppend
	ErrBusy               = driver.ErrBusy
	ErrClockMismatch      = driver.ErrClockMismatch
	ErrInvalidCursor      = driver.ErrInvalidCursor
	ErrInvalidLagQuery    = driver.ErrInvalidLagQuery
	ErrInvalidLimit       = driver.ErrInvalidLimit
	ErrNotParked          = driver.ErrNotParked
	ErrUnpromoted         = driver.ErrUnpromoted
)

// Accepts lists the commands a status accepts, in the chart's order.
// (driver.Accepts).
func Accepts(status Status) []GroupCommand { return driver.Accepts(status) }

// NewSimClock returns a simulated clock at start.
// (driver.NewSimClock).
func NewSimClock(start time.Time) *SimClock { return driver.NewSimClock(start) }
