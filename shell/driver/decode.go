package driver

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/sourced-go/sourced/core"
)

// DecodeError is the error of a store that read a stored message it
// cannot decode: its type is not registered in the store's registry
// (codec.ErrUnknownType), or its payload or metadata does not decode into
// the registered type (an incompatible change of a payload struct without
// an upcaster). It wraps the cause (errors.Is(err, codec.ErrUnknownType)
// works through it).
//
// A claim that meets one returns it with Group, Partition and OffsetID
// set (OffsetID 0 when the group itself handles a type the registry does
// not know, before any message is read), and the claim is not made. The
// router never takes that for "nothing to do": the group's error strategy
// applies (retries, then the group fails, or its partition is parked), and
// the failure, naming the message type, shows in the group's Failure
// (Stats, `sourced groups`, the dashboard) and in Drain's and WaitIdle's
// *GroupFailedError. Register the type (or add the upcaster), deploy, and
// start the group again.
type DecodeError struct {
	// Group, Partition and OffsetID name the claim that met the message
	// (empty outside a claim).
	Group     string
	Partition core.Partition
	OffsetID  int64
	// MessageType, MessageID and Position name the message (MessageID and
	// Position are zero for a handled type unknown to the registry).
	MessageType string
	MessageID   uuid.UUID
	Position    int64
	// Err is the cause.
	Err error
}

// Error names the message, its type and the cause, and says what to do.
func (e *DecodeError) Error() string {
	what := fmt.Sprintf("message type %q", e.MessageType)
	if e.Position > 0 {
		what = fmt.Sprintf("message %s (%s at position %d)", e.MessageID, e.MessageType, e.Position)
	}
	in := ""
	if e.Group != "" {
		in = fmt.Sprintf(" claimed by consumer group %s", e.Group)
		if e.Partition != nil {
			in += " in partition " + core.Partition(e.Partition).String()
		}
	}
	return fmt.Sprintf("sourced: cannot decode %s%s (register the type with codec.Register, or add an upcaster, then start the group again): %v", what, in, e.Err)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }
