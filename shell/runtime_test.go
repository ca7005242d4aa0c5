package shell_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

func testConfig(clk shell.Clock) shell.Config {
	cfg := shell.DefaultConfig()
	cfg.Clock = clk
	cfg.ProcessID = "test"
	return cfg
}

func settle(t *testing.T, rt *shell.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.WaitIdle(ctx, 0); err != nil {
		t.Fatalf("the runtime did not settle: %v", err)
	}
}

// eventually waits (in real time) until cond holds: a timer fired by a
// simulated clock runs its task in another goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func startRuntime(t *testing.T, store shell.Store, cfg shell.Config, reactors ...any) *shell.Runtime {
	t.Helper()
	rt, err := shell.NewRuntime(store, cfg, reactors...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	return rt
}

func TestRuntimeProcessesAppends(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	rm := &rosters{}
	rt := startRuntime(t, store, testConfig(clk), courseNames, enrolments, rosterProjector(rm), notifications)
	for i, s := range []string{"s1", "s2", "s3"} {
		course := []string{"c1", "c1", "c2"}[i]
		if _, err := store.Append(ctx, []core.Message{core.NewMessage(EnrolStudent{CourseID: course, StudentID: s})}, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, rt)
	if got := rm.get("c1"); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("roster c1 %v", got)
	}
	if n := len(byType(readAll(t, store), "students.notified")); n != 3 {
		t.Fatalf("%d students notified", n)
	}
}

// A reaction scheduled ahead is promoted when its time comes, and a test
// makes that happen by advancing the simulated clock: no sleeping.
type reminder struct{}

func (reminder) HandledTypes() []string  { return []string{"courses.enrolled"} }
func (reminder) PartitionKeys() []string { return []string{"course_id"} }
func (reminder) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		e := m.Payload.(StudentEnrolled)
		later := core.NewMessage(NotifyStudent{StudentID: e.StudentID, CourseID: e.CourseID}).At(m.CreatedAt.Add(time.Hour))
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Append{Messages: []core.Message{later}}}})
	}
	return pairs, nil
}

func TestRuntimeScheduledMessagesOnASimulatedClock(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	rt := startRuntime(t, store, testConfig(clk), reminder{}, notifications)
	store.Append(ctx, []core.Message{core.NewMessage(StudentEnrolled{CourseID: "c1", StudentID: "s1"})}, shell.AppendOptions{})
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatal("the reminder ran before its time")
	}
	next, ok, _ := store.NextScheduled(ctx)
	if !ok || !next.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("next scheduled %v %v", next, ok)
	}
	clk.Advance(59 * time.Minute)
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notify")); n != 0 {
		t.Fatal("promoted a minute early")
	}
	clk.Advance(time.Minute)
	eventually(t, "the reminder is promoted and handled when due", func() bool {
		return len(byType(readAll(t, store), "students.notified")) == 1
	})
}

func TestRuntimeRetriesOnTheSimulatedClock(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	cfg := testConfig(clk)
	cfg.ErrorStrategy = shell.ErrorStrategy{Retries: 2, After: 10 * time.Second}
	f := &flaky{fails: 2}
	rt := startRuntime(t, store, cfg, f)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	var failed *shell.GroupFailedError
	if err := rt.WaitIdle(ctx, 0); !errors.As(err, &failed) || failed.Status != shell.StatusRetrying || failed.RetryCount != 1 {
		t.Fatalf("WaitIdle after the first failure: %v, want a *GroupFailedError of the retrying group", err)
	}
	info, _ := store.Group(ctx, "shell_test.flaky")
	if info.Status != shell.StatusRetrying || info.Failure.RetryCount != 1 {
		t.Fatalf("after the first failure %+v", info)
	}
	clk.WaitForTimers(4)          // every periodic task armed (under load a task may arm late)
	clk.Advance(10 * time.Second) // the catch-up poll ticks every 5 s
	eventually(t, "the second attempt", func() bool {
		info, _ = store.Group(ctx, "shell_test.flaky")
		return info.Failure.RetryCount == 2
	})
	if !info.RetryAt.Equal(clk.Now().Add(20 * time.Second)) {
		t.Fatalf("second retry at %v, want now+20s", info.RetryAt)
	}
	clk.WaitForTimers(4)
	clk.Advance(20 * time.Second)
	eventually(t, "the third attempt recovers the group", func() bool {
		info, _ = store.Group(ctx, "shell_test.flaky")
		return info.Status == shell.StatusActive
	})
	if f.calls != 3 {
		t.Fatalf("%d calls", f.calls)
	}
}

