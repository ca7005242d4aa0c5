package codec

import (
	"errors"
	"strconv"
	"strings"
)

// ErrUnknownType is wrapped by errors for a message type string that no
// Register call declared (Registry.ByName, Registry.Decode,
// Registry.FromMap). The error message names the type string.
var ErrUnknownType = errors.New("codec: unknown message type")

// ErrUnregistered is wrapped by errors for a Go value whose type was never
// registered (Registry.ByGoType, Registry.TypeOf, Registry.Encode ...). The
// error message names the Go type.
var ErrUnregistered = errors.New("codec: unregistered Go type")

// ErrInvalid is matched (errors.Is) by every *ValidationError.
var ErrInvalid = errors.New("codec: invalid payload")

// FieldError is one problem with one attribute of a payload. Field is the
// attribute's JSON name, a dotted path for nested values ("address.zip"),
// or "" for a problem with the payload as a whole.
//
// FieldError is an error itself, so a Validate method can report several
// problems with errors.Join(codec.FieldError{...}, codec.FieldError{...}).
// Its JSON form is {"field": ..., "problem": ...}, so an HTTP handler can
// return a ValidationError's Fields as they are.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// Error returns "field: problem", or the problem alone for the whole payload.
func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// ValidationError lists every problem found in a payload of message type
// Type. It matches errors.Is(err, ErrInvalid).
type ValidationError struct {
	Type   string
	Fields []FieldError
}

// Error lists every field problem: `codec: invalid "courses.created"
// payload: course_id: is required; seats: must be an integer (int), got
// string`.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("codec: invalid ")
	b.WriteString(strconv.Quote(e.Type))
	b.WriteString(" payload")
	for i, f := range e.Fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// has reports whether e already lists a problem for field.
func (e *ValidationError) has(field string) bool {
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

// fieldErrors flattens an error returned by a Validate method into field
// errors: a *ValidationError contributes its fields, FieldError values are
// taken as they are (also inside errors.Join trees and %w wrappers), and
// any other error becomes a problem with the whole payload.
func fieldErrors(err error, out []FieldError) []FieldError {
	switch e := err.(type) {
	case nil:
		return out
	case *ValidationError:
		return append(out, e.Fields...)
	case FieldError:
		return append(out, e)
	case *FieldError:
		return append(out, *e)
	case multiUnwrapper:
		for _, inner := range e.Unwrap() {
			out = fieldErrors(inner, out)
		}
		return out
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return append(out, ve.Fields...)
	}
	var fe FieldError
	if errors.As(err, &fe) {
		return append(out, fe)
	}
	return append(out, FieldError{Problem: err.Error()})
}

// multiUnwrapper is an error wrapping several (errors.Join, fmt.Errorf with
// several %w): the standard library's convention, which errors.Is follows.
type multiUnwrapper interface{ Unwrap() []error }
