package shell_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// appendRoster is a read model that a projector's sync work appends to:
// replayed onto a table its OnReset did not clear, it holds every student
// twice. Its log records the hooks and the batches, in order.
type appendRoster struct {
	mu    sync.Mutex
	m     map[string][]string
	log   []string
	fails int // OnReset fails this many times first
}

func (r *appendRoster) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *appendRoster) snapshot() ([]string, map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string][]string{}
	for k, v := range r.m {
		m[k] = slices.Clone(v)
	}
	return slices.Clone(r.log), m
}

func (r *appendRoster) count(s string) int {
	log, _ := r.snapshot()
	n := 0
	for _, l := range log {
		if l == s {
			n++
		}
	}
	return n
}

// projector returns a projector writing r, with hooks recording into r.
func (r *appendRoster) projector() core.Projector[int] {
	p := core.Projector[int]{Group: "courses.appended_rosters", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }),
		core.Sync(func(_ context.Context, _ core.SyncTx, b core.Batch[int]) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.m == nil {
				r.m = map[string][]string{}
			}
			for _, m := range b.Messages {
				if e, ok := m.Payload.(StudentEnrolled); ok {
					r.m[e.CourseID] = append(r.m[e.CourseID], e.StudentID)
				}
			}
			r.log = append(r.log, "sync")
			return nil
		}),
	)
	p.Hooks = core.Hooks{
		OnStop:  func(_ context.Context, reason string) error { r.record("stop:" + reason); return nil },
		OnStart: func(context.Context) error { r.record("start"); return nil },
		OnReset: func(context.Context) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.fails > 0 {
				r.fails--
				r.log = append(r.log, "reset failed")
				return fmt.Errorf("read model unreachable")
			}
			r.m = nil
			r.log = append(r.log, "reset")
			return nil
		},
	}
	return p
}

const appendedRosters = "courses.appended_rosters"

