package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sourced-go/sourced"

// rank is the layer of a package of the module: a package may import
// the module's packages of its layer and the layers below, never above.
// The repository's internal packages (fixtures, test hooks) and the
// packages above the shell (props, bench, examples, cmd) are not layered.
func rank(path string) (int, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case rel == "shell/driver":
		return 4, true // below the rest of shell: see TestDriverImportsNoShell
	case top == "codec":
		return 0, true
	case top == "core":
		return 1, true
	case top == "effects":
		return 2, true
	case top == "statechart":
		return 3, true
	case top == "shell":
		return 5, true
	}
	return 0, false
}

// imports lists the root module's packages with the module's packages
// each imports (tests excluded: a test may reach above its layer).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"/") {
				m[fields[0]] = append(m[fields[0]], imp)
			}
		}
		if _, ok := m[fields[0]]; !ok {
			m[fields[0]] = nil
		}
	}
	if len(m) < 20 {
		t.Fatalf("go list found %d packages of the module, want the whole root module:\n%s", len(m), out)
	}
	return m
}

// TestArrows fails when a package imports a layer above its own: core
// importing shell, effects importing statechart, and so on.
func TestArrows(t *testing.T) {
	for pkg, imps := range imports(t) {
		r, ok := rank(pkg)
		if !ok {
			continue
		}
		for _, imp := range imps {
			if ri, ok := rank(imp); ok && ri > r {
				t.Errorf("%s imports %s, a layer above its own (codec <- core <- effects <- statechart <- shell/driver <- shell)", pkg, imp)
			}
		}
	}
}

// TestDriverImportsNoShell fails when the store contract imports a
// package of the shell: a store implements it without the engine, and
// the engine (package shell) imports it.
func TestDriverImportsNoShell(t *testing.T) {
	m := imports(t)
	imps, ok := m[module+"/shell/driver"]
	if !ok {
		t.Fatal("go list does not list shell/driver")
	}
	for _, imp := range imps {
		if strings.HasPrefix(imp, module+"/shell") {
			t.Errorf("shell/driver imports %s", imp)
		}
	}
	if !slices.Contains(m[module+"/shell"], module+"/shell/driver") {
		t.Errorf("shell does not import shell/driver: %v", m[module+"/shell"])
	}
}
