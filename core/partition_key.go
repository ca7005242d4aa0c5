package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Partition is a partition: the value of each of its attributes, by name
// ({"course_id": "c1"}). A decider's consistency boundary, a consumer
// group's unit of ordering and claiming, a snapshot's and a cached
// state's owner are each a Partition. An id-partitioned group's
// partitions are {IDKey: message id}.
//
// It is a map, so a map literal is a Partition and a map[string]string
// passes where one is wanted. Its methods are its one canonical encoding
// (Key, which every store keys offsets, snapshots and cached states by)
// and its display (String); ParsePartition reads either back.
type Partition map[string]string

// Key is the partition's canonical encoding: the JSON array of its
// [name, value] pairs in name order, e.g. [["course_id","c1"]], where
// only '"', '\' and the control characters are escaped (as \", \\ and
// \u00XX; every other byte is written as it is). Each partition has one
// Key and each Key one partition, whatever the values hold: no value can
// forge a separator.
func (p Partition) Key() string {
	if len(p) == 1 {
		for k, v := range p {
			if plainKeyText(k) && plainKeyText(v) {
				return `[["` + k + `","` + v + `"]]`
			}
		}
	}
	names := slices.Sorted(maps.Keys(p))
	values := make([]string, len(names))
	for i, n := range names {
		values[i] = p[n]
	}
	return string(AppendPartitionKey(nil, names, values))
}

