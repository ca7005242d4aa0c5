package shell_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// recordHooks returns hooks that append what they hear to log.
func recordHooks(log *[]string) core.Hooks {
	return core.Hooks{
		OnStop:  func(_ context.Context, reason string) error { *log = append(*log, "stop:"+reason); return nil },
		OnStart: func(context.Context) error { *log = append(*log, "start"); return nil },
		OnReset: func(context.Context) error { *log = append(*log, "reset"); return nil },
	}
}

// TestHooksOnEveryKindOfDefinition: the lifecycle hooks declared in a
// definition's Hooks (a decider's, a projector's, a machine's) are called
// by the router's operator commands, as a hand-written reactor's are;
// before, only hand-written reactors had them (a projector could not
// clear its read model on reset).
func TestHooksOnEveryKindOfDefinition(t *testing.T) {
	ctx := context.Background()
	var decided, projected, machined []string
	d := notifications
	d.Hooks = recordHooks(&decided)
	rm := &rosters{}
	p := rosterProjector(rm)
	p.Hooks = recordHooks(&projected)
	p.Hooks.OnReset = func(context.Context) error { // clear the read model
		rm.mu.Lock()
		defer rm.mu.Unlock()
		rm.m = nil
		projected = append(projected, "reset")
		return nil
	}
	m := doors
	m.Hooks = recordHooks(&machined)

	reg := courseRegistry()
	codec.MustRegister[OpenDoor](reg, "doors.open")
	codec.MustRegister[CloseDoor](reg, "doors.close")
	codec.MustRegister[LockDoor](reg, "doors.lock")
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	store := memstore.New(reg)
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, d, p, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(CourseCreated{CourseID: "c1", CourseName: "Go"}), core.NewMessage(StudentEnrolled{CourseID: "c1", StudentID: "s1"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := rm.get("c1"); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("roster %v", got)
	}
	for _, target := range []any{d, p, m} {
		if err := rt.Stop(ctx, target, "rebuild"); err != nil {
			t.Fatal(err)
		}
		if err := rt.Reset(ctx, target); err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx, target); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"stop:rebuild", "reset", "start"}
	for name, got := range map[string][]string{"decider": decided, "projector": projected, "machine": machined} {
		if !slices.Equal(got, want) {
			t.Errorf("%s hooks heard %v, want %v", name, got, want)
		}
	}
	if got := rm.get("c1"); got != nil {
		t.Fatalf("the projector's OnReset did not clear its read model: %v", got)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := rm.get("c1"); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("roster rebuilt by the replay: %v", got)
	}

	// A command the status refuses runs no hook.
	decided = nil
	var ie *shell.InvalidTransitionError
	if err := rt.Reset(ctx, d); !errors.As(err, &ie) || len(decided) != 0 {
		t.Fatalf("reset of an active group: %v, hooks %v; want an *InvalidTransitionError and no hook", err, decided)
	}
}

// TestHookFailureSaysTheCommandStands: a hook's error (or panic) is
// returned, wrapped, after the command took effect; the failed hook's
// transition stays pending (the group's work waits) and runs again, before
// the hooks of later transitions, until it succeeds.
func TestHookFailureSaysTheCommandStands(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("cache unreachable")
	stops := 0
	d := notifications
	d.Hooks = core.Hooks{
		OnStop: func(context.Context, string) error {
			stops++
			if stops == 1 {
				return boom
			}
			return nil
		},
		OnStart: func(context.Context) error { panic("start hook") },
	}
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, d)
	err := rt.Stop(ctx, d, "x")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "OnStop") {
		t.Fatalf("stop: %v, want the hook's error naming OnStop", err)
	}
	if info, _ := store.Group(ctx, "students.notifications"); info.Status != shell.StatusStopped || info.HooksPending != 1 {
		t.Fatalf("group %s with %d hooks pending, want stopped (the command stands) with its OnStop pending", info.Status, info.HooksPending)
	}
	var pe *shell.PanicError
	if err := rt.Start(ctx, d); !errors.As(err, &pe) {
		t.Fatalf("start: %v, want the hook's panic as a *PanicError", err)
	}
	if stops != 2 {
		t.Fatalf("OnStop ran %d times, want 2: it failed, then ran again before OnStart", stops)
	}
	if info, _ := store.Group(ctx, "students.notifications"); info.Status != shell.StatusActive || info.HooksPending != 1 {
		t.Fatalf("group %s with %d hooks pending, want active with its OnStart pending", info.Status, info.HooksPending)
	}
}

