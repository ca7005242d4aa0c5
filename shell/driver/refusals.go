package driver

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/textclip"
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
	// held. An ack of a claim the worker does not hold is ErrNotClaimant
	// whatever its position: every store checks ownership first.
	ErrAckBeyondClaim = errors.New("sourced: ack beyond the claim's last message")
	// ErrInvalidPartition is matched by the *InvalidPartitionError of a
	// partition read (ReadPartition) that would not read what it names: an
	// attribute no type declares, for one (see CheckReadPartition).
	ErrInvalidPartition = errors.New("sourced: partition names attributes no type read declares")
)

// InvalidPartitionError reports a partition that ReadPartition refuses
// (see CheckReadPartition): under conditional AND a message is matched
// only on the partition attributes it carries, so a misspelt attribute
// would silently widen the read (or, alone, empty it) and drop out of the
// guard. core.IDKey may only stand alone, with a message id: the partition
// of one message.
type InvalidPartitionError struct {
	// Partition is the refused partition.
	Partition core.Partition
	// Types are the types read.
	Types []string
	// Attribute is the attribute at fault ("" when the partition has
	// none).
	Attribute string
	// Problem says what is wrong and what to do.
	Problem string
	// Err is the cause when a value is one no message can be indexed
	// under (see codec.CheckIndexedValue): it wraps codec.ErrInvalid, so
	// errors.Is(err, codec.ErrInvalid) holds too. Nil otherwise.
	Err error
}

// Unwrap returns Err.
func (e *InvalidPartitionError) Unwrap() error { return e.Err }

func (e *InvalidPartitionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sourced: read partition %s of %s", clip(core.Partition(e.Partition).String()), strings.Join(e.Types, ", "))
	if e.Attribute != "" {
		fmt.Fprintf(&b, ", attribute %q", e.Attribute)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidPartition) true.
func (e *InvalidPartitionError) Is(target error) bool { return target == ErrInvalidPartition }

// CheckReadPartition returns an *InvalidPartitionError when ReadPartition
// of partition over types would not read what it names:
//   - a partition with no attributes (it would read nothing and guard
//     nothing);
//   - an attribute no type read declares and no registered type indexes
//     (a typo: under conditional AND it would silently widen the read);
//   - an attribute the types read declare but do not index (tagged
//     `sourced:"noindex"`, or not a scalar);
//   - attributes none of which any type read declares (the read could only
//     be empty, and its guard would guard nothing);
//   - an attribute reserved for the store, core.IDKey beside other
//     attributes or with a value that is not a message id, a value that is
//     no message can be indexed under (codec.CheckIndexedValue: longer
//     than codec.MaxIndexedValueBytes, holding a NUL, not valid UTF-8;
//     the error then wraps codec.ErrInvalid too).
//
// An attribute that some registered type indexes need not be declared by
// every type read, nor by any: a message is matched on the partition
// attributes its type carries (a decider's history holds events carrying
// some of its keys, as core's definition checks allow). With no types
// nothing is read and only the partition itself is checked; with a nil
// registry (a store reading payloads raw) declarations are not checked.
func CheckReadPartition(reg *codec.Registry, partition core.Partition, types []string) error {
	fail := func(attr, problem string) error {
		return &InvalidPartitionError{Partition: partition, Types: types, Attribute: attr, Problem: problem}
	}
	if len(partition) == 0 {
		return fail("", "the partition has no attributes, so it would read nothing and guard nothing: give the partition's key values, e.g. map[string]string{\"course_id\": \"c1\"}")
	}
	if id, ok := partition[core.IDKey]; ok {
		if len(partition) > 1 {
			return fail(core.IDKey, fmt.Sprintf("%s names the partition of one message, so it stands alone: read {%q: message id}, or drop it for a partition by attributes", core.IDKey, core.IDKey))
		}
		if _, err := uuid.Parse(id); err != nil {
			return fail(core.IDKey, fmt.Sprintf("%q is not a message id: the partition {%q: id} of an id-partitioned group holds the message with that id", id, core.IDKey))
		}
		return nil
	}
	typed := reg != nil && len(types) > 0
	if typed {
		for _, name := range types {
			if _, err := reg.ByName(name); err != nil {
				return fmt.Errorf("sourced: read partition %s: %w", core.Partition(partition).String(), err)
			}
		}
	}
	// The common case allocates nothing: the attributes are sorted (for
	// the error to name the first at fault) only when one is.
	bad, carried := false, !typed // carried: some type read declares some attribute
	for name, value := range partition {
		if err := codec.CheckIndexedValue(value); err != nil {
			return &InvalidPartitionError{Partition: partition, Types: types, Attribute: name, Problem: valueProblem(err), Err: err}
		}
		indexed, problem := partitionAttribute(reg, types, typed, name, value)
		carried = carried || indexed
		bad = bad || problem != ""
	}
	if !bad && carried {
		return nil
	}
	names := slices.Sorted(maps.Keys(partition))
	for _, name := range names {
		if _, problem := partitionAttribute(reg, types, typed, name, partition[name]); problem != "" {
			return fail(name, problem)
		}
	}
	return fail(names[0], fmt.Sprintf("no type read (%s) declares any of the partition's attributes (%s), so the read could only be empty and its guard would guard nothing: read the types that carry them", strings.Join(types, ", "), strings.Join(names, ", ")))
}

// partitionAttribute checks one attribute of a partition read over types
// (registered, when typed): whether one of them indexes it, and what is
// wrong with it ("" when nothing is).
func partitionAttribute(reg *codec.Registry, types []string, typed bool, name, value string) (indexed bool, problem string) {
	if strings.HasPrefix(name, codec.ReservedPrefix) {
		return false, fmt.Sprintf("attributes starting with %q are reserved for the store (only %s, alone, names a partition)", codec.ReservedPrefix, core.IDKey)
	}
	if !typed {
		return false, ""
	}
	best := fieldUndeclared
	for _, typ := range types {
		t, _ := reg.ByName(typ) // checked by the caller
		best = min(best, declares(t, name))
	}
	switch best {
	case fieldIndexed:
		return true, ""
	case fieldNoIndex:
		return false, "it is tagged `sourced:\"noindex\"` in every type read that declares it, so no message is indexed under it: remove the tag to partition by it"
	case fieldNotScalar:
		return false, "it is not a scalar or a slice of scalars in any type read that declares it, so it is not indexed"
	}
	// No type read declares it. Under conditional AND that is how a
	// partition reads a type lacking one of its attributes (a decider
	// folding events that carry some of its keys), but an attribute no
	// registered type indexes is a typo: it would widen the read.
	for _, t := range reg.Types() {
		if declares(t, name) == fieldIndexed {
			return false, ""
		}
	}
	return false, fmt.Sprintf("no type read declares it (%s), nor does any registered type index it: check its spelling against the payloads' json names", strings.Join(types, ", "))
}

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
	// Err is the cause when the value is one no message can be indexed
	// under (see codec.CheckIndexedValue): it wraps codec.ErrInvalid, so
	// errors.Is(err, codec.ErrInvalid) holds too. Nil otherwise.
	Err error
}

