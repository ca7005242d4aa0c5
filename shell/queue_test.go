package shell_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// sendMail is the job type of the queue tests.
type sendMail struct {
	N int `json:"n"`
}

// unregisteredJob is a job type no registry knows.
type unregisteredJob struct{}

// queueStore opens an empty store of the queue tests' registry by name.
func queueStore(t *testing.T, name string, clk *clock) shell.Store {
	t.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[sendMail](reg, "mail.send")
	if name == "memstore" {
		return memstore.New(reg, memstore.WithClock(clk.Now))
	}
	store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "queue.db"), sqlitestore.Options{Registry: reg, Logger: quiet(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// mailbox records the jobs a queue's Work saw.
type mailbox struct {
	mu   sync.Mutex
	jobs []effects.Job[sendMail]
}

func (b *mailbox) add(job effects.Job[sendMail]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs = append(b.jobs, job)
}

// attempts returns the attempts of job n, in the order they ran.
func (b *mailbox) attempts(n int) []effects.Job[sendMail] {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []effects.Job[sendMail]
	for _, j := range b.jobs {
		if j.Payload.N == n {
			out = append(out, j)
		}
	}
	return out
}

func (b *mailbox) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.jobs)
}

// enqueue appends a job per n, each in a transaction of its own.
func enqueue(t *testing.T, store shell.Store, ns ...int) {
	t.Helper()
	for _, n := range ns {
		if _, err := store.Append(context.Background(), core.Messages(sendMail{N: n}), shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// logged returns the log's messages.
func logged(t *testing.T, store shell.Store) []core.PositionedMessage {
	t.Helper()
	var out []core.PositionedMessage
	for m, err := range store.All(context.Background(), shell.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// jobRouter is a router of q on store, set up.
func jobRouter(t *testing.T, store shell.Store, clk *clock, q any) *shell.Router {
	t.Helper()
	rt, err := shell.NewRouter(store, shell.RouterOptions{Now: clk.Now, Logger: quiet()}, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

// promoteAfter advances the clock by d and promotes what fell due.
func promoteAfter(t *testing.T, store shell.Store, clk *clock, d time.Duration) {
	t.Helper()
	clk.Advance(d)
	if _, err := store.PromoteScheduled(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
}

func parked(t *testing.T, store shell.Store, group string) []shell.ParkedPartition {
	t.Helper()
	ps, err := store.(shell.Parking).ParkedPartitions(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// queueRig is a queue of sendMail jobs named "mail" on a store of its
// own, with a router and a settable clock, recording the jobs it does.
type queueRig struct {
	t     *testing.T
	clk   *clock
	store shell.Store
	box   *mailbox
	q     *effects.Queue[sendMail]
	rt    *shell.Router
}

// newQueueRig builds a rig whose queue records each job, then does
// work(job); set, when given, changes the queue before it is set up.
func newQueueRig(t *testing.T, name string, work func(ctx context.Context, job effects.Job[sendMail]) error, set func(q *effects.Queue[sendMail])) *queueRig {
	r := &queueRig{t: t, clk: newClock(), box: &mailbox{}}
	r.store = queueStore(t, name, r.clk)
	r.q = effects.NewQueue("mail", func(ctx context.Context, job effects.Job[sendMail]) error {
		r.box.add(job)
		return work(ctx, job)
	})
	if set != nil {
		set(r.q)
	}
	r.rt = jobRouter(t, r.store, r.clk, r.q)
	return r
}

// drain drains the router, tolerating parked jobs when tolerate.
func (r *queueRig) drain(tolerate bool) {
	r.t.Helper()
	if err := r.rt.Drain(context.Background(), &shell.DrainOptions{TolerateFailures: tolerate}); err != nil {
		r.t.Fatalf("drain: %v", err)
	}
}

// after advances the clock by d, promotes what fell due and drains.
func (r *queueRig) after(d time.Duration, tolerate bool) {
	r.t.Helper()
	promoteAfter(r.t, r.store, r.clk, d)
	r.drain(tolerate)
}

func TestQueue(t *testing.T) {
	for _, name := range []string{"memstore", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			t.Run("EachJobOnceByManyWorkers", func(t *testing.T) { queueEachJobOnce(t, name) })
			t.Run("FailedJobRetriedAlone", func(t *testing.T) { queueRetries(t, name) })
			t.Run("AttemptsRunOutParks", func(t *testing.T) { queueParks(t, name) })
			t.Run("PermanentParksAtOnce", func(t *testing.T) { queuePermanent(t, name) })
			t.Run("PanicIsAFailedAttempt", func(t *testing.T) { queuePanic(t, name) })
			t.Run("TimeoutIsAFailedAttempt", func(t *testing.T) { queueTimeout(t, name) })
			t.Run("StopIsNoFailure", func(t *testing.T) { queueStop(t, name) })
			t.Run("Keep", func(t *testing.T) { queueKeep(t, name) })
			t.Run("SnoozeIsNoAttempt", func(t *testing.T) { queueSnooze(t, name) })
		})
	}
}

// Every job is done once by a runtime's workers, and deleted.
func queueEachJobOnce(t *testing.T, name string) {
	clk := newClock()
	store := queueStore(t, name, clk)
	var box mailbox
	q := effects.NewQueue("mail", func(_ context.Context, job effects.Job[sendMail]) error {
		box.add(job)
		return nil
	})
	const jobs = 300
	var all []any
	for n := range jobs {
		all = append(all, sendMail{N: n})
	}
	ctx := context.Background()
	if _, err := store.Append(ctx, core.Messages(all[:jobs/2]...), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	rt, err := shell.NewRuntime(store, shell.Config{Workers: 4, Logger: quiet()}, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	enqueue(t, store, func() []int { // the rest while the workers run
		var ns []int
		for n := jobs / 2; n < jobs; n++ {
			ns = append(ns, n)
		}
		return ns
	}()...)
	if err := rt.WaitIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for n := range jobs {
		if got := box.attempts(n); len(got) != 1 || got[0].Attempt != 1 {
			t.Fatalf("job %d done %d times (want once, at attempt 1): %+v", n, len(got), got)
		}
	}
	if got := box.count(); got != jobs {
		t.Fatalf("%d jobs done, want %d", got, jobs)
	}
	if left := logged(t, store); len(left) != 0 {
		t.Fatalf("%d jobs left in the log, want none (deleted on ack)", len(left))
	}
}

// A failing job is retried, after its backoff, as a new job counting its
// attempts and recording its error, while the other jobs are done.
func queueRetries(t *testing.T, name string) {
	r := newQueueRig(t, name, func(_ context.Context, job effects.Job[sendMail]) error {
		if job.Payload.N == 0 && job.Attempt < 3 {
			return fmt.Errorf("smtp down at attempt %d", job.Attempt)
		}
		return nil
	}, nil)
	enqueue(t, r.store, 0, 1, 2)
	r.drain(false) // a retried job is no failure of the group
	if len(r.box.attempts(1)) != 1 || len(r.box.attempts(2)) != 1 {
		t.Fatalf("the other jobs were not done beside the failing one: %+v", r.box.jobs)
	}
	if got := len(r.box.attempts(0)); got != 1 {
		t.Fatalf("job 0 tried %d times before its backoff, want 1", got)
	}
	if left := logged(t, r.store); len(left) != 0 {
		t.Fatalf("the log holds %d messages, want none (the retry is scheduled, not logged)", len(left))
	}
	r.after(999*time.Millisecond, false) // not due yet: DefaultQueueBackoff(1) = 1s
	if got := len(r.box.attempts(0)); got != 1 {
		t.Fatalf("job 0 retried before its backoff: %d attempts", got)
	}
	r.after(time.Millisecond, false)
	r.after(2*time.Second, false) // DefaultQueueBackoff(2)
	tries := r.box.attempts(0)
	if len(tries) != 3 {
		t.Fatalf("job 0 tried %d times, want 3", len(tries))
	}
	first, last := tries[0].Message, tries[2].Message
	for i, j := range tries {
		if j.Attempt != i+1 {
			t.Fatalf("attempt %d reported as %d", i+1, j.Attempt)
		}
	}
	if last.Metadata[effects.ErrorKey] != "smtp down at attempt 2" {
		t.Fatalf("the third attempt's metadata %v, want the second's error", last.Metadata)
	}
	if last.ID == first.ID || last.CorrelationID != first.ID {
		t.Fatalf("a retry is a new message correlated with the first attempt: first %s, last id %s correlation %s", first.ID, last.ID, last.CorrelationID)
	}
	if left := logged(t, r.store); len(left) != 0 {
		t.Fatalf("%d messages left in the log, want none", len(left))
	}
	if ps := parked(t, r.store, "mail"); len(ps) != 0 {
		t.Fatalf("parked %+v, want none", ps)
	}
}

// A job that fails at every attempt is parked when they run out; the
// other jobs flow, the group stays active.
func queueParks(t *testing.T, name string) {
	ctx := context.Background()
	fixed := false
	r := newQueueRig(t, name, func(_ context.Context, job effects.Job[sendMail]) error {
		if job.Payload.N == 0 && !fixed {
			return errors.New("mailbox full")
		}
		return nil
	}, func(q *effects.Queue[sendMail]) {
		q.Attempts = 2
		q.Backoff = func(int) time.Duration { return time.Minute }
	})
	enqueue(t, r.store, 0, 1)
	r.drain(false)
	r.after(time.Minute, true)
	ps := parked(t, r.store, "mail")
	if len(ps) != 1 || !strings.Contains(ps[0].Failure.Error, "mailbox full") {
		t.Fatalf("parked %+v, want job 0 with its error", ps)
	}
	if got := len(r.box.attempts(0)); got != 2 {
		t.Fatalf("job 0 tried %d times, want Attempts = 2", got)
	}
	info, err := r.store.Group(ctx, "mail")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != shell.StatusActive {
		t.Fatalf("group %s, want active beside its parked job", info.Status)
	}
	enqueue(t, r.store, 2)
	r.drain(false)
	if len(r.box.attempts(2)) != 1 {
		t.Fatal("a job enqueued after the parked one was not done")
	}
	if left := logged(t, r.store); len(left) != 1 || left[0].Payload.(sendMail).N != 0 {
		t.Fatalf("the log holds %+v, want the parked job alone", left)
	}

	// The operator retries the parked job once its cause is fixed: it is
	// done, at its last attempt again, and deleted.
	fixed = true
	if _, err := r.store.(shell.Parking).RetryPartition(ctx, "mail", ps[0].Partition); err != nil {
		t.Fatal(err)
	}
	r.drain(false)
	if tries := r.box.attempts(0); len(tries) != 3 || tries[2].Attempt != 2 {
		t.Fatalf("attempts %+v, want a third run, reported as attempt 2", tries)
	}
	if left := logged(t, r.store); len(left) != 0 {
		t.Fatalf("the log holds %+v after the retried job was done, want nothing", left)
	}
}

// A permanent error parks the job at its first attempt.
func queuePermanent(t *testing.T, name string) {
	r := newQueueRig(t, name, func(context.Context, effects.Job[sendMail]) error {
		return core.Permanent(errors.New("no such address"))
	}, nil)
	enqueue(t, r.store, 7)
	r.drain(true)
	if ps := parked(t, r.store, "mail"); len(ps) != 1 {
		t.Fatalf("parked %+v, want the job", ps)
	}
	r.after(time.Hour, true)
	if got := len(r.box.attempts(7)); got != 1 {
		t.Fatalf("a permanent failure was tried %d times, want 1", got)
	}
}

// A panicking job is a failed attempt, retried.
func queuePanic(t *testing.T, name string) {
	r := newQueueRig(t, name, func(_ context.Context, job effects.Job[sendMail]) error {
		if job.Attempt == 1 || job.Payload.N == 2 {
			panic("nil template")
		}
		return nil
	}, func(q *effects.Queue[sendMail]) { q.Attempts = 2 })
	enqueue(t, r.store, 1, 2)
	r.drain(false)
	r.after(time.Second, true)
	tries := r.box.attempts(1)
	if len(tries) != 2 || !strings.Contains(fmt.Sprint(tries[1].Message.Metadata[effects.ErrorKey]), "panic: nil template") {
		t.Fatalf("attempts %+v, want a second one recording the panic", tries)
	}
	// A job that panics at its last attempt is parked as a panic, with the
	// stack where it was recovered, as every panic of user code is.
	ps := parked(t, r.store, "mail")
	if len(ps) != 1 || !ps[0].Failure.Panicked() || !strings.Contains(ps[0].Failure.Stack, "queue_test.go") {
		t.Fatalf("parked %+v, want job 2 parked as a panic with its stack", ps)
	}
}

// A job that runs past Timeout fails its attempt, and is retried.
func queueTimeout(t *testing.T, name string) {
	r := newQueueRig(t, name, func(ctx context.Context, job effects.Job[sendMail]) error {
		if job.Attempt == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, func(q *effects.Queue[sendMail]) { q.Timeout = 20 * time.Millisecond })
	enqueue(t, r.store, 1)
	r.drain(false)
	r.after(time.Second, false)
	tries := r.box.attempts(1)
	if len(tries) != 2 || !strings.Contains(fmt.Sprint(tries[1].Message.Metadata[effects.ErrorKey]), context.DeadlineExceeded.Error()) {
		t.Fatalf("attempts %+v, want a second one after the timeout", tries)
	}
}

// A job cut short by the worker's stop is released as it was: no failed
// attempt, no retry; the next run does it at attempt 1.
func queueStop(t *testing.T, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	var r *queueRig
	r = newQueueRig(t, name, func(ctx context.Context, job effects.Job[sendMail]) error {
		if len(r.box.attempts(job.Payload.N)) == 1 {
			cancel() // the runtime stops hard while the job runs
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, nil)
	enqueue(t, r.store, 1)
	if err := r.rt.Drain(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain = %v, want context.Canceled", err)
	}
	if ps := parked(t, r.store, "mail"); len(ps) != 0 {
		t.Fatalf("a stop parked %+v", ps)
	}
	r.drain(false)
	tries := r.box.attempts(1)
	if len(tries) != 2 || tries[1].Attempt != 1 || tries[1].Message.ID != tries[0].Message.ID {
		t.Fatalf("attempts %+v, want the same job again at attempt 1", tries)
	}
	if left := logged(t, r.store); len(left) != 0 {
		t.Fatalf("%d messages left in the log, want none", len(left))
	}
}

// With Keep, done jobs stay in the log, acknowledged.
func queueKeep(t *testing.T, name string) {
	r := newQueueRig(t, name, func(context.Context, effects.Job[sendMail]) error { return nil },
		func(q *effects.Queue[sendMail]) { q.Keep = true })
	enqueue(t, r.store, 1, 2)
	r.drain(false)
	r.drain(false)
	if r.box.count() != 2 {
		t.Fatalf("%d jobs done, want 2, once each", r.box.count())
	}
	if left := logged(t, r.store); len(left) != 2 {
		t.Fatalf("%d jobs in the log, want both kept", len(left))
	}
}

// A queue refuses to run without a group, a Work function, or a
// registered job type, saying what to do.
func TestQueueRefusedWhenIncomplete(t *testing.T) {
	clk := newClock()
	store := queueStore(t, "memstore", clk)
	work := func(context.Context, effects.Job[sendMail]) error { return nil }
	for _, tc := range []struct {
		name string
		q    any
		want string
	}{
		{"no group", effects.NewQueue("", work), "no Group"},
		{"no work", effects.NewQueue[sendMail]("mail", nil), "no Work"},
		{"negative attempts", &effects.Queue[sendMail]{Group: "mail", Work: work, Attempts: -1}, "negative Attempts (-1)"},
		{"unregistered type", effects.NewQueue("mail", func(context.Context, effects.Job[unregisteredJob]) error { return nil }), "register it with the registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shell.NewRouter(store, shell.RouterOptions{Logger: quiet()}, tc.q)
			var de *core.DefinitionError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewRouter = %v, want a *core.DefinitionError saying %q", err, tc.want)
			}
		})
	}
	// The queue is the only reactor of its job type.
	other := effects.NewQueue("mail.other", func(context.Context, effects.Job[sendMail]) error { return nil })
	if _, err := shell.NewRouter(store, shell.RouterOptions{Logger: quiet()}, effects.NewQueue("mail", work), other); err == nil {
		t.Fatal("two queues of one job type accepted")
	}
	if !slices.Equal(other.HandledTypes(), []string{"mail.send"}) {
		t.Fatalf("HandledTypes = %v after registration, want [mail.send]", other.HandledTypes())
	}
}

// A job that snoozes is done again after its delay, its attempts
// uncounted: with one attempt allowed, it snoozes twice and is done, never
// parked.
func queueSnooze(t *testing.T, name string) {
	var r *queueRig
	r = newQueueRig(t, name, func(_ context.Context, job effects.Job[sendMail]) error {
		if len(r.box.attempts(job.Payload.N)) < 3 {
			return effects.Snooze(time.Minute)
		}
		return nil
	}, func(q *effects.Queue[sendMail]) { q.Attempts = 1 })
	enqueue(t, r.store, 1)
	r.drain(false)
	r.after(59*time.Second, false)
	if got := len(r.box.attempts(1)); got != 1 {
		t.Fatalf("a snoozed job ran again before its delay: %d runs", got)
	}
	r.after(time.Second, false)
	r.after(time.Minute, false)
	tries := r.box.attempts(1)
	if len(tries) != 3 {
		t.Fatalf("%d runs, want 3 (two snoozes, then done)", len(tries))
	}
	for _, j := range tries {
		if j.Attempt != 1 {
			t.Fatalf("runs %+v: a snooze counted as an attempt", tries)
		}
	}
	if ps := parked(t, r.store, "mail"); len(ps) != 0 {
		t.Fatalf("parked %+v, want none", ps)
	}
	if left := logged(t, r.store); len(left) != 0 {
		t.Fatalf("%d messages left in the log, want none", len(left))
	}
}
