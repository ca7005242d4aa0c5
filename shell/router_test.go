package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
)

func newRouter(t *testing.T, clk *clock, opts shell.RouterOptions, reactors ...any) (*shell.Router, shell.Store) {
	t.Helper()
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	opts.Now = clk.Now
	rt, err := shell.NewRouter(store, opts, reactors...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt, store
}

func readAll(t *testing.T, s shell.Store) []core.PositionedMessage {
	t.Helper()
	var out []core.PositionedMessage
	for m, err := range s.All(context.Background(), shell.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func byType(ms []core.PositionedMessage, typ string) []core.PositionedMessage {
	var out []core.PositionedMessage
	for _, m := range ms {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// The manual's course example end to end: synchronous handling, a decider
// with a capacity, a projector, and a reaction handled by another reactor,
// with causation and correlation checked at every link.
func TestCourseExample(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	rm := &rosters{}
	rt, store := newRouter(t, clk, shell.RouterOptions{}, courseNames, enrolments, rosterProjector(rm), notifications)

	if _, err := shell.Handle(ctx, store, courseNames, CreateCourse{CourseID: "c1", CourseName: "Algebra"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := shell.Handle(ctx, store, courseNames, CreateCourse{CourseID: "c2", CourseName: "Algebra"}, nil)
	if err == nil || err.Error() != `course "Algebra" already exists` {
		t.Fatalf("second course named Algebra: %v", err)
	}
	var cmd shell.HandleResult[[]string]
	for i, s := range []string{"s1", "s2", "s3"} {
		res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: s}, nil)
		if i < capacity {
			if err != nil {
				t.Fatalf("enrolling %s: %v", s, err)
			}
			if i == 0 {
				cmd = res
			}
			continue
		}
		if !errors.Is(err, errFull) {
			t.Fatalf("enrolling %s beyond capacity: %v", s, err)
		}
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := rm.get("c1"); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("roster %v", got)
	}
	log := readAll(t, store)
	if n := len(byType(log, "courses.create")); n != 1 {
		t.Fatalf("%d CreateCourse commands stored, want 1 (a rejected command appends nothing)", n)
	}
	if n := len(byType(log, "courses.created")); n != 1 {
		t.Fatalf("%d CourseCreated", n)
	}
	notified := byType(log, "students.notified")
	if len(notified) != 2 {
		t.Fatalf("%d StudentNotified, want 2: %+v", len(notified), log)
	}
	// cmd -> event -> reaction -> event, for s1.
	ev := cmd.Events[0]
	if ev.CausationID != cmd.Command.ID || ev.CorrelationID != cmd.Command.ID {
		t.Fatalf("event link: %+v", ev)
	}
	var notify, done core.PositionedMessage
	for _, m := range log {
		switch p := m.Payload.(type) {
		case NotifyStudent:
			if p.StudentID == "s1" {
				notify = m
			}
		case StudentNotified:
			if p.StudentID == "s1" {
				done = m
			}
		}
	}
	if notify.CausationID != ev.ID || notify.CorrelationID != cmd.Command.ID || notify.Metadata["producer"] != "courses.enrolments" {
		t.Fatalf("reaction link: %+v (event %v, command %v)", notify.Message, ev.ID, cmd.Command.ID)
	}
	if done.CausationID != notify.ID || done.CorrelationID != cmd.Command.ID {
		t.Fatalf("second event link: %+v", done.Message)
	}
	// Everything is processed: draining again does nothing new.
	before := len(readAll(t, store))
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if after := len(readAll(t, store)); after != before {
		t.Fatalf("a second drain appended %d messages", after-before)
	}
}

// Commands appended for the workers (not handled synchronously) are decided
// in batches: several pending commands of one partition in one batch are each
// decided on the events of the ones before (the batch's guard advanced past
// each command's own append), and never conflict.
func TestBatchOfCommandsInOnePartition(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	rt, store := newRouter(t, clk, shell.RouterOptions{}, enrolments, notifications)
	var cmds []core.Message
	for _, s := range []string{"s1", "s2", "s1", "s3"} {
		cmds = append(cmds, core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: s}))
	}
	if _, err := store.Append(ctx, cmds[:2], shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if did, err := rt.HandleNext(ctx, "courses.enrolments", "w1"); err != nil || !did {
		t.Fatalf("HandleNext = %v, %v", did, err)
	}
	enrolled := byType(readAll(t, store), "courses.enrolled")
	if len(enrolled) != 2 {
		t.Fatalf("both commands of the batch decided: %+v", enrolled)
	}
	info, err := store.Group(ctx, "courses.enrolments")
	if err != nil || info.Status != shell.StatusActive {
		t.Fatalf("group %+v %v", info, err)
	}
}

// A batch whose third message fails: the first two are acknowledged and
// their events committed, nothing of the third is, and the group fails with
// the error recorded.
func TestPartialBatch(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	rt, store := newRouter(t, clk, shell.RouterOptions{}, strictEnrolments)
	var cmds []core.Message
	for _, s := range []string{"s1", "s2", "s3", "s4", "s5"} {
		cmds = append(cmds, core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: s}))
	}
	if _, err := store.Append(ctx, cmds, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.HandleNext(ctx, strictEnrolments, "w1"); err != nil {
		t.Fatal(err)
	}
	enrolled := byType(readAll(t, store), "courses.enrolled")
	if len(enrolled) != 2 {
		t.Fatalf("events of the first two commands only: %+v", enrolled)
	}
	info, _ := store.Group(ctx, "courses.enrolments")
	if info.Status != shell.StatusFailed || !strings.Contains(info.Failure.Error, "course is full") {
		t.Fatalf("group %+v", info)
	}
	// The failure says where: the partition and the third command.
	if f := info.Failure; f.Partition != "course_id:c1" || f.MessageType != "courses.enrol" || f.Position != 3 || f.MessageID != readAll(t, store)[2].ID.String() {
		t.Fatalf("failure %+v, want partition course_id:c1, the third command (courses.enrol at 3)", f)
	}
	// A returned error has no stack of its own: the failure records
	// where it surfaced, the decide handler that returned it.
	if s := info.Failure.Stack; info.Failure.Panicked() || !strings.Contains(s, "error returned by ") || !strings.Contains(s, "courses_test.go:") {
		t.Fatalf("the failure's stack %q (panicked %v), want where the error was returned: the decide handler in courses_test.go", s, info.Failure.Panicked())
	}
	if info.NewestProcessed != 2 {
		t.Fatalf("offset at %d, want 2 (the first two commands acknowledged)", info.NewestProcessed)
	}
	if did, _ := rt.HandleNext(ctx, strictEnrolments, "w1"); did {
		t.Fatal("a failed group is not claimed")
	}
}

// flaky fails its first n batches, then succeeds.
type flaky struct {
	fails int
	calls int
}

func (f *flaky) HandledTypes() []string  { return []string{"students.notify"} }
func (f *flaky) PartitionKeys() []string { return []string{"student_id"} }
func (f *flaky) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, fmt.Errorf("attempt %d failed", f.calls)
	}
	var pairs []effects.Pair
	for _, m := range c.Messages {
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{}}})
	}
	return pairs, nil
}

