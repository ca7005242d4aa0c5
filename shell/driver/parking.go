package driver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sourced-go/sourced/core"
)

// CmdPark is the worker command of the parking strategy (see
// ErrorStrategy.Park), applied through Groups.ChangeGroup: the partition
// of Failure.OffsetID is parked with Failure (ClaimNext skips it until an
// operator retries it, skips its failed message or resets it), and a
// retrying group recovers to active, its retry count back to 0, so that
// its other partitions flow. A stopped or failed group keeps its status;
// the partition is parked all the same. It is not a status change, so it
// is not in the status chart (Transition refuses it).
const CmdPark GroupCommand = "park"

// Parking is the parked-partition side of a store: what an operator does
// with the partitions the parking strategy set aside (see
// ErrorStrategy.Park). A parked partition keeps its offset and its pending
// messages; ClaimNext skips it until one of the operations below, while
// the group's other partitions flow. A group reset (ResetGroup) unparks
// every partition of the group, which replays them all (an exclusive
// group, which a reset leaves as it is, keeps its parked partitions).
//
// Each operation names the partition by its group and its values (as
// ClaimedPartition.Partition holds them: {"__id": message id} for an id-partitioned
// group), runs in one write transaction, returns the record of the parking
// it cleared, and refuses a partition that is not parked with an error
// matching ErrNotParked (a *NotParkedError), writing nothing; an unknown
// group gives an *UnknownGroupError.
type Parking interface {
	// ParkedPartitions returns the parked partitions of group (every
	// group's when group is ""), by group id then offset id.
	ParkedPartitions(ctx context.Context, group string) ([]ParkedPartition, error)
	// RetryPartition unparks the partition: workers claim it again from
	// its offset, so its failed message is handled again.
	RetryPartition(ctx context.Context, group string, partition core.Partition) (ParkedPartition, error)
	// SkipFailedMessage moves the partition's offset past the message it
	// failed at (Failure.Position), never backwards, and unparks it:
	// workers go on with the messages after it. The skipped message stays
	// in the log.
	SkipFailedMessage(ctx context.Context, group string, partition core.Partition) (ParkedPartition, error)
	// ResetPartition moves the partition's offset back to the start and
	// unparks it: workers replay the partition's messages (the claims up
	// to where it had been acknowledged report Replaying, as after
	// ResetGroup).
	ResetPartition(ctx context.Context, group string, partition core.Partition) (ParkedPartition, error)
}

// ParkedPartition is a partition the parking strategy set aside, with
// the failure that parked it.
type ParkedPartition struct {
	Group string
	// OffsetID identifies the partition's offset (Failure.OffsetID).
	OffsetID int64
	// Partition holds the partition's values.
	Partition core.Partition
	// LastPosition is how far the partition was acknowledged: the failed
	// message lies after it.
	LastPosition int64
	// Failure names the message the partition failed at (MessageType,
	// MessageID, Position), the error (ErrorType, Error, and Stack for a
	// panic), and RetryCount, the retries made before it was parked.
	Failure Failure
	// ParkedAt is when it was parked (the store's clock).
	ParkedAt time.Time
}

// Attempts is how many times the failed message was handled before the
// partition was parked: the first try and the retries.
func (p ParkedPartition) Attempts() int { return p.Failure.RetryCount + 1 }

// ErrNotParked is matched by the error of a parked-partition operation on
// a partition that is not parked (see Parking).
var ErrNotParked = errors.New("sourced: partition not parked")

// NotParkedError is returned by a parked-partition operation on a
// partition that is not parked; it names the group's parked partitions.
type NotParkedError struct {
	Group     string
	Partition core.Partition
	// Parked are the group's parked partitions, as core.Partition's String renders
	// them.
	Parked []string
}

func (e *NotParkedError) Error() string {
	parked := strings.Join(e.Parked, ", ")
	if parked == "" {
		parked = "none"
	}
	return fmt.Sprintf("sourced: partition %s of consumer group %s is not parked (parked: %s); nothing was changed", core.Partition(e.Partition).String(), e.Group, parked)
}

// Is makes errors.Is(err, ErrNotParked) true.
func (e *NotParkedError) Is(target error) bool { return target == ErrNotParked }

// SortParked orders parked partitions by group id, then offset id (the
// order of ParkedPartitions), for store implementations.
func SortParked(ps []ParkedPartition) {
	slices.SortFunc(ps, func(a, b ParkedPartition) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return int(min(max(a.OffsetID-b.OffsetID, -1), 1))
	})
}

// CheckPartition validates the values naming a partition of a group
// partitioned by partitionBy (empty: by message id), for store
// implementations: exactly the group's partition attributes, or exactly
// {"__id": a message id}.
func CheckPartition(group string, partitionBy []string, partition core.Partition) error {
	if len(partitionBy) == 0 {
		if _, ok := partition[core.IDKey]; len(partition) == 1 && ok {
			return nil
		}
		return fmt.Errorf("sourced: partition %s of consumer group %s: the group is partitioned by message id, so name it {%q: message id}", core.Partition(partition).String(), group, core.IDKey)
	}
	if !slices.Equal(slices.Sorted(maps.Keys(partition)), slices.Sorted(slices.Values(partitionBy))) {
		return fmt.Errorf("sourced: partition %s of consumer group %s: give exactly its partition attributes %v", core.Partition(partition).String(), group, partitionBy)
	}
	return nil
}
