package driver

import (
	"context"
	"errors"
	"fmt"
)

// Lagger is implemented by the stores that count a consumer group's
// pending work at a bounded cost, whatever the size of the log and the
// number of partitions behind (the SQLite, PostgreSQL and in-memory
// stores): tools such as the dashboard call it on every page. A call reads
// one snapshot with a fixed number of queries (the group, a count of its
// pending partitions and of its parked ones, the partitions to count) plus
// one per partition it counts, each reading at most q.Limit messages.
type Lagger interface {
	// GroupLag counts the pending work of group within the bounds of q
	// (see LagQuery): an unknown group gives an *UnknownGroupError, a query
	// out of bounds an error matching ErrInvalidLagQuery.
	GroupLag(ctx context.Context, group string, q LagQuery) (Lag, error)
}

// Bounds of a LagQuery.
const (
	// MaxLagPartitions is the most partitions one GroupLag counts the
	// messages of (LagQuery.Offsets, LagQuery.Partitions).
	MaxLagPartitions = 200
	// DefaultLagLimit is the messages counted per partition when
	// LagQuery.Limit is 0.
	DefaultLagLimit = 1000
	// MaxLagLimit is the most messages counted per partition.
	MaxLagLimit = 10000
)

// ErrInvalidLagQuery is matched by the error of a LagQuery out of bounds.
var ErrInvalidLagQuery = errors.New("sourced: invalid lag query")

// LagQuery says which of a group's partitions GroupLag counts the pending
// messages of. Pending and parked partitions are always counted in full
// (one counting query each).
type LagQuery struct {
	// Offsets, when given, are the offset ids (Offset.ID) whose pending
	// messages are counted: a page of offsets, say. Ids of other groups,
	// of offsets that are gone or have no pending work are left out of
	// Lag.ByOffset. At most MaxLagPartitions.
	Offsets []int64
	// Partitions, when Offsets is empty, counts the pending messages of
	// that many of the group's pending partitions, those furthest behind
	// first (the lowest last position, then the lowest offset id); 0
	// counts none. At most MaxLagPartitions.
	Partitions int
	// Limit caps the messages counted per partition (0: DefaultLagLimit;
	// at most MaxLagLimit): a count equal to it means "at least".
	Limit int
}

// Lag is a group's pending work as GroupLag counts it.
type Lag struct {
	// Pending is the number of the group's partitions with pending work
	// (a message of a handled type after their offset that wakes them:
	// Pending work in shell/storetest's package doc), claimed and parked
	// ones included. Exact.
	Pending int64
	// Parked is the number of the group's parked partitions. Exact.
	Parked int64
	// ByOffset holds, for each counted partition with pending messages (by
	// offset id), how many of the group's handled types it has not
	// processed yet, at most the query's limit. Partitions with no pending
	// messages are absent.
	ByOffset map[int64]int
	// Limit is the cap each count of ByOffset was read with.
	Limit int
}

// Total sums ByOffset: the pending messages of the partitions counted.
// It is a lower bound of the group's pending messages when Partial.
func (l Lag) Total() int {
	n := 0
	for _, c := range l.ByOffset {
		n += c
	}
	return n
}

// Partial reports whether Total may be short of the group's pending
// messages: a pending partition was not counted, or a count reached the
// limit.
func (l Lag) Partial() bool {
	if int64(len(l.ByOffset)) < l.Pending {
		return true
	}
	for _, c := range l.ByOffset {
		if c >= l.Limit {
			return true
		}
	}
	return false
}

// CheckLagQuery validates q and returns the limit to count with (q.Limit,
// or DefaultLagLimit when 0), for store implementations.
func CheckLagQuery(q LagQuery) (limit int, err error) {
	switch {
	case len(q.Offsets) > MaxLagPartitions:
		return 0, fmt.Errorf("%w: %d offsets to count, at most %d (shell.MaxLagPartitions): count a page at a time", ErrInvalidLagQuery, len(q.Offsets), MaxLagPartitions)
	case q.Partitions < 0 || q.Partitions > MaxLagPartitions:
		return 0, fmt.Errorf("%w: %d partitions to count: want 0 to %d (shell.MaxLagPartitions)", ErrInvalidLagQuery, q.Partitions, MaxLagPartitions)
	case q.Limit < 0 || q.Limit > MaxLagLimit:
		return 0, fmt.Errorf("%w: a limit of %d messages per partition: want 0 (default %d) to %d (shell.MaxLagLimit)", ErrInvalidLagQuery, q.Limit, DefaultLagLimit, MaxLagLimit)
	}
	if q.Limit == 0 {
		return DefaultLagLimit, nil
	}
	return q.Limit, nil
}

// MaxParkedPage is the largest page of ReadParked.
const MaxParkedPage = 1000

// ParkedQuery selects a page of parked partitions (see ParkedReader).
type ParkedQuery struct {
	// Group filters by group id ("" for all groups).
	Group string
	// From is the inclusive offset-id cursor.
	From int64
	// Limit is the page size (0: DefaultPageSize; at most MaxParkedPage).
	Limit int
}

// ParkedReader is implemented by the stores that page their parked
// partitions (the SQLite, PostgreSQL and in-memory stores), so that a
// tool lists them at a bounded cost however many are parked: one query
// per page.
type ParkedReader interface {
	// ReadParked returns a page of the parked partitions of q.Group (every
	// group's when ""), by ascending offset id from q.From. An unknown
	// group gives an *UnknownGroupError; a limit out of bounds an error.
	ReadParked(ctx context.Context, q ParkedQuery) ([]ParkedPartition, error)
}

// CheckParkedQuery validates q and returns the page size to read (q.Limit,
// or DefaultPageSize when 0), for store implementations.
func CheckParkedQuery(q ParkedQuery) (limit int, err error) {
	if q.Limit < 0 || q.Limit > MaxParkedPage {
		return 0, fmt.Errorf("sourced: a page of %d parked partitions: want 0 (default %d) to %d (shell.MaxParkedPage)", q.Limit, DefaultPageSize, MaxParkedPage)
	}
	if q.Limit == 0 {
		return DefaultPageSize, nil
	}
	return q.Limit, nil
}