func TestRetryWithBackoff(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	var retries []time.Time
	var failed error
	strategy := shell.ErrorStrategy{Retries: 3, After: time.Second}.
		OnRetry(func(_ context.Context, r shell.RetryReport) { retries = append(retries, r.RetryAt) }).
		OnFail(func(_ context.Context, f shell.FailureReport) { failed = f.Err })
	t.Run("recovers", func(t *testing.T) {
		f := &flaky{fails: 2}
		rt, store := newRouter(t, clk, shell.RouterOptions{ErrorStrategy: strategy}, f)
		if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		retries = nil
		start := clk.Now()
		rt.HandleNext(ctx, f, "w")
		info, _ := store.Group(ctx, "shell_test.flaky")
		if info.Status != shell.StatusRetrying || info.Failure.RetryCount != 1 || !info.RetryAt.Equal(start.Add(time.Second)) {
			t.Fatalf("after the first failure: %+v", info)
		}
		if did, _ := rt.HandleNext(ctx, f, "w"); did {
			t.Fatal("claimed before the retry time")
		}
		clk.Advance(time.Second)
		rt.HandleNext(ctx, f, "w")
		info, _ = store.Group(ctx, "shell_test.flaky")
		if info.Status != shell.StatusRetrying || info.Failure.RetryCount != 2 || !info.RetryAt.Equal(clk.Now().Add(2*time.Second)) {
			t.Fatalf("after the second failure (backoff 2s): %+v", info)
		}
		clk.Advance(2 * time.Second)
		if did, err := rt.HandleNext(ctx, f, "w"); !did || err != nil {
			t.Fatalf("third attempt: %v %v", did, err)
		}
		info, _ = store.Group(ctx, "shell_test.flaky")
		if info.Status != shell.StatusActive || info.Failure.RetryCount != 0 {
			t.Fatalf("recovered: %+v", info)
		}
		if len(retries) != 2 {
			t.Fatalf("OnRetry called %d times", len(retries))
		}
	})
	t.Run("fails when retries run out", func(t *testing.T) {
		f := &flaky{fails: 1000}
		rt, store := newRouter(t, clk, shell.RouterOptions{ErrorStrategy: strategy}, f)
		store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
		for i := 0; i < 10; i++ {
			rt.HandleNext(ctx, f, "w")
			clk.Advance(time.Minute)
		}
		info, _ := store.Group(ctx, "shell_test.flaky")
		if info.Status != shell.StatusFailed || f.calls != 4 || failed == nil || !strings.Contains(info.Failure.Error, "attempt 4 failed") {
			t.Fatalf("after %d calls: %+v (OnFail: %v)", f.calls, info, failed)
		}
	})
}

