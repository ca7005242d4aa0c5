package codec

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Validator is implemented by payload types with rules beyond required
// attributes; Validate may have a value or a pointer receiver. To blame
// attributes, return a *ValidationError, a FieldError, or several joined
// with errors.Join; any other error is a problem with the whole payload.
type Validator interface{ Validate() error }

// Validate checks a payload (a registered struct value or a pointer to
// one): every `sourced:"required"` attribute must hold a non-zero value
// (use a pointer to require presence while allowing zero), every any
// attribute JSON data only (see the package doc), then the payload's
// Validate method, if any, runs. All problems are returned
// together in a *ValidationError (errors.Is(err, ErrInvalid)); an
// unregistered payload is an error wrapping ErrUnregistered.
func (r *Registry) Validate(payload any) error {
	t, err := r.TypeOf(payload)
	if err != nil {
		return err
	}
	return t.Validate(payload)
}

// Validate checks payload, a t.GoType value or a pointer to one: see
// Registry.Validate.
func (t *Type) Validate(payload any) error {
	rv := reflect.ValueOf(payload)
	switch rv.Type() {
	case t.GoType:
	case t.ptrType:
		if rv.IsNil() {
			return &ValidationError{Type: t.Name, Fields: []FieldError{{Problem: "the payload is a nil pointer"}}}
		}
		rv = rv.Elem()
	default:
		return fmt.Errorf("codec: validate %q: got a %T, want a %v", t.Name, payload, t.GoType)
	}
	ve := &ValidationError{Type: t.Name}
	t.validate(rv, payload, ve, nil)
	return ve.orNil(t)
}

// validate adds the required-attribute problems and the Validate method's
// problems to ve, skipping attributes in failed (already reported).
func (t *Type) validate(rv reflect.Value, payload any, ve *ValidationError, failed map[string]bool) {
	if t.hasMulti || t.hasText {
		if base, ok := t.pointer(payload); ok && base != nil {
			if t.hasMulti {
				t.checkLists(base, ve, failed)
			}
			if t.hasText {
				t.checkText(base, ve, failed)
			}
		}
	}
	if t.freeForm != nil {
		t.checkFreeForm(rv, ve, failed)
	}
	for _, i := range t.required {
		f := t.Fields[i]
		if failed[f.Name] || ve.has(f.Name) {
			continue
		}
		if fv, err := rv.FieldByIndexErr(f.Index); err != nil || fv.IsZero() {
			ve.Fields = append(ve.Fields, FieldError{Field: f.Name, Problem: "is required"})
		}
	}
	var v Validator
	switch t.validator {
	case noValidator:
		return
	case valueValidator:
		v = payload.(Validator)
	case pointerValidator:
		if payload == nil || reflect.TypeOf(payload) != t.ptrType {
			// Never call a pointer method on the caller's value: copy it.
			pv := reflect.New(t.GoType)
			pv.Elem().Set(rv)
			payload = pv.Interface()
		}
		v = payload.(Validator)
	}
	for _, fe := range fieldErrors(v.Validate(), nil) {
		if (fe.Field != "" && failed[fe.Field]) || slices.Contains(ve.Fields, fe) {
			continue
		}
		ve.Fields = append(ve.Fields, fe)
	}
}

