package core

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// handlerKind says which kind of handler a Handler built, so that Emits
// knows what it declares.
type handlerKind uint8

const (
	kindOther handlerKind = iota
	kindDecide
	kindReact
	kindReactAny
)

// Emits declares the message types a Decide, React or ReactAny handler may
// return, given as values of those types (zero values will do):
//
//	core.Decide(decideCreate).Emits(CourseCreated{}, CourseRejected{})
//
// A topology (package shell/topology) then knows what the handler produces
// without running it. The declaration is checked whenever the handler
// runs: returning a message of an undeclared type fails the decision (or
// the reaction) with an error matching ErrUndeclaredEmit that names the
// type, so a test that exercises the handler catches a declaration that
// fell behind the code. Emits with no types declares that the handler
// produces nothing. On other handlers (Evolve, Sync, ...) it is a
// definition error.
func (h Handler[S]) Emits(types ...any) Handler[S] {
	declared := make([]reflect.Type, 0, len(types))
	var bad []string
	for _, v := range types {
		t := emittedType(v)
		if t == nil || t.Kind() != reflect.Struct {
			bad = append(bad, fmt.Sprintf("%T", v))
			continue
		}
		if !slices.Contains(declared, t) {
			declared = append(declared, t)
		}
	}
	inner, kind, msgType := h.apply, h.kind, h.msgType
	return Handler[S]{kind: kind, msgType: msgType, apply: func(hs *handlers[S]) {
		if inner == nil {
			hs.errorf("Emits on a zero Handler (build handlers with Decide, React, ...)")
			return
		}
		if len(bad) > 0 {
			hs.errorf("Emits: %s are not message payloads (pass values of the payload struct types)", strings.Join(bad, ", "))
		}
		before := len(hs.errs)
		inner(hs)
		if len(hs.errs) > before {
			return // the handler itself was refused
		}
		switch kind {
		case kindDecide:
			fn := hs.decide[msgType]
			hs.decide[msgType] = func(s S, m Message) ([]any, error) {
				out, err := fn(s, m)
				if err == nil {
					err = checkEmitted(declared, out, "decide", msgType)
				}
				if err != nil {
					return nil, err
				}
				return out, nil
			}
			hs.decideEmits[msgType] = declared
		case kindReact:
			fn := hs.react[msgType]
			hs.react[msgType] = func(s S, m Message) []any {
				out := fn(s, m)
				if err := checkEmitted(declared, out, "react", msgType); err != nil {
					return []any{undeclared{err}}
				}
				return out
			}
			hs.reactEmits[msgType] = declared
		case kindReactAny:
			fn := hs.reactAny
			hs.reactAny = func(s S, m Message) []any {
				out := fn(s, m)
				if err := checkEmitted(declared, out, "ReactAny", PayloadType(m.Payload)); err != nil {
					return []any{undeclared{err}}
				}
				return out
			}
			hs.reactAnyEmits, hs.reactAnyDeclared = declared, true
		default:
			hs.errorf("Emits applies to Decide, React and ReactAny handlers only")
		}
	}}
}

// ErrUndeclaredEmit is matched by the error of a handler that returned a
// message of a type its Emits declaration does not list: add the type to
// Emits, or stop returning it.
var ErrUndeclaredEmit = fmt.Errorf("sourced: handler emitted a type it does not declare")

// UndeclaredEmitError names the handler (kind and message type) and the
// undeclared type it returned.
type UndeclaredEmitError struct {
	Handler  string
	Consumes reflect.Type
	Emitted  reflect.Type
	Declared []reflect.Type
}

func (e *UndeclaredEmitError) Error() string {
	names := make([]string, len(e.Declared))
	for i, t := range e.Declared {
		names[i] = t.String()
	}
	return fmt.Sprintf("sourced: %s handler for %v returned %v, which its Emits declaration [%s] does not list: add it to Emits", e.Handler, e.Consumes, e.Emitted, strings.Join(names, ", "))
}

// Is makes errors.Is(err, ErrUndeclaredEmit) true.
func (e *UndeclaredEmitError) Is(target error) bool { return target == ErrUndeclaredEmit }

// undeclared carries a reaction's UndeclaredEmitError through the []any a
// reaction returns to dispatch, which reports it.
type undeclared struct{ err error }

func checkEmitted(declared []reflect.Type, out []any, handler string, consumes reflect.Type) error {
	for _, o := range out {
		t := emittedType(o)
		if t == nil {
			continue // nil entries are reported by the dispatch
		}
		if !slices.Contains(declared, t) {
			return &UndeclaredEmitError{Handler: handler, Consumes: consumes, Emitted: t, Declared: slices.Clone(declared)}
		}
	}
	return nil
}

// emittedType is the payload type of what a handler returns: a payload, a
// pointer to one, a Message or a Delayed.
func emittedType(v any) reflect.Type {
	switch x := v.(type) {
	case nil:
		return nil
	case Message:
		return PayloadType(x.Payload)
	case *Message:
		if x == nil {
			return nil
		}
		return PayloadType(x.Payload)
	case Delayed:
		return PayloadType(x.Message.Payload)
	}
	return PayloadType(v)
}
