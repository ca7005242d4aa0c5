package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry maps message type strings to Go struct types and back, and
// holds what Register compiled for each. Build one with NewRegistry (the
// zero value works too), register every message type at start-up, then
// share it: all methods are safe for concurrent use, and lookups take no
// lock (registration publishes a new immutable snapshot).
type Registry struct {
	mu   sync.Mutex // serialises registrations
	snap atomic.Pointer[snapshot]
}

type snapshot struct {
	byName map[string]*Type
	byGo   map[reflect.Type]*Type
	sorted []*Type
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.snap.Store(&snapshot{byName: map[string]*Type{}, byGo: map[reflect.Type]*Type{}})
	return r
}

func (r *Registry) load() *snapshot {
	if s := r.snap.Load(); s != nil {
		return s
	}
	return &snapshot{}
}

// Register compiles the struct type T as message type name.
//
// name is the stable type string stored with every message: lower-case
// letters, digits, '.', '_' and '-', starting with a letter or a digit
// ("courses.created"). Registering a name or a Go type a second time is an
// error naming both. So is a payload the codec cannot store and read back,
// named down to the attribute path: channels, functions, complex numbers,
// unsafe pointers, interfaces with methods, maps whose keys are not
// strings, integers or TextMarshalers, structs with no exported fields,
// url.URL (use URL), marshalers without the matching unmarshaler, an
// attribute named with the reserved prefix "__", or an upcaster chain
// with a missing link. Fields of type any hold free-form JSON data only
// (Validate refuses a time, a struct or bytes in them; see the package doc).
//
// Struct tags: `json:"..."` names attributes as encoding/json does;
// `sourced:"required"` marks a required attribute (see Validate);
// `sourced:"noindex"` keeps a scalar attribute out of the key pairs.
func Register[T any](r *Registry, name string, opts ...Option) error {
	t, err := compileType(reflect.TypeFor[T](), name, opts)
	if err != nil {
		return err
	}
	t.decode = func(data []byte) (any, error) {
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	return r.add(t)
}

// MustRegister is Register, panicking on error: for message types declared
// in package-level variables or test fixtures.
func MustRegister[T any](r *Registry, name string, opts ...Option) {
	if err := Register[T](r, name, opts...); err != nil {
		panic(err)
	}
}

func (r *Registry) add(t *Type) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.load()
	if prev, ok := old.byName[t.Name]; ok {
		return fmt.Errorf("codec: register %q (%v): the type string %q is already registered for Go type %v", t.Name, t.GoType, t.Name, prev.GoType)
	}
	if prev, ok := old.byGo[t.GoType]; ok && !t.shared {
		return fmt.Errorf("codec: register %q (%v): Go type %v is already registered as %q", t.Name, t.GoType, t.GoType, prev.Name)
	}
	next := &snapshot{
		byName: maps.Clone(old.byName),
		byGo:   maps.Clone(old.byGo),
	}
	if next.byName == nil {
		next.byName, next.byGo = map[string]*Type{}, map[reflect.Type]*Type{}
	}
	next.byName[t.Name] = t
	if !t.shared {
		next.byGo[t.GoType] = t
	}
	next.sorted = slices.Clone(old.sorted)
	i, _ := slices.BinarySearchFunc(next.sorted, t.Name, func(e *Type, name string) int { return strings.Compare(e.Name, name) })
	next.sorted = slices.Insert(next.sorted, i, t)
	r.snap.Store(next)
	return nil
}

// ByName returns the type registered as name. The error wraps
// ErrUnknownType.
func (r *Registry) ByName(name string) (*Type, error) {
	if t, ok := r.load().byName[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w %q: register its payload struct with codec.Register", ErrUnknownType, name)
}

// ByGoType returns the type registered for the struct type t (or for the
// struct a pointer type t points to). The error wraps ErrUnregistered.
func (r *Registry) ByGoType(t reflect.Type) (*Type, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil type", ErrUnregistered)
	}
	s := r.load()
	if mt, ok := s.byGo[t]; ok {
		return mt, nil
	}
	if t.Kind() == reflect.Pointer {
		if mt, ok := s.byGo[t.Elem()]; ok {
			return mt, nil
		}
	}
	if st := t; st.Kind() == reflect.Struct || (st.Kind() == reflect.Pointer && st.Elem().Kind() == reflect.Struct) {
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		return nil, fmt.Errorf("%w %v: register it with codec.Register[%v](registry, \"type.name\")", ErrUnregistered, t, st)
	}
	return nil, fmt.Errorf("%w %v: payloads are registered struct types", ErrUnregistered, t)
}

// TypeOf returns the type of a payload: a registered struct value or a
// pointer to one. The error wraps ErrUnregistered.
func (r *Registry) TypeOf(payload any) (*Type, error) {
	if payload == nil {
		return nil, fmt.Errorf("%w: the payload is nil", ErrUnregistered)
	}
	return r.ByGoType(reflect.TypeOf(payload))
}