// checkText adds a problem for every indexed text value (a string, or a
// TextMarshaler's text) no store can be indexed under the same way (see
// CheckIndexedValue): one longer than MaxIndexedValueBytes, one holding a
// NUL byte, one that is not valid UTF-8. encoding/json stores invalid
// UTF-8 with U+FFFD in place of the invalid bytes, so the message would be
// indexed under a value it is not stored with (and re-indexing the stored
// payload, as promoting a scheduled message does, would index it under
// another one); PostgreSQL refuses a NUL in text and an index entry over
// about 2.7 KB, where SQLite takes both.
func (t *Type) checkText(base unsafe.Pointer, ve *ValidationError, failed map[string]bool) {
	for i := range t.keys {
		kf := &t.keys[i]
		if kf.nested && ve.has(t.nested[kf.name].Nested) {
			continue // too long: reported by checkLists
		}
		if kf.kind != kString && kf.kind != kText || failed[kf.name] || asciiText[kf.typ] {
			continue
		}
		p := kf.locate(base)
		if p == nil {
			continue
		}
		if !kf.multi {
			if problem := textProblem(kf, p); problem != "" {
				ve.Fields = append(ve.Fields, FieldError{Field: kf.name, Problem: problem})
			}
			continue
		}
		data, n := kf.elems(p)
		for j := range n {
			ep := kf.elem(data, j)
			if ep != nil && kf.nested {
				ep = kf.sub(ep)
			}
			if ep != nil {
				if problem := textProblem(kf, ep); problem != "" {
					ve.Fields = append(ve.Fields, FieldError{Field: kf.name, Problem: fmt.Sprintf("element %d %s", j, problem)})
					break
				}
			}
		}
	}
}

// checkLists adds a problem for every list indexed from inside
// (sourced:"index=name") that holds more than MaxNestedKeys elements, and
// one for the whole payload when its indexed attributes hold more than
// MaxKeyPairs values in all. Both are counted from the lists' lengths
// alone, so a payload of any size is refused in time proportional to its
// number of attributes, before a store writes any of it.
func (t *Type) checkLists(base unsafe.Pointer, ve *ValidationError, failed map[string]bool) {
	total := t.keyCount
	for i := range t.keys {
		kf := &t.keys[i]
		if !kf.multi {
			continue
		}
		p := kf.locate(base)
		if p == nil {
			continue
		}
		_, n := kf.elems(p)
		total += n
		if !kf.nested || n <= MaxNestedKeys {
			continue
		}
		list := t.nested[kf.name].Nested
		if failed[list] || ve.has(list) {
			continue
		}
		ve.Fields = append(ve.Fields, FieldError{Field: list, Problem: fmt.Sprintf("holds %d elements, and its %q is indexed (sourced:\"index=%s\"): at most %d (codec.MaxNestedKeys); split the message, or index fewer elements", n, kf.name, kf.name, MaxNestedKeys)})
	}
	if total > MaxKeyPairs {
		ve.Fields = append(ve.Fields, FieldError{Problem: fmt.Sprintf("its indexed attributes hold %d values: a message is indexed under at most %d (codec.MaxKeyPairs); split the message, or mark long lists sourced:\"noindex\"", total, MaxKeyPairs)})
	}
}

// asciiText are the TextMarshalers of this package, whose text is ASCII:
// Validate need not marshal them to check it. Read-only.
var asciiText = map[reflect.Type]bool{reflect.TypeFor[Date](): true, reflect.TypeFor[Decimal](): true}

func utf8Problem(at int) string {
	return fmt.Sprintf("is not valid UTF-8 (at byte %d): indexed values must be text, which JSON would store with U+FFFD in place of the invalid bytes; fix the input, or use []byte for binary data", at)
}

// textProblem says what is wrong with the string or text at p as an
// indexed value ("" when nothing is; see CheckIndexedValue).
func textProblem(kf *keyField, p unsafe.Pointer) string {
	if kf.kind == kString {
		return indexedValueProblem(*(*string)(p))
	}
	var buf [64]byte
	text, err := appendScalar(buf[:0], kf.kind, kf.typ, p)
	if err != nil {
		return "" // a failing marshaler is Encode's to report
	}
	return indexedValueProblem(unsafe.String(unsafe.SliceData(text), len(text)))
}

// firstInvalid returns the offset of the first byte of b that is not
// part of a valid UTF-8 sequence.
func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return 0
}

