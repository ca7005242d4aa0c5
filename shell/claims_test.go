package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Regression tests of issue 11: claims that always come back, failures
// that never hide.

// quiet is a logger that discards everything.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// records is a slog handler that keeps every record, for tests that check
// what was logged and at which level.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// find returns the records whose message contains msg.
func (r *records) find(msg string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if strings.Contains(rec.Message, msg) {
			out = append(out, rec)
		}
	}
	return out
}

// at returns the records at level.
func (r *records) at(level slog.Level) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if rec.Level == level {
			out = append(out, rec)
		}
	}
	return out
}

// attr returns the value of a record's attribute, as a string.
func attr(rec slog.Record, key string) string {
	var v string
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

func offsetsOf(t *testing.T, store shell.Store, group string) []shell.Offset {
	t.Helper()
	page, err := store.ReadOffsets(context.Background(), shell.OffsetQuery{Group: group})
	if err != nil {
		t.Fatal(err)
	}
	return page.Offsets
}

// unpositioned appends a notification per batch in a pair with no source:
// it names no message it processed.
type unpositioned struct{ pure bool }

func (u unpositioned) GroupID() string         { return fmt.Sprintf("shell_test.unpositioned_%v", u.pure) }
func (u unpositioned) HandledTypes() []string  { return []string{"students.notify"} }
func (u unpositioned) PartitionKeys() []string { return []string{"student_id"} }
func (u unpositioned) Pure() bool              { return u.pure }
func (u unpositioned) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	return []effects.Pair{{Signals: []effects.Signal{
		effects.Append{Messages: []core.Message{core.NewMessage(StudentNotified{StudentID: c.Partition["student_id"]})}},
	}}}, nil
}

// Item 1: a reactor returning pairs without a positioned source does not
// strand its partition: the appends commit and the claim is released in
// the same transaction, on both router paths.
func TestPairsWithoutAPositionedSourceReleaseTheClaim(t *testing.T) {
	for _, pure := range []bool{true, false} {
		t.Run(fmt.Sprintf("pure=%v", pure), func(t *testing.T) {
			ctx := context.Background()
			r := unpositioned{pure: pure}
			rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, r)
			store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
			if did, err := rt.HandleNext(ctx, r, "w1"); !did || err != nil {
				t.Fatalf("HandleNext: did %v, err %v", did, err)
			}
			if n := len(byType(readAll(t, store), "students.notified")); n != 1 {
				t.Fatalf("%d notifications appended, want the batch's one", n)
			}
			for _, o := range offsetsOf(t, store, r.GroupID()) {
				if o.Claimed {
					t.Fatalf("the partition is stranded: %+v", o)
				}
			}
			if did, err := rt.HandleNext(ctx, r, "w2"); !did || err != nil {
				t.Fatalf("another worker cannot claim the partition: did %v, err %v", did, err)
			}
		})
	}
}

// pausing is an impure reactor whose first batch waits until resumed (a
// worker frozen by a VM pause, a long GC or an NTP step); the others go
// through at once. Every batch appends one notification per message and
// acknowledges it.
type pausing struct {
	started chan struct{}
	resume  chan struct{}
	mu      sync.Mutex
	calls   int
	// failFirst, when set, is the first call's error, returned once it
	// resumes (a decision made on a history its lost claim no longer
	// protected).
	failFirst error
}

func newPausing() *pausing {
	return &pausing{started: make(chan struct{}, 1), resume: make(chan struct{})}
}

func (p *pausing) HandledTypes() []string  { return []string{"students.notify"} }
func (p *pausing) PartitionKeys() []string { return []string{"student_id"} }
func (p *pausing) Pure() bool              { return false }
func (p *pausing) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if first {
		p.started <- struct{}{}
		<-p.resume
		if p.failFirst != nil {
			return nil, p.failFirst
		}
	}
	var pairs []effects.Pair
	for _, m := range c.Messages {
		n := m.Payload.(NotifyStudent)
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{
			effects.Append{Messages: []core.Message{core.NewMessage(StudentNotified(n))}},
		}})
	}
	return pairs, nil
}

