package sourced

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// names is the front door: every exported name of the package, sorted.
// Changing it is a decision about what an application sees: an engine
// name (Router, Task, StateCache, ...) or a store-driver name (Groups,
// GroupTx, CheckAck, Claimable, PrepareMessage, ...) does not belong
// here; a name an application calls may be added, with its example.
var names = []string{
	"AfterSync",
	"After",
	"AppendOptions",
	"Batch",
	"CommandResult",
	"Config",
	"Decide",
	"Decider",
	"DefaultConfig",
	"ErrBusy",
	"ErrConcurrentAppend",
	"ErrInvalid",
	"Evolve",
	"Guard",
	"Handle",
	"HandleResult",
	"Handler",
	"Job",
	"Load",
	"Message",
	"Messages",
	"Module",
	"NewQueue",
	"NewRegistry",
	"NewRuntime",
	"Partition",
	"Projector",
	"Queue",
	"React",
	"ReadAllOptions",
	"Register",
	"Registry",
	"Runtime",
	"Snooze",
	"Store",
	"Supervise",
	"Sync",
	"SyncTx",
	"Tx",
	"ValidationError",
}

// TestExportedNames fails when the package's exported names change: the
// list above is the front door's contract.
func TestExportedNames(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var got []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "sourced" {
			t.Fatalf("%s: package %s, want sourced", e.Name(), f.Name.Name)
		}
		for _, d := range f.Decls {
			got = append(got, exported(d)...)
		}
	}
	slices.Sort(got)
	want := slices.Clone(names)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		for _, n := range got {
			if !slices.Contains(want, n) {
				t.Errorf("new exported name %s: an application's name? add it to the list (an engine or driver name belongs elsewhere)", n)
			}
		}
		for _, n := range want {
			if !slices.Contains(got, n) {
				t.Errorf("exported name %s is gone: remove it from the list if that is the decision", n)
			}
		}
	}
	if len(got) > 40 {
		t.Errorf("%d exported names: the front door is about 30-40 names an application calls", len(got))
	}
}

// exported returns the exported names a top-level declaration declares
// (methods are not names of the package).
func exported(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			out = append(out, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
