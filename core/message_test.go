package core_test

import (
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