// Item 3: a worker frozen past the claim TTL loses its claim to the
// reaper; when it wakes its ack fails, and that is not the reactor's
// failure: the batch is abandoned (rolled back), the group stays active,
// and the new claimant processes the partition from its cursor.
func TestLostClaimIsAbandoned(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		clk := newClock()
		p := newPausing()
		logs := &records{}
		rt, store := newRouter(t, clk, shell.RouterOptions{Logger: slog.New(logs)}, p)
		lostClaim(t, clk, rt, store, p, logs)
	})
	t.Run("sqlitestore", func(t *testing.T) {
		clk := newClock()
		p := newPausing()
		logs := &records{}
		rt, store := sqliteRouter(t, shell.RouterOptions{Logger: slog.New(logs), Now: clk.Now}, p)
		lostClaim(t, clk, rt, store, p, logs)
	})
}

func lostClaim(t *testing.T, clk *clock, rt *shell.Router, store shell.Store, p *pausing, logs *records) {
	t.Helper()
	ctx := context.Background()
	store.Append(ctx, []core.Message{
		core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c1"}),
		core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c2"}),
	}, shell.AppendOptions{})
	frozen := make(chan error)
	go func() {
		_, err := rt.HandleNext(ctx, p, "w1")
		frozen <- err
	}()
	<-p.started
	clk.Advance(3 * time.Minute)
	if n, err := store.ReleaseStaleClaims(ctx, clk.Now(), 2*time.Minute); err != nil || n != 1 {
		t.Fatalf("reaping the frozen worker's claim: %d, %v", n, err)
	}
	if did, err := rt.HandleNext(ctx, p, "w2"); !did || err != nil {
		t.Fatalf("the new claimant: did %v, err %v", did, err)
	}
	close(p.resume)
	if err := <-frozen; err != nil {
		t.Fatalf("the frozen worker's HandleNext: %v, want nil (its batch, acked or failed, is abandoned: the loss is its lost claim's)", err)
	}
	info, _ := store.Group(ctx, "shell_test.pausing")
	if info.Status != shell.StatusActive || !info.Failure.IsZero() {
		t.Fatalf("group after a lost claim: %+v, want active with no failure", info)
	}
	if n := len(byType(readAll(t, store), "students.notified")); n != 2 {
		t.Fatalf("%d notifications, want the new claimant's 2 (the abandoned batch rolled back)", n)
	}
	for _, o := range offsetsOf(t, store, "shell_test.pausing") {
		if o.Claimed || o.LastPosition != 2 {
			t.Fatalf("offset %+v, want acknowledged at 2 and free", o)
		}
	}
	if warns := logs.find("claim lost"); len(warns) == 0 || warns[0].Level != slog.LevelWarn {
		t.Fatalf("the abandoned batch was not logged at WARN: %v", warns)
	}
}

// A worker frozen past the claim TTL whose batch then FAILS (its decision
// met the new claimant's work: "job done twice") must not fail the group:
// the failure is the lost claim's, not the reactor's. Found by
// pgstore's TestThreeWorkerProcesses, where a slow impure worker's stale
// claim failed the group for every worker.
func TestFailureOnALostClaimIsAbandoned(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		clk := newClock()
		p := newPausing()
		p.failFirst = errors.New("job done twice")
		logs := &records{}
		rt, store := newRouter(t, clk, shell.RouterOptions{Logger: slog.New(logs)}, p)
		lostClaim(t, clk, rt, store, p, logs)
	})
	t.Run("sqlitestore", func(t *testing.T) {
		clk := newClock()
		p := newPausing()
		p.failFirst = errors.New("job done twice")
		logs := &records{}
		rt, store := sqliteRouter(t, shell.RouterOptions{Logger: slog.New(logs), Now: clk.Now}, p)
		lostClaim(t, clk, rt, store, p, logs)
	})
}

// barrierStore holds each caller of Group, once it has read the group,
// until a second caller has read it too (or a second has passed), so that
// two workers that read a group's state before writing it both read it
// before either writes.
type barrierStore struct {
	shell.Store
	mu      sync.Mutex
	waiting chan struct{}
}

func (b *barrierStore) Group(ctx context.Context, group string) (shell.GroupInfo, error) {
	info, err := b.Store.Group(ctx, group)
	b.mu.Lock()
	if b.waiting == nil {
		ch := make(chan struct{})
		b.waiting = ch
		b.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(time.Second):
		}
	} else {
		close(b.waiting)
		b.waiting = nil
		b.mu.Unlock()
	}
	return info, err
}

// twoFailing fails every batch once both of two batches are being
// handled.
type twoFailing struct{ arrived sync.WaitGroup }

func (f *twoFailing) GroupID() string         { return "shell_test.twofailing" }
func (f *twoFailing) HandledTypes() []string  { return []string{"students.notify"} }
func (f *twoFailing) PartitionKeys() []string { return []string{"student_id"} }
func (f *twoFailing) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	f.arrived.Done()
	f.arrived.Wait()
	return nil, fmt.Errorf("%s failed", c.Partition["student_id"])
}

// Item 4: two partitions failing at once each count a retry (the group's
// status is read and written in one transaction): with Retries 1 the
// second failure fails the group.
func TestConcurrentFailuresCountEveryRetry(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	store := &barrierStore{Store: memstore.New(courseRegistry(), memstore.WithClock(clk.Now))}
	f := &twoFailing{}
	f.arrived.Add(2)
	rt, err := shell.NewRouter(store, shell.RouterOptions{Now: clk.Now, Logger: quiet(), ErrorStrategy: shell.ErrorStrategy{Retries: 1, After: time.Minute}}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"}), core.NewMessage(NotifyStudent{StudentID: "s2"})}, shell.AppendOptions{})
	var wg sync.WaitGroup
	for _, w := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.HandleNext(ctx, f, w); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	info, err := store.Store.Group(ctx, "shell_test.twofailing")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != shell.StatusFailed {
		t.Fatalf("after two failures with Retries 1: %s with retry count %d, want failed", info.Status, info.Failure.RetryCount)
	}
}

// cancelling is an impure reactor that cancels the drain's context while
// it handles its batch (a shutdown arriving mid-batch) and then fails the
// way a service client would, with an error that does not wrap the
// context's, or with a panic.
type cancelling struct {
	cancel context.CancelFunc
	panics bool
	calls  int
}

func (c *cancelling) HandledTypes() []string  { return []string{"students.notify"} }
func (c *cancelling) PartitionKeys() []string { return []string{"student_id"} }
func (c *cancelling) Pure() bool              { return false }
func (c *cancelling) HandleClaim(ctx context.Context, cl effects.Claim) ([]effects.Pair, error) {
	c.calls++
	if c.cancel != nil {
		c.cancel()
		if c.panics {
			panic("connection torn down")
		}
		return nil, errors.New("service call aborted")
	}
	return []effects.Pair{{Source: cl.Messages[len(cl.Messages)-1], Signals: []effects.Signal{effects.Ack{}}}}, nil
}

// sqliteRouter is newRouter on a SQLite store in a temporary file (with
// opts.Now as the store's clock too).
func sqliteRouter(t *testing.T, opts shell.RouterOptions, reactors ...any) (*shell.Router, shell.Store) {
	t.Helper()
	store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "router.db"), sqlitestore.Options{Registry: courseRegistry(), Logger: quiet(), Now: opts.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rt, err := shell.NewRouter(store, opts, reactors...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt, store
}

// Item 5: cancelling the drain's context is never a reactor failure: the
// batch is released and the group stays active, on either store.
func TestCancelledDrainIsNotAFailure(t *testing.T) {
	stores := map[string]func(*testing.T, shell.RouterOptions, ...any) (*shell.Router, shell.Store){
		"memstore": func(t *testing.T, opts shell.RouterOptions, rs ...any) (*shell.Router, shell.Store) {
			return newRouter(t, newClock(), opts, rs...)
		},
		"sqlitestore": sqliteRouter,
	}
	for _, name := range []string{"memstore", "sqlitestore"} {
		for _, panics := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/panics=%v", name, panics), func(t *testing.T) {
				c := &cancelling{panics: panics}
				rt, store := stores[name](t, shell.RouterOptions{Logger: quiet()}, c)
				cancelledDrain(t, rt, store, c)
			})
		}
	}
}

