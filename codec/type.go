package codec

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unsafe"
)

// Read-only type descriptors, set once at init and never written again.
var (
	jsonMarshalerType   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	validatorType       = reflect.TypeFor[Validator]()
	timeType            = reflect.TypeFor[time.Time]()
	urlType             = reflect.TypeFor[url.URL]()
)

// ReservedPrefix starts the attribute names the store keeps for itself (the
// message id is indexed as "__id"): a payload may not declare an attribute
// whose JSON name starts with it.
const ReservedPrefix = "__"

// Type is a registered message type: its type string, its Go struct type,
// its current schema version and its JSON attributes, compiled once by
// Register. A Type is read-only and safe for concurrent use.
type Type struct {
	// Name is the stable type string stored with every message ("courses.created").
	Name string
	// GoType is the registered struct type (never a pointer type).
	GoType reflect.Type
	// Version is the current schema version of the payload (1 unless set with Version).
	Version int
	// Fields are the top-level JSON attributes in declaration order, with
	// embedded structs flattened as encoding/json does. Read-only: the
	// compiled key extractors depend on it.
	Fields []Field

	ptrType   reflect.Type
	indirect  bool // GoType values are boxed behind a pointer in an interface
	byName    map[string]int
	nested    map[string]Field // attributes indexed from inside a list (sourced:"index=...")
	keys      []keyField       // indexed fields, sorted by name
	keyCount  int              // key pairs produced by non-Multi fields, at most
	hasMulti  bool
	hasText   bool                         // some indexed field holds strings or TextMarshaler text
	freeForm  map[reflect.Type][]jsonField // the struct types that may hold an any field (nil: none)
	required  []int                        // indexes into Fields
	decode    func(data []byte) (any, error)
	upcasters []func(map[string]any) (map[string]any, error) // upcasters[v] turns v into v+1
	validator validatorKind
	shared    bool // registered with RegisterAs: not found by its Go type
}

type validatorKind uint8

const (
	noValidator validatorKind = iota
	valueValidator
	pointerValidator
)

// Field is one top-level JSON attribute of a message type.
type Field struct {
	// Name is the attribute's JSON name (the json tag name, or the Go field name).
	Name string
	// GoType is the Go type of the struct field.
	GoType reflect.Type
	// Index is the reflect field index path from the payload struct (see reflect.Value.FieldByIndex).
	Index []int
	// Required is set by the struct tag `sourced:"required"`: Validate
	// reports the attribute when it holds its zero value, and FromMap when
	// it is missing or null.
	Required bool
	// Indexed reports whether the attribute yields key pairs: a scalar, a
	// pointer to one, or a slice or array of scalars (unless tagged
	// `sourced:"noindex"`).
	Indexed bool
	// NoIndex is set by the struct tag `sourced:"noindex"`: the attribute
	// yields no key pairs even if it could.
	NoIndex bool
	// Multi reports an indexed slice or array: one key pair per distinct element.
	Multi bool
	// OmitEmpty is set by the json options omitempty and omitzero: a zero
	// scalar (see Zeroer) then yields no key pair.
	OmitEmpty bool
	// Nested names the list attribute an attribute is indexed from (see
	// the struct tag `sourced:"index=name"`): the attribute is not one of
	// the payload's own (it is not in Type.Fields), only an index.
	Nested string
}

// Field returns the attribute with JSON name name: a top-level attribute,
// or one indexed from inside a list (Field.Nested).
func (t *Type) Field(name string) (Field, bool) {
	i, ok := t.byName[name]
	if !ok {
		f, ok := t.nested[name]
		return f, ok
	}
	return t.Fields[i], true
}

// Has reports whether the type declares the attribute name (a JSON name),
// top-level or indexed from inside a list.
func (t *Type) Has(name string) bool {
	_, ok := t.Field(name)
	return ok
}

// String returns the type string.
func (t *Type) String() string { return t.Name }

