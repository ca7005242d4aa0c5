package driver

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// PreparedMessage is a message ready to be stored: validated, named,
// stamped and encoded. Stores build their rows from it.
type PreparedMessage struct {
	// Message is the message as stored: its type set to the registered
	// name, its id and time stamped (the time in UTC, to the microsecond,
	// so what the caller gets back is what a read returns).
	Message core.Message
	// Type is the message's registered type.
	Type *codec.Type
	// Payload is the encoded payload.
	Payload []byte
	// Metadata is the encoded metadata, nil when there is none.
	Metadata []byte
	// Scheduled says the message is dated after now: the store keeps it
	// aside until it is due.
	Scheduled bool
}

// PrepareMessage validates, names, stamps (a new UUIDv7 and now, where m
// has none) and encodes one message for a store's append, the same way
// for every store. A message dated before its creation time (m.Err, see
// core.Message.At) is refused with its *core.PastMessageDateError.
// Nothing is written: an error means the append must be
// refused whole.
func PrepareMessage(reg *codec.Registry, m core.Message, now time.Time) (PreparedMessage, error) {
	if err := m.Err(); err != nil {
		return PreparedMessage{}, err // dated before its creation (core.Message.At)
	}
	typ, err := reg.TypeFor(m.Type, m.Payload)
	if err != nil {
		return PreparedMessage{}, err
	}
	if err := typ.Validate(m.Payload); err != nil {
		return PreparedMessage{}, err
	}
	data, err := typ.Encode(m.Payload)
	if err != nil {
		return PreparedMessage{}, err
	}
	if m.Type != "" && m.Type != typ.Name {
		return PreparedMessage{}, fmt.Errorf("message type %q is not the registered name %q of its payload %T: %w", m.Type, typ.Name, m.Payload, codec.ErrInvalid)
	}
	m.Type = typ.Name
	var id uuid.UUID
	if !m.Stamped() {
		if id, err = uuid.NewV7(); err != nil {
			return PreparedMessage{}, fmt.Errorf("new message id: %w", err)
		}
	}
	m = m.Stamp(id, now)
	m.CreatedAt = m.CreatedAt.UTC().Truncate(time.Microsecond)
	p := PreparedMessage{Message: m, Type: typ, Payload: data, Scheduled: m.Scheduled(now)}
	if len(m.Metadata) > 0 {
		if p.Metadata, err = json.Marshal(m.Metadata); err != nil {
			return PreparedMessage{}, fmt.Errorf("metadata of %s: %w", typ.Name, err)
		}
	}
	if err := CheckDecodes(typ, p.Payload, p.Metadata); err != nil {
		return PreparedMessage{}, err
	}
	return p, nil
}

// CheckDecodes reports, wrapping codec.ErrInvalid, a message whose encoded
// payload does not decode again as its type, or whose encoded metadata is
// not JSON a read can decode: for example a json.RawMessage (a workflow's
// input) nested to encoding/json's depth limit, which encodes but, once
// wrapped in the payload, is one level too deep to decode. Stored, such a
// message would fail every read of a page holding it. PrepareMessage runs
// it for every append and schedule; a store that prepares messages its own
// way must run it too.
func CheckDecodes(typ *codec.Type, payload, metadata []byte) error {
	if _, err := typ.Decode(0, payload); err != nil {
		return fmt.Errorf("%s: the encoded payload (%d bytes) would not decode again: %v: %w", typ.Name, len(payload), err, codec.ErrInvalid)
	}
	if metadata != nil && !json.Valid(metadata) {
		var v any
		err := json.Unmarshal(metadata, &v)
		return fmt.Errorf("%s: the encoded metadata (%d bytes) would not decode again: %v: %w", typ.Name, len(metadata), err, codec.ErrInvalid)
	}
	return nil
}
