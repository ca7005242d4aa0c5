// Package textclip cuts the text that errors quote and metadata records
// (a caller's input, a job's error) to a byte bound, on a character
// boundary, so that neither repeats unbounded input. Each caller says in
// its own words how much was cut.
package textclip

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Head returns the longest prefix of s of at most limit bytes that does not
// cut a character in two, and how many bytes of s it leaves out (0 when s
// fits).
func Head(s string, limit int) (head string, cut int) {
	if len(s) <= limit {
		return s, 0
	}
	n := max(0, limit)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], len(s) - n
}

// Quote is s quoted (strconv.Quote) for an error message, cut to limit
// bytes and then saying how long it was: `"abc"... (4000 bytes)`.
func Quote(s string, limit int) string {
	head, cut := Head(s, limit)
	if cut == 0 {
		return strconv.Quote(s)
	}
	return strconv.Quote(head) + fmt.Sprintf("... (%d bytes)", len(s))
}
