package driver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart/groupstatus"
)

// Groups is the consumer-group side of a store: registering groups,
// claiming partitions with pending work, acknowledging them, the group
// lifecycle, worker heartbeats and housekeeping. A consumer group processes
// the log per partition, in parallel across partitions, with one offset and
// at most one claim per partition.
type Groups interface {
	// RegisterGroup creates the group (status active) or updates its
	// label, partition keys and handled types; a failed or stopped group
	// keeps its status. Registration also records how the group's handled
	// types are indexed: by payload, or by message id for an id-partitioned
	// group (which must be exclusive; its types are indexed by payload
	// too). A partition key that no handled type indexes is refused (see
	// CheckGroupSpec). Two exclusive owners of one type, or
	// an exclusive group sharing a type with another group, are refused
	// with a *GroupConflictError.
	RegisterGroup(ctx context.Context, g GroupSpec) error

	// ClaimNext claims the partition of group with pending work whose
	// offset is furthest behind, if any, for workerID, and returns up to
	// batchSize of its messages. It returns nil and no error when there is
	// nothing to claim: the group is stopped or failed, retrying and its
	// retry time has not come, operator transitions of it wait for their
	// lifecycle hooks (GroupSpec.Hooks), or no partition has pending work
	// that no other worker holds. An idle group answers in O(1) (the claim-scan
	// latch).
	ClaimNext(ctx context.Context, group, workerID string, batchSize int) (*ClaimedPartition, error)
	// ClaimUpdate claims like ClaimNext and, when there is a claim, calls
	// fn with it inside the same write transaction, so that a batch can be
	// claimed, handled and acknowledged in one commit. An error from fn
	// rolls back everything, the claim included. It reports whether there
	// was a claim; an idle group answers as cheaply as with ClaimNext.
	ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx Tx, c *ClaimedPartition) error) (bool, error)
	// Release frees a claim without moving its offset. Only the claiming
	// worker may release it (else ErrNotClaimant).
	Release(ctx context.Context, c *ClaimedPartition) error
	// Ack moves the claim's offset to position and frees it; see Tx.Ack.
	Ack(ctx context.Context, c *ClaimedPartition, position int64) error

	// StopGroup stops a group (reason is kept in its error context),
	// StartGroup starts it again and ResetGroup clears its offsets so that
	// it replays the log once started. Each is one transaction; a status
	// that does not accept the command returns an *InvalidTransitionError
	// and writes nothing; an unknown group an *UnknownGroupError. For a
	// group registered with GroupSpec.Hooks, each also records its
	// transition, in the same transaction, as pending until its lifecycle
	// hook ran (see ClaimTransition): the group's work is not claimed
	// meanwhile.
	StopGroup(ctx context.Context, group, reason string) error
	StartGroup(ctx context.Context, group string) error
	ResetGroup(ctx context.Context, group string) error
	// RetryGroup moves the group to retrying until at, recording the
	// failure; FailGroup moves it to failed. Both are worker commands: they
	// never fail on a status (a stopped group stays stopped). Each is
	// ChangeGroup with a decision that does not depend on the group's state.
	RetryGroup(ctx context.Context, group string, at time.Time, failure Failure) error
	FailGroup(ctx context.Context, group string, failure Failure) error
	// ChangeGroup reads the group's state, calls decide with it and applies
	// the worker command decide returns, all in one write transaction: a
	// status change is read and written together, so two workers failing
	// at once each see the other's change (two failures count two
	// retries). The command is CmdRetry (the group retries at RetryAt, its
	// claim scan dirty) or CmdFail, each recording Failure, or CmdPark
	// (the partition of Failure.OffsetID is parked with Failure; see
	// CmdPark and Parking); a status that
	// does not accept it leaves the group as it is, with no error (a
	// stopped group stays stopped), and a zero Command changes nothing. An
	// error from decide is returned and nothing is written. ChangeGroup
	// returns the group's state afterwards.
	ChangeGroup(ctx context.Context, group string, decide func(GroupState) (GroupChange, error)) (GroupState, error)
	// Group returns a group's status and figures.
	Group(ctx context.Context, group string) (GroupInfo, error)

	// ClaimTransition claims, for claimant, the oldest operator transition
	// of group whose lifecycle hook has not run (a group registered with
	// GroupSpec.Hooks records each StopGroup, StartGroup and ResetGroup,
	// whoever calls it), so that exactly one process runs its hook. It
	// returns nil and no error when none is pending (always, for a group
	// registered without Hooks) or when the oldest is claimed already,
	// by any claimant (claimant included), after now-lease; a claim made
	// at or before now-lease is taken over (its claimant died or overran
	// its lease). The claim records claimant and now, in one write
	// transaction: of two claimants at once, exactly one gets it. An
	// unknown group is an *UnknownGroupError; a lease that is not
	// positive or an empty claimant is refused.
	ClaimTransition(ctx context.Context, group, claimant string, now time.Time, lease time.Duration) (*GroupTransition, error)
	// FinishTransition ends the claim of t (from ClaimTransition). ran
	// true records that its hook ran: the group's hooks-ran marker moves
	// to t.Seq and the transition is no longer pending (once none is,
	// the group's work is claimed again); false releases it, to be
	// claimed again (its hook failed). A claim t.Claimant no longer holds
	// (taken over after its lease, or finished) is refused with an error
	// matching ErrNotClaimant, and nothing changes.
	FinishTransition(ctx context.Context, t *GroupTransition, ran bool) error

	// Heartbeat records that the workers are alive at at.
	Heartbeat(ctx context.Context, workerIDs []string, at time.Time) error
	// ReleaseStaleClaims releases the claims of workers not seen since
	// now-ttl (workers with no heartbeat at all included, by claim age),
	// re-checking each claim in the same transaction; returns how many.
	// A negative ttl is refused.
	ReleaseStaleClaims(ctx context.Context, now time.Time, ttl time.Duration) (int, error)
	// ReleaseClaimsOlderThan releases every claim made at or before cutoff,
	// whoever holds it (a live worker that leaked it, or one stuck in a
	// batch), in one transaction, and returns the released offsets as they
	// were (group, partition, worker, claim time). The worker's ack then
	// fails with ErrNotClaimant and another worker processes the partition
	// from its offset.
	ReleaseClaimsOlderThan(ctx context.Context, cutoff time.Time) ([]Offset, error)
	// RemoveWorkers deletes the heartbeat records of workers that stopped
	// cleanly, so that only live workers are recorded. A claim such a
	// worker still holds is then stale by its age (see
	// ReleaseStaleClaims).
	RemoveWorkers(ctx context.Context, workerIDs []string) error
	// ReleaseDrainedOffsets deletes unclaimed offsets whose partition has no
	// messages left (drained delete-on-ack queues); returns how many.
	ReleaseDrainedOffsets(ctx context.Context) (int, error)
	// PruneOrphanKeyPairs deletes key pairs no message or offset uses.
	PruneOrphanKeyPairs(ctx context.Context) (int, error)

	// ReadOffsets returns a page of offsets (by ascending id from q.From),
	// and Offsets iterates them lazily.
	ReadOffsets(ctx context.Context, q OffsetQuery) (OffsetPage, error)
	Offsets(ctx context.Context, q OffsetQuery) iter.Seq2[Offset, error]

	// Parking is what an operator does with parked partitions.
	Parking
}

