package readme

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exampleLibraries is what the README's "Try it" says the two example
// applications import of the library: the front door and their store.
var exampleLibraries = []string{
	"github.com/sourced-go/sourced/shell/sourced",
	"github.com/sourced-go/sourced/shell/sqlitestore",
}

// TestExamplesImportTheFrontDoor fails when examples/courses or
// examples/web (their tests included) import a package of the library
// other than the two the README names: an application needs no more.
func TestExamplesImportTheFrontDoor(t *testing.T) {
	const module = "github.com/sourced-go/sourced/"
	for _, dir := range []string{"courses", "courses/domain", "web"} {
		entries, err := os.ReadDir(filepath.Join("..", dir))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join("..", dir, e.Name()), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !strings.HasPrefix(path, module) || strings.HasPrefix(path, module+"examples/") {
					continue
				}
				if !slices.Contains(exampleLibraries, path) {
					t.Errorf("examples/%s/%s imports %s: the examples import only %v", dir, e.Name(), path, exampleLibraries)
				}
			}
		}
	}
}