// Unwrap returns Err.
func (e *InvalidConditionError) Unwrap() error { return e.Err }

func (e *InvalidConditionError) Error() string {
	var b strings.Builder
	b.WriteString("sourced: condition ")
	b.WriteString(clip(e.Condition.String()))
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
// attribute reserved for the store (core.IDKey), or a value no message
// can be indexed under (see codec.CheckIndexedValue; the error then wraps
// codec.ErrInvalid too). A condition with no attributes selects every
// message of its type and is valid.
//
// With a nil registry (a store reading payloads raw, such as the sourced
// command's, knows no types) only what needs no type is checked: an empty
// type, a reserved attribute, a value no message is indexed under.
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
		if err := codec.CheckIndexedValue(value); err != nil {
			return &InvalidConditionError{Condition: c, Attribute: name, Problem: valueProblem(err), Err: err}
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

// maxQuoted is how many bytes of a caller's input an error message quotes.
const maxQuoted = 200

// clip cuts s to about maxQuoted bytes (on a character boundary), saying
// how long it was, so that an error never repeats unbounded input.
func clip(s string) string {
	head, cut := textclip.Head(s, maxQuoted)
	if cut == 0 {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", head, len(s))
}

// valueProblem is the problem codec.CheckIndexedValue found, for a
// refusal that names the attribute itself.
func valueProblem(err error) string {
	return strings.TrimPrefix(err.Error(), "codec: ") + "; no message is indexed under such a value"
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

// How a set of types declares an attribute, best first.
const (
	fieldIndexed = iota
	fieldNotScalar
	fieldNoIndex
	fieldUndeclared
)

// declares says how type t declares the attribute name.
func declares(t *codec.Type, name string) int {
	f, ok := t.Field(name)
	switch {
	case !ok:
		return fieldUndeclared
	case f.Indexed:
		return fieldIndexed
	case f.NoIndex:
		return fieldNoIndex
	default:
		return fieldNotScalar
	}
}

// ErrInvalidCursor is matched by the error of a ReadAll given cursors it
// cannot honour (see ReadAllOptions): two of From, After and Before, After
// with Descending, Before with Ascending, or a negative After or Before.
var ErrInvalidCursor = errors.New("sourced: invalid read all cursor")

// ErrInvalidLimit is matched by the error of a read whose Limit no store
// honours: a negative one (Read, ReadPartition, ReadAll, All), or a page
// of ReadAll or All over MaxPageSize.
var ErrInvalidLimit = errors.New("sourced: invalid read limit")

// MaxPageSize is the largest page ReadAll (and All) returns: a Limit over
// it is refused (ErrInvalidLimit), so one call never holds a store's
// reader, and the caller's memory, for a whole log. Page through a long
// log with All or Page.Next instead.
//
// Read and ReadPartition have no such cap: with Limit 0 they return every
// message matching their conditions, as a decision or a fold needs all of
// its history; their cost is bounded by what the conditions select.
const MaxPageSize = 10_000

// CheckReadOptions refuses ReadOptions no store honours: a negative Limit
// (0 is "no cap"; a negative one used to read everything on some stores).
// Every store runs it on Read and ReadPartition, in a transaction or not.
func CheckReadOptions(opts ReadOptions) error {
	if opts.Limit < 0 {
		return fmt.Errorf("sourced: read with limit %d: give a positive limit, or 0 for every matching message: %w", opts.Limit, ErrInvalidLimit)
	}
	return nil
}

// CheckReadAll refuses ReadAll options no page could honour: an order
// other than Ascending and Descending, cursors ReadAllOptions does not
// allow (ErrInvalidCursor), a negative Limit or one over MaxPageSize
// (ErrInvalidLimit), or conditions CheckConditions refuses.
func CheckReadAll(reg *codec.Registry, opts ReadAllOptions) error {
	if opts.Order != Ascending && opts.Order != Descending {
		return fmt.Errorf("sourced: read all: unknown order %d: use shell.Ascending or shell.Descending", opts.Order)
	}
	switch {
	case opts.After < 0 || opts.Before < 0:
		return fmt.Errorf("%w: After %d, Before %d: positions are positive (0: no cursor)", ErrInvalidCursor, opts.After, opts.Before)
	case opts.After > 0 && opts.Order == Descending:
		return fmt.Errorf("%w: After %d with Descending: a descending read goes back from a cursor, give Before (exclusive) or From (inclusive)", ErrInvalidCursor, opts.After)
	case opts.Before > 0 && opts.Order == Ascending:
		return fmt.Errorf("%w: Before %d with Ascending: an ascending read goes on from a cursor, give After (exclusive) or From (inclusive)", ErrInvalidCursor, opts.Before)
	case opts.From > 0 && (opts.After > 0 || opts.Before > 0):
		return fmt.Errorf("%w: From %d with After %d or Before %d: give one cursor (From includes its position, After and Before do not)", ErrInvalidCursor, opts.From, opts.After, opts.Before)
	case opts.Limit < 0 || opts.Limit > MaxPageSize:
		return fmt.Errorf("sourced: read all with a page of %d messages: give a page size from 1 to %d (shell.MaxPageSize), or 0 for %d, and page on with Page.Next or All: %w", opts.Limit, MaxPageSize, DefaultPageSize, ErrInvalidLimit)
	}
	return CheckConditions(reg, opts.Conditions)
}

// CheckAck refuses an ack at a position after the claim's last message:
// the offset would skip messages no worker has seen (and, past the end of
// the log, never be claimed again). The error matches ErrAckBeyondClaim.
func CheckAck(c *ClaimedPartition, position int64) error {
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

// NormalizeGroupSpec is the prologue of every store's RegisterGroup: it
// checks the spec (CheckGroupSpec), refuses an id that is not normalised
// (core.NormalizeGroup), and returns the spec as a store keeps it:
// Handled and PartitionBy sorted without duplicates (PartitionBy never
// nil), and Label defaulted to the ID.
func NormalizeGroupSpec(reg *codec.Registry, g GroupSpec) (GroupSpec, error) {
	if err := CheckGroupSpec(reg, g); err != nil {
		return GroupSpec{}, err
	}
	if n, err := core.NormalizeGroup(g.ID); err != nil || n != g.ID {
		return GroupSpec{}, fmt.Errorf("sourced: consumer group id %q is not normalised (core.NormalizeGroup gives %q, %v): register it under the normalised id", g.ID, n, err)
	}
	g.Handled = slices.Compact(slices.Sorted(slices.Values(g.Handled)))
	g.PartitionBy = slices.Compact(slices.Sorted(slices.Values(g.PartitionBy)))
	if g.PartitionBy == nil {
		g.PartitionBy = []string{}
	}
	if g.Label == "" {
		g.Label = g.ID
	}
	return g, nil
}

// CheckGroupConflict is RegisterGroup's check of a spec against one group
// the store has registered already (id, whether it is exclusive, and
// which types it handles): an exclusive group may share no handled type
// with another group, nor any group with an exclusive one (an exclusive
// group is the sole consumer of its types, and may delete them when it
// acks). The spec's own id is no conflict (a re-registration).
// It returns a *GroupConflictError naming the types shared.
func CheckGroupConflict(spec GroupSpec, id string, exclusive bool, handles func(typ string) bool) error {
	if id == spec.ID || !spec.Exclusive && !exclusive {
		return nil
	}
	var shared []string
	for _, typ := range spec.Handled {
		if handles(typ) {
			shared = append(shared, typ)
		}
	}
	if len(shared) > 0 {
		return &GroupConflictError{Group: spec.ID, Other: id, Types: shared}
	}
	return nil
}

// CheckClaim checks the arguments of a claim (ClaimNext, ClaimUpdate,
// ClaimMany): a worker id, which names the claim's holder, and a positive
// batch size.
func CheckClaim(workerID string, batchSize int) error {
	if workerID == "" {
		return errors.New("sourced: claim with no worker id: give the id of the worker that will hold the claim")
	}
	if batchSize <= 0 {
		return fmt.Errorf("sourced: claim a batch of %d messages: the batch size must be positive", batchSize)
	}
	return nil
}
