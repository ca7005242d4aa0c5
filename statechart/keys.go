package statechart

import (
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/sourced-go/sourced/core"
)

// keyFiller fills partition keys into the payloads a machine emits: state
// events, data events and dispatched commands. Where a payload's struct
// (or a struct it embeds) has an attribute named like a partition key (its
// JSON name) holding its zero value, the partition's value is written
// there. String attributes take the value as is; integer and boolean ones
// parse it. The attributes of each Go type are found once and cached (per
// machine, not per process).
type keyFiller struct {
	cache sync.Map // reflect.Type -> []keyField
}

type keyField struct {
	name  string
	index []int
	kind  reflect.Kind
}

// fields returns t's attributes, by JSON name, through embedded structs.
func (f *keyFiller) fields(t reflect.Type) []keyField {
	if v, ok := f.cache.Load(t); ok {
		return v.([]keyField)
	}
	var out []keyField
	seen := map[string]bool{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		var embedded [][]int
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), index...), i)
			if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
				embedded = append(embedded, idx)
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, keyField{name: name, index: idx, kind: sf.Type.Kind()})
		}
		for _, idx := range embedded {
			walk(t.FieldByIndex(idx).Type, idx)
		}
	}
	if t.Kind() == reflect.Struct {
		walk(t, nil)
	}
	f.cache.Store(t, out)
	return out
}

// field returns the attribute of payload named name as a string.
func (f *keyFiller) field(payload any, name string) (string, bool) {
	v := reflect.ValueOf(payload)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	for _, kf := range f.fields(v.Type()) {
		if kf.name != name {
			continue
		}
		fv := v.FieldByIndex(kf.index)
		switch fv.Kind() {
		case reflect.String:
			return fv.String(), true
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return strconv.FormatInt(fv.Int(), 10), true
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return strconv.FormatUint(fv.Uint(), 10), true
		case reflect.Bool:
			return strconv.FormatBool(fv.Bool()), true
		}
		return "", false
	}
	return "", false
}

// needs reports whether payload of type t has a zero key attribute that
// partition has a value for.
func (f *keyFiller) needs(v reflect.Value, partition core.Partition) bool {
	for _, kf := range f.fields(v.Type()) {
		if _, ok := partition[kf.name]; ok && v.FieldByIndex(kf.index).IsZero() {
			return true
		}
	}
	return false
}

// fillValue writes the partition's values into the zero key attributes of
// v, an addressable struct.
func (f *keyFiller) fillValue(v reflect.Value, partition core.Partition) {
	for _, kf := range f.fields(v.Type()) {
		val, ok := partition[kf.name]
		if !ok {
			continue
		}
		fv := v.FieldByIndex(kf.index)
		if !fv.IsZero() || !fv.CanSet() {
			continue
		}
		switch fv.Kind() {
		case reflect.String:
			fv.SetString(val)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				fv.SetInt(n)
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if n, err := strconv.ParseUint(val, 10, 64); err == nil {
				fv.SetUint(n)
			}
		case reflect.Bool:
			if b, err := strconv.ParseBool(val); err == nil {
				fv.SetBool(b)
			}
		}
	}
}

// fill returns payload with the partition's keys filled in (a copy when
// anything changed; a pointer payload stays a pointer, to a copy).
func (f *keyFiller) fill(payload any, partition core.Partition) any {
	if len(partition) == 0 || payload == nil {
		return payload
	}
	v := reflect.ValueOf(payload)
	ptr := v.Kind() == reflect.Pointer
	if ptr {
		if v.IsNil() {
			return payload
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || !f.needs(v, partition) {
		return payload
	}
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	f.fillValue(c.Elem(), partition)
	if ptr {
		return c.Interface()
	}
	return c.Elem().Interface()
}

// fillMessage fills the keys of a message's payload.
func (f *keyFiller) fillMessage(m core.Message, partition core.Partition) core.Message {
	m.Payload = f.fill(m.Payload, partition)
	return m
}
