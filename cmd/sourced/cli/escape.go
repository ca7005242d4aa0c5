package cli

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// escWriter writes text with every control character other than newline
// and tab shown escaped (\x1b, \r, \x9b, ...), and bytes that are not
// UTF-8 as \xNN: stored data (payloads, failure messages, group ids)
// printed by the tool cannot drive the terminal (move the cursor, retitle
// the window, hide text, write to the clipboard). JSON output holds none
// of them raw, so it goes through unchanged.
type escWriter struct{ w io.Writer }

func (e escWriter) Write(p []byte) (int, error) {
	clean := true
	for _, b := range p {
		if b < 0x20 && b != '\n' && b != '\t' || b >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return e.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
