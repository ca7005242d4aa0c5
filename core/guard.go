package core

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sourced-go/sourced/codec"
)

// ErrConcurrentAppend is matched (errors.Is) by the error an append returns
// when a message matching its guard arrived after the guard's position.
var ErrConcurrentAppend = errors.New("sourced: concurrent append")

// Guard is the consistency guard of a decision: the conditions it read and
// the last log position it saw. An append made with the guard fails if any
// message matching one of the conditions has a later position.
//
// A guard with no conditions never conflicts. A read that found nothing
// still guards: its LastPosition is the store's position at read time, so a
// message created after the read is a conflict.
type Guard struct {
	Conditions   []Condition
	LastPosition int64
}

// Conflicting returns the messages of later (in their order) that violate
// the guard: position after LastPosition and matching a condition. keysOf
// gives a message's key pairs; stores pass their index, tests can pass
// KeysFrom(reg).
func (g Guard) Conflicting(later []PositionedMessage, keysOf func(PositionedMessage) []codec.KeyPair) []PositionedMessage {
	if len(g.Conditions) == 0 {
		return nil
	}
	var out []PositionedMessage
	for _, m := range later {
		if m.Position <= g.LastPosition {
			continue
		}
		if MatchAny(g.Conditions, m.Type, keysOf(m)) {
			out = append(out, m)
		}
	}
	return out
}

// Advance returns the guard with LastPosition raised to pos (never lowered).
// A batch that appends under one guard several times advances it past its
// own appends so that it never conflicts with itself.
func (g Guard) Advance(pos int64) Guard {
	if pos > g.LastPosition {
		g.LastPosition = pos
	}
	return g
}

// KeysFrom returns a key function for Guard.Conflicting that extracts key
// pairs from payloads with the registry (unregistered payloads have none).
func KeysFrom(reg *codec.Registry) func(PositionedMessage) []codec.KeyPair {
	return func(m PositionedMessage) []codec.KeyPair {
		t, err := reg.TypeFor(m.Type, m.Payload)
		if err != nil {
			return nil
		}
		return t.Keys(m.Payload, nil)
	}
}

// ConflictError is the error of an append rejected by its guard. It carries
// the conflicting messages themselves, so a pure decider can re-decide on
// the delta without reading the partition again. It matches
// ErrConcurrentAppend.
type ConflictError struct {
	Guard     Guard
	Conflicts []PositionedMessage
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sourced: concurrent append: %d conflicting message(s) after position %d", len(e.Conflicts), e.Guard.LastPosition)
	for i, m := range e.Conflicts {
		if i == 3 {
			fmt.Fprintf(&b, ", ...")
			break
		}
		fmt.Fprintf(&b, "; %s at %d", m.Type, m.Position)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrConcurrentAppend) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConcurrentAppend }
