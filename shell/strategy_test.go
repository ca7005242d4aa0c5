package shell_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
)

var (
	errGatewayDown = errors.New("gateway down")
	errBadAddress  = errors.New("bad address")
)

// erring notifies students; a course id names how it fails: "down" with a
// transient error, "declined" with a Permanent one, "junk" with an error
// the strategy skips, "sync" in its sync work (a failure of the batch's
// commit).
type erring struct {
	strategy shell.ErrorStrategy
	mu       sync.Mutex
	notified []string
}

func (e *erring) GroupID() string                    { return "shell_test.erring" }
func (e *erring) HandledTypes() []string             { return []string{"students.notify"} }
func (e *erring) PartitionKeys() []string            { return []string{"student_id"} }
func (e *erring) ErrorStrategy() shell.ErrorStrategy { return e.strategy }
func (e *erring) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for i, m := range c.Messages {
		n := m.Payload.(NotifyStudent)
		var err error
		switch n.CourseID {
		case "down":
			err = errGatewayDown
		case "declined":
			err = core.Permanent(errDeclined)
		case "junk":
			err = errBadAddress
		case "sync":
			pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{
				effects.Sync{Work: func(context.Context, core.SyncTx) error { return errBadAddress }}, effects.Ack{}}})
			continue
		}
		if err != nil {
			return pairs, &core.BatchError{Message: m, Index: i, Err: err}
		}
		e.mu.Lock()
		e.notified = append(e.notified, n.StudentID+"/"+n.CourseID)
		e.mu.Unlock()
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{}}})
	}
	return pairs, nil
}