// GroupTx is the consumer-group side of a write transaction: what the
// router does in the transaction that appends a batch's messages.
type GroupTx interface {
	// ClaimNext is Groups.ClaimNext inside the transaction: the claim
	// commits or rolls back with it. The router uses it to claim and
	// process several partitions of a pure reactor in one transaction.
	ClaimNext(group, workerID string, batchSize int) (*ClaimedPartition, error)
	// Ack moves the claim's offset to position (never backwards) and frees
	// the claim; the group's highest acknowledged position rises to it; a
	// retrying group whose failed partition this is recovers to active.
	// Only the claiming worker may ack (else ErrNotClaimant), and at most
	// at the claim's last message (else ErrAckBeyondClaim, and nothing
	// changes). A store may defer the claimant check to the transaction's
	// next statement or its commit (pgstore sends a transaction's acks as
	// one statement): an ack of a claim no longer held then fails the
	// whole Update with an error matching ErrNotClaimant, and nothing the
	// transaction did is written.
	Ack(c *ClaimedPartition, position int64) error
	// Release frees the claim without moving its offset, in the
	// transaction (a batch that processed none of its messages). Only the
	// claiming worker may release it (else ErrNotClaimant).
	Release(c *ClaimedPartition) error
	// Delete removes messages from the log (delete-on-ack).
	Delete(positions ...int64) error
	// AdvanceOffset moves a partition's offset to position without a claim
	// (creating the offset if needed), so that workers skip a command
	// handled synchronously. It never moves an offset backwards, and it does
	// not move it at all (returning false) while the partition holds a
	// message of the group's handled types between the offset and position
	// that no worker has processed yet: skipping it would lose it. The
	// group's highest position rises to position when the offset moves.
	AdvanceOffset(group string, partition core.Partition, position int64) (bool, error)
}

