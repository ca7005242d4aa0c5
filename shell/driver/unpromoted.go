package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// ErrUnpromoted is matched by the *UnpromotedError of a PromoteScheduled
// that set aside scheduled messages it could not promote.
var ErrUnpromoted = errors.New("sourced: scheduled messages could not be promoted")

// UnpromotedMessage is a due scheduled message that PromoteScheduled set
// aside: its type is no longer registered, its payload no longer decodes,
// or it no longer validates (a rule added, or a limit such as
// codec.MaxIndexedValueBytes, since it was scheduled).
type UnpromotedMessage struct {
	// ID is the message's id.
	ID uuid.UUID
	// Type is its type string.
	Type string
	// DueAt is when it was due.
	DueAt time.Time
	// Err says why it was not promoted.
	Err error
}

// UnpromotedError lists the due scheduled messages PromoteScheduled set
// aside. Every other due message was promoted (the count PromoteScheduled
// returns beside it), so one message the current code cannot append no
// longer holds up everything due after it. A set-aside message stays in the
// schedule, unchanged (ReadScheduled lists it, NextScheduled counts it),
// and every PromoteScheduled reports it again until it can be promoted:
// register its type or relax the rule, and it is promoted at the next
// call; nothing is lost. It matches errors.Is(err, ErrUnpromoted).
type UnpromotedError struct {
	Messages []UnpromotedMessage
}

func (e *UnpromotedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sourced: promote scheduled messages: %d set aside, left in the schedule: they cannot be appended as they are (register their types, or fix what the error names, and they are promoted at the next call)", len(e.Messages))
	const shown = 5
	for i, m := range e.Messages {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.Messages)-shown)
			break
		}
		fmt.Fprintf(&b, "; %s %s due %s: %v", m.Type, m.ID, m.DueAt.UTC().Format(time.RFC3339), m.Err)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUnpromoted) true.
func (e *UnpromotedError) Is(target error) bool { return target == ErrUnpromoted }

// CheckPromotable reports why a due scheduled message of type typ, its
// stored payload decoded as m.Payload, cannot be appended: the same
// validation an append runs (codec.Type.Validate, so the limits on indexed
// values included). Stores run it on every due message before they promote
// it, and set aside (UnpromotedError) a message it refuses.
func CheckPromotable(typ *codec.Type, m core.Message) error {
	return typ.Validate(m.Payload)
}