// A deciding error strategy (core.ErrorStrategyFunc) sees the error, the
// message and the attempt, and decides: a Permanent error fails the group
// at once, a transient one is retried when the strategy says, a junk
// message is skipped and the group goes on; the fixed policy stays
// available to it (ErrorStrategy.Fixed) and itself never retries a
// Permanent error.
func TestDecidingErrorStrategy(t *testing.T) {
	ctx := context.Background()
	const group = "shell_test.erring"
	type seen struct {
		pos     int64
		retries int
		err     error
	}
	deciding := func(attempts *[]seen) shell.ErrorStrategy {
		fixed := core.FixedErrorStrategy(1, time.Second, false)
		return core.ErrorStrategyFunc(func(a core.FailedAttempt) core.ErrorDecision {
			*attempts = append(*attempts, seen{a.Message.Position, a.Retries, a.Err})
			switch {
			case core.IsPermanent(a.Err):
				return core.FailGroup()
			case errors.Is(a.Err, errGatewayDown):
				return core.RetryAt(a.Now.Add(time.Duration(a.Retries+1) * time.Minute))
			case errors.Is(a.Err, errBadAddress):
				return core.SkipMessage()
			}
			return fixed.Fixed(a)
		})
	}
	for _, name := range []string{"memstore", "sqlitestore"} {
		t.Run(name+"/a permanent error fails the group at once", func(t *testing.T) {
			var attempts []seen
			e := &erring{strategy: deciding(&attempts)}
			rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet()}, e)
			notify(t, store, "s1", "c1", "s1", "declined", "s1", "c3")
			err := rt.Drain(ctx, nil)
			var gf *shell.GroupFailedError
			if !errors.As(err, &gf) || gf.Status != shell.StatusFailed || gf.Position != 2 || !errors.Is(err, errDeclined) {
				t.Fatalf("drain: %v, want the group failed at position 2 by the declined card", err)
			}
			if len(attempts) != 1 || attempts[0].pos != 2 || attempts[0].retries != 0 || !core.IsPermanent(attempts[0].err) {
				t.Fatalf("the strategy saw %+v, want one attempt at position 2 with no retries, a permanent error", attempts)
			}
			info, _ := store.Group(ctx, group)
			if info.Status != shell.StatusFailed || info.Failure.RetryCount != 0 {
				t.Fatalf("group %+v, want failed with no retries", info)
			}
		})

		t.Run(name+"/a transient error is retried when the strategy says", func(t *testing.T) {
			var attempts []seen
			e := &erring{strategy: deciding(&attempts)}
			clk := newClock()
			rt, store := clockedRouter(t, name, clk, shell.RouterOptions{Logger: quiet()}, e)
			notify(t, store, "s1", "down")
			for want := 1; want <= 3; want++ {
				if err := rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
					t.Fatal(err)
				}
				info, _ := store.Group(ctx, group)
				at := clk.Now().Add(time.Duration(want) * time.Minute)
				if info.Status != shell.StatusRetrying || info.Failure.RetryCount != want || !info.RetryAt.Equal(at) {
					t.Fatalf("after failure %d: %+v, want retrying (retry %d) at %v", want, info, want, at)
				}
				if len(attempts) != want || attempts[want-1].retries != want-1 {
					t.Fatalf("the strategy saw %+v, want %d attempts counting the retries", attempts, want)
				}
				clk.Advance(time.Duration(want) * time.Minute)
			}
		})

		t.Run(name+"/a skipped message lets the partition go on", func(t *testing.T) {
			var attempts []seen
			var reports []core.FailureReport
			e := &erring{strategy: deciding(&attempts).OnFail(func(_ context.Context, f core.FailureReport) { reports = append(reports, f) })}
			rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet()}, e)
			notify(t, store, "s1", "c1", "s1", "junk", "s1", "c3", "s2", "c1")
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatalf("drain: %v, want nil (a skip is not a failure of the group)", err)
			}
			if want := []string{"s1/c1", "s1/c3", "s2/c1"}; !sameSet(e.notified, want) {
				t.Fatalf("notified %v, want %v", e.notified, want)
			}
			if len(reports) != 1 || !reports[0].Skipped || reports[0].Parked || reports[0].Message.Position != 2 {
				t.Fatalf("failure reports %+v, want one skip at position 2", reports)
			}
			info, _ := store.Group(ctx, group)
			if info.Status != shell.StatusActive {
				t.Fatalf("group %+v, want active", info)
			}
			if parked, _ := store.(shell.Parking).ParkedPartitions(ctx, group); len(parked) != 0 {
				t.Fatalf("parked %+v, want none", parked)
			}
		})

		t.Run(name+"/a skip of a commit failure parks instead", func(t *testing.T) {
			var attempts []seen
			e := &erring{strategy: deciding(&attempts)}
			rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet(), BatchSize: 10}, e)
			notify(t, store, "s1", "c1", "s1", "sync", "s1", "c3")
			err := rt.Drain(ctx, nil)
			var gf *shell.GroupFailedError
			if !errors.As(err, &gf) || !gf.Parked || gf.Position != 2 {
				t.Fatalf("drain: %v, want the partition parked at position 2", err)
			}
			parked, _ := store.(shell.Parking).ParkedPartitions(ctx, group)
			if len(parked) != 1 || parked[0].LastPosition != 0 {
				t.Fatalf("parked %+v, want s1 parked before c1 (its work was rolled back with the failure)", parked)
			}
		})

		t.Run(name+"/the fixed policy does not retry a permanent error", func(t *testing.T) {
			e := &erring{strategy: shell.ErrorStrategy{Retries: 3, After: time.Second}}
			rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet()}, e)
			notify(t, store, "s1", "declined", "s2", "down")
			rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
			info, _ := store.Group(ctx, group)
			if info.Status != shell.StatusFailed || info.Failure.RetryCount != 0 || info.Failure.Position != 1 {
				t.Fatalf("group %+v, want failed at once at position 1", info)
			}
		})
	}
}