type panicky struct{}

func (panicky) HandledTypes() []string  { return []string{"students.notify"} }
func (panicky) PartitionKeys() []string { return []string{"student_id"} }
func (panicky) HandleClaim(context.Context, effects.Claim) ([]effects.Pair, error) {
	panic("boom")
}

func TestPanicIsAnError(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, panicky{})
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	if _, err := rt.HandleNext(ctx, panicky{}, "w"); err != nil {
		t.Fatal(err)
	}
	info, _ := store.Group(ctx, "shell_test.panicky")
	if info.Status != shell.StatusFailed || !strings.Contains(info.Failure.Error, "boom") || !strings.Contains(info.Failure.Stack, "panicky") {
		t.Fatalf("group %+v", info)
	}
}

// busyStore is a store whose write transactions fail with ErrBusy while
// busy is set, as when another process holds the write lock.
type busyStore struct {
	shell.Store
	busy bool
}

func (b *busyStore) Update(ctx context.Context, fn func(shell.Tx) error) error {
	if b.busy {
		return fmt.Errorf("test: begin immediate: %w", shell.ErrBusy)
	}
	return b.Store.Update(ctx, fn)
}

// A busy store is not the reactor's failure: the batch is released, the
// error returned, the group stays active with no retry counted, and the
// batch is handled once the store is free.
func TestBusyStoreIsNotAFailure(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	inner := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	store := &busyStore{Store: inner}
	f := &flaky{}
	rt, err := shell.NewRouter(store, shell.RouterOptions{Now: clk.Now}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	store.busy = true
	did, err := rt.HandleNext(ctx, f, "w")
	if !did || !errors.Is(err, shell.ErrBusy) {
		t.Fatalf("HandleNext on a busy store: did %v, err %v", did, err)
	}
	info, _ := store.Group(ctx, "shell_test.flaky")
	if info.Status != shell.StatusActive || info.Failure.RetryCount != 0 || info.Failure.Error != "" {
		t.Fatalf("group after a busy batch: %+v", info)
	}
	store.busy = false
	if did, err := rt.HandleNext(ctx, f, "w2"); !did || err != nil {
		t.Fatalf("HandleNext after the store is free: did %v, err %v (the busy claim was not released?)", did, err)
	}
	if did, _ := rt.HandleNext(ctx, f, "w2"); did {
		t.Fatal("the batch was not acknowledged")
	}
	if f.calls != 2 {
		t.Fatalf("reactor called %d times, want 2", f.calls)
	}
}

// conflicting appends under a guard that every batch violates.
type conflicting struct{ calls int }

func (c *conflicting) HandledTypes() []string  { return []string{"students.notify"} }
func (c *conflicting) PartitionKeys() []string { return []string{"student_id"} }
func (c *conflicting) HandleClaim(_ context.Context, cl effects.Claim) ([]effects.Pair, error) {
	c.calls++
	g := core.Guard{Conditions: []core.Condition{{Type: "students.notify"}}, LastPosition: 0}
	return []effects.Pair{{Source: cl.Messages[0], Signals: []effects.Signal{
		effects.Append{Messages: []core.Message{core.NewMessage(StudentNotified{StudentID: "s1"})}, Guard: &g},
	}}}, nil
}

// A batch that keeps conflicting is retried a bounded number of times and
// then goes through the error strategy (never retried silently for ever).
func TestEndlessConflictGoesToTheStrategy(t *testing.T) {
	ctx := context.Background()
	c := &conflicting{}
	rt, store := newRouter(t, newClock(), shell.RouterOptions{MaxConflictRetries: 2}, c)
	store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{})
	rt.HandleNext(ctx, c, "w")
	info, _ := store.Group(ctx, "shell_test.conflicting")
	if c.calls != 3 || info.Status != shell.StatusFailed || !strings.Contains(info.Failure.Error, "concurrent append") {
		t.Fatalf("calls %d, group %+v", c.calls, info)
	}
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatalf("%d messages of a conflicting batch written", n)
	}
}