// blocking blocks each batch until released.
type blocking struct {
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	done    int
}

func (b *blocking) HandledTypes() []string  { return []string{"students.notify"} }
func (b *blocking) PartitionKeys() []string { return []string{"student_id"} }
func (b *blocking) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	b.started <- struct{}{}
	<-b.release
	b.mu.Lock()
	b.done += len(c.Messages)
	b.mu.Unlock()
	return []effects.Pair{{Source: c.Messages[len(c.Messages)-1], Signals: []effects.Signal{effects.Ack{}}}}, nil
}

func TestRuntimeStopWaitsForTheCurrentBatch(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	b := &blocking{started: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := testConfig(shell.SystemClock{})
	cfg.Workers = 1
	rt, err := shell.NewRuntime(store, cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	rt.Start(ctx)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	<-b.started
	stopped := make(chan error)
	go func() { stopped <- rt.Stop(ctx) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned while a batch was running: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(b.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	info, _ := store.Group(ctx, "shell_test.blocking")
	if info.NewestProcessed == 0 {
		t.Fatal("the batch finished during Stop was not acknowledged")
	}
	// Started again, it works again.
	b.release = make(chan struct{})
	close(b.release)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s2"})}, shell.AppendOptions{})
	<-b.started
	settle(t, rt)
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeStopTimesOut(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	b := &blocking{started: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := testConfig(shell.SystemClock{})
	cfg.Workers, cfg.StopTimeout = 1, 30*time.Millisecond
	rt, _ := shell.NewRuntime(store, cfg, b)
	rt.Start(ctx)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	<-b.started
	err := rt.Stop(ctx)
	close(b.release)
	if !errors.Is(err, shell.ErrStopTimeout) {
		t.Fatalf("Stop = %v, want ErrStopTimeout", err)
	}
}

func TestRuntimeWithoutWorkers(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	cfg := testConfig(shell.SystemClock{})
	cfg.Workers = 0
	rt := startRuntime(t, store, cfg, notifications)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	time.Sleep(20 * time.Millisecond)
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatal("a runtime with no workers processed a message")
	}
	if !rt.Idle() {
		t.Fatal("no worker, yet busy")
	}
}

// A worker that stops heartbeating loses its claim to the reaper, and
// another worker finishes the partition.
func TestRuntimeReapsStaleClaims(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	cfg := testConfig(clk)
	rt, err := shell.NewRuntime(store, cfg, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Router().Setup(ctx); err != nil {
		t.Fatal(err)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	store.Heartbeat(ctx, []string{"dead-worker"}, clk.Now())
	claim, err := store.ClaimNext(ctx, "students.notifications", "dead-worker", 10)
	if err != nil || claim == nil {
		t.Fatalf("claim %v %v", claim, err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatal("a claimed partition was processed by another worker")
	}
	for i := 0; i < 6; i++ { // 3 minutes: past the 2 minute TTL, several reaper ticks
		clk.WaitForTimers(1)
		clk.Advance(30 * time.Second)
	}
	eventually(t, "another worker finishes the dead worker's partition", func() bool {
		return len(byType(readAll(t, store), "students.notified")) == 1
	})
}

func TestConfig(t *testing.T) {
	env := map[string]string{
		shell.EnvWorkers:          "4",
		shell.EnvCatchUpInterval:  "250ms",
		shell.EnvBatchesPerHandle: "8",
		shell.EnvInlineBudget:     "5ms",
	}
	cfg, err := shell.DefaultConfig().FromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.Workers != 4 || cfg.CatchUpInterval != 250*time.Millisecond || cfg.BatchSize != 50 ||
		cfg.BatchesPerHandle != 8 || cfg.InlineBudget != 5*time.Millisecond {
		t.Fatalf("%+v %v", cfg, err)
	}
	env = map[string]string{shell.EnvWorkers: "many", shell.EnvClaimTTL: "soon"}
	_, err = shell.DefaultConfig().FromEnv(func(k string) string { return env[k] })
	for _, want := range []string{"SOURCED_WORKERS", "Workers", "SOURCED_CLAIM_TTL", "ClaimTTL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	bad := shell.DefaultConfig()
	bad.Workers, bad.BatchSize, bad.ClaimTTL, bad.BatchesPerHandle, bad.InlineBudget, bad.MaxClaimAge = -1, -1, time.Second, -2, -time.Second, -time.Minute
	err = bad.Validate()
	for _, want := range []string{"Workers", "BatchSize", "ClaimTTL", "BatchesPerHandle", "InlineBudget", "MaxClaimAge"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if _, err := shell.NewRuntime(memstore.New(courseRegistry()), bad, notifications); err == nil {
		t.Fatal("NewRuntime accepted a bad config")
	}
}

func TestTasksStartAndStopOnTheirOwn(t *testing.T) {
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	rt := startRuntime(t, store, testConfig(clk), notifications)
	ctx := context.Background()
	if err := enginehooks.RuntimeTasks(rt).CatchUp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if enginehooks.RuntimeTasks(rt).CatchUp.Running() || !enginehooks.RuntimeTasks(rt).Reaper.Running() {
		t.Fatal("stopping one task stopped another")
	}
	before := enginehooks.RuntimeTasks(rt).Reaper.Ticks()
	clk.WaitForTimers(3)
	clk.Advance(30 * time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for enginehooks.RuntimeTasks(rt).Reaper.Ticks() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if enginehooks.RuntimeTasks(rt).Reaper.Ticks() == before {
		t.Fatal("the reaper did not tick after its interval")
	}
	enginehooks.RuntimeTasks(rt).CatchUp.Start()
	if !enginehooks.RuntimeTasks(rt).CatchUp.Running() {
		t.Fatal("the catch-up poll did not start again")
	}
}

// WaitIdle called before the runtime started (right after `go
// Supervise(ctx, rt)`, say) registers the groups itself instead of failing
// with an unknown consumer group, and settles the work.
func TestWaitIdleBeforeStart(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rt, err := shell.NewRuntime(store, testConfig(shell.SystemClock{}), notifications)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c1"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 1 {
		t.Fatalf("%d students notified, want 1", n)
	}
}

// A runtime that is never started is driven step by step: Task.RunOnce
// runs the reaper now, in the caller's goroutine, and counts a tick.
func TestTaskRunOnceReapsWithoutStarting(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	rt, err := shell.NewRuntime(store, shell.Config{Workers: 1, Clock: clk, ProcessID: "p", HeartbeatInterval: time.Second, ClaimTTL: 2 * time.Second}, enrolments)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Router().Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: "s1"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := store.ClaimNext(ctx, "courses.enrolments", "gone-worker", 10)
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	clk.Advance(time.Minute)
	if err := enginehooks.RuntimeTasks(rt).Reaper.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := enginehooks.RuntimeTasks(rt).Reaper.Ticks(); n != 1 {
		t.Errorf("ticks = %d, want 1", n)
	}
	if enginehooks.RuntimeTasks(rt).Reaper.Running() {
		t.Error("RunOnce started the task's loop")
	}
	for o, err := range store.Offsets(ctx, shell.OffsetQuery{Group: "courses.enrolments"}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed {
			t.Errorf("the silent worker's claim survived RunOnce of the reaper: %+v", o)
		}
	}
}
