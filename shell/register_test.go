package shell_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// parent is a definition that brings another with it, as a machine brings
// the child machines it starts.
type parent struct {
	core.Decider[int]
	children []core.Definition
}

func (p parent) Reactors() []core.Definition { return append([]core.Definition{p}, p.children...) }

// module is a bounded context's bundle.
type module []core.Definition

func (m module) Reactors() []core.Definition { return m }

func groupsOf(rt *shell.Router) []string {
	var out []string
	for _, info := range rt.Reactors() {
		out = append(out, info.Group)
	}
	return out
}

// TestRegistering: bundles expand recursively (a module's machines bring
// their children), a machine whose children are not registered is
// refused with a *MissingReactorsError naming them, the same reactor
// registered twice is registered once, and two different reactors with
// one group id are refused naming both.
func TestRegistering(t *testing.T) {
	store := memstore.New(courseRegistry())
	p := parent{Decider: notifications, children: []core.Definition{enrolments}}

	t.Run("a bundle expands recursively", func(t *testing.T) {
		rt, err := shell.NewRouter(store, shell.RouterOptions{}, module{courseNames, p})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := groupsOf(rt), []string{"courses.course_names", "students.notifications", "courses.enrolments"}; !slices.Equal(got, want) {
			t.Fatalf("registered %v, want %v (the module's machine brings its child)", got, want)
		}
	})

	t.Run("a module holds hand-written reactors and bundles", func(t *testing.T) {
		inner := shell.Module{unpositioned{pure: true}, courseNames}
		rt, err := shell.NewRouter(store, shell.RouterOptions{}, shell.Module{unpositioned{}, module{p}, inner, courseNames})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"shell_test.unpositioned_false", "students.notifications", "courses.enrolments", "shell_test.unpositioned_true", "courses.course_names"}
		if got := groupsOf(rt); !slices.Equal(got, want) {
			t.Fatalf("registered %v, want %v", got, want)
		}
		if got := shell.Expand(shell.Module{unpositioned{}, module{p}, inner, courseNames}); len(got) != len(want) {
			t.Fatalf("Expand gives %d reactors, want %d: %v", len(got), len(want), got)
		}
		if _, err := shell.NewRouter(store, shell.RouterOptions{}, shell.Module{courseNames, nil}); err == nil || !strings.Contains(err.Error(), "is not a reactor") {
			t.Fatalf("a module holding nil: %v", err)
		}
	})

	t.Run("a machine registered without its children is refused", func(t *testing.T) {
		adapted, err := effects.FromDefinition(store.Registry(), p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = shell.NewRouter(store, shell.RouterOptions{}, adapted)
		var me *shell.MissingReactorsError
		if !errors.As(err, &me) || !errors.Is(err, core.ErrDefinition) || me.Group != "students.notifications" || !slices.Equal(me.Missing, []string{"courses.enrolments"}) {
			t.Fatalf("NewRouter: %v, want a *MissingReactorsError naming courses.enrolments", err)
		}
		if !strings.Contains(err.Error(), "register the machine itself") {
			t.Fatalf("%v: does not say what to do", err)
		}
		if _, err := shell.NewRouter(store, shell.RouterOptions{}, adapted, enrolments); err != nil {
			t.Fatalf("with the child registered too: %v", err)
		}
	})

	t.Run("the same reactor twice is registered once", func(t *testing.T) {
		same := notifications // a copy is the same reactor
		f := &flaky{}
		rt, err := shell.NewRouter(store, shell.RouterOptions{}, notifications, same, module{notifications}, f, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := groupsOf(rt); !slices.Equal(got, []string{"students.notifications", "shell_test.flaky"}) {
			t.Fatalf("registered %v", got)
		}
	})

	t.Run("two different reactors with one group id are refused, naming both", func(t *testing.T) {
		other := core.Projector[int]{Group: "students.notifications", PartitionBy: []string{"student_id"}}.With(
			core.Evolve(func(n int, _ StudentNotified) int { return n + 1 }))
		for _, pair := range [][]any{{notifications, other}, {module{notifications}, other}, {&flaky{}, &flaky{}}} {
			_, err := shell.NewRouter(store, shell.RouterOptions{}, pair...)
			var de *shell.DuplicateGroupError
			if !errors.As(err, &de) || !errors.Is(err, core.ErrDefinition) {
				t.Fatalf("%T and %T: %v, want a *DuplicateGroupError", pair[0], pair[1], err)
			}
			if de.First == "" || de.Second == "" || de.First == de.Second && !strings.Contains(de.First, "flaky") {
				t.Fatalf("%+v: does not name both", de)
			}
		}
		_, err := shell.NewRouter(store, shell.RouterOptions{}, notifications, other)
		if msg := err.Error(); !strings.Contains(msg, "core.Decider[int] handling students.notify") || !strings.Contains(msg, "core.Projector[int] handling students.notified") {
			t.Fatalf("%v: does not name both reactors", err)
		}
	})
}
