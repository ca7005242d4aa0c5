package core_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
)

// partitionGen draws partitions whose names and values hold what a log
// may: separators, quotes, backslashes, control characters, JSON-looking
// text, any UTF-8, and (values) invalid UTF-8.
func partitionGen() *rapid.Generator[core.Partition] {
	text := rapid.OneOf(
		rapid.SampledFrom([]string{"c1", "a|b", "a:b", `"`, `\`, "\n", "\x00", "{", "[", "<&>", "\u2028", "é", "😀", "\xff", " ", ""}),
		rapid.String(),
		rapid.StringMatching(`[a-z_]{1,8}`),
	)
	name := rapid.OneOf(rapid.StringMatching(`[a-z_]{1,8}`), text.Filter(func(s string) bool { return s != "" }))
	return rapid.Custom(func(t *rapid.T) core.Partition {
		return core.Partition(rapid.MapOfN(name, text, 1, 4).Draw(t, "partition"))
	})
}

// Key and String read back as the same partition, whatever it holds.
func TestPartitionRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := partitionGen().Draw(t, "p")
		back, err := core.ParsePartition(p.Key())
		if err != nil || !back.Equal(p) {
			t.Fatalf("ParsePartition(%q) = %q, %v; want %q", p.Key(), back, err, p)
		}
		back, err = core.ParsePartitionKey(p.Key())
		if err != nil || !back.Equal(p) {
			t.Fatalf("ParsePartitionKey(%q) = %q, %v; want %q", p.Key(), back, err, p)
		}
		back, err = core.ParsePartition(p.String())
		if err != nil || !back.Equal(p) {
			t.Fatalf("ParsePartition(String %q) = %q, %v; want %q", p.String(), back, err, p)
		}
	})
}

// Key is canonical: equal partitions have one Key, different ones
// different Keys; for valid UTF-8 it is JSON that encoding/json reads back.
func TestPartitionKeyIsCanonical(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, q := partitionGen().Draw(t, "p"), partitionGen().Draw(t, "q")
		if (p.Key() == q.Key()) != p.Equal(q) {
			t.Fatalf("%q and %q: keys %q and %q", p, q, p.Key(), q.Key())
		}
		copied := core.Partition{}
		for _, n := range p.Names() {
			copied[n] = p[n]
		}
		if copied.Key() != p.Key() {
			t.Fatalf("one partition, two keys: %q, %q", copied.Key(), p.Key())
		}
		if names := p.Names(); true {
			values := make([]string, len(names))
			for i, n := range names {
				values[i] = p[n]
			}
			if got := string(core.AppendPartitionKey(nil, names, values)); got != p.Key() {
				t.Fatalf("AppendPartitionKey = %q, Key = %q", got, p.Key())
			}
		}
		if !json.Valid([]byte(p.Key())) {
			t.Fatalf("Key %q is not JSON", p.Key())
		}
		if strings.ToValidUTF8(p.Key(), "") == p.Key() {
			var pairs [][2]string
			if err := json.Unmarshal([]byte(p.Key()), &pairs); err != nil || len(pairs) != len(p) {
				t.Fatalf("Key %q read by encoding/json: %v, %v", p.Key(), pairs, err)
			}
			for _, pair := range pairs {
				if p[pair[0]] != pair[1] {
					t.Fatalf("Key %q read by encoding/json: %v", p.Key(), pairs)
				}
			}
		}
	})
}

func TestPartitionKeyAndString(t *testing.T) {
	for _, tc := range []struct {
		p         core.Partition
		key, text string
	}{
		{core.Partition{"course_id": "c1"}, `[["course_id","c1"]]`, "course_id:c1"},
		{core.Partition{"student_id": "s1", "course_id": "c1"}, `[["course_id","c1"],["student_id","s1"]]`, "course_id:c1|student_id:s1"},
		{core.Partition{"course_id": `a"b\c` + "\n"}, `[["course_id","a\"b\\c\u000a"]]`, "course_id:a\"b\\c\n"},
		{core.Partition{"course_id": "<a&b>"}, `[["course_id","<a&b>"]]`, "course_id:<a&b>"},
		{core.Partition{"course_id": "a|b"}, `[["course_id","a|b"]]`, `{"course_id":"a|b"}`},
		{core.Partition{"course_id": "a:b"}, `[["course_id","a:b"]]`, "course_id:a:b"},
		{core.Partition{}, `[]`, `{}`},
		{nil, `[]`, `{}`},
	} {
		if got := tc.p.Key(); got != tc.key {
			t.Errorf("%v.Key() = %s, want %s", map[string]string(tc.p), got, tc.key)
		}
		if got := tc.p.String(); got != tc.text {
			t.Errorf("%v.String() = %s, want %s", map[string]string(tc.p), got, tc.text)
		}
	}
}

func TestParsePartitionRefuses(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, s := range []string{"", "course_id", ":c1", "a:1|a:2", `{"":"x"}`, "|", long} {
		_, err := core.ParsePartition(s)
		if !errors.Is(err, core.ErrBadPartition) || len(err.Error()) > 600 {
			t.Errorf("ParsePartition(%.20q) = %v, want ErrBadPartition in a short message", s, err)
		}
	}
	for _, s := range []string{"course_id:c1", `{"a":"b"}`, `[["a","b"]`, `[["a","b"],["a","c"]]`, `[["","b"]]`, `[["a",1]]`} {
		if _, err := core.ParsePartitionKey(s); !errors.Is(err, core.ErrBadPartition) {
			t.Errorf("ParsePartitionKey(%q) = %v, want ErrBadPartition", s, err)
		}
	}
	// Texts that look like JSON but are not are read as pairs.
	for s, want := range map[string]core.Partition{
		"{x:1":                     {"{x": "1"},
		"[x:1":                     {"[x": "1"},
		`{"course_id":"a|b"}`:      {"course_id": "a|b"},
		`[ ["a" , "1"] ]`:          {"a": "1"},
		`[["a","\ud83d\ude00"]]`:   {"a": "😀"},
		"course_id:c1|student:s:1": {"course_id": "c1", "student": "s:1"},
	} {
		got, err := core.ParsePartition(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParsePartition(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
}

// ExamplePartition shows a partition's texts.
func ExamplePartition() {
	p := core.Partition{"course_id": "c1", "student_id": "ada"}
	fmt.Println(p.Key())
	fmt.Println(p)
	back, _ := core.ParsePartition("course_id:c1|student_id:ada")
	fmt.Println(back.Equal(p))
	// Output:
	// [["course_id","c1"],["student_id","ada"]]
	// course_id:c1|student_id:ada
	// true
}

func FuzzParsePartition(f *testing.F) {
	for _, s := range []string{"course_id:c1", `{"a":"b|c"}`, `[["a","b"]]`, "{x:1", "a:1|b:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := core.ParsePartition(s)
		if err != nil {
			return
		}
		back, err := core.ParsePartition(p.Key())
		if err != nil || !back.Equal(p) {
			t.Fatalf("%q: Key %q reads back as %v, %v", s, p.Key(), back, err)
		}
		back, err = core.ParsePartition(p.String())
		if err != nil || !back.Equal(p) {
			t.Fatalf("%q: String %q reads back as %v, %v", s, p.String(), back, err)
		}
	})
}