// DeferredAdvancer is implemented by a Tx that can send an offset's move
// (GroupTx.AdvanceOffset) with the transaction's COMMIT instead of in a
// round trip of its own, as an append with AppendOptions.Deferred: Handle
// moves its decider's offset past the command it decided this way, since
// it needs no answer. A failure the store can tell at once (an unknown
// group, a partition missing a key) is returned at once; one the server
// finds fails the transaction: Update returns it. A store may move the
// offset at once instead.
type DeferredAdvancer interface {
	AdvanceOffsetDeferred(group string, partition core.Partition, position int64) error
}

// DeferredCommandAppender is implemented by a Tx that can append a
// command a group decides synchronously and move the group's offset past
// it without a round trip of their own (as AppendOptions.Deferred and
// DeferredAdvancer do), so that on a store over a network Handle costs
// the history read and one round trip with the COMMIT, and the command's
// position, a hole to every reader until the transaction ends, is drawn
// only in that last round trip. It returns the command as stamped, and
// position, which gives the command's position: once Update returned
// nil, the one stored; before, a call sends what the transaction queued
// (a round trip) to learn it. The command must not be dated (the store
// stamps it now: a deferred command is never scheduled). A store may
// append it at once, and move the offset at once.
type DeferredCommandAppender interface {
	AppendCommandDeferred(cmd core.Message, group string, partition core.Partition) (stamped core.Message, position func() (int64, error), err error)
}

// ClaimManyTx is implemented by a store's Tx that can claim several
// partitions of a group in one step (one statement where the store can),
// so that a worker draining a group of many small partitions (a
// delete-on-ack queue, one partition per job) claims and commits many of
// them per transaction instead of one. The router uses it when the store's
// Tx has it, and otherwise calls GroupTx.ClaimNext repeatedly.
type ClaimManyTx interface {
	// ClaimMany claims, for workerID, up to partitions distinct partitions
	// of group with pending work that no other worker holds, in the order
	// ClaimNext would claim them one after another (the offset furthest
	// behind first), each with up to batchSize of its messages. It returns
	// no claims and no error when there is nothing to claim (an idle group
	// answers in O(1), as ClaimNext does). The claims commit or roll back
	// with the transaction.
	ClaimMany(group, workerID string, batchSize, partitions int) ([]*ClaimedPartition, error)
}

// ClaimManyUpdater is implemented by a store whose ClaimUpdate can claim
// several partitions at its start (pgstore): a worker that handles up to
// partitions partitions a transaction claims them all with its first
// statement, rather than one with ClaimUpdate and the others with a
// ClaimManyTx.ClaimMany round trip after it. The router uses it when the
// store has it.
type ClaimManyUpdater interface {
	// ClaimManyUpdate claims as ClaimManyTx.ClaimMany does, in a write
	// transaction, and when there is a claim calls fn with the
	// transaction and the claims (at least one); the claims and whatever
	// fn writes commit together, and an error from fn rolls everything
	// back, the claims included. It reports whether there was a claim; an
	// idle group answers as cheaply as with ClaimNext, without calling fn.
	ClaimManyUpdate(ctx context.Context, group, workerID string, batchSize, partitions int, fn func(tx Tx, claims []*ClaimedPartition) error) (bool, error)
}

// GroupSpec describes a consumer group to register.
type GroupSpec struct {
	// ID is the normalised group id (see core.NormalizeGroup).
	ID string
	// Label is a human name (defaults to ID).
	Label string
	// PartitionBy are the partition attributes. Empty means one partition
	// per message (keyed by core.IDKey), which requires Exclusive.
	PartitionBy []string
	// Exclusive marks the group as the sole consumer of its types.
	Exclusive bool
	// Handled are the type strings the group claims.
	Handled []string
	// Hooks marks a group whose reactor has lifecycle hooks (OnStop,
	// OnStart or OnReset; see core.Hooks). The store then records every
	// operator transition of the group (StopGroup, StartGroup,
	// ResetGroup: a router's, the CLI's, the dashboard's) as pending,
	// numbered, until a process ran its hook (ClaimTransition,
	// FinishTransition), and claims none of the group's work while one
	// is pending: a reset's replay never lands on a read model its
	// OnReset has not cleared yet. Registering the group without Hooks
	// forgets its pending transitions (no process would run them).
	Hooks bool
}

