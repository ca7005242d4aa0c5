package shell

import (
	"context"
	"errors"
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
	Partition map[string]string
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

// undecodable meets a claim that failed because a message could not be
// decoded (a *DecodeError): the group's failure, not an idle group. The
// error strategy applies as to a failed batch, with the message as the
// one that failed; when no partition is named (a handled type the
// registry does not know) there is nothing to park, and the group fails
// once its retries ran out. ok is false for any other error.
func (rt *Router) undecodable(ctx context.Context, re *reactor, err error) (failed *GroupFailedError, ok bool, _ error) {
	var de *DecodeError
	if !errors.As(err, &de) || transient(ctx, err) {
		return nil, false, nil
	}
	claim := &ClaimedPartition{Group: re.info.Group, Partition: de.Partition, OffsetID: de.OffsetID}
	if de.MessageType != "" {
		m := core.PositionedMessage{Position: de.Position}
		m.ID, m.Type = de.MessageID, de.MessageType
		claim.Messages = []core.PositionedMessage{m}
	}
	if de.OffsetID == 0 {
		strategy := rt.opts.ErrorStrategy
		if re.strategy != nil {
			strategy = *re.strategy
		}
		if strategy.Park {
			strategy.Park = false
			cp := *re
			cp.strategy = &strategy
			re = &cp
		}
	}
	failed, ferr := rt.fail(context.WithoutCancel(ctx), re, claim, err, 0)
	return failed, true, ferr
}