func cancelledDrain(t *testing.T, rt *shell.Router, store shell.Store, c *cancelling) {
	t.Helper()
	store.Append(context.Background(), []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := rt.Drain(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain: %v, want an error matching context.Canceled", err)
	}
	info, _ := store.Group(context.Background(), "shell_test.cancelling")
	if info.Status != shell.StatusActive || !info.Failure.IsZero() {
		t.Fatalf("group after a cancelled drain: %+v, want active with no failure", info)
	}
	c.cancel = nil
	if err := rt.Drain(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if c.calls != 2 {
		t.Fatalf("reactor called %d times, want 2 (the cancelled batch was released and handled again)", c.calls)
	}
	for _, o := range offsetsOf(t, store, "shell_test.cancelling") {
		if o.Claimed || o.LastPosition != 1 {
			t.Fatalf("offset %+v, want acknowledged at 1 and free", o)
		}
	}
}

// Item 11: a decider's reaction batches run its sync and after-sync work,
// as core.Sync and core.AfterSync say: after each batch's transaction.
func TestDeciderReactionsRunSyncWork(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var synced, after []string
	record := func(dst *[]string, b core.Batch[[]string]) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b.Messages {
			*dst = append(*dst, fmt.Sprintf("%T", m.Payload))
		}
	}
	d := core.Decider[[]string]{Group: "shell_test.reacting", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
		core.Decide(func(s []string, c EnrolStudent) ([]any, error) { return []any{StudentEnrolled(c)}, nil }),
		core.React(func(_ []string, e StudentEnrolled) []any {
			return []any{NotifyStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
		}),
		core.Sync(func(_ context.Context, _ core.SyncTx, b core.Batch[[]string]) error { record(&synced, b); return nil }),
		core.AfterSync(func(_ context.Context, b core.Batch[[]string]) error { record(&after, b); return nil }),
	)
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, d)
	store.Append(ctx, []core.Message{core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: "s1"})}, shell.AppendOptions{})
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%T", EnrolStudent{}), fmt.Sprintf("%T", StudentEnrolled{})}
	if !slices.Equal(synced, want) || !slices.Equal(after, want) {
		t.Fatalf("sync work ran for %v, after-sync work for %v; want both for %v (the command, then the reaction)", synced, after, want)
	}
}

// busyAtFirst fails its first registrations and heartbeats with ErrBusy,
// as when another process holds the write lock while a runtime starts.
type busyAtFirst struct {
	shell.Store
	mu                sync.Mutex
	registers, beats  int
	busyRegs, busyHBs int
}

func (b *busyAtFirst) RegisterGroup(ctx context.Context, g driver.GroupSpec) error {
	b.mu.Lock()
	b.registers++
	busy := b.registers <= b.busyRegs
	b.mu.Unlock()
	if busy {
		return fmt.Errorf("test: register: %w", shell.ErrBusy)
	}
	return b.Store.RegisterGroup(ctx, g)
}

func (b *busyAtFirst) Heartbeat(ctx context.Context, ids []string, at time.Time) error {
	b.mu.Lock()
	b.beats++
	busy := b.beats <= b.busyHBs
	b.mu.Unlock()
	if busy {
		return fmt.Errorf("test: heartbeat: %w", shell.ErrBusy)
	}
	return b.Store.Heartbeat(ctx, ids, at)
}