// Validate checks a spec on its own (the store checks it against the other
// registered groups).
func (g GroupSpec) Validate() error {
	switch {
	case g.ID == "":
		return errors.New("sourced: consumer group with no id")
	case len(g.Handled) == 0:
		return fmt.Errorf("sourced: consumer group %q handles no types", g.ID)
	case len(g.PartitionBy) == 0 && !g.Exclusive:
		return fmt.Errorf("sourced: consumer group %q has no partition keys: only an exclusive group may be partitioned by message id", g.ID)
	case slices.Contains(g.PartitionBy, core.IDKey):
		return fmt.Errorf("sourced: consumer group %q: %s is reserved; leave PartitionBy empty for id-partitioning", g.ID, core.IDKey)
	}
	return nil
}

// ClaimedPartition is a worker's claim on a partition of a consumer group,
// as the store records it: the partition's pending messages, held by the
// worker until it acknowledges or releases them (Groups.ClaimNext). A
// reactor receives its messages as an effects.Claim.
type ClaimedPartition struct {
	Group    string
	WorkerID string
	// OffsetID identifies the partition's offset.
	OffsetID int64
	// Partition holds the partition's values ({"__id": id} for an
	// id-partitioned group).
	Partition core.Partition
	// Messages are the pending messages, in position order (conditional
	// AND: each matches every partition attribute it carries).
	Messages []core.PositionedMessage
	// After is the offset's position when it was claimed: Messages are
	// the partition's messages of the group's handled types after it, in
	// order, every one up to the last (Last), the first BatchSize of them.
	// A reader that kept the partition's history up to a position at or
	// after After (the router's kept histories, see HistoryKeeper) has,
	// with Messages, all of it up to Last without reading.
	After int64
	// Guard covers every handled type that declares partition attributes,
	// up to the last claimed message.
	Guard core.Guard
	// Replaying is true when the last claimed message is at or below how
	// far this partition had been acknowledged when the group was last
	// reset: the messages were processed before.
	Replaying bool
	// ReplayUpto is how far this partition had been acknowledged when the
	// group was last reset (0: never reset, or nothing acknowledged then):
	// a claimed message at or below it is a replay, even when the claim
	// reaches past it (Replaying false), and its side effects (reactions,
	// decisions) are not made again.
	ReplayUpto int64
}

// Last is the position of the claim's last message.
func (c *ClaimedPartition) Last() int64 {
	if len(c.Messages) == 0 {
		return 0
	}
	return c.Messages[len(c.Messages)-1].Position
}

// Status is a consumer group's status.
type Status string

// The statuses of a consumer group.
const (
	StatusActive   Status = "active"
	StatusRetrying Status = "retrying"
	StatusStopped  Status = "stopped"
	StatusFailed   Status = "failed"
)

// GroupCommand is a change of a consumer group's status, by the status
// chart of package statechart/groupstatus: an operator's (start, stop,
// reset) or a worker's (retry, recover, fail, park). It is not a command
// in the CQRS sense: those are messages a decider decides (see Handle).
type GroupCommand string

// Operator commands (Start, Stop, Reset) and worker commands (Retry,
// Recover, Fail).
const (
	CmdStart   GroupCommand = "start"
	CmdStop    GroupCommand = "stop"
	CmdReset   GroupCommand = "reset"
	CmdRetry   GroupCommand = "retry"
	CmdRecover GroupCommand = "recover"
	CmdFail    GroupCommand = "fail"
)

// commands maps each GroupCommand to its value in the status chart.
var commands = map[GroupCommand]any{
	CmdStart: groupstatus.Start{}, CmdStop: groupstatus.Stop{}, CmdReset: groupstatus.Reset{},
	CmdRetry: groupstatus.Retry{}, CmdRecover: groupstatus.Recover{}, CmdFail: groupstatus.Fail{},
}

