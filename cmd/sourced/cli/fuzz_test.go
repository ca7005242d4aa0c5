package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzArgs runs the tool on a fixture store with arbitrary arguments
// (split at NUL bytes): it never panics, and exits 0, 1 or 2. Arguments
// that would leave the fixture (-db, -dir), wait (serve, -follow) or name
// another store are left out.
func FuzzArgs(f *testing.F) {
	db := fixture(f)
	for _, seed := range []string{
		"stats", "log\x00-limit\x00-1", "log\x00-type\x00courses.created\x00-where\x00course_id=c1",
		"partitions\x00retry\x00courses.catalog\x00course_id:c1|x:y", "partitions\x00reset\x00courses.catalog\x00{\"course_id\":\"a|b\"}",
		"groups\x00stop\x00nope", "offsets\x00-group\x00courses.catalog", "trace\x00not-a-uuid", "-json\x00stats",
		"log\x00-from\x009223372036854775807", "help\x00log", "workflow\x00x\x00y", "schedule", "migrate\x00print\x00-format\x00goose",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := []string{"-db", db}
		for _, a := range strings.Split(s, "\x00") {
			l := strings.ToLower(a)
			if strings.Contains(l, "db") || strings.Contains(l, "dir") || strings.Contains(l, "serve") || strings.Contains(l, "follow") || strings.Contains(l, "prefix") {
				return
			}
			args = append(args, a)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var out, errOut bytes.Buffer
		code := Run(ctx, args, &out, &errOut, SQLite())
		if code < 0 || code > 2 {
			t.Fatalf("sourced %q: exit %d", args, code)
		}
		if code != 0 && errOut.Len() == 0 {
			t.Fatalf("sourced %q: exit %d with nothing on stderr", args, code)
		}
	})
}
