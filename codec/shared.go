package codec

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// RegisterAs registers the struct type T under name as one of several
// message types sharing one Go type: the lifecycle events of durable
// workflows, for instance, are the same structs for every workflow but
// stored under each workflow's own type strings ("greeting_task.step_started",
// "index_pages.step_started"), so that each workflow's consumer group claims
// only its own runs.
//
// A type registered this way is found by ByName (so messages stored under
// name decode to T) but never by ByGoType or TypeOf: a message of such a
// payload must carry its Type (see TypeFor). A Go type may be registered
// with RegisterAs under many names, and with Register under one more,
// which ByGoType then answers. Registering a name twice is an error, as
// with Register.
func RegisterAs[T any](r *Registry, name string, opts ...Option) error {
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
	t.shared = true
	return r.add(t)
}

// TypeFor returns the type a message of type name (empty: not named yet)
// and payload is stored as: TypeOf(payload) when name is empty, else the
// type registered as name, provided payload is of its Go type (or a
// pointer to it). This is how stores name what they append, so that
// payloads registered with RegisterAs are stored under the name their
// message carries. Errors wrap ErrUnregistered, ErrUnknownType, or
// ErrInvalid for a payload of another Go type than name's.
func (r *Registry) TypeFor(name string, payload any) (*Type, error) {
	if name == "" {
		return r.TypeOf(payload)
	}
	t, ok := r.load().byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: register its payload struct with codec.Register", ErrUnknownType, name)
	}
	if _, ok := t.pointer(payload); !ok {
		if own, err := r.TypeOf(payload); err == nil {
			return nil, fmt.Errorf("message type %q is not the registered name %q of its payload %T: %w", name, own.Name, payload, ErrInvalid)
		}
		return nil, fmt.Errorf("message type %q holds %v payloads, not %T: %w", name, t.GoType, payload, ErrInvalid)
	}
	return t, nil
}