// Transition returns the status a command moves a group from status to,
// by the consumer-group status chart (package statechart/groupstatus), or
// an *InvalidTransitionError naming what the status accepts.
func Transition(group string, status Status, cmd GroupCommand) (Status, error) {
	c, ok := commands[cmd]
	if !ok {
		return status, fmt.Errorf("sourced: unknown consumer group command %q", cmd)
	}
	next, err := groupstatus.Next(string(status), c)
	if err != nil {
		return status, &InvalidTransitionError{Group: group, Status: status, Command: cmd, Accepts: Accepts(status)}
	}
	return Status(next), nil
}

// Accepts lists the commands a status accepts, in the chart's order.
func Accepts(status Status) []GroupCommand {
	var out []GroupCommand
	for _, name := range groupstatus.Accepts(string(status)) {
		out = append(out, GroupCommand(strings.ToLower(name)))
	}
	return out
}

// Claimable reports whether a group with this status and retry time may be
// claimed at now: active, or retrying once its retry time has passed.
func Claimable(status Status, retryAt time.Time, now time.Time) bool {
	switch status {
	case StatusActive:
		return true
	case StatusRetrying:
		return !retryAt.After(now)
	}
	return false
}

// Failure is the error context of a consumer group, stored as JSON: which
// batch failed (partition, message), how (the error, its type, a panic's
// stack) and what the error strategy made of it (retries).
type Failure struct {
	// RetryCount counts retries since the group last recovered.
	RetryCount int `json:"retry_count"`
	// RetryAt is when a retrying group may be claimed again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// OffsetID is the partition whose batch failed (its ack recovers the
	// group).
	OffsetID int64 `json:"offset_id,omitempty"`
	// Partition is that partition, as core.Partition's String renders it.
	Partition string `json:"partition,omitempty"`
	// MessageType, MessageID and Position name the message that failed
	// (the first of the batch not processed).
	MessageType string `json:"message_type,omitempty"`
	MessageID   string `json:"message_id,omitempty"`
	Position    int64  `json:"position,omitempty"`
	// ErrorType is the Go type of the error (the class, in Ruby terms):
	// the innermost type in its chain that is not a generic wrapper
	// (fmt.Errorf's, errors.Join's, core.BatchError), or "panic(T)" for a
	// panic with a value of type T. An error with no type of its own
	// (errors.New, a sentinel such as io.EOF, fmt.Errorf without %w) is
	// named by its text instead, cut at 60 characters, as
	// errors.New("card declined"): every such error has the one type
	// *errors.errorString, and a sentinel's variable name is not known
	// at run time.
	ErrorType string `json:"error_type,omitempty"`
	// Error is the error's message.
	Error string `json:"error,omitempty"`
	// Stack is where a panic happened; for a returned error (which Go
	// gives no stack), where it surfaced (the decide handler that
	// returned it, by function and file:line, else the reactor or the
	// batch's commit), then the error's own stack when it carries one (a
	// StackTrace, Callers or Stack method, as github.com/pkg/errors'). See
	// Panicked.
	Stack string `json:"stack,omitempty"`
	// Reason is why an operator stopped the group.
	Reason string `json:"reason,omitempty"`
}

// IsZero reports whether f records nothing.
func (f Failure) IsZero() bool { return f == Failure{} }

// Panicked reports whether the failure was a panic (and Stack is where it
// happened) rather than a returned error (whose Stack says where it
// surfaced, and holds its own stack when it carries one).
func (f Failure) Panicked() bool { return strings.HasPrefix(f.ErrorType, "panic(") }

// GroupState is a consumer group's status, retry time and error context:
// what a worker command is decided on (see Groups.ChangeGroup).
type GroupState struct {
	Status  Status
	RetryAt time.Time
	Failure Failure
}

// GroupChange is a worker command decided on a group's state (see
// Groups.ChangeGroup): CmdRetry until RetryAt, or CmdFail, recording
// Failure. A zero Command changes nothing.
type GroupChange struct {
	Command GroupCommand
	RetryAt time.Time
	Failure Failure
}

// GroupTransition is an operator transition of a consumer group
// registered with GroupSpec.Hooks (StopGroup, StartGroup, ResetGroup)
// whose lifecycle hook has not run yet, as ClaimTransition hands it to the
// process that runs the hook.
type GroupTransition struct {
	// Group is the group's id.
	Group string `json:"-"`
	// Seq numbers the group's transitions, from 1, in the order they were
	// made.
	Seq int64 `json:"seq"`
	// Command is CmdStop, CmdStart or CmdReset.
	Command GroupCommand `json:"command"`
	// Reason is a stop's reason.
	Reason string `json:"reason,omitempty"`
	// At is when the store recorded the transition (its clock).
	At time.Time `json:"at"`
	// Claimant and ClaimedAt are the claim ClaimTransition made.
	Claimant  string    `json:"-"`
	ClaimedAt time.Time `json:"-"`
}

