package shell_test

import (
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sourced-go/sourced/shell"
)

// FuzzParsePartition reads arbitrary text as a partition: no panic; an
// error quotes a bounded part of the input; what parses names no empty
// attribute, and its JSON form (PartitionJSON) reads back the same, as
// does its PartitionKey form when no name or value holds a separator.
func FuzzParsePartition(f *testing.F) {
	for _, s := range []string{"course_id:c1", "course_id:c1|student_id:s1", `{"course_id":"a|b"}`, "a:b:c", "|", ":", "{", `{"a":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := shell.ParsePartition(s)
		if err != nil {
			if len(err.Error()) > 1000 {
				t.Fatalf("an error of %d bytes: it repeats its input", len(err.Error()))
			}
			return
		}
		plain := true
		for k, v := range p {
			if k == "" {
				t.Fatalf("ParsePartition(%q) = %v: an empty name", s, p)
			}
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return // JSON would store U+FFFD: partition values are valid UTF-8
			}
			plain = plain && !strings.ContainsAny(k, ":|") && !strings.Contains(v, "|") && !strings.HasPrefix(k, "{")
		}
		back, err := shell.ParsePartition(shell.PartitionJSON(p))
		if err != nil || !maps.Equal(back, p) {
			t.Fatalf("JSON form of %v reads back as %v, %v", p, back, err)
		}
		if plain && len(p) > 0 {
			back, err := shell.ParsePartition(shell.PartitionKey(p))
			if err != nil || !maps.Equal(back, p) {
				t.Fatalf("key form %q of %v reads back as %v, %v", shell.PartitionKey(p), p, back, err)
			}
		}
	})
}