func enrol(t *testing.T, store shell.Store, course string, students ...string) {
	t.Helper()
	var msgs []core.Message
	for _, s := range students {
		msgs = append(msgs, core.NewMessage(StudentEnrolled{CourseID: course, StudentID: s}))
	}
	if _, err := store.Append(context.Background(), msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// operate stops, resets and starts the group through the store, as the
// CLI (`sourced groups stop/reset/start`) and the dashboard without a
// router do.
func operate(t *testing.T, store shell.Store, group string) {
	t.Helper()
	ctx := context.Background()
	if err := store.StopGroup(ctx, group, "rebuild"); err != nil {
		t.Fatal(err)
	}
	if err := store.ResetGroup(ctx, group); err != nil {
		t.Fatal(err)
	}
	if err := store.StartGroup(ctx, group); err != nil {
		t.Fatal(err)
	}
}

// checkRebuilt checks that the hooks of one stop, reset and start ran once
// each, in order, before any batch of the replay, and that the replay
// rebuilt the read model from scratch.
func checkRebuilt(t *testing.T, r *appendRoster, want map[string][]string) {
	t.Helper()
	log, m := r.snapshot()
	for _, h := range []string{"stop:rebuild", "reset", "start"} {
		if n := r.count(h); n != 1 {
			t.Fatalf("hook %s ran %d times, want once: %v", h, n, log)
		}
	}
	stop, reset, start := slices.Index(log, "stop:rebuild"), slices.Index(log, "reset"), slices.Index(log, "start")
	if !(stop < reset && reset < start) || slices.Contains(log[stop:start], "sync") {
		t.Fatalf("log %v: want OnStop, OnReset, OnStart in order and no batch between them", log)
	}
	if !slices.Contains(log[start:], "sync") {
		t.Fatalf("log %v: the group never replayed after its hooks", log)
	}
	for course, students := range want {
		if !slices.Equal(m[course], students) {
			t.Fatalf("read model %v, want %v: the replay landed on a table OnReset had not cleared", m, want)
		}
	}
}

func hooksConfig(id string) shell.Config {
	cfg := testConfig(shell.SystemClock{})
	cfg.ProcessID = id
	cfg.Workers = 2
	cfg.CatchUpInterval = 10 * time.Millisecond
	return cfg
}

// TestOperatorResetThroughTheStoreRunsOnReset: a group stopped, reset and
// started through the store directly (as `sourced groups` does) while a
// runtime runs: the runtime runs OnStop, OnReset and OnStart once each,
// and the replay starts only after OnReset cleared the read model. Before,
// no hook ran and the replay appended every student a second time.
func TestOperatorResetThroughTheStoreRunsOnReset(t *testing.T) {
	store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "hooks.db"), sqlitestore.Options{Registry: courseRegistry(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := &appendRoster{}
	rt := startRuntime(t, store, hooksConfig("p1"), r.projector())
	enrol(t, store, "c1", "s1", "s2")
	settle(t, rt)
	operate(t, store, appendedRosters)
	eventually(t, "the hooks run and the group replays", func() bool {
		log, _ := r.snapshot()
		start := slices.Index(log, "start")
		return start >= 0 && slices.Contains(log[start:], "sync")
	})
	settle(t, rt)
	checkRebuilt(t, r, map[string][]string{"c1": {"s1", "s2"}})
	if info, err := store.Group(context.Background(), appendedRosters); err != nil || info.HooksPending != 0 {
		t.Fatalf("group %+v (%v), want no hook pending", info, err)
	}
}

// TestTwoProcessesRunAHookOnce: two runtimes on one SQLite file (two
// processes) run the same projector; a reset made through the store runs
// its hooks once in all, in one of them.
func TestTwoProcessesRunAHookOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hooks.db")
	a, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: courseRegistry(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: courseRegistry(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	r := &appendRoster{} // the read model both processes write
	rtA := startRuntime(t, a, hooksConfig("p1"), r.projector())
	rtB := startRuntime(t, b, hooksConfig("p2"), r.projector())
	enrol(t, a, "c1", "s1")
	enrol(t, b, "c2", "s2")
	settle(t, rtA)
	settle(t, rtB)
	for round := 1; round <= 3; round++ {
		operate(t, a, appendedRosters)
		eventually(t, "the hooks run and the group replays", func() bool {
			return r.count("start") == round && r.count("sync") > 0
		})
		settle(t, rtA)
		settle(t, rtB) // WaitIdle runs the hooks owed too: none is
		for _, h := range []string{"stop:rebuild", "reset", "start"} {
			if n := r.count(h); n != round {
				log, _ := r.snapshot()
				t.Fatalf("round %d: hook %s ran %d times in all, want %d: %v", round, h, n, round, log)
			}
		}
	}
	if info, err := b.Group(ctx, appendedRosters); err != nil || info.HooksPending != 0 {
		t.Fatalf("group %+v (%v), want no hook pending", info, err)
	}
}

// TestRouterCommandsRunTheirHooksOnce: the router's own Stop, Reset and
// Start run their hooks inline, through the same claims as the runtime
// observing the store, so that no hook runs twice.
func TestRouterCommandsRunTheirHooksOnce(t *testing.T) {
	store := memstore.New(courseRegistry())
	r := &appendRoster{}
	p := r.projector()
	cfg := hooksConfig("p1")
	cfg.CatchUpInterval = time.Millisecond
	rt := startRuntime(t, store, cfg, p)
	enrol(t, store, "c1", "s1")
	settle(t, rt)
	ctx := context.Background()
	if err := rt.Router().Stop(ctx, p, "rebuild"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Router().Reset(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := rt.Router().Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the group replays", func() bool {
		log, _ := r.snapshot()
		return slices.Contains(log[slices.Index(log, "start"):], "sync")
	})
	settle(t, rt)
	checkRebuilt(t, r, map[string][]string{"c1": {"s1"}})
}

// TestDrainRunsTheHooksOwed: a router without a runtime runs, when it
// drains, the hooks of transitions made through the store, before the
// replay.
func TestDrainRunsTheHooksOwed(t *testing.T) {
	r := &appendRoster{}
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, r.projector())
	ctx := context.Background()
	enrol(t, store, "c1", "s1", "s2")
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	operate(t, store, appendedRosters)
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	checkRebuilt(t, r, map[string][]string{"c1": {"s1", "s2"}})
}

// TestFailingOnResetHoldsTheReplay: an OnReset that fails is retried at
// the next catch-up poll, and the group replays nothing until it
// succeeded.
func TestFailingOnResetHoldsTheReplay(t *testing.T) {
	store := memstore.New(courseRegistry())
	r := &appendRoster{fails: 2}
	rt := startRuntime(t, store, hooksConfig("p1"), r.projector())
	enrol(t, store, "c1", "s1")
	settle(t, rt)
	operate(t, store, appendedRosters)
	eventually(t, "OnReset succeeds and the group replays", func() bool {
		log, _ := r.snapshot()
		start := slices.Index(log, "start")
		return start >= 0 && slices.Contains(log[start:], "sync")
	})
	settle(t, rt)
	if n := r.count("reset failed"); n != 2 {
		t.Fatalf("OnReset failed %d times, want 2", n)
	}
	checkRebuilt(t, r, map[string][]string{"c1": {"s1"}})
}
