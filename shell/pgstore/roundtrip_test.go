package pgstore_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// roundTrips counts what the store sends to the server: each statement
// sent alone and each batch is one round trip, but for what no operation
// sends, sent at moments no test can pin to one operation: the store's
// checks of the stored horizon and of its tables' sizes, once a second;
// the notifications to other processes, sent after commits on a
// connection of their own, coalesced (see TestWakesCoalesce); and the
// setting of a new connection of the pool (which opens one when an
// operation finds all of them taken, by a notification for one).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.HasSuffix(d.SQL, pgstore.HealMark) && d.SQL != pgstore.NotifySQL && d.SQL != pgstore.ConnectSQL {
		r.n.Add(1)
	}
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if strings.HasSuffix(q.SQL, pgstore.HealMark) {
			return ctx
		}
	}
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// rtJob is a job of the delete-on-ack queue of TestQueueRoundTrips.
type rtJob struct {
	Seq int `json:"seq"`
}

// rtQueue is a delete-on-ack queue (exclusive, partitioned by message id)
// whose batches ack each job with delete, as bench.QueueDrain's does.
type rtQueue struct{ done atomic.Int64 }

func (q *rtQueue) HandledTypes() []string { return []string{"rt.job"} }
func (q *rtQueue) Exclusive() bool        { return true }
func (q *rtQueue) GroupID() string        { return "rt.queue" }
func (q *rtQueue) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	pairs := make([]effects.Pair, len(c.Messages))
	for i, m := range c.Messages {
		pairs[i] = effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{Delete: true}}}
	}
	q.done.Add(int64(len(pairs)))
	return pairs, nil
}

// TestQueueRoundTrips drains a delete-on-ack queue with one worker
// through the router (HandleNext until it finds nothing) and counts the
// round trips per job, so that a change that adds round trips to the
// queue's settlement shows (the drain on PostgreSQL is bound by them, not
// by the server's work). The first jobs warm the statement caches.
func TestQueueRoundTrips(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[rtJob](reg, "rt.job")
	rts := &roundTrips{}
	s := open(t, pgstore.Options{Registry: reg, Tracer: rts, MaxConns: 2})

	ctx := context.Background()
	q := &rtQueue{}
	cfg := shell.DefaultConfig()
	cfg.Workers = 1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := shell.NewRuntime(s, cfg, q)
	if err != nil {
		t.Fatal(err)
	}
	router := rt.Router()
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	appendJobs := func(n int) {
		msgs := make([]core.Message, n)
		for i := range msgs {
			msgs[i] = core.Message{Payload: rtJob{Seq: i}}
		}
		if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// drain handles until the queue is empty, the last call finding it so.
	drain := func() {
		for {
			did, err := router.HandleNext(ctx, q, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if !did {
				return
			}
		}
	}
	const warm, jobs = 50, 1000
	appendJobs(warm)
	drain()
	appendJobs(jobs)
	before := rts.n.Load()
	drain()
	if got := q.done.Load(); got != warm+jobs {
		t.Fatalf("%d jobs handled, want %d", got, warm+jobs)
	}
	per := float64(rts.n.Load()-before) / jobs
	t.Logf("%.3f round trips per job (%d jobs, one worker)", per, jobs)
	// The router claims many jobs per transaction and the store settles
	// them (deletes, acks, the next claims) in a few round trips whatever
	// their number: one round trip per job (or more, 3.95 when each job
	// took its own claim, acknowledgement and transaction) means that
	// batching broke.
	if per > 0.5 {
		t.Errorf("%.3f round trips per job, want at most 0.5", per)
	}
	if did, err := router.HandleNext(ctx, q, "w1"); err != nil || did {
		t.Fatalf("after the drain: handled %v, %v; want an empty queue", did, err)
	}
	page, err := s.ReadAll(ctx, driver.ReadAllOptions{Limit: 1})
	if err != nil || len(page.Messages) != 0 {
		t.Fatalf("after the drain the log holds %v (%v), want no job", page.Messages, err)
	}
}

// TestClaimAckRoundTrips counts the round trips of a claim and of an ack
// of a keyed partition, each in a transaction of its own (ClaimNext, Ack):
// the claim statement with BEGIN, and COMMIT (a group whose last claim
// found work is not probed first); the ack with BEGIN and COMMIT in one
// batch. Once the group is drained, a claim that finds nothing puts the
// idle probe back: each claim after it is that one round trip.
func TestClaimAckRoundTrips(t *testing.T) {
	rts := &roundTrips{}
	s := open(t, pgstore.Options{Registry: jobRegistry(), Tracer: rts, MaxConns: 2})
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "jobs.shards", PartitionBy: []string{"shard"}, Handled: []string{"jobs.job"}}); err != nil {
		t.Fatal(err)
	}
	var msgs []core.Message
	for i := range 40 {
		msgs = append(msgs, core.Message{Payload: Job{JobID: strconv.Itoa(i), Shard: strconv.Itoa(i % 20)}})
	}
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var claims, acks int64
	for i := range 20 {
		before := rts.n.Load()
		c, err := s.ClaimNext(ctx, "jobs.shards", "w1", 10)
		if err != nil || c == nil || len(c.Messages) != 2 {
			t.Fatalf("claim %d: %+v, %v; want a shard's two jobs", i, c, err)
		}
		mid := rts.n.Load()
		if err := s.Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
		if i >= 5 { // the statement caches warm
			claims += mid - before
			acks += rts.n.Load() - mid
		}
	}
	t.Logf("%.1f round trips per claim, %.1f per ack", float64(claims)/15, float64(acks)/15)
	if claims > 2*15 || acks > 1*15 {
		t.Errorf("%d round trips for 15 claims and %d for 15 acks, want at most 2 and 1 each", claims, acks)
	}
	for i := range 4 {
		before := rts.n.Load()
		c, err := s.ClaimNext(ctx, "jobs.shards", "w1", 10)
		if err != nil || c != nil {
			t.Fatalf("claim %d of the drained group: %+v, %v; want none", i, c, err)
		}
		if n := rts.n.Load() - before; i > 0 && n != 1 {
			t.Errorf("claim %d of the drained group: %d round trips, want the probe's one", i, n)
		}
	}
}

