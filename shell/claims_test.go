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
	"github.com/sourced-go/sourced/shell"
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
	ctx := context.Background()
	clk := newClock()
	p := newPausing()
	logs := &records{}
	rt, store := newRouter(t, clk, shell.RouterOptions{Logger: slog.New(logs)}, p)
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
		t.Fatalf("the frozen worker's HandleNext: %v, want nil (its batch is abandoned, not failed)", err)
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
	if warns := logs.find("claim"); len(warns) == 0 || warns[0].Level != slog.LevelWarn {
		t.Fatalf("the abandoned batch was not logged at WARN: %v", warns)
	}
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

// Item 5: cancelling the drain's context is never a reactor failure: the
// batch is released and the group stays active.
func TestCancelledDrainIsNotAFailure(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics=%v", panics), func(t *testing.T) {
			c := &cancelling{panics: panics}
			rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, c)
			store.Append(context.Background(), []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			c.cancel = cancel
			if err := rt.Drain(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("Drain: %v, want an error matching context.Canceled", err)
			}
			info, _ := store.Group(context.Background(), "shell_test.cancelling")
			if info.Status != shell.StatusActive || !info.Failure.IsZero() {
				t.Fatalf("group after a cancelled drain: %+v, want active with no failure", info)
			}
			c.cancel = nil
			if err := rt.Drain(context.Background()); err != nil {
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
		})
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
		core.Sync(func(_ context.Context, _ core.Tx, b core.Batch[[]string]) error { record(&synced, b); return nil }),
		core.AfterSync(func(_ context.Context, b core.Batch[[]string]) error { record(&after, b); return nil }),
	)
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, d)
	store.Append(ctx, []core.Message{core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: "s1"})}, shell.AppendOptions{})
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"shell_test.EnrolStudent", "shell_test.StudentEnrolled"}
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

func (b *busyAtFirst) RegisterGroup(ctx context.Context, g shell.GroupSpec) error {
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