// compileType builds everything about gt that does not need the static type
// parameter: options, fields, key extractors, validation hooks.
func compileType(gt reflect.Type, name string, opts []Option) (*Type, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("codec: register %q (%v): %s", name, gt, fmt.Sprintf(format, args...))
	}
	if err := checkName(name); err != nil {
		return nil, fail("%v", err)
	}
	if gt.Kind() != reflect.Struct {
		hint := ""
		if gt.Kind() == reflect.Pointer && gt.Elem().Kind() == reflect.Struct {
			hint = " (register the struct, not a pointer to it)"
		}
		return nil, fail("a payload must be a struct type, not %v%s", gt, hint)
	}
	var o options
	o.version = 1
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, fail("%v", o.err)
	}
	upcasters, err := o.chain()
	if err != nil {
		return nil, fail("%v", err)
	}

	t := &Type{
		Name:      name,
		GoType:    gt,
		Version:   o.version,
		ptrType:   reflect.PointerTo(gt),
		indirect:  gt.Size() > unsafe.Sizeof(uintptr(0)),
		byName:    map[string]int{},
		upcasters: upcasters,
	}
	for _, m := range []reflect.Type{jsonMarshalerType, textMarshalerType} {
		if gt.Implements(m) || t.ptrType.Implements(m) {
			return nil, fail("a payload type may not implement %v: its attributes must be its fields, so keys, validation and FromMap agree with the stored JSON", m)
		}
	}
	if err := checkEncodable(gt, "", map[reflect.Type]bool{}); err != nil {
		return nil, fail("%v", err)
	}
	t.freeForm = freeFormPlan(gt)
	for _, jf := range jsonFields(gt) {
		if strings.HasPrefix(jf.name, ReservedPrefix) {
			return nil, fail("attribute %q: names starting with %q are reserved for the store (the message id is indexed as __id); rename it with a json tag", jf.name, ReservedPrefix)
		}
		f := Field{Name: jf.name, GoType: jf.typ, Index: jf.index, OmitEmpty: jf.omitEmpty}
		var nestedNames []string
		if tag, ok := jf.sf.Tag.Lookup("sourced"); ok {
			for opt := range strings.SplitSeq(tag, ",") {
				opt = strings.TrimSpace(opt)
				switch {
				case opt == "required":
					f.Required = true
				case opt == "noindex":
					f.NoIndex = true
				case strings.HasPrefix(opt, "index="):
					nestedNames = append(nestedNames, strings.TrimPrefix(opt, "index="))
				case opt == "":
				default:
					return nil, fail("attribute %q: unknown sourced tag option %q (known: required, noindex, index=name)", jf.name, opt)
				}
			}
		}
		for _, sub := range nestedNames {
			kf, nf, err := compileNestedKey(gt, f, sub)
			if err != nil {
				return nil, fail("attribute %q: sourced:\"index=%s\": %v", jf.name, sub, err)
			}
			if t.nested == nil {
				t.nested = map[string]Field{}
			}
			if _, dup := t.nested[sub]; dup {
				return nil, fail("attribute %q: %q is indexed from two lists", jf.name, sub)
			}
			t.nested[sub] = nf
			t.keys = append(t.keys, kf)
			t.hasText = t.hasText || kf.kind == kString || kf.kind == kText
			t.hasMulti = true
		}
		kf, ok := compileKey(gt, f)
		if ok && !f.NoIndex {
			f.Indexed, f.Multi = true, kf.multi
			t.keys = append(t.keys, kf)
			t.hasText = t.hasText || kf.kind == kString || kf.kind == kText
			if kf.multi {
				t.hasMulti = true
			} else {
				t.keyCount++
			}
		}
		if f.Required {
			t.required = append(t.required, len(t.Fields))
		}
		t.byName[f.Name] = len(t.Fields)
		t.Fields = append(t.Fields, f)
	}
	for name := range t.nested {
		if _, clash := t.byName[name]; clash {
			return nil, fail("attribute %q is both a top-level attribute and indexed from inside a list (sourced:\"index=%s\"): rename one", name, name)
		}
	}
	sortKeyFields(t.keys)
	switch {
	case gt.Implements(validatorType):
		t.validator = valueValidator
	case t.ptrType.Implements(validatorType):
		t.validator = pointerValidator
	}
	return t, nil
}