// failingNotes is a decider that rejects every notification.
var failingNotes = core.Decider[int]{Group: "students.failing", PartitionBy: []string{"student_id"}, Hooks: core.Hooks{RefusalsFail: true}}.With(
	core.Decide(func(_ int, c NotifyStudent) ([]any, error) { return nil, fmt.Errorf("no mail for %s", c.StudentID) }),
)

// TestDefinitionErrorStrategy: a definition's own error strategy
// (Hooks.ErrorStrategy) replaces the router's default; before, only a
// hand-written reactor could have one.
func TestDefinitionErrorStrategy(t *testing.T) {
	ctx := context.Background()
	d := failingNotes
	d.Hooks.ErrorStrategy = &core.ErrorStrategy{Retries: 2, After: time.Minute}
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, d)
	notify(t, store, "s1", "c1")
	rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	info, _ := store.Group(ctx, "students.failing")
	if info.Status != shell.StatusRetrying || info.Failure.RetryCount != 1 {
		t.Fatalf("group %+v, want retrying (the definition's strategy), not failed (the router's default)", info)
	}
}

// reportLog is a Reporter that records what it hears.
type reportLog struct {
	name string
	log  *[]string
}

func (r reportLog) ReportRetry(_ context.Context, rr shell.RetryReport) {
	*r.log = append(*r.log, fmt.Sprintf("%s retry %d", r.name, rr.RetryCount))
}
func (r reportLog) ReportFailure(_ context.Context, f shell.FailureReport) {
	*r.log = append(*r.log, fmt.Sprintf("%s fail %d parked=%v", r.name, f.RetryCount, f.Parked))
}

// TestStrategyListeners: several OnRetry and OnFail listeners and
// Reporters, called in the order they were added, each with the retry
// count, the error, the failing message and the partition (and the retry
// time for a retry); a listener that panics does not stop the others.
func TestStrategyListeners(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	var log []string
	var retries []shell.RetryReport
	var fails []shell.FailureReport
	strategy := shell.ErrorStrategy{Retries: 1, After: time.Second}.
		OnRetry(func(_ context.Context, r shell.RetryReport) {
			log = append(log, "first retry")
			retries = append(retries, r)
		}).
		OnRetry(func(context.Context, shell.RetryReport) { panic("a broken listener") }).
		Report(reportLog{"reporter", &log}).
		OnFail(func(_ context.Context, f shell.FailureReport) {
			log = append(log, "first fail")
			fails = append(fails, f)
		}).
		OnRetry(func(context.Context, shell.RetryReport) { log = append(log, "last retry") })
	base := shell.ErrorStrategy{Retries: 1}
	if len(base.OnRetry(func(context.Context, shell.RetryReport) {}).Reporters()) != 1 || len(base.Reporters()) != 0 {
		t.Fatal("adding a listener changed the strategy it was added to")
	}
	rt, store := newRouter(t, clk, shell.RouterOptions{ErrorStrategy: strategy}, failingNotes)
	notify(t, store, "s1", "c1")
	msg := readAll(t, store)[0]
	rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	clk.Advance(time.Second)
	rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	want := []string{"first retry", "reporter retry 1", "last retry", "reporter fail 1 parked=false", "first fail"}
	if !slices.Equal(log, want) {
		t.Fatalf("listeners heard %q, want %q", log, want)
	}
	r := retries[0]
	if r.Group != "students.failing" || r.Partition["student_id"] != "s1" || r.RetryCount != 1 || !r.RetryAt.Equal(clk.Now()) ||
		r.Message.Type != "students.notify" || r.Message.ID != msg.ID || r.Message.ID == uuid.Nil || r.Message.Position != 1 || !strings.Contains(r.Err.Error(), "no mail for s1") {
		t.Fatalf("retry report %+v", r)
	}
	f := fails[0]
	if f.Group != "students.failing" || f.Partition["student_id"] != "s1" || f.RetryCount != 1 || f.Parked || f.Message.ID != msg.ID || f.Message.Position != 1 || !strings.Contains(f.Err.Error(), "no mail") {
		t.Fatalf("failure report %+v", f)
	}
}
