package codec

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxIndexedValueBytes is the longest value, in bytes, a message may be
// indexed under, and the longest value a condition or a partition may
// name. Every store refuses a longer one the same way (Validate, with a
// *ValidationError naming the attribute; CheckIndexedValue for the values
// of reads), before it writes anything.
//
// It is set well below what every store can index: PostgreSQL refuses an
// index entry over about 2.7 KB (the attribute name and the value are one
// entry of its GIN index), where SQLite would take a value of a megabyte.
// A longer text is data to store, not to look messages up by: mark it
// sourced:"noindex", or index a digest of it.
const MaxIndexedValueBytes = 1024

// CheckIndexedValue reports, wrapping ErrInvalid, a value no message can
// be indexed under, so that no condition, partition or guard can name it:
// one longer than MaxIndexedValueBytes, one holding a NUL byte (U+0000;
// PostgreSQL stores no NUL in text), or one that is not valid UTF-8. The
// error says what is wrong without repeating the value. Validate applies
// the same rules to the indexed attributes of a payload.
func CheckIndexedValue(value string) error {
	if p := indexedValueProblem(value); p != "" {
		return valueError(p)
	}
	return nil
}

// valueError is CheckIndexedValue's error: the problem, which matches
// ErrInvalid.
type valueError string

func (e valueError) Error() string { return "codec: the value " + string(e) }

// Is reports whether target is ErrInvalid.
func (e valueError) Is(target error) bool { return target == ErrInvalid }

// indexedValueProblem says what is wrong with value as an indexed value,
// "" when nothing is.
func indexedValueProblem(value string) string {
	switch {
	case len(value) > MaxIndexedValueBytes:
		return lengthProblem(len(value))
	case strings.IndexByte(value, 0) >= 0:
		return nulProblem(strings.IndexByte(value, 0))
	case !utf8.ValidString(value):
		return utf8Problem(firstInvalid([]byte(value)))
	}
	return ""
}

func lengthProblem(n int) string {
	return fmt.Sprintf("is %d bytes long: an indexed value is at most %d bytes (codec.MaxIndexedValueBytes); mark the attribute sourced:\"noindex\" to store long text, or index a shorter key", n, MaxIndexedValueBytes)
}

func nulProblem(at int) string {
	return fmt.Sprintf("holds a NUL byte (at byte %d): no indexed value may (PostgreSQL stores no NUL in text); strip it, or mark the attribute sourced:\"noindex\"", at)
}
