package shell_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// recorder keeps every observation.
type recorder struct {
	mu  sync.Mutex
	obs []shell.Observation
}

func (r *recorder) Observe(_ context.Context, o shell.Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

func observed[T shell.Observation](r *recorder) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, o := range r.obs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func TestObserverHearsBatchesAndClaims(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rec := &recorder{}
	router, err := shell.NewRouter(store, shell.RouterOptions{Observer: rec}, enrolments, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: "ada"})
	res, err := store.Append(ctx, []core.Message{cmd}, shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	batches := observed[shell.BatchHandled](rec)
	// The command (deciding it appends its event), the event (a reaction
	// appends NotifyStudent), NotifyStudent (its event).
	if len(batches) != 3 {
		t.Fatalf("%d batches observed, want 3: %+v", len(batches), batches)
	}
	first := batches[0]
	if first.Group != "courses.enrolments" || first.Messages != 1 || first.Appended != 1 || first.First != res.Positions[0] || first.Partition["course_id"] != "c1" {
		t.Errorf("first batch %+v", first)
	}
	for _, b := range batches {
		if want := []uuid.UUID{res.Messages[0].CorrelationID}; !slices.Equal(b.Correlations, want) || want[0] == uuid.Nil {
			t.Errorf("batch %s correlations %v, want the command's chain %v", b.Group, b.Correlations, want)
		}
		if b.Duration <= 0 || b.Started.IsZero() {
			t.Errorf("batch %s without a duration", b.Group)
		}
	}
	if claims := observed[shell.Claimed](rec); len(claims) != 3 {
		t.Errorf("%d claims observed, want 3", len(claims))
	}
}

// contender is an impure reactor whose first handling of a claim races
// with another writer of its partition: its append conflicts once.
type contender struct {
	store shell.Store
	raced atomic.Bool
}

func (c *contender) HandledTypes() []string  { return []string{"courses.enrol"} }
func (c *contender) GroupID() string         { return "observed.contender" }
func (c *contender) PartitionKeys() []string { return []string{"course_id"} }
func (c *contender) HistoryTypes() []string  { return []string{"courses.enrol"} }
func (c *contender) HandleClaim(ctx context.Context, cl effects.Claim) ([]effects.Pair, error) {
	if c.raced.CompareAndSwap(false, true) {
		if _, err := c.store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: "rival"}), shell.AppendOptions{}); err != nil {
			return nil, err
		}
	}
	last := cl.Messages[len(cl.Messages)-1]
	g := cl.HistoryGuard
	return []effects.Pair{{Source: last, Signals: []effects.Signal{
		effects.Append{Messages: core.Messages(StudentEnrolled{CourseID: "c1", StudentID: "x"}), Guard: &g},
		effects.Ack{},
	}}}, nil
}

func TestObserverHearsGuardConflicts(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rec := &recorder{}
	router, err := shell.NewRouter(store, shell.RouterOptions{Observer: rec}, &contender{store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: "ada"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := router.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	conflicts := observed[shell.GuardConflict](rec)
	if len(conflicts) != 1 {
		t.Fatalf("%d conflicts observed, want 1: %+v", len(conflicts), conflicts)
	}
	c := conflicts[0]
	if c.Group != "observed.contender" || c.Partition["course_id"] != "c1" || c.Attempt != 1 || !c.Retried || !errors.Is(c.Err, core.ErrConcurrentAppend) {
		t.Errorf("conflict %+v", c)
	}
	// The retry succeeded and is observed as a batch.
	if n := len(observed[shell.BatchHandled](rec)); n < 1 {
		t.Error("the retried batch was not observed")
	}
}

func TestObserverHearsFailures(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rec := &recorder{}
	broken := core.Decider[int]{Group: "observed.broken", PartitionBy: []string{"student_id"}, Hooks: core.Hooks{RefusalsFail: true}}.With(
		core.Decide(func(int, NotifyStudent) ([]any, error) { return nil, errors.New("mail server down") }),
	)
	router, err := shell.NewRouter(store, shell.RouterOptions{Observer: rec, ErrorStrategy: shell.ErrorStrategy{Retries: 1, After: time.Hour}}, broken)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, core.Messages(NotifyStudent{StudentID: "ada"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	fails := observed[shell.BatchFailed](rec)
	if len(fails) != 1 || !fails[0].Retrying || fails[0].RetryCount != 1 || fails[0].RetryAt.IsZero() || fails[0].Partition["student_id"] != "ada" {
		t.Fatalf("failures observed: %+v", fails)
	}
}

func TestObserverHearsSynchronousHandling(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rec := &recorder{}
	if _, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "ada"}, &shell.HandleOptions{Observer: rec}); err != nil {
		t.Fatal(err)
	}
	apps := observed[shell.Appended](rec)
	if len(apps) != 1 || apps[0].Group != "courses.enrolments" || apps[0].Messages != 2 {
		t.Fatalf("appends observed: %+v", apps)
	}
}
