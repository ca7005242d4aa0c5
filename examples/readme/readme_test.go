package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxGap is how many lines of code may come between two consecutive lines
// of a snippet (a function header around a snippet of statements, the
// error checks an Example needs).
const maxGap = 5

// sourceGlobs are the files holding the snippets: this package's, and the
// PostgreSQL store's Example (a module of its own, which this module does
// not import).
var sourceGlobs = []string{"*_test.go", filepath.Join("..", "..", "shell", "pgstore", "example_test.go")}

// normalize drops a line's indentation and collapses runs of spaces, so
// that gofmt's alignment of comments does not count.
func normalize(line string) string { return strings.Join(strings.Fields(line), " ") }

// goSnippets returns the ```go blocks of a Markdown text, each as its
// non-blank normalised lines.
func goSnippets(md string) [][]string {
	var (
		out  [][]string
		cur  []string
		open bool
	)
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !open && strings.TrimSpace(line) == "```go":
			open, cur = true, nil
		case open && strings.TrimSpace(line) == "```":
			open = false
			out = append(out, cur)
		case open && strings.TrimSpace(line) != "":
			cur = append(cur, normalize(line))
		}
	}
	return out
}

// contains reports whether snippet's lines appear in order in code, each
// within maxGap lines of the one before.
func contains(code, snippet []string) bool {
	for start := range code {
		if code[start] != snippet[0] {
			continue
		}
		at, ok := start, true
		for _, want := range snippet[1:] {
			found := false
			for j := at + 1; j <= at+1+maxGap && j < len(code); j++ {
				if code[j] == want {
					at, found = j, true
					break
				}
			}
			if !found {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func TestREADMESnippetsAreCompiled(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, g := range sourceGlobs {
		fs, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	var sources [][]string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, normalize(l))
			}
		}
		sources = append(sources, lines)
	}
	snippets := goSnippets(string(md))
	if len(snippets) < 5 {
		t.Fatalf("found %d Go snippets in README.md, want at least 5", len(snippets))
	}
	for _, s := range snippets {
		found := false
		for _, src := range sources {
			found = found || contains(src, s)
		}
		if !found {
			t.Errorf("README.md snippet starting %q is not in examples/readme (or shell/pgstore's Example): copy it into an Example there (line for line), so it compiles and runs", s[0])
		}
	}
}
