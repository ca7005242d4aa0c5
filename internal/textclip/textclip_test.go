package textclip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHead(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		head  string
		cut   int
	}{
		{"short", 10, "short", 0},
		{"exactly", 7, "exactly", 0},
		{"abcdef", 3, "abc", 3},
		{"aé", 2, "a", 2}, // é is two bytes: not cut in two
		{"日本", 4, "日", 3},
		{"abc", 0, "", 3},
		{"abc", -1, "", 3},
	} {
		head, cut := Head(tc.s, tc.limit)
		if head != tc.head || cut != tc.cut {
			t.Errorf("Head(%q, %d) = %q, %d; want %q, %d", tc.s, tc.limit, head, cut, tc.head, tc.cut)
		}
	}
	long := strings.Repeat("ü", 1000)
	for limit := range 50 {
		head, cut := Head(long, limit)
		if !utf8.ValidString(head) || len(head)+cut != len(long) || len(head) > limit {
			t.Fatalf("Head(ü..., %d) = %d bytes (valid %v), cut %d", limit, len(head), utf8.ValidString(head), cut)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("a\"b", 10); got != `"a\"b"` {
		t.Errorf("Quote short = %s", got)
	}
	if got := Quote("abcdé", 5); got != `"abcd"... (6 bytes)` {
		t.Errorf("Quote long = %s, want the head without a half character and the length", got)
	}
}