func sameSet(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// clockedRouter is a router on the store named (as routerStores) whose
// router and store read clk.
func clockedRouter(t *testing.T, name string, clk *clock, opts shell.RouterOptions, rs ...any) (*shell.Router, shell.Store) {
	if name == "memstore" {
		return newRouter(t, clk, opts, rs...)
	}
	opts.Now = clk.Now
	return sqliteRouter(t, opts, rs...)
}

// A command its decider refuses in a background worker is an outcome, not
// a failure: the refusal is recorded (core.CommandRejected, caused by the
// command), the group goes on with its other commands and partitions, and
// the sender awaits the outcome (AwaitCommand): the events, or the
// refusal matched with errors.Is on the decider's sentinel. A replay
// after a reset records nothing again.
func TestBusinessRefusalIsAnOutcome(t *testing.T) {
	for _, name := range []string{"memstore", "sqlitestore"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet()}, enrolments)
			res, err := store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: "s1"}, EnrolStudent{CourseID: "c1", StudentID: "s2"}, EnrolStudent{CourseID: "c1", StudentID: "s3"}, EnrolStudent{CourseID: "c2", StudentID: "s4"}), shell.AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s1, s3, s4 := res.Messages[0].ID, res.Messages[2].ID, res.Messages[3].ID
			if out, err := shell.CommandOutcomeOf(ctx, store, s3, "courses.enrolments"); err != nil || out.Decided {
				t.Fatalf("outcome before any worker ran: %+v, %v; want not decided", out, err)
			}
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatalf("drain: %v, want nil (a refusal is not a failure)", err)
			}
			if info, _ := store.Group(ctx, "courses.enrolments"); info.Status != shell.StatusActive || info.Failure.Error != "" {
				t.Fatalf("group %+v, want active with no failure", info)
			}
			out, err := shell.AwaitCommand(ctx, store, s3, nil)
			var refusal *core.RefusalError
			if !errors.Is(err, errFull) || !errors.Is(err, core.ErrRefused) || !errors.As(err, &refusal) || len(out.Events) != 0 || out.Refusal == nil {
				t.Fatalf("outcome of s3: %+v, %v; want refused with errFull", out, err)
			}
			if refusal.CommandID != s3.String() || refusal.CommandType != "courses.enrol" || refusal.Group != "courses.enrolments" || errors.Is(err, errDeclined) {
				t.Fatalf("refusal %+v, want s3's courses.enrol refused by courses.enrolments (and no other sentinel)", refusal)
			}
			for _, id := range []uuid.UUID{s1, s4} {
				out, err := shell.AwaitCommand(ctx, store, id, &shell.AwaitOptions{Group: "courses.enrolments"})
				if err != nil || len(out.Events) != 1 || out.Events[0].Type != "courses.enrolled" {
					t.Fatalf("outcome of %v: %+v, %v; want its StudentEnrolled", id, out, err)
				}
			}
			rejections := func() int { return len(byType(readAll(t, store), core.CommandRejectedType)) }
			if n := rejections(); n != 1 {
				t.Fatalf("%d rejections recorded, want 1", n)
			}
			for _, step := range []func(context.Context, any) error{
				func(ctx context.Context, d any) error { return rt.Stop(ctx, d, "replay") },
				rt.Reset, rt.Start,
			} {
				if err := step(ctx, enrolments); err != nil {
					t.Fatal(err)
				}
			}
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if n := rejections(); n != 1 {
				t.Fatalf("%d rejections after a replay, want still 1", n)
			}
		})
	}
}

// A decider whose refusals fail (core.Hooks.RefusalsFail) fails its group
// as before.
func TestRefusalsFailWhenTheDefinitionSaysSo(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, strictEnrolments)
	notifyEnrol(t, store, "c1", "s1", "s2", "s3")
	if err := rt.Drain(ctx, nil); !errors.Is(err, errFull) {
		t.Fatalf("drain: %v, want the group failed by errFull", err)
	}
	if n := len(byType(readAll(t, store), core.CommandRejectedType)); n != 0 {
		t.Fatalf("%d rejections recorded, want none", n)
	}
}

func notifyEnrol(t *testing.T, store shell.Store, course string, students ...string) {
	t.Helper()
	var msgs []core.Message
	for _, s := range students {
		msgs = append(msgs, core.NewMessage(EnrolStudent{CourseID: course, StudentID: s}))
	}
	if _, err := store.Append(context.Background(), msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// stackedError carries a stack of its own, as errors of
// github.com/pkg/errors do (their StackTrace method).
type stackedError struct {
	msg string
	pcs []uintptr
}

func (e *stackedError) Error() string { return e.msg }

// StackTrace returns the program counters recorded where e was made.
func (e *stackedError) StackTrace() []uintptr { return e.pcs }

//go:noinline
func makeStackedError() error {
	pcs := make([]uintptr, 16)
	return &stackedError{msg: "ledger unavailable", pcs: pcs[:runtime.Callers(1, pcs)]}
}

// A failure records a stack for a returned error too: where it surfaced
// (the handler, or the reactor), and the error's own stack when it
// carries one; only a panic's failure says Panicked.
func TestFailureRecordsWhereAReturnedErrorSurfaced(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want []string
	}{
		{"plain", errDeclined, []string{"error returned by the reactor of shell_test.failing_with"}},
		{"own stack", fmt.Errorf("posting: %w", makeStackedError()), []string{"error returned by the reactor", "the error's own stack:", "makeStackedError", "strategy_test.go:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := failingWith{err: c.err}
			rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, f)
			notify(t, store, "s1", "c1")
			rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
			info, _ := store.Group(ctx, f.GroupID())
			for _, w := range c.want {
				if !strings.Contains(info.Failure.Stack, w) {
					t.Fatalf("stack %q, want it to contain %q", info.Failure.Stack, w)
				}
			}
			if info.Failure.Panicked() {
				t.Fatal("a returned error's failure says it panicked")
			}
		})
	}
}
