package shell

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Checks every store runs on its input before it reads or writes, so that
// the stores refuse the same things with the same errors (package
// storetest holds them to it).

var (
	// ErrInvalidCondition is matched by the *InvalidConditionError of a
	// read, a page or a guard whose condition could never match a message.
	ErrInvalidCondition = errors.New("sourced: condition can never match")
	// ErrAckBeyondClaim is matched by the error of an ack at a position
	// after the claim's last message. Nothing changes: the claim is still
	// held.
	ErrAckBeyondClaim = errors.New("sourced: ack beyond the claim's last message")
)

// InvalidConditionError reports a condition that could never match a
// message: its type is empty or not registered, or it names an attribute
// the type does not declare or does not index. A store refuses such a
// condition rather than silently read nothing (or, in a guard, guard
// nothing: a typo would turn the consistency check off).
type InvalidConditionError struct {
	// Condition is the refused condition.
	Condition core.Condition
	// Attribute is the attribute at fault ("" when the type is).
	Attribute string
	// Problem says what is wrong and what to do.
	Problem string
}

func (e *InvalidConditionError) Error() string {
	var b strings.Builder
	b.WriteString("sourced: condition ")
	b.WriteString(e.Condition.String())
	if e.Condition.Type != "" {
		fmt.Fprintf(&b, " on type %q", e.Condition.Type)
	}
	if e.Attribute != "" {
		fmt.Fprintf(&b, ", attribute %q", e.Attribute)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidCondition) true.
func (e *InvalidConditionError) Is(target error) bool { return target == ErrInvalidCondition }

// CheckConditions returns an *InvalidConditionError for the first of conds
// that could never match a message stored with reg: an empty type, a type
// reg does not know, an attribute the type does not declare or does not
// index (a nested struct, a map, a field tagged `sourced:"noindex"`), an
// attribute reserved for the store (core.IDKey), or a value that is not
// valid UTF-8 (no indexed value is). A condition with no attributes selects
// every message of its type and is valid.
//
// With a nil registry (a store reading payloads raw, such as the sourced
// command's, knows no types) only what needs no type is checked: an empty
// type, a reserved attribute, a value that is not UTF-8.
func CheckConditions(reg *codec.Registry, conds []core.Condition) error {
	for _, c := range conds {
		if err := checkCondition(reg, c); err != nil {
			return err
		}
	}
	return nil
}

func checkCondition(reg *codec.Registry, c core.Condition) error {
	fail := func(attr, format string, args ...any) error {
		return &InvalidConditionError{Condition: c, Attribute: attr, Problem: fmt.Sprintf(format, args...)}
	}
	if c.Type == "" {
		return fail("", "the type is empty: name the message type string (ex. \"courses.created\")")
	}
	var t *codec.Type
	if reg != nil {
		var err error
		if t, err = reg.ByName(c.Type); err != nil {
			return fail("", "no such message type is registered: check the spelling, or register its payload with codec.Register")
		}
	}
	for name, value := range c.Attrs {
		if strings.HasPrefix(name, codec.ReservedPrefix) {
			return fail(name, "attributes starting with %q are reserved for the store and cannot be queried", codec.ReservedPrefix)
		}
		if !utf8.ValidString(value) {
			return fail(name, "the value %q is not valid UTF-8, and no indexed value is", value)
		}
		if t == nil {
			continue
		}
		f, ok := t.Field(name)
		if !ok {
			return fail(name, "%s declares no such attribute (it has %s)", c.Type, fieldNames(t))
		}
		if !f.Indexed {
			why := "it is not a scalar or a slice of scalars, so it is not indexed"
			if f.NoIndex {
				why = "it is tagged `sourced:\"noindex\"`, so it is not indexed: remove the tag to query it"
			}
			return fail(name, "%s", why)
		}
	}
	return nil
}

func fieldNames(t *codec.Type) string {
	if len(t.Fields) == 0 {
		return "no attributes"
	}
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// CheckReadAll refuses ReadAll options no page could honour: an order
// other than Ascending and Descending, or conditions CheckConditions
// refuses.
func CheckReadAll(reg *codec.Registry, opts ReadAllOptions) error {
	if opts.Order != Ascending && opts.Order != Descending {
		return fmt.Errorf("sourced: read all: unknown order %d: use shell.Ascending or shell.Descending", opts.Order)
	}
	return CheckConditions(reg, opts.Conditions)
}

// CheckAck refuses an ack at a position after the claim's last message:
// the offset would skip messages no worker has seen (and, past the end of
// the log, never be claimed again). The error matches ErrAckBeyondClaim.
func CheckAck(c *Claim, position int64) error {
	if c == nil {
		return nil // the store reports the nil claim
	}
	if last := c.Last(); position > last {
		return fmt.Errorf("sourced: ack offset %d of %s at position %d: the claim's last message is at %d; ack at most there: %w", c.OffsetID, c.Group, position, last, ErrAckBeyondClaim)
	}
	return nil
}

// CheckTTL refuses a negative claim time-to-live for ReleaseStaleClaims
// (it would release the claims of live workers, heartbeats from the future
// aside).
func CheckTTL(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("sourced: release stale claims with a negative ttl (%v): give how long a worker may stay silent before its claims are released, e.g. 2m", ttl)
	}
	return nil
}

// CheckGroupSpec checks a spec against the registry: every handled type
// is registered, and every partition key is an indexed attribute of at
// least one handled type (else no message could ever create or wake a
// partition of the group).
func CheckGroupSpec(reg *codec.Registry, g GroupSpec) error {
	if err := g.Validate(); err != nil {
		return err
	}
	types := make([]*codec.Type, 0, len(g.Handled))
	for _, name := range g.Handled {
		t, err := reg.ByName(name)
		if err != nil {
			return fmt.Errorf("sourced: consumer group %q: %w", g.ID, err)
		}
		types = append(types, t)
	}
	for _, key := range g.PartitionBy {
		declared, noindex := false, false
		for _, t := range types {
			if f, ok := t.Field(key); ok {
				if f.Indexed {
					declared = true
					break
				}
				noindex = noindex || f.NoIndex
			}
		}
		switch {
		case declared:
		case noindex:
			return fmt.Errorf("sourced: consumer group %q: partition key %q is tagged `sourced:\"noindex\"` in every handled type that declares it, so no message is indexed under it: remove the tag", g.ID, key)
		default:
			return fmt.Errorf("sourced: consumer group %q: partition key %q is not an indexed attribute of any handled type (%s), so no partition would ever be created: check its spelling against the payloads' json names", g.ID, key, strings.Join(g.Handled, ", "))
		}
	}
	return nil
}
