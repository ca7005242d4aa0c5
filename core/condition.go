package core

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/sourced-go/sourced/codec"
)

// IDKey is the reserved attribute under which a message's id is indexed when
// its type belongs to an id-partitioned group (a delete-on-ack queue).
const IDKey = "__id"

// Condition selects messages of one type whose indexed attributes have all
// the given values (AND within a condition). A list of conditions selects the
// union of what each selects (OR across conditions). A condition with no
// attributes selects every message of its type.
//
// Values are canonical key strings, as produced by codec.Canonical.
type Condition struct {
	Type  string
	Attrs map[string]string
}

// String renders the condition as type(attr=value,...) with attributes in
// name order, for error messages and logs.
func (c Condition) String() string {
	var b strings.Builder
	b.WriteString(c.Type)
	b.WriteByte('(')
	for i, k := range slices.Sorted(maps.Keys(c.Attrs)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(c.Attrs[k])
	}
	b.WriteByte(')')
	return b.String()
}

// Match reports whether a message of type typ indexed under keys satisfies
// the condition. keys are the message's key pairs (see codec.Type.Keys).
func (c Condition) Match(typ string, keys []codec.KeyPair) bool {
	if typ != c.Type {
		return false
	}
	for name, value := range c.Attrs {
		if !slices.Contains(keys, codec.KeyPair{Name: name, Value: value}) {
			return false
		}
	}
	return true
}

// MatchAny reports whether any of conds matches the message.
func MatchAny(conds []Condition, typ string, keys []codec.KeyPair) bool {
	for _, c := range conds {
		if c.Match(typ, keys) {
			return true
		}
	}
	return false
}

// ConditionsFor builds the conditions that select (at least) the given
// partition's messages of each type, for reads and guards. A type that
// declares none of the partition attributes contributes nothing (there is
// no CourseCreated x user_id condition).
//
// A type's condition holds the partition attributes it declares, except
// those that may be absent from a message (pointers, omitempty attributes,
// slices): under conditional AND a message lacking one still belongs to the
// partition, so a condition requiring it would let the guard miss that
// message. When every declared attribute may be absent, the type gets one
// condition per attribute instead. The guard may then be wider than the
// partition (a possible false conflict), never narrower.
func ConditionsFor(partition Partition, types ...*codec.Type) []Condition {
	conds := make([]Condition, 0, len(types))
	for _, t := range types {
		always := map[string]string{}
		var optional []string
		for _, name := range slices.Sorted(maps.Keys(partition)) {
			f, ok := t.Field(name)
			if !ok {
				continue
			}
			if mayBeAbsent(f) {
				optional = append(optional, name)
			} else {
				always[name] = partition[name]
			}
		}
		switch {
		case len(always) > 0:
			conds = append(conds, Condition{Type: t.Name, Attrs: always})
		default:
			for _, name := range optional {
				conds = append(conds, Condition{Type: t.Name, Attrs: map[string]string{name: partition[name]}})
			}
		}
	}
	return conds
}

// mayBeAbsent reports whether a message of the type can lack a key pair for
// the attribute.
func mayBeAbsent(f codec.Field) bool {
	return f.OmitEmpty || f.Multi || f.GoType.Kind() == reflect.Pointer || f.GoType.Kind() == reflect.Interface
}

// InPartition reports whether a message indexed under keys belongs to the
// partition under conditional AND: it carries at least one partition
// attribute, and for every partition attribute it carries, one of its key
// pairs for that attribute has the partition's value. Matching is on indexed
// keys, so an attribute left absent (a nil pointer, an omitempty zero value)
// is ignored. A message whose attribute holds several values (a slice)
// belongs to each partition whose value is among them.
func InPartition(partition Partition, keys []codec.KeyPair) bool {
	carried := 0
	for name, value := range partition {
		has, match := false, false
		for _, k := range keys {
			if k.Name == name {
				has = true
				if k.Value == value {
					match = true
					break
				}
			}
		}
		if !has {
			continue
		}
		if !match {
			return false
		}
		carried++
	}
	return carried > 0
}
