package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
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
	if err := s.RegisterGroup(context.Background(), shell.GroupSpec{ID: claimGroup, PartitionBy: []string{"account"}, Handled: []string{storeEventType}}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkGroupsAppend is BenchmarkAppend with the group registered.
func BenchmarkGroupsAppend(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			s := groupsAppendStore(b)
			ctx := context.Background()
			msgs := make([]core.Message, 0, batch)
			seq := 0
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				msgs = storeBatch(msgs, seq, batch, storeAccounts)
				seq += batch
				if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(seq)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkGroupsAppendGuarded is BenchmarkAppendGuarded with the group
// registered.
func BenchmarkGroupsAppendGuarded(b *testing.B) {
	s := groupsAppendStore(b)
	ctx := context.Background()
	var last int64
	msgs := make([]core.Message, 0, 1)
	seq := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		msgs = storeBatch(msgs, seq, 1, storeAccounts)
		seq++
		g := core.Guard{
			Conditions:   []core.Condition{{Type: storeEventType, Attrs: map[string]string{"account": storeAccount(seq - 1)}}},
			LastPosition: last,
		}
		res, err := s.Append(ctx, msgs, shell.AppendOptions{Guard: &g})
		if err != nil {
			b.Fatal(err)
		}
		last = res.Last
	}
	b.ReportMetric(float64(seq)/time.Since(start).Seconds(), "msgs/s")
}
