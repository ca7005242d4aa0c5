package core

import (
	"errors"
	"fmt"
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
	// maps and slices of those). It is not typed by the codec: read back,
	// numbers are float64, exact for integers up to 2^53 only (a larger
	// one comes back rounded; store it as a string).
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

	// err is the mistake At recorded (see Err).
	err error
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

// At returns a copy of m dated t. Appending a message whose time is in
// the future schedules it: the store keeps it aside and promotes it into
// the log once t has passed; one dated now or in the past is appended at
// once.
//
// A message that already has a creation time (a stamped one, one read
// from the log, a reaction's follow-up, dated from its event) cannot be
// dated before it: At then keeps the message's time and records a
// *PastMessageDateError (matching ErrPastMessageDate), which Err returns
// and which fails the append of the message (nothing is written) or the
// reaction that dispatched it, rather than the message being appended now
// in silence. Calling At again with a valid time clears it.
func (m Message) At(t time.Time) Message {
	if !m.CreatedAt.IsZero() && t.Before(m.CreatedAt) {
		m.err = &PastMessageDateError{Type: m.Type, Payload: m.Payload, CreatedAt: m.CreatedAt, At: t}
		return m
	}
	m.CreatedAt, m.err = t, nil
	return m
}

// Err returns the mistake At recorded (a *PastMessageDateError), or nil.
// Stores refuse to append a message with one.
func (m Message) Err() error { return m.err }

// ErrPastMessageDate is matched by the error of dating a message before
// its creation time (see Message.At).
var ErrPastMessageDate = errors.New("sourced: message dated before its creation time")

// PastMessageDateError is the manual's PastMessageDateError: a message
// dated (At, or a reaction's core.At or core.After) before its creation
// time.
type PastMessageDateError struct {
	// Type is the message's type string, when it has one yet; Payload its
	// payload.
	Type      string
	Payload   any
	CreatedAt time.Time
	At        time.Time
}

func (e *PastMessageDateError) Error() string {
	name := e.Type
	if name == "" {
		name = fmt.Sprintf("%T", e.Payload)
	}
	return fmt.Sprintf("sourced: message %s dated %s, %v before its creation time %s: date it at or after its creation (a future time schedules it)",
		name, e.At.Format(time.RFC3339Nano), e.CreatedAt.Sub(e.At), e.CreatedAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrPastMessageDate) true.
func (e *PastMessageDateError) Is(target error) bool { return target == ErrPastMessageDate }

// Scheduled reports whether m is dated after now, so that appending it
// schedules it rather than appending it immediately.
func (m Message) Scheduled(now time.Time) bool {
	return m.CreatedAt.After(now)
}