// orNil sorts the problems by attribute (declaration order, then unknown
// attributes, then whole-payload problems) and returns nil if there are none.
func (ve *ValidationError) orNil(t *Type) error {
	if len(ve.Fields) == 0 {
		return nil
	}
	rank := func(field string) int {
		if field == "" {
			return len(t.Fields) + 1
		}
		top, _, _ := strings.Cut(field, ".")
		if i, ok := t.byName[top]; ok {
			return i
		}
		if i, ok := t.byName[field]; ok {
			return i
		}
		return len(t.Fields)
	}
	slices.SortStableFunc(ve.Fields, func(a, b FieldError) int {
		if c := cmp.Compare(rank(a.Field), rank(b.Field)); c != 0 {
			return c
		}
		return strings.Compare(a.Field, b.Field)
	})
	return ve
}

// FromMap builds a payload of message type name from raw attributes, for
// example a JSON request body decoded into a map[string]any (numbers as
// float64 or json.Number, times as RFC 3339 strings; native Go values work
// too), then validates it. It returns the struct value (not a pointer).
//
// Every problem is reported in one *ValidationError: attributes the type
// does not declare, values of the wrong type (each attribute is decoded on
// its own, so all of them are listed, with nested paths like
// "address.zip"), required attributes missing or null, and the problems
// from the type's Validate method (except those about attributes already
// reported). An unregistered name is an error wrapping ErrUnknownType.
func (r *Registry) FromMap(name string, raw map[string]any) (any, error) {
	t, err := r.ByName(name)
	if err != nil {
		return nil, err
	}
	return t.FromMap(raw)
}

// FromMap builds and validates a t.GoType value from raw attributes: see
// Registry.FromMap.
func (t *Type) FromMap(raw map[string]any) (any, error) {
	ve := &ValidationError{Type: t.Name}
	failed := map[string]bool{}
	pv := reflect.New(t.GoType)
	v := pv.Elem()
	for _, f := range t.Fields {
		rv, present := raw[f.Name]
		if !present || rv == nil {
			if f.Required {
				ve.Fields = append(ve.Fields, FieldError{Field: f.Name, Problem: "is required"})
				failed[f.Name] = true
			}
			continue
		}
		fv := reflect.New(f.GoType)
		if err := decodeValue(rv, fv.Interface()); err != nil {
			ve.Fields = append(ve.Fields, fieldProblem(f, rv, err))
			failed[f.Name] = true
			continue
		}
		fieldAlloc(v, f.Index).Set(fv.Elem())
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if !t.Has(name) {
			ve.Fields = append(ve.Fields, FieldError{Field: name, Problem: "is not an attribute of " + strconv.Quote(t.Name)})
			failed[name] = true
		}
	}
	t.validate(v, pv.Interface(), ve, failed)
	if err := ve.orNil(t); err != nil {
		return nil, err
	}
	return v.Interface(), nil
}

// decodeValue stores the raw value into dst (a pointer) through JSON, as
// the store would.
func decodeValue(raw any, dst any) error {
	data, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, dst)
}

// fieldProblem turns a decoding error of attribute f into a FieldError.
func fieldProblem(f Field, raw any, err error) FieldError {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := f.Name
		if ute.Field != "" {
			field += "." + ute.Field
		}
		return FieldError{Field: field, Problem: fmt.Sprintf("must be %s, got %s", describe(ute.Type), ute.Value)}
	}
	t := f.GoType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return FieldError{Field: f.Name, Problem: "must be " + describe(t) + ", got " + strconv.Quote(pe.Value)}
		}
		return FieldError{Field: f.Name, Problem: "must be " + describe(t) + ", got " + jsonKind(raw)}
	}
	return FieldError{Field: f.Name, Problem: "invalid value: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// jsonKind names the JSON kind of a raw value, for error messages.
func jsonKind(raw any) string {
	data, err := json.Marshal(raw)
	if err != nil || len(data) == 0 {
		return fmt.Sprintf("a %T", raw)
	}
	switch data[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// describe names what JSON value a Go type wants, for error messages.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer (%v)", t)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("a non-negative integer (%v)", t)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return fmt.Sprintf("a %v", t)
}

// fieldAlloc returns the settable field at index in v, allocating nil
// embedded struct pointers on the way.
func fieldAlloc(v reflect.Value, index []int) reflect.Value {
	for k, i := range index {
		if k > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v
}
