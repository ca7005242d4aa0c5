package core

import (
	"maps"
	"time"

	"github.com/google/uuid"
)

// Message is one entry of the log: a typed payload and its envelope.
//
// Payload is a value of a struct type registered with a codec.Registry; Type
// is the stored type string for it ("courses.created"). Type may be left
// empty on messages built in memory: the store names it from the registry
// when it appends, and every message read from a store has it set.
type Message struct {
	// ID identifies the message. UUID v7 (time-ordered) when the shell
	// stamps it; the zero UUID means "not stamped yet".
	ID uuid.UUID
	// Type is the stable type string of the payload.
	Type string
	// Payload is the message's data: a registered struct value.
	Payload any
	// Metadata holds JSON-native values (strings, numbers, bools, nested
	// maps and slices of those). It is not typed by the codec.
	Metadata map[string]any
	// CausationID is the id of the message that caused this one; it defaults
	// to the message's own id.
	CausationID uuid.UUID
	// CorrelationID is the id of the first message of the causal chain; it
	// defaults to the message's own id.
	CorrelationID uuid.UUID
	// CreatedAt is when the message was created. A time in the future (see
	// At) makes the store schedule the message instead of appending it now.
	CreatedAt time.Time
}

// PositionedMessage is a message as stored in the log, with its global
// position (1-based, strictly increasing, never reused).
type PositionedMessage struct {
	Message
	Position int64
}

// NewMessage wraps a payload in a message with an empty envelope. If payload
// is already a Message it is returned unchanged. The id, time and default
// causation/correlation are filled in by Stamp when the message is appended.
func NewMessage(payload any) Message {
	switch m := payload.(type) {
	case Message:
		return m
	case *Message:
		return *m
	case PositionedMessage:
		return m.Message
	}
	return Message{Payload: payload}
}

// Stamped reports whether the message has an id.
func (m Message) Stamped() bool { return m.ID != uuid.Nil }

// Stamp fills what a message needs before it is stored: the id (when zero),
// the creation time (when zero), and causation and correlation ids (each
// defaults to the message's own id). Fields already set are kept, so
// stamping is idempotent. Stamp is pure: the caller supplies the id and time.
func (m Message) Stamp(id uuid.UUID, now time.Time) Message {
	if m.ID == uuid.Nil {
		m.ID = id
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	if m.CausationID == uuid.Nil {
		m.CausationID = m.ID
	}
	if m.CorrelationID == uuid.Nil {
		m.CorrelationID = m.ID
	}
	return m
}

// Correlate links m to the message that caused it: causation becomes the
// source's id and correlation the source's correlation id (or the source's id
// when it has none), so every message of a chain shares the first one's id.
func (m Message) Correlate(source Message) Message {
	m.CausationID = source.ID
	m.CorrelationID = source.CorrelationID
	if m.CorrelationID == uuid.Nil {
		m.CorrelationID = source.ID
	}
	return m
}

// WithMetadata returns a copy of m whose metadata has kv merged in (kv wins).
// The original message's metadata map is not modified.
func (m Message) WithMetadata(kv map[string]any) Message {
	if len(kv) == 0 {
		return m
	}
	md := make(map[string]any, len(m.Metadata)+len(kv))
	maps.Copy(md, m.Metadata)
	maps.Copy(md, kv)
	m.Metadata = md
	return m
}

// At returns a copy of m stamped with creation time t. Appending a message
// whose time is in the future schedules it: the store keeps it aside and
// promotes it into the log once t has passed.
func (m Message) At(t time.Time) Message {
	m.CreatedAt = t
	return m
}

// Scheduled reports whether m is dated after now, so that appending it
// schedules it rather than appending it immediately.
func (m Message) Scheduled(now time.Time) bool {
	return m.CreatedAt.After(now)
}
