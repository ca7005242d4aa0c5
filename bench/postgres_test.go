package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// The benchmarks on PostgreSQL. With SOURCED_TEST_POSTGRES_URL set (the
// pgstore tests' server), BenchmarkAppend and BenchmarkClaimAck gain
// store=postgres sub-benchmarks beside their SQLite ones, whose names stay
// as they were; the benchmarks that have no sub-benchmarks on SQLite
// (Handle, Drain, EndToEnd, QueueDrain) get a PostgreSQL twin of their
// own, BenchmarkPostgres<Name>/store=postgres, since a benchmark that
// gains a sub-benchmark no longer reports its own result. Each store is
// installed under a fresh table prefix and dropped at the end.
//
//	cd bench && SOURCED_TEST_POSTGRES_URL=postgres://... go test -run '^$' -bench 'Append|Handle$|ClaimAck|Drain|EndToEnd' -benchtime 2s

// onPostgres runs f as the sub-benchmark store=postgres/name (store=postgres
// when name is empty) of b when SOURCED_TEST_POSTGRES_URL is set, and does
// nothing otherwise.
func onPostgres(b *testing.B, name string, f func(b *testing.B, url string)) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		return
	}
	if name != "" {
		name = "/" + name
	}
	b.Run("store=postgres"+name, func(b *testing.B) { f(b, url) })
}

// postgresOnly runs f as the sub-benchmark store=postgres of b, skipping
// b, saying how, when SOURCED_TEST_POSTGRES_URL is not set.
func postgresOnly(b *testing.B, f func(b *testing.B, url string)) {
	if os.Getenv(PostgresURLEnv) == "" {
		b.Skip(PostgresURLEnv + " is not set: these benchmarks run on PostgreSQL (see shell/pgstore/internal/pgtest for a throwaway server)")
	}
	onPostgres(b, "", f)
}

// pgOpen installs a pgstore under a fresh prefix, dropped when tb ends.
func pgOpen(tb testing.TB, url string, reg *codec.Registry) *pgstore.Store {
	tb.Helper()
	s := OpenPostgres(tb, url, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tb.Cleanup(func() {
		s.Uninstall(context.Background())
		s.Close()
	})
	return s
}

// BenchmarkPostgresHandle is BenchmarkHandle on PostgreSQL.
func BenchmarkPostgresHandle(b *testing.B) {
	postgresOnly(b, func(b *testing.B, url string) {
		s := pgOpen(b, url, routerRegistry(b))
		handleLoop(b, s, handleSeed(b, s))
	})
}

// BenchmarkPostgresHandleRemote is BenchmarkPostgresHandle with the
// application half a millisecond from the server: through a LatencyProxy
// adding 0.25 ms each way (rtt=500us), where each round trip a Handle
// makes costs what it costs an application server on another host.
func BenchmarkPostgresHandleRemote(b *testing.B) {
	postgresOnly(b, func(b *testing.B, url string) {
		b.Run("rtt=500us", func(b *testing.B) {
			p, via, err := ProxyPostgres(url, 250*time.Microsecond)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close() })
			s := pgOpen(b, via, routerRegistry(b))
			handleLoop(b, s, handleSeed(b, s))
		})
	})
}

// BenchmarkPostgresDrain is BenchmarkDrain on PostgreSQL.
func BenchmarkPostgresDrain(b *testing.B) {
	postgresOnly(b, func(b *testing.B, url string) {
		drainLoop(b, func() shell.Store { return pgOpen(b, url, routerRegistry(b)) })
	})
}

// BenchmarkPostgresEndToEnd is BenchmarkEndToEnd on PostgreSQL.
func BenchmarkPostgresEndToEnd(b *testing.B) {
	postgresOnly(b, func(b *testing.B, url string) {
		endToEndLoop(b, func() shell.Store { return pgOpen(b, url, routerRegistry(b)) }, 1000)
	})
}

// BenchmarkPostgresQueueDrain is BenchmarkQueueDrain on PostgreSQL
// (PostgresQueueDrain): 100,000 jobs, or DRAIN_JOBS (as in bench/peers)
// for a shorter run.
func BenchmarkPostgresQueueDrain(b *testing.B) {
	jobs := 100_000
	if n, err := strconv.Atoi(os.Getenv("DRAIN_JOBS")); err == nil && n > 0 {
		jobs = n
	}
	postgresOnly(b, func(b *testing.B, url string) { PostgresQueueDrain(b, url, jobs) })
}
