package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

func TestStampFillsDefaultsOnce(t *testing.T) {
	id := uuid.MustParse("0190b6d8-0000-7000-8000-000000000001")
	now := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	m := core.NewMessage(CreateCourse{CourseID: "c1"}).Stamp(id, now)
	if m.ID != id || m.CausationID != id || m.CorrelationID != id || !m.CreatedAt.Equal(now) {
		t.Fatalf("stamp defaults: %+v", m)
	}
	again := m.Stamp(uuid.New(), now.Add(time.Hour))
	if again.ID != id || !again.CreatedAt.Equal(now) {
		t.Fatalf("stamp is not idempotent: %+v", again)
	}
	if !m.Stamped() || core.NewMessage(CreateCourse{}).Stamped() {
		t.Fatal("Stamped reports wrongly")
	}
}

func TestCorrelateChainsToTheRoot(t *testing.T) {
	now := time.Unix(0, 0)
	cmd := core.NewMessage(CreateCourse{}).Stamp(uuid.New(), now)
	evt := core.NewMessage(CourseCreated{}).Correlate(cmd).Stamp(uuid.New(), now)
	reaction := core.NewMessage(SendReminder{}).Correlate(evt).Stamp(uuid.New(), now)
	if evt.CausationID != cmd.ID || evt.CorrelationID != cmd.ID {
		t.Fatalf("event ids: causation %v correlation %v, command %v", evt.CausationID, evt.CorrelationID, cmd.ID)
	}
	if reaction.CausationID != evt.ID || reaction.CorrelationID != cmd.ID {
		t.Fatalf("reaction ids: causation %v correlation %v", reaction.CausationID, reaction.CorrelationID)
	}
	// A source with no correlation id of its own (never stamped) is the root.
	src := core.Message{ID: uuid.New()}
	if got := core.NewMessage(CourseCreated{}).Correlate(src); got.CorrelationID != src.ID {
		t.Fatalf("correlation with an unstamped source: %v", got.CorrelationID)
	}
}

func TestWithMetadataCopies(t *testing.T) {
	m := core.NewMessage(CreateCourse{}).WithMetadata(map[string]any{"user": "u1"})
	m2 := m.WithMetadata(map[string]any{"user": "u2", "request": "r1"})
	if m.Metadata["user"] != "u1" || len(m.Metadata) != 1 {
		t.Fatalf("original metadata changed: %v", m.Metadata)
	}
	if m2.Metadata["user"] != "u2" || m2.Metadata["request"] != "r1" {
		t.Fatalf("merged metadata: %v", m2.Metadata)
	}
	if got := m.WithMetadata(nil); got.Metadata["user"] != "u1" {
		t.Fatalf("empty merge lost metadata: %v", got.Metadata)
	}
}

func TestAtSchedules(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := core.NewMessage(SendReminder{}).At(now.Add(time.Second))
	if !m.Scheduled(now) || m.Scheduled(now.Add(time.Second)) {
		t.Fatal("a message is scheduled only while its time is in the future")
	}
	if core.NewMessage(SendReminder{}).Scheduled(now) {
		t.Fatal("an unstamped message is not scheduled")
	}
}

func TestNewMessageKeepsMessages(t *testing.T) {
	m := core.Message{ID: uuid.New(), Payload: CreateCourse{CourseID: "c1"}}
	if got := core.NewMessage(m); got.ID != m.ID {
		t.Fatal("NewMessage rewrapped a Message")
	}
	if got := core.NewMessage(&m); got.ID != m.ID {
		t.Fatal("NewMessage rewrapped a *Message")
	}
	pm := core.PositionedMessage{Message: m, Position: 3}
	if got := core.NewMessage(pm); got.ID != m.ID {
		t.Fatal("NewMessage rewrapped a PositionedMessage")
	}
}

// TestAtBeforeTheCreationTime: dating a message that has a creation time
// before it records a *PastMessageDateError (Err) and keeps the time,
// instead of the message being appended now in silence; a message with
// no creation time yet takes any time, and a later valid At clears it.
func TestAtBeforeTheCreationTime(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	m := core.NewMessage(CourseCreated{CourseID: "c1"}).Stamp(uuid.New(), created)
	past := m.At(created.Add(-time.Minute))
	var pe *core.PastMessageDateError
	if !errors.Is(past.Err(), core.ErrPastMessageDate) || !errors.As(past.Err(), &pe) || !pe.At.Equal(created.Add(-time.Minute)) || !pe.CreatedAt.Equal(created) {
		t.Fatalf("At before the creation time: %v, want a *PastMessageDateError with both times", past.Err())
	}
	if !past.CreatedAt.Equal(created) {
		t.Fatalf("the refused date was kept: %v", past.CreatedAt)
	}
	if !strings.Contains(past.Err().Error(), "before its creation time") {
		t.Fatalf("%v", past.Err())
	}
	if later := past.At(created.Add(time.Hour)); later.Err() != nil || !later.CreatedAt.Equal(created.Add(time.Hour)) {
		t.Fatalf("a valid At after a refused one: %v %v", later.Err(), later.CreatedAt)
	}
	if m.At(created).Err() != nil || core.NewMessage(CourseCreated{}).At(created.Add(-time.Hour)).Err() != nil {
		t.Fatal("a message dated at its creation, or one with no creation time yet, is refused")
	}
}

// TestReactionDatedBeforeItsEvent: a reaction's follow-up dated before
// the event that triggered it (core.At in the past, a negative
// core.After: a reminder a day before a check-in less than a day away) is
// due at once, dated at the event's time; before, it failed the reaction
// (and its group, by default) with a *PastMessageDateError.
func TestReactionDatedBeforeItsEvent(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for name, out := range map[string]any{
		"At":    core.At(created.Add(-time.Second), SendReminder{CourseID: "c1"}),
		"After": core.After(-time.Second, SendReminder{CourseID: "c1"}),
	} {
		p := core.Projector[int]{Group: "reminders", PartitionBy: []string{"course_id"}}.With(
			core.Evolve(func(n int, _ CourseCreated) int { return n }),
			core.React(func(int, CourseCreated) []any { return []any{out} }),
		)
		event := core.NewMessage(CourseCreated{CourseID: "c1"}).Stamp(uuid.New(), created)
		got, err := p.React(0, event)
		if err != nil || len(got) != 1 || got[0].Err() != nil || !got[0].CreatedAt.Equal(created) {
			t.Errorf("%s in the past: %v %v, want one message due at once (dated at the event, %v)", name, got, err, created)
		}
	}
	p := core.Projector[int]{Group: "reminders", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ CourseCreated) int { return n }),
		core.React(func(int, CourseCreated) []any { return []any{core.After(time.Hour, SendReminder{CourseID: "c1"})} }),
	)
	event := core.NewMessage(CourseCreated{CourseID: "c1"}).Stamp(uuid.New(), created)
	out, err := p.React(0, event)
	if err != nil || len(out) != 1 || !out[0].CreatedAt.Equal(created.Add(time.Hour)) {
		t.Fatalf("an hour after the event: %v %v", out, err)
	}
}
