package core

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Snapshots is a decider's opt-in to persisted snapshots of its state
// (Decider.Snapshots): how the state is encoded and how often a snapshot
// is taken. The shell (shell.Handle, shell.Load) then starts a cold
// partition from its latest snapshot and folds only the events after it,
// instead of the partition's whole history. The zero value takes none.
//
// A snapshot is only a shortcut: the state it decodes to is the state a
// full fold of the partition up to the snapshot's position gives, so a
// decision on it is exactly the decision on a full fold. What keeps it so
// is the codec's Version: change it whenever the state's shape, an evolve
// handler or an upcaster of an evolved type changes, and every snapshot
// taken with the old version is ignored (and rebuilt from the log).
type Snapshots[S any] struct {
	// Codec encodes and decodes the state, and names its shape with
	// Version (JSONSnapshots for states that are plain data).
	Codec SnapshotCodec[S]
	// Every is how many events a partition's state folds between two
	// snapshots: a decision saves one when the state it decided on folded
	// at least Every events since the snapshot it started from (0:
	// DefaultSnapshotEvery).
	Every int
}

// DefaultSnapshotEvery is Snapshots.Every when none is given.
const DefaultSnapshotEvery = 100

// SnapshotCodec encodes a decider's state for a snapshot and decodes it.
// Decode(Encode(s)) must be a state equal to s for everything the
// decider's evolve and decide handlers read. A codec may also implement
// SnapshotCodecChecker, called when the decider is checked, to refuse a
// state type it cannot encode faithfully.
type SnapshotCodec[S any] interface {
	// Version names the state's shape, e.g. "account/v3": snapshots
	// taken under another version are ignored. Change it whenever the
	// state type, an evolve handler or an upcaster of an evolved type
	// changes.
	Version() string
	// Encode encodes a state.
	Encode(S) ([]byte, error)
	// Decode decodes what Encode returned.
	Decode([]byte) (S, error)
}

// SnapshotCodecChecker is the optional interface of a SnapshotCodec that
// can tell, when the decider is checked (Decider.Check), that it cannot
// encode the decider's state type faithfully: Check returns why, and the
// decider is refused before any snapshot is taken. JSONSnapshots
// implements it (a state with unexported fields, channels or functions
// does not survive JSON).
type SnapshotCodecChecker interface {
	Check() error
}

// JSONSnapshots is the SnapshotCodec of states that are plain data:
// encoding/json, under version. The state type must round-trip through
// JSON unchanged, which Check verifies from its type when the decider is
// checked: structs with exported fields only (none tagged `json:"-"`),
// no interfaces, functions or channels, maps keyed by strings or
// integers. Types with their own MarshalJSON and UnmarshalJSON (or text
// marshalling), such as time.Time, are trusted.
func JSONSnapshots[S any](version string) SnapshotCodec[S] {
	return jsonSnapshots[S]{version: version}
}

type jsonSnapshots[S any] struct{ version string }

func (c jsonSnapshots[S]) Version() string { return c.version }

func (c jsonSnapshots[S]) Encode(s S) ([]byte, error) { return json.Marshal(s) }

func (c jsonSnapshots[S]) Decode(b []byte) (S, error) {
	var s S
	err := json.Unmarshal(b, &s)
	return s, err
}

// Check refuses a state type that JSON would not round-trip.
func (c jsonSnapshots[S]) Check() error {
	return checkJSONState(reflect.TypeFor[S](), "state", map[reflect.Type]bool{})
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// marshalsItself reports whether t (or *t) encodes and decodes itself.
func marshalsItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return (t.Implements(jsonMarshaler) || p.Implements(jsonMarshaler)) && p.Implements(jsonUnmarshaler) ||
		(t.Implements(textMarshaler) || p.Implements(textMarshaler)) && p.Implements(textUnmarshaler)
}

