package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The append benchmarks again, with a consumer group partitioned by
// account registered (handling every appended message): each append also
// creates or wakes the offset of its partition in the same transaction
// (eager offsets), and the latch trigger fires per message. Compare with
// BenchmarkAppend and BenchmarkAppendGuarded for the cost the consumer-group
// machinery adds to an append.

func groupsAppendStore(b *testing.B) *sqlitestore.Store {
	b.Helper()
	s := storeOpen(b)
	if err := s.RegisterGroup(context.Background(), driver.GroupSpec{ID: claimGroup, PartitionBy: []string{"account"}, Handled: []string{storeEventType}}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkGroupsAppend is BenchmarkAppend with the group registered.
func BenchmarkGroupsAppend(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) { appendLoop(b, groupsAppendStore(b), batch) })
	}
}

// BenchmarkGroupsAppendGuarded is BenchmarkAppendGuarded with the group
// registered.
func BenchmarkGroupsAppendGuarded(b *testing.B) { appendGuardedLoop(b, groupsAppendStore(b)) }
