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

// historyPartitions is how many partitions the history benchmarks decide
// on, round-robin.
const historyPartitions = 100

// historyStore is a store with historyPartitions accounts of history
// deposits each and the decider's group registered.
func historyStore(b *testing.B, history int) *sqlitestore.Store {
	ctx := context.Background()
	s := routerStore(b)
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchAccounts)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	var seed []core.Message
	for i := range history * historyPartitions {
		seed = append(seed, core.NewMessage(benchDeposited{Account: account(i % historyPartitions), Amount: 1}))
		if len(seed) == 1000 {
			if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			seed = seed[:0]
		}
	}
	if len(seed) > 0 {
		if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkHandleHistory is BenchmarkHandle on partitions of 10 and of
// 1,000 events, with a StateCache (HandleOptions.Cache): each partition's
// state is folded once (before the timer starts), then every decision
// reads and folds only what was appended since the partition's last one.
// The two rates should be the same. It reports commands per second.
//
//	go test -run '^$' -bench 'HandleHistory' -count 3
func BenchmarkHandleHistory(b *testing.B) {
	for _, history := range []int{10, 1000} {
		b.Run("history="+strconv.Itoa(history), func(b *testing.B) { handleHistory(b, history, true) })
	}
}

// BenchmarkHandleHistoryUncached is BenchmarkHandleHistory without the
// cache: every decision reads and folds its partition's whole history.
func BenchmarkHandleHistoryUncached(b *testing.B) {
	for _, history := range []int{10, 1000} {
		b.Run("history="+strconv.Itoa(history), func(b *testing.B) { handleHistory(b, history, false) })
	}
}

func handleHistory(b *testing.B, history int, cached bool) {
	ctx := context.Background()
	s := historyStore(b, history)
	opts := shell.HandleOptions{NoCache: true} // not the store's own cache
	if cached {
		opts = shell.HandleOptions{Cache: shell.NewStateCache(10 * historyPartitions)}
	}
	balances := make([]int, historyPartitions)
	for i := range balances {
		balances[i] = history
	}
	handle := func(i int) {
		p := i % historyPartitions
		res, err := shell.Handle(ctx, s, benchAccounts, benchDeposit{Account: account(p), Amount: 5}, &opts)
		if err != nil {
			b.Fatal(err)
		}
		balances[p] += 5
		if res.State != balances[p] {
			b.Fatalf("balance %d, want %d", res.State, balances[p])
		}
	}
	for i := range historyPartitions { // fold every partition once
		handle(i)
	}
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		handle(n)
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
	if cached {
		if hits, misses := opts.Cache.Stats(); misses != historyPartitions {
			b.Fatalf("%d hits, %d misses: want a miss for each partition's first decision only", hits, misses)
		}
	}
}
