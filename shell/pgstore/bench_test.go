package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// The benchmarks of bench/ (same names, same units) on PostgreSQL, as
// store=postgres sub-benchmarks; bench/ keeps the SQLite ones. They need
// SOURCED_TEST_POSTGRES_URL, e.g.
//
//	cd shell/pgstore && go test -run '^$' -bench . -benchtime 2s

func benchStore(b *testing.B, reg *codec.Registry) *pgstore.Store {
	b.Helper()
	s, err := pgstore.Install(context.Background(), pgtest.URL(b), pgstore.Options{Registry: reg, Prefix: pgtest.Prefix(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		s.Uninstall(context.Background())
		s.Close()
	})
	return s
}

// BenchmarkAppend appends batches of one and of 100 messages, each in a
// transaction of its own, and reports msgs/s.
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("store=postgres/batch=%d", batch), func(b *testing.B) {
			reg, _ := storetest.NewRegistry()
			s := benchStore(b, reg)
			ctx := context.Background()
			msgs := make([]core.Message, batch)
			b.ResetTimer()
			for i := range b.N {
				for j := range msgs {
					msgs[j] = core.NewMessage(storetest.UserJoinedCourse{CourseName: fmt.Sprint("c", (i*batch+j)%50), UserID: fmt.Sprint("u", i*batch+j)})
				}
				if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkClaimIdle measures a poll of a group whose 10,000 partitions
// are all caught up: the O(1) idle probe.
func BenchmarkClaimIdle(b *testing.B) {
	b.Run("store=postgres/partitions=10000", func(b *testing.B) {
		reg, _ := storetest.NewRegistry()
		s := benchStore(b, reg)
		ctx := context.Background()
		if err := s.RegisterGroup(ctx, shell.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
			b.Fatal(err)
		}
		var msgs []core.Message
		for i := range 10_000 {
			msgs = append(msgs, core.NewMessage(storetest.DeviceRegistered{DeviceID: fmt.Sprint("d", i)}))
		}
		res, err := s.Append(ctx, msgs, shell.AppendOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// Every partition caught up (advanced past its message, as a
		// synchronously handled command is).
		err = s.Update(ctx, func(tx shell.Tx) error {
			for i, pos := range res.Positions {
				if ok, err := tx.AdvanceOffset("devices", map[string]string{"device_id": fmt.Sprint("d", i)}, pos); err != nil || !ok {
					return fmt.Errorf("advance: %v %v", ok, err)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		s.Optimize(ctx)
		b.ResetTimer()
		for range b.N {
			c, err := s.ClaimNext(ctx, "devices", "w", 100)
			if err != nil || c != nil {
				b.Fatal(c, err)
			}
		}
	})
}

// BenchmarkClaimAck claims and acknowledges one-message batches of 1,000
// partitions, and reports claims/s.
func BenchmarkClaimAck(b *testing.B) {
	b.Run("store=postgres", func(b *testing.B) {
		reg, _ := storetest.NewRegistry()
		s := benchStore(b, reg)
		ctx := context.Background()
		if err := s.RegisterGroup(ctx, shell.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
			b.Fatal(err)
		}
		var msgs []core.Message
		for i := range b.N {
			msgs = append(msgs, core.NewMessage(storetest.DeviceRegistered{DeviceID: fmt.Sprint("d", i%1000)}))
			if len(msgs) == 1000 || i == b.N-1 {
				if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
				msgs = msgs[:0]
			}
		}
		b.ResetTimer()
		for range b.N {
			c, err := s.ClaimNext(ctx, "devices", "w", 1)
			if err != nil || c == nil {
				b.Fatal(c, err)
			}
			if err := s.Ack(ctx, c, c.Last()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	})
}

// queueJob is the payload of QueueDrain's no-op jobs.
type queueJob struct {
	Seq int `json:"seq"`
}

// drainQueue is bench.QueueDrain's delete-on-ack queue: exclusive, with
// no partition keys (one partition per job), each job deleted by the
// transaction of its ack, counted after that commit.
type drainQueue struct {
	target int64
	done   atomic.Int64
	all    chan struct{}
}

func (q *drainQueue) HandledTypes() []string { return []string{"bench.queue_job"} }
func (q *drainQueue) Exclusive() bool        { return true }
func (q *drainQueue) GroupID() string        { return "bench.queue" }

func (q *drainQueue) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	pairs := make([]effects.Pair, len(c.Messages))
	for i, m := range c.Messages {
		pairs[i] = effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{Delete: true}}}
	}
	if n := int64(len(pairs)); n > 0 {
		last := &pairs[n-1]
		last.Signals = append(last.Signals, effects.AfterSync{Work: func(context.Context) error {
			if q.done.Add(n) == q.target {
				close(q.all)
			}
			return nil
		}})
	}
	return pairs, nil
}

// BenchmarkQueueDrain is bench.QueueDrain on PostgreSQL: 20,000 no-op
// jobs appended (not timed), then drained by a Runtime with two workers;
// it reports jobs/s counted on commit.
func BenchmarkQueueDrain(b *testing.B) {
	b.Run("store=postgres", func(b *testing.B) {
		jobs := envInt("SOURCED_BENCH_JOBS", 20_000)
		ctx := context.Background()
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		b.StopTimer()
		for range b.N {
			reg := codec.NewRegistry()
			codec.MustRegister[queueJob](reg, "bench.queue_job")
			s := benchStore(b, reg)
			q := &drainQueue{target: int64(jobs), all: make(chan struct{})}
			cfg := shell.DefaultConfig()
			cfg.Workers = 2
			cfg.Logger = quiet
			cfg.ProcessID = "bench"
			rt, err := shell.NewRuntime(s, cfg, q)
			if err != nil {
				b.Fatal(err)
			}
			if err := rt.Router().Setup(ctx); err != nil {
				b.Fatal(err)
			}
			var msgs []core.Message
			for i := range jobs {
				msgs = append(msgs, core.NewMessage(queueJob{Seq: i}))
				if len(msgs) == 5000 || i == jobs-1 {
					if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
						b.Fatal(err)
					}
					msgs = msgs[:0]
				}
			}
			b.StartTimer()
			if err := rt.Start(ctx); err != nil {
				b.Fatal(err)
			}
			select {
			case <-q.all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("%d of %d jobs done in 5 minutes", q.done.Load(), jobs)
			}
			b.StopTimer()
			if err := rt.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			page, err := s.ReadAll(ctx, shell.ReadAllOptions{Limit: 1})
			if err != nil || len(page.Messages) != 0 {
				b.Fatalf("after the drain the log holds %v (%v)", page.Messages, err)
			}
		}
		b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
