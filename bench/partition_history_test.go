package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// historyLengths are the histories of BenchmarkPartitionHistory's
// partition.
var historyLengths = []int{10, 1000, 20_000}

// BenchmarkPartitionHistory: what a partition's new message costs a
// worker as the partition's history grows. The partition (one account of
// claimGroup) holds history=N messages, processed, among as many of 99
// other accounts; each iteration appends one message to it, claims and
// acknowledges it, and reads the partition after the position read last
// (as a decider with its state cached does): ns per message (append,
// claim, ack and read), which should not grow with N. On SQLite, and with
// SOURCED_TEST_POSTGRES_URL set on PostgreSQL too (store=postgres/...),
// where lookups by key pairs went through a GIN index that yields the
// partition's whole history (2.8-3.3 ms a lookup at 20,000) until schema
// version 14 gave them a btree by key and position.
func BenchmarkPartitionHistory(b *testing.B) {
	for _, n := range historyLengths {
		b.Run("history="+strconv.Itoa(n), func(b *testing.B) { partitionHistoryLoop(b, storeOpen(b), n) })
	}
	for _, n := range historyLengths {
		onPostgres(b, "history="+strconv.Itoa(n), func(b *testing.B, url string) {
			partitionHistoryLoop(b, pgOpen(b, url, storeRegistry(b)), n)
		})
	}
}

func partitionHistoryLoop(b *testing.B, s shell.Store, history int) {
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: claimGroup, PartitionBy: []string{"account"}, Handled: []string{storeEventType}}); err != nil {
		b.Fatal(err)
	}
	// The history: the partition's messages among other accounts'.
	var msgs []core.Message
	for seq := 0; seq < 2*history; seq += len(msgs) {
		msgs = msgs[:0]
		for i := seq; i < min(2*history, seq+1000); i++ {
			account := "acct-0"
			if i%2 == 1 {
				account = "acct-" + strconv.Itoa(1+i%99)
			}
			msgs = append(msgs, core.Message{Payload: storeEvent{Account: account, Ref: "h-" + strconv.Itoa(i)}})
		}
		if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var last int64
	for {
		c, err := s.ClaimNext(ctx, claimGroup, "w1", 5000)
		if err != nil {
			b.Fatal(err)
		}
		if c == nil {
			break
		}
		last = max(last, c.Messages[len(c.Messages)-1].Position)
		if err := s.Ack(ctx, c, c.Messages[len(c.Messages)-1].Position); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Optimize(ctx); err != nil {
		b.Fatal(err)
	}
	partition := core.Partition{"account": "acct-0"}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		res, err := s.Append(ctx, []core.Message{{Payload: storeEvent{Account: "acct-0", Ref: "n-" + strconv.Itoa(i)}}}, shell.AppendOptions{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := s.ClaimNext(ctx, claimGroup, "w1", 10)
		if err != nil || c == nil || len(c.Messages) != 1 {
			b.Fatalf("claim of the new message: %+v, %v", c, err)
		}
		if err := s.Ack(ctx, c, res.Last); err != nil {
			b.Fatal(err)
		}
		read, err := s.ReadPartition(ctx, partition, []string{storeEventType}, shell.ReadOptions{After: last})
		if err != nil || len(read.Messages) != 1 {
			b.Fatalf("read after %d: %d messages, %v; want the new one", last, len(read.Messages), err)
		}
		last = res.Last
	}
}