// TestHandleRoundTrips counts the round trips of shell.Handle on a
// partition of its own: the read (before the transaction), and the
// COMMIT, which carries BEGIN, the command's append and the offset's
// move past it (driver.DeferredCommandAppender), and the events' append
// (driver.AppendOptions.Deferred). Sent one by one they were five; with
// the command's append in a round trip of its own (its position given to
// the decider), three. The balances show that what went with the COMMIT
// was written, the positions that each command's is the one stored.
// (The notification to other processes after the commit goes on a
// connection of its own, off the command's path: not counted.)
func TestHandleRoundTrips(t *testing.T) {
	rts := &roundTrips{}
	s := open(t, pgstore.Options{Registry: rlRegistry(t), Tracer: rts, MaxConns: 2})
	ctx := context.Background()
	const warm, n = 5, 20
	var total int64
	for i := range warm + n {
		before := rts.n.Load()
		acct := "a" + strconv.Itoa(i%3)
		res, err := shell.Handle(ctx, s, rlAccounts, rlDeposit{Account: acct, Amount: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2 * (i/3 + 1); res.State != want {
			t.Fatalf("command %d: balance %d, want %d", i, res.State, want)
		}
		if len(res.Events) != 1 {
			t.Fatalf("command %d: %d events, want 1", i, len(res.Events))
		}
		if i >= warm { // the first registers the group and warms the caches
			total += rts.n.Load() - before
		}
		got, err := s.ReadPartition(ctx, map[string]string{"account": acct}, []string{"rl.deposit"}, driver.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if last := got.Messages[len(got.Messages)-1]; last.ID != res.Command.ID || last.Position != res.Position || res.Position == 0 {
			t.Fatalf("command %d: Handle says position %d, the log holds it at %d (%v, want %v)", i, res.Position, last.Position, last.ID, res.Command.ID)
		}
	}
	t.Logf("%.2f round trips per Handle", float64(total)/n)
	if total > 2*n {
		t.Errorf("%d round trips for %d Handles, want at most 2 each", total, n)
	}
	// Every event and every offset's move went with a COMMIT: the
	// balances read back, and the group has nothing left to claim.
	for i := range 3 {
		acct := "a" + strconv.Itoa(i)
		bal, _, err := shell.Load(ctx, s, rlAccounts, map[string]string{"account": acct}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for j := range warm + n {
			if j%3 == i {
				want += 2
			}
		}
		if bal != want {
			t.Errorf("%s: balance %d read back, want %d", acct, bal, want)
		}
	}
	if c, err := s.ClaimNext(ctx, rlAccounts.Group, "w1", 10); err != nil || c != nil {
		t.Errorf("after the Handles a worker claimed %+v (%v), want nothing: every offset moved past its command", c, err)
	}
}

// The first append after this store registered a group is one round trip,
// as every other: the configuration the registration committed is the
// one the store checks appends against. It kept the version cached
// before, so that the append was refused for a changed configuration,
// the configuration read again and the append sent again (four round
// trips where one does; the first command after every runtime's start).
func TestAppendAfterRegistrationIsOneRoundTrip(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[rtJob](reg, "rt.job")
	rts := &roundTrips{}
	s := open(t, pgstore.Options{Registry: reg, Tracer: rts, MaxConns: 2})
	ctx := t.Context()
	appendJob := func() int64 {
		t.Helper()
		before := rts.n.Load()
		if _, err := s.Append(ctx, []core.Message{{Payload: rtJob{}}}, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		return rts.n.Load() - before
	}
	appendJob() // the configuration read, then cached
	for _, spec := range []driver.GroupSpec{
		{ID: "rt.queue", Exclusive: true, Handled: []string{"rt.job"}},
		{ID: "rt.queue", Exclusive: true, Handled: []string{"rt.job"}, Label: "relabelled"}, // no new version
	} {
		if err := s.RegisterGroup(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if n := appendJob(); n != 1 {
			t.Fatalf("the first append after registering %+v: %d round trips, want 1", spec, n)
		}
	}
}
