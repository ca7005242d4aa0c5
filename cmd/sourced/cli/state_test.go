package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

type (
	RenameCourse struct {
		CourseID string `json:"course_id" sourced:"required"`
		Name     string `json:"name" sourced:"required"`
	}
	CourseRenamed struct {
		CourseID string `json:"course_id"`
		Name     string `json:"name"`
	}
)

// names is a decider: a course's name, renamed by RenameCourse.
func names() core.Decider[string] {
	return core.Decider[string]{Group: "courses.names", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(_ string, e CourseRenamed) string { return e.Name }),
		core.Decide(func(_ string, c RenameCourse) ([]any, error) { return []any{CourseRenamed(c)}, nil }).Emits(CourseRenamed{}),
	)
}

// stateApp is a store with a decider's and a machine's history: three
// renames of course c1, and gate g1 opened.
func stateApp(t *testing.T) (string, Driver) {
	t.Helper()
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[RenameCourse](reg, "courses.rename")
	codec.MustRegister[CourseRenamed](reg, "courses.renamed")
	codec.MustRegister[OpenGate](reg, "gates.open")
	m, d := gates(), names()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitestore.Install(ctx, db, sqlitestore.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []string{"Algebra", "Algebra I", "Linear algebra"} {
		if _, err := shell.Handle(ctx, s, d, RenameCourse{CourseID: "c1", Name: n}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shell.HandleMachine(ctx, s, m, OpenGate{GateID: "g1"}, nil); err != nil {
		t.Fatal(err)
	}
	return db, WithReactors(SQLite(), reg, d, m)
}

func runState(t *testing.T, db string, d Driver, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"-db", db, "state"}, args...), &out, &errOut, d)
	return code, out.String(), errOut.String()
}

// 'sourced state' folds a decider's state at three positions of its
// partition (the log's positions 1-6: command, event, three times), with
// the command decided next and the event it produced, and a machine's
// active states; -json gives the same for scripts.
func TestStateCommand(t *testing.T) {
	db, d := stateApp(t)
	for _, c := range []struct {
		at    string
		state string
		next  int64
		made  int64
	}{
		{"0", `""`, 1, 2},
		{"2", `"Algebra"`, 3, 4},
		{"4", `"Algebra I"`, 5, 6},
		{"", `"Linear algebra"`, 0, 0},
	} {
		args := []string{"-json", "courses.names", "course_id:c1"}
		if c.at != "" {
			args = append(args, "-at", c.at)
		}
		code, out, errOut := runState(t, db, d, args...)
		if code != 0 {
			t.Fatalf("state -at %s: exit %d: %s", c.at, code, errOut)
		}
		var st dashboard.PartitionState
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if string(st.State) != c.state {
			t.Errorf("-at %s: state %s, want %s", c.at, st.State, c.state)
		}
		switch {
		case c.next == 0 && st.Decision != nil:
			t.Errorf("-at %s: decision %+v after the last message", c.at, st.Decision)
		case c.next != 0 && (st.Decision == nil || st.Decision.Message.Position != c.next || len(st.Decision.Produced) != 1 || st.Decision.Produced[0].Position != c.made):
			t.Errorf("-at %s: decision %+v, want the command at %d producing %d", c.at, st.Decision, c.next, c.made)
		}
	}
	code, out, errOut := runState(t, db, d, "courses.names", "course_id:c1", "-at", "2")
	if code != 0 {
		t.Fatalf("table: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"courses.names (decider)", "after", "#2", `"Algebra"`, "back: -at 1, forward: -at 3", "handled next", "#3", "courses.rename", "produced", "#4", "courses.renamed", "> #2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runState(t, db, d, "gates", "gate_id:g1")
	if code != 0 || !strings.Contains(out, "active states") || !strings.Contains(out, "opened") {
		t.Errorf("a machine: exit %d\n%s%s", code, out, errOut)
	}
}

// Bad input is a usage error (exit 2); what cannot be folded fails
// (exit 1) saying why; the stock tool knows no reactors.
func TestStateCommandRefusals(t *testing.T) {
	db, d := stateApp(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"courses.names"}, 2, "GROUP PARTITION"},
		{[]string{"courses.names", "course_id:c1", "-at", "-5"}, 2, "-at -5"},
		{[]string{"courses.names", "nonsense"}, 2, "partition"},
		{[]string{"nope", "course_id:c1"}, 1, "not among the application's"},
		{[]string{"courses.names", "gate_id:g1"}, 1, "keys"},
	} {
		code, out, errOut := runState(t, db, d, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("state %v: exit %d, %q%q; want %d naming %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	code, _, errOut := runState(t, db, SQLite(), "courses.names", "course_id:c1")
	if code != 1 || !strings.Contains(errOut, "WithReactors") {
		t.Errorf("the stock tool: exit %d, %q", code, errOut)
	}
}
