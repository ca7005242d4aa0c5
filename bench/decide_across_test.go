package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The decision-across benchmark's domain: a transfer reads the balances of
// two accounts (two boundaries) and is guarded by both.
type (
	benchTransfer struct {
		From   string `json:"from" sourced:"required"`
		To     string `json:"to" sourced:"required"`
		Amount int    `json:"amount"`
	}
	benchTransferred struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Amount int    `json:"amount"`
	}
)

type benchBalances struct{ From, To int }

var benchBalance = core.Projection[int]{}.With(
	core.Evolve(func(balance int, e benchDeposited) int { return balance + e.Amount }),
)

var benchTransfers = core.Decider[benchBalances]{Group: "bench.transfers", PartitionBy: []string{"from"}}.With(
	core.Reads(func(c benchTransfer) core.Query[benchBalances] {
		return core.Query[benchBalances]{
			core.Read(benchBalance, func(s benchBalances, n int) benchBalances { s.From = n; return s }, core.Where("account", c.From)),
			core.Read(benchBalance, func(s benchBalances, n int) benchBalances { s.To = n; return s }, core.Where("account", c.To)),
		}
	}),
	core.Decide(func(s benchBalances, c benchTransfer) ([]any, error) {
		if s.From < c.Amount {
			return nil, fmt.Errorf("balance %d is below %d", s.From, c.Amount)
		}
		return []any{benchTransferred(c)}, nil
	}),
)

// BenchmarkDecideAcross handles commands synchronously (Handle) whose
// decision reads two boundaries of 10 events each (the balances of two
// accounts: one read of the union, each part folding its own account's
// events), on a file database; it reports commands per second. Compare
// with BenchmarkHandle (one boundary of 10 events) in the same run.
func BenchmarkDecideAcross(b *testing.B) {
	ctx := context.Background()
	s := transferStore(b)
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchTransfers)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	n := b.N
	for from := 0; from < 2*n; from += 1000 {
		var seed []core.Message
		for i := from; i < min(from+1000, 2*n); i++ {
			for range 10 {
				seed = append(seed, core.NewMessage(benchDeposited{Account: account(i), Amount: 1}))
			}
		}
		if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		res, err := shell.Handle(ctx, s, benchTransfers, benchTransfer{From: account(2 * i), To: account(2*i + 1), Amount: 5}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if res.State != (benchBalances{From: 10, To: 10}) || len(res.Guard.Conditions) != 2 {
			b.Fatalf("state %+v guard %v, want both balances at 10 and two conditions", res.State, res.Guard.Conditions)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
}

// BenchmarkDecideAcrossWarm is BenchmarkDecideAcross on 100 accounts of
// 10 events each, round-robin (account i transfers 1 to account i+1), with
// the store's own state cache (Handle's default): after the first lap each
// part's state (an account's balance) is cached, and a decision reads and
// folds only what was appended since. Compare with
// BenchmarkHandleHistory/history=10 (one boundary, the same partitions,
// cached) in the same run. It reports commands per second.
func BenchmarkDecideAcrossWarm(b *testing.B) {
	ctx := context.Background()
	s := transferStore(b)
	// Transfers move money: the projection folds transferred events too.
	balance := core.Projection[int]{}.With(
		core.Evolve(func(n int, e benchDeposited) int { return n + e.Amount }),
	)
	transfers := core.Decider[benchBalances]{Group: "bench.transfers", PartitionBy: []string{"from"}}.With(
		core.Reads(func(c benchTransfer) core.Query[benchBalances] {
			return core.Query[benchBalances]{
				core.Read(balance, func(s benchBalances, n int) benchBalances { s.From = n; return s }, core.Where("account", c.From)),
				core.Read(balance, func(s benchBalances, n int) benchBalances { s.To = n; return s }, core.Where("account", c.To)),
			}
		}),
		core.Decide(func(s benchBalances, c benchTransfer) ([]any, error) {
			if s.From < c.Amount {
				return nil, fmt.Errorf("balance %d is below %d", s.From, c.Amount)
			}
			return []any{benchDeposited{Account: c.From, Amount: -c.Amount}, benchDeposited{Account: c.To, Amount: c.Amount}}, nil
		}),
	)
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, transfers)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	const accounts = 100
	var seed []core.Message
	for i := range accounts * 10 {
		seed = append(seed, core.NewMessage(benchDeposited{Account: account(i % accounts), Amount: 1}))
	}
	if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
		b.Fatal(err)
	}
	balances := make([]int, accounts)
	for i := range balances {
		balances[i] = 10
	}
	transfer := func(i int) {
		from, to := i%accounts, (i+1)%accounts
		res, err := shell.Handle(ctx, s, transfers, benchTransfer{From: account(from), To: account(to), Amount: 1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		balances[from]--
		balances[to]++
		if res.State != (benchBalances{From: balances[from], To: balances[to]}) {
			b.Fatalf("state %+v, want {%d %d}", res.State, balances[from], balances[to])
		}
	}
	for i := range accounts { // a lap: every part folded once
		transfer(i)
	}
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		transfer(accounts + n)
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
}

// transferStore is a file store with the transfer messages registered
// beside the router's, for the DecideAcross benchmarks.
func transferStore(b *testing.B) *sqlitestore.Store {
	b.Helper()
	reg := routerRegistry(b)
	codec.MustRegister[benchTransfer](reg, "bench.transfer")
	codec.MustRegister[benchTransferred](reg, "bench.transferred")
	s, err := sqlitestore.Install(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
