package shell_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
)

// Messages whose partition key is not a required attribute: what a
// registry may hold although Check refuses a decider deciding them.
type (
	loose struct {
		CourseID string `json:"course_id"`
		Note     string `json:"note"`
	}
	looseOmit struct {
		CourseID string `json:"course_id,omitempty"`
	}
	loosePtr struct {
		CourseID *string `json:"course_id"`
	}
	looseDone struct {
		CourseID string `json:"course_id"`
	}
)

func looseRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[loose](reg, "loose.cmd")
	codec.MustRegister[looseOmit](reg, "loose.omit")
	codec.MustRegister[loosePtr](reg, "loose.ptr")
	codec.MustRegister[looseDone](reg, "loose.done")
	return reg
}

var looseDecider = core.Decider[int]{Group: "loose", PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(n int, _ looseDone) int { return n + 1 }),
	core.Decide(func(n int, c loose) ([]any, error) { return []any{looseDone{CourseID: c.CourseID}}, nil }),
	core.Decide(func(n int, c looseOmit) ([]any, error) { return []any{looseDone{CourseID: c.CourseID}}, nil }),
	core.Decide(func(n int, c loosePtr) ([]any, error) { return []any{looseDone{}}, nil }),
)

// wantKeyError asserts err is a *codec.ValidationError naming course_id.
func wantKeyError(t *testing.T, err error, problem string) {
	t.Helper()
	var ve *codec.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("error %v (%T), want a *codec.ValidationError", err, err)
	}
	if len(ve.Fields) != 1 || ve.Fields[0].Field != "course_id" || !strings.Contains(ve.Fields[0].Problem, problem) {
		t.Fatalf("error %v, want one problem with course_id saying %q", err, problem)
	}
}

func TestHandleRefusesAMissingOrEmptyPartitionKey(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(looseRegistry())
	// Registered by hand: NewRouter would refuse the decider (its commands
	// do not declare course_id as required).
	if err := store.RegisterGroup(ctx, driver.GroupSpec{ID: "loose", PartitionBy: []string{"course_id"}, Handled: []string{"loose.cmd", "loose.omit", "loose.ptr"}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		cmd     any
		problem string
	}{
		{"empty value", loose{Note: "n"}, "empty"},
		{"omitted", looseOmit{}, "missing"},
		{"nil pointer", loosePtr{}, "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shell.Handle(ctx, store, looseDecider, tc.cmd, nil)
			wantKeyError(t, err, tc.problem)
		})
	}
	st, err := store.Stats(ctx)
	if err != nil || st.MaxPosition != 0 {
		t.Fatalf("max position %d (%v): a refused command must write nothing", st.MaxPosition, err)
	}
}

func TestLoadRefusesAnEmptyPartitionKey(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	_, _, err := shell.Load(ctx, store, enrolments, map[string]string{"course_id": ""}, nil)
	wantKeyError(t, err, "empty")
	_, _, err = shell.Load(ctx, store, enrolments, map[string]string{"student_id": "s1"}, nil)
	wantKeyError(t, err, "missing")
	if _, _, err = shell.Load(ctx, store, enrolments.Projection(), nil, nil); !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("Load with no partition: %v, want codec.ErrInvalid", err)
	}
}

// Once the group is registered, the store refuses a message with an empty
// value for its partition key (driver.CheckPartitionValues): the group
// never meets it, and goes on.
func TestAppendRefusesAnEmptyKeyOfARegisteredGroup(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(looseRegistry())
	counter := core.Projector[int]{Group: "loose.counter", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, e looseDone) int { return n + 1 }),
	)
	router, err := shell.NewRouter(store, shell.RouterOptions{}, counter)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = store.Append(ctx, core.Messages(looseDone{CourseID: ""}), shell.AppendOptions{})
	wantKeyError(t, err, "empty")
	if _, err := store.Append(ctx, core.Messages(looseDone{CourseID: "c1"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := router.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if g, err := store.Group(ctx, "loose.counter"); err != nil || g.Status != shell.StatusActive || g.HighestPosition != 1 {
		t.Fatalf("group %+v (%v): want it active, past the one message appended", g, err)
	}
}

// A message appended before its group was registered is not refused: the
// router fails the group on it, naming the empty key, before the reactor
// runs.
func TestRouterRefusesAPartitionWithAnEmptyKey(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(looseRegistry())
	var seen []string
	counter := core.Projector[int]{Group: "loose.counter", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, e looseDone) int { seen = append(seen, e.CourseID); return n + 1 }),
	)
	router, err := shell.NewRouter(store, shell.RouterOptions{}, counter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, core.Messages(looseDone{CourseID: ""}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := router.Drain(ctx, nil); err != nil && !errors.Is(err, codec.ErrInvalid) {
		t.Fatal(err)
	}
	g, err := store.Group(ctx, "loose.counter")
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != shell.StatusFailed || !strings.Contains(g.Failure.Error, "course_id") || !strings.Contains(g.Failure.Error, "empty") {
		t.Fatalf("group %+v: want it failed with the empty key named", g)
	}
	if len(seen) != 0 {
		t.Fatalf("the projector saw %q: the message must be refused before the reactor runs", seen)
	}
}

func TestHandleRegistersTheDecidersGroupOnFirstUse(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil)
	if err != nil {
		t.Fatalf("Handle before any router or runtime registered the group: %v", err)
	}
	g, err := store.Group(ctx, "courses.enrolments")
	if err != nil || g.Status != shell.StatusActive {
		t.Fatalf("group %+v, %v: want it registered, active", g, err)
	}
	// The workers started later do not decide the command again; they
	// react to its event.
	router, err := shell.NewRouter(store, shell.RouterOptions{}, enrolments, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := router.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for m, err := range store.All(ctx, shell.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == "courses.enrolled" {
			n++
		}
	}
	if n != 1 || len(res.Events) != 1 {
		t.Fatalf("%d enrolled events (Handle returned %d): the command was decided twice or not at all", n, len(res.Events))
	}
	// An invalid decider is refused at that first use, registering nothing.
	bad := core.Decider[int]{Group: "bad", PartitionBy: []string{"course_id"}}.With(
		core.Decide(func(int, StudentEnrolled) ([]any, error) { return nil, nil }))
	if _, err := shell.Handle(ctx, store, bad, StudentEnrolled{CourseID: "c1", StudentID: "s1"}, nil); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("Handle with an invalid decider: %v, want core.ErrDefinition", err)
	}
	if _, err := store.Group(ctx, "bad"); !errors.Is(err, shell.ErrGroupNotRegistered) {
		t.Fatalf("the invalid decider's group: %v, want it not registered", err)
	}
}

func TestUnknownGroupErrorNamesTheFix(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	_, err := store.Group(ctx, "courses.enrolments")
	var ue *shell.UnknownGroupError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "registered: none") || !strings.Contains(err.Error(), "NewRuntime") || !strings.Contains(err.Error(), "Router.Setup") {
		t.Fatalf("error %q: want it to say what registers a group", err)
	}
}