func TestRouterValidatesReactorsTogether(t *testing.T) {
	store := memstore.New(courseRegistry())
	if _, err := shell.NewRouter(store, shell.RouterOptions{}, enrolments, enrolments); err != nil {
		t.Fatalf("the same reactor twice: %v, want it registered once (see TestRegistering)", err)
	}
	twin := core.Decider[int]{Group: enrolments.Group, PartitionBy: []string{"course_id"}}.With(
		core.Decide(func(int, EnrolStudent) ([]any, error) { return nil, nil }))
	_, err := shell.NewRouter(store, shell.RouterOptions{}, enrolments, twin)
	if !errors.Is(err, core.ErrDefinition) || !strings.Contains(err.Error(), "share the consumer group id") {
		t.Fatalf("duplicate group: %v", err)
	}
	queue := &jobQueue{}
	_, err = shell.NewRouter(store, shell.RouterOptions{}, queue, notifications)
	var gc *shell.GroupConflictError
	if !errors.As(err, &gc) {
		t.Fatalf("exclusive owner sharing a type: %v", err)
	}
	_, err = shell.NewRouter(store, shell.RouterOptions{}, "not a reactor")
	if err == nil {
		t.Fatal("a string is not a reactor")
	}
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, enrolments, notifications)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.HandleNext(context.Background(), "nope", "w")
	var ug *shell.UnknownGroupError
	if !errors.As(err, &ug) || !strings.Contains(err.Error(), "courses.enrolments") {
		t.Fatalf("unknown name: %v", err)
	}
}

type jobQueue struct{ done []int64 }

func (q *jobQueue) HandledTypes() []string { return []string{"students.notify"} }
func (q *jobQueue) Exclusive() bool        { return true }
func (q *jobQueue) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		q.done = append(q.done, m.Position)
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{Delete: true}}})
	}
	return pairs, nil
}