// Names returns the type strings of the Go types ts, in order; the error
// wraps ErrUnregistered and names every Go type that was never registered.
func (r *Registry) Names(ts ...reflect.Type) ([]string, error) {
	out := make([]string, 0, len(ts))
	var errs []error
	for _, t := range ts {
		ct, err := r.ByGoType(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ct.Name)
	}
	return out, errors.Join(errs...)
}

// Types returns every registered type, sorted by Name.
func (r *Registry) Types() []*Type { return slices.Clone(r.load().sorted) }

// Len returns how many types are registered. Types are only ever added,
// so Len grows with every registration: a cache built from the registry
// (a store's view of which types its consumer groups handle) is stale
// when Len changed since it was built. It takes no lock.
func (r *Registry) Len() int { return len(r.load().sorted) }

// Encode returns the type of payload (a registered struct value or a
// non-nil pointer to one) and its JSON encoding, at the type's current
// Version. It does not validate: see Validate. NaN and infinite floats,
// and failing marshalers, are errors naming the type.
func (r *Registry) Encode(payload any) (t *Type, data []byte, err error) {
	t, err = r.TypeOf(payload)
	if err != nil {
		return nil, nil, err
	}
	data, err = t.Encode(payload)
	return t, data, err
}

// Encode returns the JSON encoding of payload, a t.GoType value or a
// non-nil pointer to one.
func (t *Type) Encode(payload any) ([]byte, error) {
	p, ok := t.pointer(payload)
	if !ok {
		return nil, fmt.Errorf("codec: encode %q: got a %T, want a %v", t.Name, payload, t.GoType)
	}
	if p == nil {
		return nil, fmt.Errorf("codec: encode %q: nil *%v", t.Name, t.GoType)
	}
	// Marshal through a pointer: no copy, and pointer-receiver marshalers
	// of the fields apply whether the payload came as a value or a pointer.
	data, err := json.Marshal(reflect.NewAt(t.GoType, p).Interface())
	if err != nil {
		return nil, fmt.Errorf("codec: encode %q (%v): %w", t.Name, t.GoType, err)
	}
	return data, nil
}

// Decode returns the payload stored as message type name at schema
// version (0 means the current one) as a struct value (not a pointer).
// The error wraps ErrUnknownType for an unregistered name.
func (r *Registry) Decode(name string, version int, data []byte) (any, error) {
	t, err := r.ByName(name)
	if err != nil {
		return nil, err
	}
	return t.Decode(version, data)
}

// Decode returns the payload in data, stored at schema version (0 means
// t.Version), as a t.GoType value. An older version runs the upcasters up
// to t.Version first; a newer one is an error (the data was written by a
// newer build). Attributes the struct does not declare are ignored, and
// declared attributes missing from data keep their zero value: decoding
// stored facts does not validate them.
func (t *Type) Decode(version int, data []byte) (any, error) {
	if version == 0 || version == t.Version {
		v, err := t.decode(data)
		if err != nil {
			return nil, fmt.Errorf("codec: decode %q version %d: %w", t.Name, t.Version, err)
		}
		return v, nil
	}
	if version < 0 || version > t.Version {
		return nil, fmt.Errorf("codec: decode %q version %d: the current version is %d: was it written by a newer build?", t.Name, version, t.Version)
	}
	up, err := t.upcast(version, data)
	if err != nil {
		return nil, err
	}
	v, err := t.decode(up)
	if err != nil {
		return nil, fmt.Errorf("codec: decode %q version %d (upcast to %d): %w", t.Name, version, t.Version, err)
	}
	return v, nil
}

// upcast runs the upcasters from version to t.Version on data.
func (t *Type) upcast(version int, data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("codec: decode %q version %d: %w", t.Name, version, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	for v := version; v < t.Version; v++ {
		next, err := t.upcasters[v](m)
		if err != nil {
			return nil, fmt.Errorf("codec: decode %q: upcast from version %d to %d: %w", t.Name, v, v+1, err)
		}
		if next == nil {
			next = map[string]any{}
		}
		m = next
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("codec: decode %q: encode the upcast payload (version %d): %w", t.Name, t.Version, err)
	}
	return out, nil
}

// Keys returns the key pairs of payload appended to dst (see Type.Keys).
// Errors wrap ErrUnregistered for a payload of no registered type, or
// report a TextMarshaler that failed.
func (r *Registry) Keys(payload any, dst []KeyPair) ([]KeyPair, error) {
	t, err := r.TypeOf(payload)
	if err != nil {
		return dst, err
	}
	p, _ := t.pointer(payload)
	if p == nil {
		return dst, fmt.Errorf("codec: keys of %q: nil *%v", t.Name, t.GoType)
	}
	return t.appendKeys(p, dst)
}
