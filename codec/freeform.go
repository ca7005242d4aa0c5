package codec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
)

// maxFreeFormDepth bounds how deep Validate follows free-form data (a
// pointer cycle would otherwise never end; encoding/json refuses it too).
const maxFreeFormDepth = 64

var (
	jsonNumberType = reflect.TypeFor[json.Number]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
)

// freeFormPlan returns, for every struct type reachable from t (t
// included) whose values may hold an any field, its JSON fields; nil when
// no any field is reachable. Validate walks only these.
func freeFormPlan(t reflect.Type) map[reflect.Type][]jsonField {
	// The types reachable from t, and the types each one contains.
	children := map[reflect.Type][]reflect.Type{}
	fieldsOf := map[reflect.Type][]jsonField{}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		if _, ok := children[t]; ok {
			return
		}
		children[t] = nil
		var kids []reflect.Type
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			kids = []reflect.Type{t.Elem()}
		case reflect.Struct:
			fieldsOf[t] = jsonFields(t)
			for _, f := range fieldsOf[t] {
				kids = append(kids, f.typ)
			}
		}
		children[t] = kids
		for _, k := range kids {
			collect(k)
		}
	}
	collect(t)
	// holds: may a value of the type hold an any field? A fixpoint, so
	// that recursive types are decided right.
	holds := map[reflect.Type]bool{}
	for ct := range children {
		holds[ct] = ct.Kind() == reflect.Interface && ct.NumMethod() == 0
	}
	for changed := true; changed; {
		changed = false
		for ct, kids := range children {
			if holds[ct] {
				continue
			}
			for _, k := range kids {
				if holds[k] {
					holds[ct], changed = true, true
					break
				}
			}
		}
	}
	if !holds[t] {
		return nil
	}
	plan := map[reflect.Type][]jsonField{}
	for st, fields := range fieldsOf {
		if holds[st] {
			plan[st] = fields
		}
	}
	return plan
}

// checkFreeForm adds a problem for every any field of rv holding a value
// that is not JSON data: its stored form would decode as something else
// (a time.Time or another marshaler as a string, a struct as a map, a
// []byte as a base64 string, a map's integer keys as strings).
func (t *Type) checkFreeForm(rv reflect.Value, ve *ValidationError, failed map[string]bool) {
	for _, f := range t.Fields {
		if failed[f.Name] || ve.has(f.Name) {
			continue
		}
		fv, err := rv.FieldByIndexErr(f.Index)
		if err != nil {
			continue
		}
		if problem := t.freeFormIn(fv, f.Name, 0); problem != "" {
			ve.Fields = append(ve.Fields, FieldError{Field: f.Name, Problem: problem})
		}
	}
}

// freeFormIn looks for any fields inside v (a value of a declared type) and
// checks what they hold.
func (t *Type) freeFormIn(v reflect.Value, path string, depth int) string {
	if depth > maxFreeFormDepth {
		return fmt.Sprintf("nests deeper than %d levels at %s", maxFreeFormDepth, path)
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() || v.NumMethod() > 0 {
			return ""
		}
		return freeFormData(v.Elem(), path, depth+1)
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return t.freeFormIn(v.Elem(), path, depth+1)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p := t.freeFormIn(v.Index(i), path+"["+strconv.Itoa(i)+"]", depth+1); p != "" {
				return p
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key())
			if iter.Key().Kind() == reflect.String {
				key = strconv.Quote(iter.Key().String())
			}
			if p := t.freeFormIn(iter.Value(), path+"["+key+"]", depth+1); p != "" {
				return p
			}
		}
	case reflect.Struct:
		fields, ok := t.freeForm[v.Type()]
		if !ok {
			return ""
		}
		for _, f := range fields {
			fv, err := v.FieldByIndexErr(f.index)
			if err != nil {
				continue
			}
			if p := t.freeFormIn(fv, path+"."+f.name, depth+1); p != "" {
				return p
			}
		}
	}
	return ""
}

// freeFormData checks v, the dynamic value of an any field: JSON data
// (nil, bools, strings, numbers, json.Number, json.RawMessage, and slices
// and string-keyed maps of those) is kept; anything else is refused, with
// what to do.
func freeFormData(v reflect.Value, path string, depth int) string {
	if depth > maxFreeFormDepth {
		return fmt.Sprintf("nests deeper than %d levels at %s", maxFreeFormDepth, path)
	}
	if !v.IsValid() {
		return ""
	}
	typ := v.Type()
	if typ == jsonNumberType || typ == rawMessageType {
		return ""
	}
	refuse := func(becomes string) string {
		return fmt.Sprintf("free-form (any) data at %s holds a %v, which would be stored as %s and read back as that, not as a %v: store JSON data there (nil, bool, string, number, []any, map[string]any), or give the value a typed field", path, typ, becomes, typ)
	}
	pt := reflect.PointerTo(typ)
	if typ.Kind() != reflect.Pointer && typ.Kind() != reflect.Interface {
		if typ.Implements(jsonMarshalerType) || pt.Implements(jsonMarshalerType) {
			return refuse("its MarshalJSON output (a string, for a time.Time)")
		}
		if typ.Implements(textMarshalerType) || pt.Implements(textMarshalerType) {
			return refuse("a string (its MarshalText)")
		}
	}
	switch typ.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "" // numbers come back as float64, as documented
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return freeFormData(v.Elem(), path, depth+1)
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 {
			return refuse("a base64 string")
		}
		for i := range v.Len() {
			if p := freeFormData(v.Index(i), path+"["+strconv.Itoa(i)+"]", depth+1); p != "" {
				return p
			}
		}
		return ""
	case reflect.Map:
		if typ.Key().Kind() != reflect.String {
			return refuse("an object with string keys")
		}
		iter := v.MapRange()
		for iter.Next() {
			if p := freeFormData(iter.Value(), fmt.Sprintf("%s[%q]", path, iter.Key().String()), depth+1); p != "" {
				return p
			}
		}
		return ""
	case reflect.Struct:
		return refuse("an object (a map[string]any)")
	}
	return refuse("nothing (encoding/json cannot encode it)")
}
