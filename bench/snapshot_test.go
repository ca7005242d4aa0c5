package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// BenchmarkHandleCold is a cold decision (no StateCache: a restarted
// process, or a partition its cache does not hold) on one partition of
// 10,000 events, on SQLite: without snapshots every decision reads and
// folds the whole history; with them (core.Snapshots, Every 100) it
// loads the latest snapshot in its transaction and folds only the events
// after it, saving a new snapshot every 100 events (that cost is in the
// figure). It reports commands per second.
//
//	go test -run '^$' -bench 'HandleCold' -count 3
func BenchmarkHandleCold(b *testing.B) {
	snapshotting := benchAccounts
	snapshotting.Snapshots = core.Snapshots[int]{Codec: core.JSONSnapshots[int]("bench.accounts/v1"), Every: 100}
	for _, c := range []struct {
		name string
		d    core.Decider[int]
	}{{"history=10000/snapshots=off", benchAccounts}, {"history=10000/snapshots=on", snapshotting}} {
		b.Run(c.name, func(b *testing.B) { handleCold(b, c.d, 10_000) })
	}
}

func handleCold(b *testing.B, d core.Decider[int], history int) {
	ctx := context.Background()
	s := routerStore(b)
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, d)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	seed := make([]core.Message, 0, 1000)
	for range history {
		seed = append(seed, core.NewMessage(benchDeposited{Account: account(0), Amount: 1}))
		if len(seed) == cap(seed) {
			if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			seed = seed[:0]
		}
	}
	balance := history
	handle := func() {
		res, err := shell.Handle(ctx, s, d, benchDeposit{Account: account(0), Amount: 5}, &shell.HandleOptions{NoCache: true})
		if err != nil {
			b.Fatal(err)
		}
		balance += 5
		if res.State != balance {
			b.Fatalf("balance %d, want %d", res.State, balance)
		}
	}
	handle() // the first decision folds the history (and saves a snapshot)
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		handle()
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
}
