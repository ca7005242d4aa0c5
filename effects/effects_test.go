package effects_test

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
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/internal/testdomain"
)

// The course domain of the tests, declared once in testdomain.
type (
	EnrolStudent    = testdomain.EnrolStudent
	StudentEnrolled = testdomain.StudentEnrolled
	NotifyStudent   = testdomain.NotifyStudent
)

type RunJob struct {
	N int `json:"n"`
}

func registry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[EnrolStudent](reg, "courses.enrol_student")
	codec.MustRegister[StudentEnrolled](reg, "courses.student_enrolled")
	codec.MustRegister[NotifyStudent](reg, "students.notify")
	codec.MustRegister[RunJob](reg, "jobs.run")
	return reg
}

var enrolment = core.Decider[[]string]{Group: "Courses::Enrolment", PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	core.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		if slices.Contains(s, c.StudentID) {
			return nil, fmt.Errorf("%s already enrolled", c.StudentID)
		}
		return []any{StudentEnrolled{CourseID: c.CourseID, StudentID: c.StudentID}}, nil
	}),
	core.React(func(s []string, e StudentEnrolled) []any { return []any{NotifyStudent{StudentID: e.StudentID}} }),
)

func positioned(pos int64, payload any) core.PositionedMessage {
	return core.PositionedMessage{Message: core.NewMessage(payload).Stamp(uuid.New(), time.Now()), Position: pos}
}

func TestFromDefinitionDescribesTheGroup(t *testing.T) {
	r, err := effects.FromDefinition(registry(), enrolment)
	if err != nil {
		t.Fatal(err)
	}
	info, err := effects.Describe(r)
	if err != nil {
		t.Fatal(err)
	}
	if info.Group != "courses.enrolment" || info.Label != "courses.enrolment" || info.Exclusive {
		t.Fatalf("info %+v", info)
	}
	if !slices.Equal(info.Handled, []string{"courses.enrol_student", "courses.student_enrolled"}) {
		t.Fatalf("handled %v", info.Handled)
	}
	if !slices.Equal(info.History, []string{"courses.student_enrolled"}) || !slices.Equal(info.PartitionBy, []string{"course_id"}) {
		t.Fatalf("history %v partition %v", info.History, info.PartitionBy)
	}
}

func TestFromDefinitionChecksTheDefinition(t *testing.T) {
	bad := enrolment.With(core.Decide(func(s []string, c NotifyStudent) ([]any, error) { return nil, nil }))
	if _, err := effects.FromDefinition(registry(), bad); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("err = %v", err)
	}
}

func TestStepTurnsOutcomesIntoSignals(t *testing.T) {
	history := []core.PositionedMessage{positioned(1, StudentEnrolled{CourseID: "c1", StudentID: "s1"})}
	guard := core.Guard{Conditions: []core.Condition{{Type: "courses.student_enrolled", Attrs: map[string]string{"course_id": "c1"}}}, LastPosition: 3}
	c := effects.Claim{
		Partition:    map[string]string{"course_id": "c1"},
		Messages:     []core.PositionedMessage{positioned(2, EnrolStudent{CourseID: "c1", StudentID: "s2"}), positioned(3, EnrolStudent{CourseID: "c1", StudentID: "s2"})},
		History:      history,
		HistoryGuard: guard,
	}
	pairs, err := effects.Step(enrolment, c)
	var be *core.BatchError
	if !errors.As(err, &be) || be.Message.Position != 3 || !strings.Contains(err.Error(), "s2 already enrolled") {
		t.Fatalf("the second enrolment of s2 is rejected: %v", err)
	}
	if len(pairs) != 1 || pairs[0].Source.Position != 2 {
		t.Fatalf("pairs before the failure: %+v", pairs)
	}
	sigs := pairs[0].Signals
	app, ok := sigs[0].(effects.Append)
	if !ok || app.Guard == nil || app.Guard.LastPosition != 3 || !app.Correlated {
		t.Fatalf("first signal: %#v", sigs[0])
	}
	if _, ok := sigs[len(sigs)-1].(effects.Ack); !ok {
		t.Fatalf("last signal: %#v", sigs[len(sigs)-1])
	}
	msgs := effects.Messages(pairs)
	if len(msgs) != 1 || msgs[0].CausationID != c.Messages[0].ID || msgs[0].CorrelationID != c.Messages[0].ID {
		t.Fatalf("event envelope: %+v", msgs)
	}
}