func TestDeleteOnAckQueue(t *testing.T) {
	ctx := context.Background()
	q := &jobQueue{}
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, q)
	var jobs []core.Message
	for i := 0; i < 5; i++ {
		jobs = append(jobs, core.NewMessage(NotifyStudent{StudentID: "s1"}))
	}
	store.Append(ctx, jobs, shell.AppendOptions{})
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(q.done) != 5 {
		t.Fatalf("jobs done %v", q.done)
	}
	if left := readAll(t, store); len(left) != 0 {
		t.Fatalf("%d jobs left in the log", len(left))
	}
}

func TestHandleErrors(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	// (An unregistered decider's group is registered on first use: see
	// TestHandleRegistersTheDecidersGroupOnFirstUse.)
	rt, _ := shell.NewRouter(store, shell.RouterOptions{}, enrolments)
	rt.Setup(ctx)
	_, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1"}, nil)
	if !errors.Is(err, errInvalid()) || !strings.Contains(err.Error(), "student_id") {
		t.Fatalf("invalid command: %v", err)
	}
	if len(readAll(t, store)) != 0 {
		t.Fatal("an invalid command appends nothing")
	}
}

// Handle moves the decider's offset past the command, so workers do not
// decide it again, but they still run the reactions to its events (the
// offset moves past the command only, not past the events it appended).
func TestHandleThenWorkers(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, enrolments, notifications)
	res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.State, []string{"s1"}) || len(res.Events) != 1 || res.Command.ID == uuid.Nil {
		t.Fatalf("result %+v", res)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	log := readAll(t, store)
	if n := len(byType(log, "courses.enrolled")); n != 1 {
		t.Fatalf("the command was decided %d times", n)
	}
	if n := len(byType(log, "students.notified")); n != 1 {
		t.Fatalf("the reaction ran %d times, want 1", n)
	}
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{}, enrolments)
	_ = rt
	for _, s := range []string{"s1", "s2"} {
		if _, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: s}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s, g, err := shell.Load(ctx, store, enrolments, map[string]string{"course_id": "c1"}, nil)
	if err != nil || !slices.Equal(s, []string{"s1", "s2"}) || len(g.Conditions) == 0 {
		t.Fatalf("Load = %v, %+v, %v", s, g, err)
	}
	first := byType(readAll(t, store), "courses.enrolled")[0].Position
	s, _, err = shell.Load(ctx, store, enrolments, map[string]string{"course_id": "c1"}, &shell.ReadOptions{Upto: first})
	if err != nil || !slices.Equal(s, []string{"s1"}) {
		t.Fatalf("Load upto %d = %v, %v", first, s, err)
	}
	// A stale guard conflicts.
	_, err = store.Append(ctx, []core.Message{core.NewMessage(StudentEnrolled{CourseID: "c1", StudentID: "s9"})}, shell.AppendOptions{Guard: &core.Guard{Conditions: g.Conditions, LastPosition: first}})
	if !errors.Is(err, shell.ErrConcurrentAppend) {
		t.Fatalf("stale guard: %v", err)
	}
}

type hooked struct {
	jobQueue
	events []string
}

func (h *hooked) GroupID() string { return "hooked" }
func (h *hooked) OnStop(_ context.Context, reason string) error {
	h.events = append(h.events, "stop:"+reason)
	return nil
}
func (h *hooked) OnStart(context.Context) error { h.events = append(h.events, "start"); return nil }
func (h *hooked) OnReset(context.Context) error { h.events = append(h.events, "reset"); return nil }

