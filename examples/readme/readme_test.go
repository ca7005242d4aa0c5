package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxGap is how many lines of code may come between two consecutive lines
// of a snippet (a function header around a snippet of statements, the
// error checks an Example needs).
const maxGap = 5

// sourceGlobs are the files holding the snippets: this package's, and the
// Examples of packages that hold their own README snippet (the PostgreSQL
// store is a module of its own, which this module does not import).
var sourceGlobs = []string{
	"*_test.go",
	filepath.Join("..", "..", "shell", "pgstore", "example_test.go"),
	filepath.Join("..", "..", "shell", "workflow", "example_test.go"),
	filepath.Join("..", "..", "shell", "dashboard", "example_test.go"),
	filepath.Join("..", "..", "shell", "example_snapshot_test.go"),
	filepath.Join("..", "..", "shell", "example_strategy_test.go"),
	filepath.Join("..", "..", "shell", "sourced", "example_queue_test.go"),
}

// trailingComment is a line comment after code (the whitespace before it
// keeps "postgres://..." whole).
var trailingComment = regexp.MustCompile(`\s+//\s.*$`)

// normalize drops a line's indentation, its trailing comment and runs of
// spaces, so that gofmt's alignment and the wording of comments do not
// count; a line that is only a comment normalises to "".
func normalize(line string) string {
	line = strings.TrimSpace(trailingComment.ReplaceAllString(line, ""))
	if strings.HasPrefix(line, "//") {
		return ""
	}
	return strings.Join(strings.Fields(line), " ")
}

// elision is a snippet line standing for code left out: the next line may
// come any number of lines later.
const elision = "..."

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
		case open && normalize(line) != "":
			cur = append(cur, normalize(line))
		}
	}
	return out
}

// contains reports whether snippet's lines appear in order in code, each
// within maxGap lines of the one before (any number after an elision).
func contains(code, snippet []string) bool {
	for start := range code {
		if code[start] != snippet[0] {
			continue
		}
		at, ok, gap := start, true, maxGap
		for _, want := range snippet[1:] {
			if want == elision {
				gap = len(code)
				continue
			}
			found := false
			for j := at + 1; j <= at+1+gap && j < len(code); j++ {
				if code[j] == want {
					at, found = j, true
					break
				}
			}
			if !found {
				ok = false
				break
			}
			gap = maxGap
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
			if n := normalize(l); n != "" {
				lines = append(lines, n)
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
			t.Errorf("README.md snippet starting %q is not in examples/readme (or the Example of its package, see sourceGlobs): copy it into an Example there (line for line), so it compiles and runs", s[0])
		}
	}
}