// Item 6: Start retries a busy store with back-off, so Supervise does not
// exit under contention; a store busy for longer than ctx allows returns
// the context's error.
func TestStartRetriesABusyStore(t *testing.T) {
	ctx := context.Background()
	logs := &records{}
	store := &busyAtFirst{Store: memstore.New(courseRegistry()), busyRegs: 3, busyHBs: 2}
	cfg := testConfig(shell.SystemClock{})
	cfg.Logger = slog.New(logs)
	rt, err := shell.NewRuntime(store, cfg, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatalf("Start on a store busy for a moment: %v", err)
	}
	defer rt.Stop(ctx)
	if errs := logs.at(slog.LevelError); len(errs) > 0 {
		t.Fatalf("a busy store logged at ERROR: %v", errs[0].Message)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}

	always := &busyAtFirst{Store: memstore.New(courseRegistry()), busyRegs: 1 << 30}
	rt2, err := shell.NewRuntime(always, testConfig(shell.SystemClock{}), notifications)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := rt2.Start(short); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, shell.ErrBusy) {
		t.Fatalf("Start on a store that stays busy: %v, want the deadline and ErrBusy", err)
	}
}

// Item 8: a clean stop removes the workers' heartbeat rows, so the
// workers table lists only live workers.
func TestStopRemovesHeartbeats(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "hb.db")
	store, err := sqlitestore.Install(ctx, db, sqlitestore.Options{Registry: courseRegistry(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	workers := func() int64 {
		conn, err := sqlite.OpenConn(db, sqlite.OpenReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var n int64
		err = sqlitex.ExecuteTransient(conn, "SELECT count(*) FROM "+sqlitestore.DefaultPrefix+"_workers", &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { n = stmt.ColumnInt64(0); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cfg := testConfig(shell.SystemClock{})
	cfg.Workers = 3
	rt, err := shell.NewRuntime(store, cfg, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := workers(); n != 3 {
		t.Fatalf("%d heartbeat rows while running, want 3", n)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := workers(); n != 0 {
		t.Fatalf("%d heartbeat rows after a clean stop, want 0", n)
	}
}

// Item 15: a zero Config field means its default, so a Config naming only
// the workers runs.
func TestZeroConfigMeansDefaults(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rt, err := shell.NewRuntime(store, shell.Config{Workers: 4}, notifications)
	if err != nil {
		t.Fatalf("NewRuntime with Config{Workers: 4}: %v", err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
}

// Item 15: one logger setting for the store and the runtime: a runtime
// with no logger of its own logs to the store's.
func TestRuntimeLogsToTheStoresLogger(t *testing.T) {
	ctx := context.Background()
	logs := &records{}
	store, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "log.db"), sqlitestore.Options{Registry: courseRegistry(), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := testConfig(shell.SystemClock{})
	cfg.Workers = 0
	rt, err := shell.NewRuntime(store, cfg, panicky{})
	if err != nil {
		t.Fatal(err)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	rt.Router().Setup(ctx)
	rt.Router().HandleNext(ctx, panicky{}, "w")
	if got := logs.find("group failed"); len(got) != 1 {
		t.Fatalf("the runtime's router logged %d 'group failed' records to the store's logger, want 1", len(got))
	}
}

// tick advances a simulated clock by d once every periodic task of a
// runtime has armed its timer (four of them), so that each task ticks once
// per call.
func tick(clk *shell.SimClock, d time.Duration) {
	clk.WaitForTimers(4)
	clk.Advance(d)
}

// Item 2: a claim leaked by a live worker (it heartbeats, so it is never
// stale, but no running batch renews the claim) is released once older
// than MaxClaimAge, with a warning naming the group, the partition and the
// worker, and another worker processes the partition. Issue 28 (item 2)
// narrowed this deliberately to claims nobody renews: the claim of a batch
// a worker is running is renewed on every heartbeat and kept however long
// the batch runs (see TestClockJumpWithClaimsInFlight,
// TestBatchPastItsTimeoutFails).
func TestMaxClaimAgeReleasesALiveWorkersClaim(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	logs := &records{}
	cfg := testConfig(clk)
	cfg.Logger = slog.New(logs)
	rt, err := shell.NewRuntime(store, cfg, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Router().Setup(ctx); err != nil {
		t.Fatal(err)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	// A worker of this very process leaks a claim: it heartbeats, so its
	// claim is never stale.
	if c, err := store.ClaimNext(ctx, "students.notifications", "test-worker-1", 10); err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	settle(t, rt)
	for range 18 { // 9 minutes: under MaxClaimAge
		tick(clk, 30*time.Second)
	}
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatalf("a claim 9 minutes old was released (%d processed)", n)
	}
	for range 4 {
		tick(clk, 30*time.Second)
	}
	eventually(t, "the leaked claim is released and its partition processed", func() bool {
		return len(byType(readAll(t, store), "students.notified")) == 1
	})
	warns := logs.find("older than MaxClaimAge")
	if len(warns) != 1 || warns[0].Level != slog.LevelWarn {
		t.Fatalf("%d warnings about the old claim, want 1 at WARN", len(warns))
	}
	if w := warns[0]; attr(w, "group") != "students.notifications" || attr(w, "partition") != "student_id:s1" || attr(w, "worker") != "test-worker-1" {
		t.Fatalf("the warning names group %q, partition %q, worker %q", attr(w, "group"), attr(w, "partition"), attr(w, "worker"))
	}
}

// Item 3, with a clock jump: a +11 min NTP step while a batch is in
// flight makes its claim older than MaxClaimAge. Issue 28 (item 2)
// changed the contract deliberately: the reaper used to release the claim
// and hand the partition to another worker, which ran the batch again;
// now the worker renews the claims of the batches it runs on every
// heartbeat, so the reaper releases nothing, no other worker runs the
// batch, and the batch completes once when it resumes.
func TestClockJumpWithClaimsInFlight(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	logs := &records{}
	cfg := testConfig(clk)
	cfg.Logger = slog.New(logs)
	p := newPausing()
	rt := startRuntime(t, store, cfg, p)
	store.Append(ctx, []core.Message{
		core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c1"}),
		core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c2"}),
	}, shell.AppendOptions{})
	<-p.started
	reaps := enginehooks.RuntimeTasks(rt).Reaper.Ticks()
	tick(clk, 11*time.Minute)
	eventually(t, "the reaper ticks after the jump", func() bool { return enginehooks.RuntimeTasks(rt).Reaper.Ticks() > reaps })
	clk.WaitForTimers(4) // the reaper's tick is over: it armed its next timer
	if warns := logs.find("older than MaxClaimAge"); len(warns) != 0 {
		t.Fatalf("the running batch's claim was released: %s", warns[0].Message)
	}
	close(p.resume)
	settle(t, rt)
	info, _ := store.Group(ctx, "shell_test.pausing")
	if info.Status != shell.StatusActive || !info.Failure.IsZero() || info.NewestProcessed != 2 {
		t.Fatalf("group after the clock jump: %+v, want active, no failure, processed up to 2", info)
	}
	if n := len(byType(readAll(t, store), "students.notified")); n != 2 {
		t.Fatalf("%d notifications, want 2", n)
	}
	p.mu.Lock()
	calls := p.calls
	p.mu.Unlock()
	if calls != 1 || len(logs.find("claim lost")) != 0 {
		t.Fatalf("the batch was handled %d times (%d lost claims), want once", calls, len(logs.find("claim lost")))
	}
	if errs := logs.at(slog.LevelError); len(errs) > 0 {
		t.Fatalf("logged at ERROR: %s", errs[0].Message)
	}
}

// busyHeartbeats fails heartbeats with ErrBusy while busy is set.
type busyHeartbeats struct {
	shell.Store
	mu   sync.Mutex
	busy bool
}

func (b *busyHeartbeats) setBusy(v bool) { b.mu.Lock(); b.busy = v; b.mu.Unlock() }

func (b *busyHeartbeats) Heartbeat(ctx context.Context, ids []string, at time.Time) error {
	b.mu.Lock()
	busy := b.busy
	b.mu.Unlock()
	if busy {
		return fmt.Errorf("test: heartbeat: %w", shell.ErrBusy)
	}
	return b.Store.Heartbeat(ctx, ids, at)
}

// Item 6: a periodic task that finds the store busy logs it at DEBUG,
// then at WARN once it happened several ticks in a row, never at ERROR.
func TestBusyPeriodicTaskIsNotAnError(t *testing.T) {
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := &busyHeartbeats{Store: memstore.New(courseRegistry(), memstore.WithClock(clk.Now))}
	logs := &records{}
	cfg := testConfig(clk)
	cfg.Logger = slog.New(logs)
	rt := startRuntime(t, store, cfg, notifications)
	store.setBusy(true)
	busyTicks := func() []slog.Record { return logs.find("found the store busy") }
	for i := 1; i <= 6; i++ {
		before := enginehooks.RuntimeTasks(rt).Reaper.Ticks()
		tick(clk, 30*time.Second)
		eventually(t, "the reaper ticks", func() bool { return enginehooks.RuntimeTasks(rt).Reaper.Ticks() > before && len(busyTicks()) >= i })
	}
	got := busyTicks()
	for i, rec := range got {
		want := slog.LevelDebug
		if i >= 4 {
			want = slog.LevelWarn
		}
		if rec.Level != want {
			t.Fatalf("busy tick %d logged at %v, want %v", i+1, rec.Level, want)
		}
	}
	if errs := logs.at(slog.LevelError); len(errs) > 0 {
		t.Fatalf("a busy store logged at ERROR: %s", errs[0].Message)
	}
}

// sqliteOnly is a projector whose sync work assumes the SQLite store's
// transaction: on any other store it panics, the mistake that once passed
// an integration test on memstore.
var sqliteOnly = core.Projector[int]{Group: "shell_test.sqlite_only", PartitionBy: []string{"student_id"}}.With(
	core.Evolve(func(n int, _ StudentNotified) int { return n + 1 }),
	core.Sync(func(_ context.Context, tx core.SyncTx, _ core.Batch[int]) error {
		_ = tx.(*sqlitestore.TxContext)
		return nil
	}),
)

// Item 9: Drain reports a group that failed while draining (a projector
// that panicked), naming the group, the partition, the message and the
// cause; DrainOptions.TolerateFailures lets a test that wants the failure
// go on.
func TestDrainReportsAFailedGroup(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, notifications, sqliteOnly)
	res, err := store.Append(ctx, []core.Message{core.NewMessage(StudentNotified{StudentID: "s1"})}, shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Drain(ctx, nil)
	var failed *shell.GroupFailedError
	if !errors.As(err, &failed) {
		t.Fatalf("Drain after a projector panicked: %v, want a *GroupFailedError", err)
	}
	var pe *shell.PanicError
	if failed.Group != "shell_test.sqlite_only" || failed.Status != shell.StatusFailed || failed.Partition["student_id"] != "s1" ||
		failed.MessageType != "students.notified" || failed.MessageID != res.Messages[0].ID || failed.Position != 1 || !errors.As(err, &pe) {
		t.Fatalf("%+v, want the group, failed, partition s1, the message (students.notified %s at 1), and the panic", failed, res.Messages[0].ID)
	}
	for _, want := range []string{"shell_test.sqlite_only", "students.notified", "student_id:s1", "panic"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	rt2, store2 := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, sqliteOnly)
	store2.Append(ctx, []core.Message{core.NewMessage(StudentNotified{StudentID: "s1"})}, shell.AppendOptions{})
	if err := rt2.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
		t.Fatalf("Drain tolerating failures: %v", err)
	}
	if info, _ := store2.Group(ctx, "shell_test.sqlite_only"); info.Status != shell.StatusFailed {
		t.Fatalf("the tolerated failure is not recorded: %+v", info)
	}
}

// Item 9: WaitIdle reports a group that failed in a worker.
func TestWaitIdleReportsAFailedGroup(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	cfg := testConfig(shell.SystemClock{})
	cfg.Logger = quiet()
	rt := startRuntime(t, store, cfg, notifications, sqliteOnly)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := rt.WaitIdle(wctx, 0)
	var failed *shell.GroupFailedError
	if !errors.As(err, &failed) || failed.Group != "shell_test.sqlite_only" || failed.MessageType != "students.notified" {
		t.Fatalf("WaitIdle after a projector failed in a worker: %v, want its *GroupFailedError", err)
	}
	if err := rt.WaitIdle(wctx, 0); err != nil {
		t.Fatalf("the failure is reported once: %v", err)
	}
}

// myError is an application error type.
type myError struct{ code int }

func (e *myError) Error() string { return fmt.Sprintf("code %d", e.code) }

// wrapping fails with an application error wrapped by fmt.Errorf, or
// panics with one.
type wrapping struct{ panics bool }

func (w wrapping) GroupID() string         { return fmt.Sprintf("shell_test.wrapping_%v", w.panics) }
func (w wrapping) HandledTypes() []string  { return []string{"students.notify"} }
func (w wrapping) PartitionKeys() []string { return []string{"student_id"} }
func (w wrapping) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	err := fmt.Errorf("notifying %s: %w", c.Partition["student_id"], &myError{code: 7})
	if w.panics {
		panic(err)
	}
	return nil, err
}

// Item 10: the failure recorded is the one that happened: the error's own
// type (not *fmt.wrapError), a stack only for a panic, and the partition
// and message that failed, stored (Stats shows them) and shown.
func TestFailureRecordsWhatHappened(t *testing.T) {
	ctx := context.Background()
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics=%v", panics), func(t *testing.T) {
			w := wrapping{panics: panics}
			rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, w)
			res, _ := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
			rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
			st, err := store.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f := st.Groups[0].Failure
			wantType := "*shell_test.myError"
			if panics {
				wantType = "panic(*shell_test.myError)"
			}
			if f.ErrorType != wantType || !strings.Contains(f.Error, "notifying s1: code 7") {
				t.Fatalf("recorded %q: %q, want %q", f.ErrorType, f.Error, wantType)
			}
			if f.Partition != "student_id:s1" || f.MessageType != "students.notify" || f.MessageID != res.Messages[0].ID.String() || f.Position != 1 {
				t.Fatalf("failure %+v, want partition student_id:s1 and message students.notify %s at 1", f, res.Messages[0].ID)
			}
			if panics != f.Panicked() || panics && !strings.Contains(f.Stack, "wrapping") || !panics && !strings.HasPrefix(f.Stack, "error returned by the reactor of shell_test.wrapping_false") {
				t.Fatalf("stack %q for panics=%v: a panic's stack is where it happened; a returned error's says where it surfaced", f.Stack, panics)
			}
			if strings.Contains(f.Stack, "failureOf") {
				t.Fatalf("the stack is the router's own: %s", f.Stack)
			}
		})
	}
}

// Item 2: MaxClaimAge is read from the environment, defaults to 10
// minutes and must be well above the inline budget.
func TestMaxClaimAgeConfig(t *testing.T) {
	if got := shell.DefaultConfig().MaxClaimAge; got != 10*time.Minute {
		t.Fatalf("default MaxClaimAge %v, want 10m", got)
	}
	cfg, err := shell.Config{}.FromEnv(func(k string) string {
		return map[string]string{shell.EnvMaxClaimAge: "30m"}[k]
	})
	if err != nil || cfg.MaxClaimAge != 30*time.Minute {
		t.Fatalf("%s=30m: %v, %v", shell.EnvMaxClaimAge, cfg.MaxClaimAge, err)
	}
	bad := shell.Config{InlineBudget: time.Second, MaxClaimAge: time.Second}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "MaxClaimAge") {
		t.Fatalf("MaxClaimAge at the inline budget: %v, want an error naming MaxClaimAge", err)
	}
	// A running batch's claim is renewed once per heartbeat: MaxClaimAge
	// must be longer (issue 28, item 2).
	short := shell.Config{MaxClaimAge: 600 * time.Millisecond} // the heartbeat defaults to 30 s
	if err := short.Validate(); err == nil || !strings.Contains(err.Error(), "longer than HeartbeatInterval") {
		t.Fatalf("MaxClaimAge under the heartbeat interval: %v, want an error naming HeartbeatInterval", err)
	}
	short.HeartbeatInterval = 100 * time.Millisecond
	if err := short.Validate(); err != nil {
		t.Fatalf("MaxClaimAge above the heartbeat interval: %v", err)
	}
}