func TestLifecycleHooks(t *testing.T) {
	ctx := context.Background()
	h := &hooked{}
	rt, _ := newRouter(t, newClock(), shell.RouterOptions{}, h, enrolments)
	if err := rt.Stop(ctx, "hooked", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Reset(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, "hooked"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.events, []string{"stop:maintenance", "reset", "start"}) {
		t.Fatalf("hooks %v", h.events)
	}
	err := rt.Reset(ctx, enrolments)
	var it *shell.InvalidTransitionError
	if !errors.As(err, &it) || !strings.Contains(err.Error(), "It accepts: stop") {
		t.Fatalf("resetting an active group: %v", err)
	}
}

// A pure reactor's batches are claimed, handled and acknowledged several
// per transaction, up to BatchesPerHandle.
func TestBatchesPerHandle(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{BatchesPerHandle: 2}, notifications)
	for _, s := range []string{"s1", "s2", "s3"} {
		store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: s})}, shell.AppendOptions{})
	}
	for i, want := range []int{2, 3, 3} {
		did, err := rt.HandleNext(ctx, notifications, "w")
		if err != nil || did != (i < 2) {
			t.Fatalf("HandleNext %d: did %v, err %v", i, did, err)
		}
		if got := len(byType(readAll(t, store), "students.notified")); got != want {
			t.Fatalf("after HandleNext %d: %d students notified, want %d", i, got, want)
		}
	}
}

// A failure among the batches handled in one transaction rolls them all
// back; each is then handled on its own, so the batches before the failure
// commit once, the failing batch commits up to the failing message, and the
// failure reaches the error strategy.
func TestFailureAmongInlineBatches(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, strictEnrolments)
	for _, c := range []EnrolStudent{{CourseID: "c1", StudentID: "s1"}, {CourseID: "c2", StudentID: "s1"}, {CourseID: "c2", StudentID: "s2"}, {CourseID: "c2", StudentID: "s3"}, {CourseID: "c3", StudentID: "s1"}} {
		store.Append(ctx, []core.Message{core.NewMessage(c)}, shell.AppendOptions{})
	}
	var failed *shell.GroupFailedError
	if err := rt.Drain(ctx, nil); !errors.As(err, &failed) || failed.Group != "courses.enrolments" || !errors.Is(err, errFull) {
		t.Fatalf("Drain: %v, want a *GroupFailedError of courses.enrolments matching errFull", err)
	}
	var got []string
	for _, m := range byType(readAll(t, store), "courses.enrolled") {
		e := m.Payload.(StudentEnrolled)
		got = append(got, e.CourseID+"/"+e.StudentID)
	}
	if want := []string{"c1/s1", "c2/s1", "c2/s2"}; !slices.Equal(got, want) {
		t.Fatalf("enrolled %v, want %v (each once)", got, want)
	}
	info, _ := store.Group(ctx, "courses.enrolments")
	if info.Status != shell.StatusFailed || !strings.Contains(info.Failure.Error, "course is full") {
		t.Fatalf("group %+v, want failed on the full course", info)
	}
}

// countingStore counts the store's write transactions and claims.
type countingStore struct {
	shell.Store
	updates, claims int
}

func (c *countingStore) Update(ctx context.Context, fn func(shell.Tx) error) error {
	c.updates++
	return c.Store.Update(ctx, fn)
}

func (c *countingStore) ClaimNext(ctx context.Context, group, workerID string, n int) (*driver.ClaimedPartition, error) {
	c.claims++
	return c.Store.ClaimNext(ctx, group, workerID, n)
}