// checkName enforces the type string syntax: one or more of a-z, 0-9, '.',
// '_' and '-', starting with a letter or a digit.
func checkName(name string) error {
	if name == "" {
		return errors.New("the type string is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("invalid type string: byte %d is %q; use lower-case letters, digits, '.', '_' and '-', starting with a letter or a digit (ex. \"courses.created\")", i, c)
		}
	}
	return nil
}

// checkEncodable reports the first value inside t that encoding/json cannot
// encode, cannot decode back, or would silently lose, with its attribute path.
func checkEncodable(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func() string {
		if path == "" {
			return "the payload"
		}
		return fmt.Sprintf("attribute %q", path)
	}
	if t == urlType {
		return fmt.Errorf("%s is a url.URL, which has no JSON or text form: encoding/json would write an object and drop its user info; use codec.URL, which stores the URL as a string", at())
	}
	pt := reflect.PointerTo(t)
	if t.Kind() != reflect.Interface {
		switch {
		case t.Implements(jsonMarshalerType) || pt.Implements(jsonMarshalerType):
			if !pt.Implements(jsonUnmarshalerType) {
				return fmt.Errorf("%s: %v implements json.Marshaler but not json.Unmarshaler, so it could be stored but not read back", at(), t)
			}
			return nil
		case t.Implements(textMarshalerType) || pt.Implements(textMarshalerType):
			if !pt.Implements(textUnmarshalerType) {
				return fmt.Errorf("%s: %v implements encoding.TextMarshaler but not encoding.TextUnmarshaler, so it could be stored but not read back", at(), t)
			}
			return nil
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return nil
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return fmt.Errorf("%s has interface type %v, which JSON can encode but not decode into; use any for free-form JSON data", at(), t)
		}
		return nil
	case reflect.Slice, reflect.Array:
		return checkEncodable(t.Elem(), path+"[]", seen)
	case reflect.Map:
		kt := t.Key()
		switch kt.Kind() {
		case reflect.String,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			if !kt.Implements(textMarshalerType) || !reflect.PointerTo(kt).Implements(textUnmarshalerType) {
				return fmt.Errorf("%s is a map with key type %v: JSON object keys must be strings, integers or encoding.TextMarshaler/TextUnmarshaler types", at(), kt)
			}
		}
		return checkEncodable(t.Elem(), path+"[]", seen)
	case reflect.Struct:
		if seen[t] {
			return nil
		}
		seen[t] = true
		fields := jsonFields(t)
		if len(fields) == 0 {
			for i := range t.NumField() {
				if t.Field(i).Name != "_" {
					return fmt.Errorf("%s: %v has no exported fields, so encoding/json would store {} and lose its value; export its fields or implement json.Marshaler/Unmarshaler", at(), t)
				}
			}
		}
		for _, f := range fields {
			p := f.name
			if path != "" {
				p = path + "." + f.name
			}
			if err := checkEmbeddedPath(t, f.index); err != nil {
				return fmt.Errorf("attribute %q: %w", p, err)
			}
			if err := checkEncodable(f.typ, p, seen); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%s has type %v, which JSON cannot encode (%v)", at(), t, t.Kind())
	}
}

// checkEmbeddedPath rejects a promoted field reached through an embedded
// pointer to an unexported struct type: encoding/json cannot allocate it
// when decoding.
func checkEmbeddedPath(t reflect.Type, index []int) error {
	for _, i := range index[:len(index)-1] {
		sf := t.Field(i)
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			if !sf.IsExported() {
				return fmt.Errorf("it is promoted through the embedded pointer %s, to an unexported struct type that encoding/json cannot set when decoding; embed it by value or export the type", sf.Name)
			}
			ft = ft.Elem()
		}
		t = ft
	}
	return nil
}
