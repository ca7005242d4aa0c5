package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The router benchmarks' domain: deposits into accounts, a decider that
// keeps a balance, and a projector that counts deposits.
type (
	benchDeposit struct {
		Account string `json:"account" sourced:"required"`
		Amount  int    `json:"amount"`
	}
	benchDeposited struct {
		Account string `json:"account"`
		Amount  int    `json:"amount"`
	}
)

func routerRegistry(b testing.TB) *codec.Registry {
	b.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[benchDeposit](reg, "bench.deposit")
	codec.MustRegister[benchDeposited](reg, "bench.deposited")
	return reg
}

var benchAccounts = core.Decider[int]{Group: "bench.accounts", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(balance int, e benchDeposited) int { return balance + e.Amount }),
	core.Decide(func(balance int, c benchDeposit) ([]any, error) {
		if c.Amount <= 0 {
			return nil, fmt.Errorf("a deposit must be positive")
		}
		return []any{benchDeposited(c)}, nil
	}),
)

var benchCounter = core.Projector[int]{Group: "bench.counter", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(n int, _ benchDeposited) int { return n + 1 }),
)

func routerStore(b *testing.B) *sqlitestore.Store {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlitestore.Install(context.Background(), path, sqlitestore.Options{Registry: routerRegistry(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func account(i int) string { return "acct-" + strconv.Itoa(i) }

// handleStore is the store of the Handle benchmarks: the decider's group
// registered, and b.N accounts of 10 deposits each, one per command.
func handleStore(b *testing.B) (*sqlitestore.Store, int) {
	s := routerStore(b)
	return s, handleSeed(b, s)
}

// handleSeed registers the decider's group in s and appends b.N accounts
// of 10 deposits each; it returns b.N.
func handleSeed(b *testing.B, s shell.Store) int {
	seedAccounts(b, s, b.N)
	return b.N
}

// seedAccounts registers the decider's group in s and appends n accounts
// of 10 deposits each.
func seedAccounts(tb testing.TB, s shell.Store, n int) {
	ctx := context.Background()
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchAccounts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		tb.Fatal(err)
	}
	for from := 0; from < n; from += 1000 {
		var seed []core.Message
		for i := from; i < min(from+1000, n); i++ {
			for range 10 {
				seed = append(seed, core.NewMessage(benchDeposited{Account: account(i), Amount: 1}))
			}
		}
		if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkHandle handles commands synchronously (Handle: read the
// partition, decide, append command and event under the guard, move the
// offset: one transaction) on a decider whose partition holds 10 events,
// on a file database; it reports commands per second.
func BenchmarkHandle(b *testing.B) {
	s, n := handleStore(b)
	handleLoop(b, s, n)
}

// handleLoop handles n commands synchronously on s, one per account of
// handleSeed, and reports cmds/s.
func handleLoop(b *testing.B, s shell.Store, n int) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		res, err := shell.Handle(ctx, s, benchAccounts, benchDeposit{Account: account(i), Amount: 5}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if res.State != 15 {
			b.Fatalf("balance %d, want 15", res.State)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
}

// BenchmarkHandleParallel handles commands synchronously from 16
// goroutines at once (a web server's request handlers), each command in a
// partition of its own holding 10 events; the store's group commit lets
// concurrent Handles share commits. It reports commands per second.
func BenchmarkHandleParallel(b *testing.B) {
	ctx := context.Background()
	s, n := handleStore(b)
	var next atomic.Int64
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1) - 1)
			res, err := shell.Handle(ctx, s, benchAccounts, benchDeposit{Account: account(i), Amount: 5}, nil)
			if err != nil {
				b.Error(err)
				return
			}
			if res.State != 15 {
				b.Errorf("balance %d, want 15", res.State)
				return
			}
		}
	})
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
}

// BenchmarkDrain appends 1,000 partitions x 10 commands up front, then the
// router drains a decider (deciding the 10,000 commands) and a projector
// (projecting the 10,000 events); msgs/s counts the 20,000 messages the two
// groups processed.
func BenchmarkDrain(b *testing.B) {
	drainLoop(b, func() shell.Store { return routerStore(b) })
}

// drainLoop is BenchmarkDrain on the stores open returns (one per
// iteration).
func drainLoop(b *testing.B, open func() shell.Store) {
	ctx := context.Background()
	const partitions, perPartition = 1000, 10
	for range b.N {
		b.StopTimer()
		s := open()
		rt, err := shell.NewRouter(s, shell.RouterOptions{Logger: quiet()}, benchAccounts, benchCounter)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.Setup(ctx); err != nil {
			b.Fatal(err)
		}
		var cmds []core.Message
		for i := range partitions * perPartition {
			cmds = append(cmds, core.NewMessage(benchDeposit{Account: account(i % partitions), Amount: 1}))
		}
		if _, err := s.Append(ctx, cmds, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := rt.Drain(ctx, nil); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		st, err := s.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if want := int64(2 * partitions * perPartition); st.MaxPosition != want {
			b.Fatalf("log holds %d messages, want %d", st.MaxPosition, want)
		}
		b.ReportMetric(float64(2*partitions*perPartition)/elapsed.Seconds(), "msgs/s")
		b.StartTimer()
	}
}

// storeCommits is the write transactions a store committed so far (-1
// when it does not count them).
func storeCommits(s shell.Store) int64 {
	if c, ok := s.(interface{ Commits() int64 }); ok {
		return c.Commits()
	}
	return -1
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// BenchmarkEndToEnd appends 10,000 commands from one goroutine, spread
// round-robin over 10, 1,000 or 100,000 partitions (accounts; with
// 100,000 each command opens a partition of its own), while the runtime
// (2 workers) runs a decider and a projector, and times until every group
// caught up. It reports commands per second, the latency from a
// command's append to the commit of the batch that decided it (p50-us,
// p99-us), and the write transactions committed per command
// (commits/cmd, on a store that counts them: appends, decisions and
// projections together, however group commit shared them). The runtime
// takes its settings from the environment over the defaults
// (SOURCED_WAKE_COOLDOWN=-1ms: without the wake cooldown).
func BenchmarkEndToEnd(b *testing.B) {
	for _, partitions := range []int{10, 1000, 100_000} {
		b.Run("partitions="+strconv.Itoa(partitions), func(b *testing.B) {
			endToEndLoop(b, func() shell.Store { return routerStore(b) }, partitions)
		})
	}
}

// endToEndLoop is BenchmarkEndToEnd on the stores open returns (one per
// iteration), with commands spread over partitions accounts.
func endToEndLoop(b *testing.B, open func() shell.Store, partitions int) {
	ctx := context.Background()
	const commands = 10000
	for range b.N {
		b.StopTimer()
		s := open()
		var mu sync.Mutex
		appended := make(map[uuid.UUID]time.Time, commands)
		var latencies []time.Duration
		timed := benchAccounts.With(core.AfterSync(func(_ context.Context, batch core.Batch[int]) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, m := range batch.Messages {
				if at, ok := appended[m.ID]; ok {
					latencies = append(latencies, now.Sub(at))
				}
			}
			return nil
		}))
		// The environment tunes the runtime (shell.Config.FromEnv):
		// SOURCED_WAKE_COOLDOWN=-1ms measures it without the wake cooldown.
		cfg, err := shell.DefaultConfig().FromEnv(nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Logger = quiet()
		rt, err := shell.NewRuntime(s, cfg, timed, benchCounter)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.Start(ctx); err != nil {
			b.Fatal(err)
		}
		commits := storeCommits(s)
		b.StartTimer()
		start := time.Now()
		for i := range commands {
			id := uuid.Must(uuid.NewV7())
			m := core.NewMessage(benchDeposit{Account: account(i % partitions), Amount: 1})
			m.ID = id
			mu.Lock()
			appended[id] = time.Now()
			mu.Unlock()
			if _, err := s.Append(ctx, []core.Message{m}, shell.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		wait, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err = rt.WaitIdle(wait, 0)
		cancel()
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		if len(latencies) != commands {
			b.Fatalf("%d commands decided, want %d", len(latencies), commands)
		}
		slices.Sort(latencies)
		p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
		mu.Unlock()
		b.ReportMetric(float64(commands)/elapsed.Seconds(), "cmds/s")
		b.ReportMetric(float64(p50.Microseconds()), "p50-us")
		b.ReportMetric(float64(p99.Microseconds()), "p99-us")
		if commits >= 0 {
			b.ReportMetric(float64(storeCommits(s)-commits)/commands, "commits/cmd")
		}
		b.StartTimer()
	}
}