// CheckClaimTransition validates ClaimTransition's arguments (shared by
// the stores).
func CheckClaimTransition(claimant string, lease time.Duration) error {
	if claimant == "" {
		return errors.New("sourced: claim a group transition with no claimant: name the process claiming it")
	}
	if lease <= 0 {
		return fmt.Errorf("sourced: claim a group transition with a lease of %v: the lease must be positive (how long a hook may run before another process may run it)", lease)
	}
	return nil
}

// GroupInfo is a consumer group's status and figures.
type GroupInfo struct {
	ID      string
	Label   string
	Status  Status
	RetryAt time.Time
	Failure Failure
	// OldestProcessed and NewestProcessed are the lowest non-zero and the
	// highest offset positions; Partitions the number of offsets.
	OldestProcessed int64
	NewestProcessed int64
	Partitions      int64
	// HighestPosition is the furthest position ever acknowledged.
	HighestPosition int64
	PartitionBy     []string
	Exclusive       bool
	// HooksPending counts the operator transitions whose lifecycle hooks
	// have not run yet (see GroupSpec.Hooks): the group's work is not
	// claimed while it is not 0. A count that stays up means no process
	// running the group's reactor is up, or its hook keeps failing (the
	// runtime logs each failure).
	HooksPending int64
}

// OffsetQuery selects offsets to page through.
type OffsetQuery struct {
	// Group filters by group id ("" for all groups).
	Group string
	// From is the inclusive offset-id cursor.
	From int64
	// Limit is the page size (0: DefaultPageSize).
	Limit int
}

// Offset is a partition's offset as monitoring shows it.
type Offset struct {
	ID           int64
	Group        string
	GroupStatus  Status
	Partition    core.Partition
	LastPosition int64
	Claimed      bool
	ClaimedAt    time.Time
	ClaimedBy    string
	// Parked is true while the partition is parked (see Parking).
	Parked bool
}

// OffsetPage is a page of offsets.
type OffsetPage struct {
	Offsets []Offset
	// Total is the number of offsets matching the query's group filter.
	Total int64
}

var (
	// ErrNotClaimant is matched by the error of acking or releasing a claim
	// that another worker holds, or that was released.
	ErrNotClaimant = errors.New("sourced: claim not held by this worker")
	// ErrGroupNotRegistered is matched by UnknownGroupError.
	ErrGroupNotRegistered = errors.New("sourced: consumer group not registered")
)

// UnknownGroupError is returned for a group id that is not registered; it
// names the registered ones.
type UnknownGroupError struct {
	Group string
	Known []string
}

func (e *UnknownGroupError) Error() string {
	known := strings.Join(e.Known, ", ")
	if known == "" {
		known = "none"
	}
	return fmt.Sprintf("sourced: unknown consumer group %q (registered: %s): pass its reactor to shell.NewRuntime and start the runtime (Start, Run or Supervise), or call Router.Setup, before using the group", e.Group, known)
}

// Is makes errors.Is(err, ErrGroupNotRegistered) true.
func (e *UnknownGroupError) Is(target error) bool { return target == ErrGroupNotRegistered }

// InvalidTransitionError is returned by an operator command that the
// group's status does not accept.
type InvalidTransitionError struct {
	Group   string
	Status  Status
	Command GroupCommand
	Accepts []GroupCommand
}

func (e *InvalidTransitionError) Error() string {
	acc := make([]string, len(e.Accepts))
	for i, c := range e.Accepts {
		acc[i] = string(c)
	}
	return fmt.Sprintf("sourced: can't %s consumer group %s: it's %s. It accepts: %s", e.Command, e.Group, e.Status, strings.Join(acc, ", "))
}

// GroupConflictError is returned when registering a group that claims
// types an exclusive group owns (or an exclusive group claiming types
// another group handles).
type GroupConflictError struct {
	Group string
	Other string
	Types []string
}

func (e *GroupConflictError) Error() string {
	return fmt.Sprintf("sourced: consumer groups %q and %q both handle %s, and one of them is exclusive", e.Group, e.Other, strings.Join(e.Types, ", "))
}