// checkJSONState walks t and names the first part of it JSON would lose
// or change.
func checkJSONState(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	if marshalsItself(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return nil
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkJSONState(t.Elem(), path+"[]", seen)
	case reflect.Map:
		switch k := t.Key(); {
		case k.Kind() == reflect.String, k.Kind() >= reflect.Int && k.Kind() <= reflect.Uint64, reflect.PointerTo(k).Implements(textUnmarshaler):
		default:
			return fmt.Errorf("%s is a map keyed by %v, which JSON cannot key objects by", path, k)
		}
		return checkJSONState(t.Elem(), path+"[key]", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name := path + "." + f.Name
			if !f.IsExported() {
				if f.Anonymous && f.Type.Kind() == reflect.Struct {
					if err := checkJSONState(f.Type, name, seen); err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("%s is unexported, so JSON drops it", name)
			}
			if tag := f.Tag.Get("json"); tag == "-" {
				return fmt.Errorf("%s is tagged `json:\"-\"`, so JSON drops it", name)
			} else if strings.Contains(tag, ",string") && f.Type.Kind() == reflect.Pointer {
				return fmt.Errorf("%s: the ,string option on a pointer does not round-trip nil", name)
			}
			if err := checkJSONState(f.Type, name, seen); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s has type %v, which JSON cannot decode back (%s)", path, t, t.Kind())
}

// check validates the option for decider d: a codec with a version, a
// policy that is not negative, a partitioned decider (not a delete-on-ack
// queue), and what the codec's own Check says.
func (o Snapshots[S]) check(group string, partitioned bool) error {
	if o.Codec == nil {
		if o.Every != 0 {
			return &DefinitionError{Group: group, Problem: "Snapshots.Every is set but Snapshots.Codec is nil: give a codec (core.JSONSnapshots) or leave Snapshots zero"}
		}
		return nil
	}
	var errs []error
	if o.Codec.Version() == "" {
		errs = append(errs, errors.New("the snapshot codec has no Version: name the state's shape, e.g. \"account/v1\", and change it when the state or its evolve handlers change"))
	}
	if o.Every < 0 {
		errs = append(errs, fmt.Errorf("Snapshots.Every is %d: give a positive number of events (or 0 for %d)", o.Every, DefaultSnapshotEvery))
	}
	if !partitioned {
		errs = append(errs, errors.New("snapshots need a PartitionBy: an id-partitioned decider is a delete-on-ack queue, whose folded messages may be deleted after a snapshot took them in"))
	}
	if c, ok := o.Codec.(SnapshotCodecChecker); ok {
		if err := c.Check(); err != nil {
			errs = append(errs, fmt.Errorf("the snapshot codec %q cannot encode the state: %w", o.Codec.Version(), err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &DefinitionError{Group: group, Problem: "snapshots: " + errors.Join(errs...).Error()}
}

// Snapshotting is the type-erased view of a definition's snapshot option,
// for the shell: the codec with states as any, and the policy. Decider
// implements it.
type Snapshotting interface {
	// SnapshotPolicy returns the codec and how many events a state folds
	// between snapshots; ok is false when the definition takes none (or
	// its option is invalid: see Err).
	SnapshotPolicy() (codec SnapshotCodec[any], every int, ok bool)
}

// SnapshotPolicy implements Snapshotting.
func (d Decider[S]) SnapshotPolicy() (SnapshotCodec[any], int, bool) {
	o := d.Snapshots
	if o.Codec == nil || o.check(d.Group, len(d.PartitionBy) > 0) != nil {
		return nil, 0, false
	}
	every := o.Every
	if every == 0 {
		every = DefaultSnapshotEvery
	}
	return erasedCodec[S]{o.Codec}, every, true
}

// erasedCodec is a SnapshotCodec[S] with states as any.
type erasedCodec[S any] struct{ c SnapshotCodec[S] }

func (e erasedCodec[S]) Version() string { return e.c.Version() }

func (e erasedCodec[S]) Encode(s any) ([]byte, error) {
	v, ok := s.(S)
	if !ok {
		return nil, fmt.Errorf("sourced: snapshot of a %T, the decider's state is %v", s, reflect.TypeFor[S]())
	}
	return e.c.Encode(v)
}

func (e erasedCodec[S]) Decode(b []byte) (any, error) {
	s, err := e.c.Decode(b)
	if err != nil {
		return nil, err
	}
	return s, nil
}