// A reactor that is not pure handles its batches one after another, each
// acknowledged in the transaction that claims the next: one write
// transaction per batch, up to BatchesPerHandle batches per HandleNext.
func TestBatchesChainedInOneHandleNext(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	store := &countingStore{Store: memstore.New(courseRegistry(), memstore.WithClock(clk.Now))}
	f := &flaky{}
	rt, err := shell.NewRouter(store, shell.RouterOptions{Now: clk.Now, BatchesPerHandle: 2}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: s})}, shell.AppendOptions{})
	}
	store.updates, store.claims = 0, 0
	if did, err := rt.HandleNext(ctx, f, "w"); !did || err != nil {
		t.Fatalf("HandleNext: did %v, err %v", did, err)
	}
	if f.calls != 2 || store.claims != 1 || store.updates != 2 {
		t.Fatalf("first HandleNext: %d batches, %d claims, %d transactions; want 2 batches in 1 claim and 2 transactions", f.calls, store.claims, store.updates)
	}
	if did, err := rt.HandleNext(ctx, f, "w"); !did || err != nil {
		t.Fatalf("HandleNext: did %v, err %v", did, err)
	}
	if did, _ := rt.HandleNext(ctx, f, "w"); did || f.calls != 3 {
		t.Fatalf("after three batches: did %v, %d batches", did, f.calls)
	}
	offs, err := store.ReadOffsets(ctx, shell.OffsetQuery{Group: "shell_test.flaky"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs.Offsets {
		if o.Claimed || o.LastPosition == 0 {
			t.Fatalf("offset not acknowledged, or left claimed: %+v", o)
		}
	}
}

// A batch that fails in a chain: the batches before it are committed once,
// the failure goes to the strategy, and no claim is left behind.
func TestFailureInAChain(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, &failsOn{student: "s2"})
	for _, s := range []string{"s1", "s2", "s3"} {
		store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: s})}, shell.AppendOptions{})
	}
	if err := rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range byType(readAll(t, store), "students.notified") {
		got = append(got, m.Payload.(StudentNotified).StudentID)
	}
	if !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("notified %v, want s1 once (s2 fails, the group stops)", got)
	}
	info, _ := store.Group(ctx, "shell_test.failson")
	if info.Status != shell.StatusFailed || !strings.Contains(info.Failure.Error, "s2 refused") {
		t.Fatalf("group %+v", info)
	}
	offs, err := store.ReadOffsets(ctx, shell.OffsetQuery{Group: "shell_test.failson"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs.Offsets {
		if o.Claimed {
			t.Fatalf("claim left behind: %+v", o)
		}
	}
}

// failsOn notifies students, refusing one.
type failsOn struct{ student string }

func (f *failsOn) GroupID() string         { return "shell_test.failson" }
func (f *failsOn) HandledTypes() []string  { return []string{"students.notify"} }
func (f *failsOn) PartitionKeys() []string { return []string{"student_id"} }
func (f *failsOn) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		n := m.Payload.(NotifyStudent)
		if n.StudentID == f.student {
			return pairs, &core.BatchError{Message: m, Err: fmt.Errorf("%s refused", n.StudentID)}
		}
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{
			effects.Append{Messages: []core.Message{core.NewMessage(StudentNotified{StudentID: n.StudentID})}},
			effects.Ack{},
		}})
	}
	return pairs, nil
}

// A pure reactor's transaction stops claiming further batches once it has
// held the write lock for InlineBudget.
func TestInlineBudget(t *testing.T) {
	ctx := context.Background()
	slow := core.Decider[int]{Group: "shell_test.slow", PartitionBy: []string{"student_id"}}.With(
		core.Decide(func(_ int, c NotifyStudent) ([]any, error) { return []any{StudentNotified(c)}, nil }),
		core.Sync(func(context.Context, core.SyncTx, core.Batch[int]) error {
			time.Sleep(6 * time.Millisecond)
			return nil
		}),
	)
	rt, store := newRouter(t, newClock(), shell.RouterOptions{InlineBudget: 10 * time.Millisecond}, slow)
	for _, s := range []string{"s1", "s2", "s3", "s4", "s5"} {
		store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: s})}, shell.AppendOptions{})
	}
	if did, err := rt.HandleNext(ctx, slow, "w"); !did || err != nil {
		t.Fatalf("HandleNext: did %v, err %v", did, err)
	}
	if n := len(byType(readAll(t, store), "students.notified")); n < 1 || n > 2 {
		t.Fatalf("%d batches of 6 ms in one transaction with a 10 ms budget, want 1 or 2", n)
	}
}