// AppendPartitionKey appends to dst the Key of the partition whose
// attribute names, in ascending order, and values are given: for stores
// that hold them as slices.
func AppendPartitionKey(dst []byte, names, values []string) []byte {
	dst = append(dst, '[')
	for i := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = appendKeyText(dst, names[i])
		dst = append(dst, ',')
		dst = appendKeyText(dst, values[i])
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// appendKeyText appends s as a JSON string escaping only what JSON
// requires: '"', '\' and the control characters.
func appendKeyText(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// plainKeyText reports whether s is written into a Key as it is.
func plainKeyText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

// String renders the partition for people and command lines: its
// name:value pairs in name order joined by "|" (course_id:c1|student_id:s1),
// or, when that could not be read back as the same partition (a name
// holding ":" or "|", a value holding "|", an empty partition, a text
// starting as JSON does), the JSON object of its values
// ({"course_id":"a|b"}; its Key if it holds invalid UTF-8). ParsePartition
// reads each back.
func (p Partition) String() string {
	names := slices.Sorted(maps.Keys(p))
	var b strings.Builder
	for i, n := range names {
		v := p[n]
		if n == "" || strings.ContainsAny(n, ":|") || strings.Contains(v, "|") || (i == 0 && (n[0] == '{' || n[0] == '[')) {
			return p.json()
		}
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(v)
	}
	if b.Len() == 0 {
		return p.json()
	}
	return b.String()
}

// json is the partition as a JSON object of strings ({} when empty), or
// its Key when it holds invalid UTF-8, which a JSON object would replace.
func (p Partition) json() string {
	if p == nil {
		return "{}"
	}
	for k, v := range p {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return p.Key()
		}
	}
	b, _ := json.Marshal(map[string]string(p)) // a map of strings cannot fail; keys sorted
	return string(b)
}

// Names returns the partition's attribute names in ascending order.
func (p Partition) Names() []string { return slices.Sorted(maps.Keys(p)) }

// Equal reports whether p and q hold the same values (nil and empty are
// equal).
func (p Partition) Equal(q Partition) bool { return maps.Equal(p, q) }

// ErrBadPartition matches the error of ParsePartition for a text that is
// no partition.
var ErrBadPartition = errors.New("sourced: not a partition")

// ParsePartition reads a partition from any of its texts: its Key (a JSON
// array of [name, value] pairs), a JSON object of strings
// ({"course_id":"c1"}), or String's name:value pairs joined by "|" (only
// the first ":" of a pair separates, so a value may hold ":"). A text that
// is none of these, names an attribute twice or names an empty one is an
// error matching ErrBadPartition, which shows the forms.
func ParsePartition(s string) (Partition, error) {
	switch {
	case strings.HasPrefix(s, "["):
		if p, ok := parseKey(s); ok {
			return p, nil
		}
	case strings.HasPrefix(s, "{"):
		var out Partition
		if err := json.Unmarshal([]byte(s), &out); err == nil && out != nil {
			if _, empty := out[""]; empty {
				return nil, badPartition(s, "an attribute name is empty")
			}
			return out, nil
		}
	}
	out := Partition{}
	for _, pair := range strings.Split(s, "|") {
		name, value, ok := strings.Cut(pair, ":")
		if !ok || name == "" {
			return nil, badPartition(s, `want name:value pairs joined by | (course_id:c1|student_id:s1), a JSON object ({"course_id":"a|b"}, for values holding |) or a partition's Key ([["course_id","c1"]])`)
		}
		if _, dup := out[name]; dup {
			return nil, badPartition(s, "names "+quoteShort(name)+" twice")
		}
		out[name] = value
	}
	return out, nil
}

// ParsePartitionKey reads a partition from its Key only (any JSON array
// of [name, value] string pairs): what a store reads back from its rows,
// where any other text is corruption, an error matching ErrBadPartition.
// It keeps every value's bytes as encoded, invalid UTF-8 included.
func ParsePartitionKey(key string) (Partition, error) {
	if p, ok := parseKey(key); ok {
		return p, nil
	}
	return nil, badPartition(key, "want a partition's Key, a JSON array of [name, value] string pairs")
}

func badPartition(s, problem string) error {
	return fmt.Errorf("%w: %s: %s", ErrBadPartition, quoteShort(s), problem)
}

// parseKey decodes a Key (any JSON array of [name, value] string pairs,
// whitespace between tokens allowed), keeping the bytes of every value as
// they were encoded, invalid UTF-8 included.
func parseKey(s string) (Partition, bool) {
	d := keyDecoder{s: s}
	out := Partition{}
	if !d.expect('[') {
		return nil, false
	}
	if d.expect(']') {
		return out, d.end()
	}
	for {
		if !d.expect('[') {
			return nil, false
		}
		name, ok := d.str()
		if !ok || !d.expect(',') {
			return nil, false
		}
		value, ok := d.str()
		if !ok || !d.expect(']') {
			return nil, false
		}
		if _, dup := out[name]; dup || name == "" {
			return nil, false
		}
		out[name] = value
		if d.expect(']') {
			return out, d.end()
		}
		if !d.expect(',') {
			return nil, false
		}
	}
}

// keyDecoder reads the tokens of a Key.
type keyDecoder struct {
	s string
	i int
}

func (d *keyDecoder) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

func (d *keyDecoder) expect(c byte) bool {
	d.space()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *keyDecoder) end() bool {
	d.space()
	return d.i == len(d.s)
}

// str reads a JSON string.
func (d *keyDecoder) str() (string, bool) {
	if !d.expect('"') {
		return "", false
	}
	var b []byte
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return string(b), true
		case c == '\\':
			if d.i+1 >= len(d.s) {
				return "", false
			}
			e := d.s[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", false
				}
				if utf16Surrogate(r) { // a pair: \uD83D\uDE00
					if d.i+6 <= len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
						d.i += 2
						lo, ok := d.hex4()
						if !ok {
							return "", false
						}
						if lo >= 0xDC00 && lo <= 0xDFFF {
							r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
						} else {
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		default:
			b = append(b, c)
			d.i++
		}
	}
	return "", false
}

func (d *keyDecoder) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for _, h := range d.s[d.i : d.i+4] {
		r <<= 4
		switch {
		case h >= '0' && h <= '9':
			r |= h - '0'
		case h >= 'a' && h <= 'f':
			r |= h - 'a' + 10
		case h >= 'A' && h <= 'F':
			r |= h - 'A' + 10
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

func utf16Surrogate(r rune) bool { return r >= 0xD800 && r < 0xDC00 }
