package core

import (
	"fmt"
	"strings"
	"unicode"
)

// NormalizeGroup turns a consumer-group name into its canonical form:
// lowercase, dot-separated segments of snake_case words. Segments may be
// separated by "::", ".", "/" or "-" in the input, and CamelCase words are
// split ("CrossPost::Connections::LinkedIn" becomes
// "cross_post.connections.linked_in", "HTTPServer" becomes "http_server").
// A name that is empty, has an empty segment, or holds characters other than
// letters, digits and underscores in a segment is an error.
func NormalizeGroup(name string) (string, error) {
	if normalized(name) {
		return name, nil // (every Spec normalises its group: no allocation)
	}
	if strings.TrimSpace(name) == "" {
		return "", fmt.Errorf("sourced: group id is empty")
	}
	segs := strings.Split(separators.Replace(name), ".")
	for i, seg := range segs {
		if seg == "" {
			return "", fmt.Errorf("sourced: group id %q has an empty segment", name)
		}
		s, err := snake(seg)
		if err != nil {
			return "", fmt.Errorf("sourced: group id %q: %w", name, err)
		}
		segs[i] = s
	}
	return strings.Join(segs, "."), nil
}

// separators maps the segment separators NormalizeGroup accepts to ".",
// and "-" to a word break.
var separators = strings.NewReplacer("::", ".", "/", ".", "-", "_")

// normalized reports whether name is in canonical form already:
// non-empty dot-separated segments of lowercase ASCII letters, digits and
// underscores (NormalizeGroup returns such a name unchanged).
func normalized(name string) bool {
	seg := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			if seg == 0 {
				return false
			}
			seg = 0
		case c == '_' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			seg++
		default:
			return false
		}
	}
	return seg > 0
}

// snake converts one segment to snake_case, splitting CamelCase words and
// acronyms the way Rails' underscore does.
func snake(seg string) (string, error) {
	rs := []rune(seg)
	var b strings.Builder
	for i, c := range rs {
		switch {
		case c == '_' || unicode.IsDigit(c) || unicode.IsLower(c):
			b.WriteRune(c)
		case unicode.IsUpper(c):
			if i > 0 && rs[i-1] != '_' {
				prevLowerOrDigit := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if prevLowerOrDigit || (unicode.IsUpper(rs[i-1]) && nextLower) {
					b.WriteByte('_')
				}
			}
			b.WriteRune(unicode.ToLower(c))
		default:
			return "", fmt.Errorf("character %q is not allowed (letters, digits, underscores)", c)
		}
	}
	return b.String(), nil
}