func TestStepCorrelationChain(t *testing.T) {
	cmd := positioned(1, EnrolStudent{CourseID: "c1", StudentID: "s1"})
	pairs, err := effects.Step(enrolment, effects.Claim{Messages: []core.PositionedMessage{cmd}})
	if err != nil {
		t.Fatal(err)
	}
	evt := effects.Messages(pairs)[0].Stamp(uuid.New(), time.Now())
	pe := core.PositionedMessage{Message: evt, Position: 2}
	pairs, err = effects.Step(enrolment, effects.Claim{Messages: []core.PositionedMessage{pe}, History: []core.PositionedMessage{pe}})
	if err != nil {
		t.Fatal(err)
	}
	reaction := effects.Messages(pairs)
	if len(reaction) != 1 || reaction[0].CausationID != evt.ID || reaction[0].CorrelationID != cmd.ID {
		t.Fatalf("reaction envelope %+v, event %v, command %v", reaction, evt.ID, cmd.ID)
	}
	if a := pairs[0].Signals[0].(effects.Append); a.Guard != nil {
		t.Fatal("reactions are appended without a guard")
	}
	pairs, _ = effects.Step(enrolment, effects.Claim{Messages: []core.PositionedMessage{pe}, History: []core.PositionedMessage{pe}, Replaying: true})
	if len(effects.Messages(pairs)) != 0 || len(pairs) != 1 {
		t.Fatalf("no reactions on replay, one ack: %+v", pairs)
	}
}

// jobs is a third-party reactor: a delete-on-ack queue with no Sourced base.
type jobs struct{ ran []int }

func (j *jobs) HandledTypes() []string { return []string{"jobs.run"} }
func (j *jobs) Exclusive() bool        { return true }
func (j *jobs) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		j.ran = append(j.ran, m.Payload.(RunJob).N)
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{Delete: true}}})
	}
	return pairs, nil
}

func TestDescribeDefaults(t *testing.T) {
	info, err := effects.Describe(&jobs{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Group != "effects_test.jobs" || !info.Exclusive || !info.IDPartitioned() || info.Label != info.Group {
		t.Fatalf("defaults %+v", info)
	}
}

type plain struct{ keys []string }

func (p plain) HandledTypes() []string  { return []string{"jobs.run"} }
func (p plain) PartitionKeys() []string { return p.keys }
func (p plain) GroupID() string         { return "Plain::Worker" }
func (p plain) HandleClaim(context.Context, effects.Claim) ([]effects.Pair, error) {
	return nil, nil
}

func TestDescribeRefusesIDPartitioningWithoutExclusive(t *testing.T) {
	if _, err := effects.Describe(plain{}); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("a non-exclusive reactor without partition keys: %v", err)
	}
	if _, err := effects.Describe(plain{keys: []string{core.IDKey}}); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("explicit __id: %v", err)
	}
	info, err := effects.Describe(plain{keys: []string{"n"}})
	if err != nil || info.Group != "plain.worker" {
		t.Fatalf("%+v %v", info, err)
	}
}

func TestCorrelateUsesTheSourceUnlessCorrelated(t *testing.T) {
	src := core.NewMessage(RunJob{}).Stamp(uuid.New(), time.Now())
	other := core.NewMessage(RunJob{}).Stamp(uuid.New(), time.Now())
	m := core.NewMessage(NotifyStudent{})
	if got := effects.Correlate(effects.Append{Messages: []core.Message{m}}, src); got[0].CausationID != src.ID {
		t.Fatal("correlated with the pair's source")
	}
	if got := effects.Correlate(effects.Append{Messages: []core.Message{m}, Source: &other}, src); got[0].CausationID != other.ID {
		t.Fatal("correlated with the Append's own source")
	}
	if got := effects.Correlate(effects.Append{Messages: []core.Message{m}, Correlated: true}, src); got[0].CausationID != uuid.Nil {
		t.Fatal("a correlated append is left alone")
	}
}

// Deciders and event-sourced projectors are pure (the shell may handle
// them inside the write transaction); a state-stored projector, whose Load
// reads the application's storage, and a reactor that does not say so are
// not.
func TestPurity(t *testing.T) {
	roster := core.Projector[[]string]{Group: "rosters", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	)
	stored := roster
	stored.Load = func(context.Context, map[string]string) ([]string, bool, error) { return nil, false, nil }
	for _, c := range []struct {
		name string
		def  core.Definition
		pure bool
	}{{"decider", enrolment, true}, {"event-sourced projector", roster, true}, {"state-stored projector", stored, false}} {
		r, err := effects.FromDefinition(registry(), c.def)
		if err != nil {
			t.Fatal(err)
		}
		info, err := effects.Describe(r)
		if err != nil {
			t.Fatal(err)
		}
		if info.Pure != c.pure {
			t.Errorf("%s: pure %v, want %v", c.name, info.Pure, c.pure)
		}
	}
	info, err := effects.Describe(&jobs{})
	if err != nil || info.Pure {
		t.Fatalf("a plain reactor: pure %v, err %v", info.Pure, err)
	}
}
