package statechart_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

var (
	kS   = statechart.Named("ks")
	kS1  = statechart.Named("ks1")
	kS2  = statechart.Named("ks2")
	kS21 = statechart.Named("ks21")
	kS22 = statechart.Named("ks22")
	kP   = statechart.Named("kp")
	kA1  = statechart.Named("ka1")
	kA2  = statechart.Named("ka2")
	kB1  = statechart.Named("kb1")
	kB2  = statechart.Named("kb2")
	kO   = statechart.Named("ko")
)

// SCXML 3.6: <initial> holds a transition to any states below its parent.
// Here a compound state starts at its own deep history, whose default is a
// nested state.
func TestStartsAtOwnHistory(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](kS)),
		statechart.Place(kS,
			statechart.StartsAt(statechart.DeepHistory(kS, kS22)),
			statechart.Command[Leave](kO),
			statechart.Place(kS1),
			statechart.Place(kS2, statechart.Command[X](kS1), statechart.Started(kS21), statechart.Place(kS22, statechart.Command[Y](kS21))),
		),
		statechart.Place(kO, statechart.Command[Back](kS)),
	)
	cases := []struct {
		name     string
		payloads []any
		want     []string
	}{
		{"first entry: the history's default", []any{Go{}}, []string{"ks", "ks.ks2", "ks.ks2.ks22"}},
		{"entered by default: as it was left", []any{Go{}, Y{}, Leave{}, Back{}}, []string{"ks", "ks.ks2", "ks.ks2.ks21"}},
		{"as it was left, elsewhere", []any{Go{}, X{}, Leave{}, Back{}}, []string{"ks", "ks.ks1"}},
	}
	for _, c := range cases {
		in, _, log := runLog(t, m, c.payloads...)
		if !slices.Equal(in.Paths(), c.want) {
			t.Errorf("%s: %v, want %v", c.name, in.Paths(), c.want)
		}
		replays(t, m, log, c.want)
	}
}

// A compound state starting at a nested state, and one starting at two
// states of a parallel child (SCXML <initial><transition target="a2 b2"/>).
func TestStartsAtNestedAndParallel(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](kS), statechart.Command[Z](kO)),
		statechart.Place(kS,
			statechart.StartsAt(kS22),
			statechart.Started(kS1),
			statechart.Place(kS2, statechart.Started(kS21), statechart.Place(kS22)),
		),
		statechart.Place(kO,
			statechart.StartsAt(statechart.All(kA2, kB2)),
			statechart.Place(kP,
				statechart.Region("ka", statechart.Started(kA1), statechart.Place(kA2)),
				statechart.Region("kb", statechart.Started(kB1), statechart.Place(kB2)),
			),
		),
	)
	in, d, log := runLog(t, m, Go{})
	want := []string{"ks", "ks.ks2", "ks.ks2.ks22"}
	if !slices.Equal(in.Paths(), want) || !slices.Equal(moves(d.Messages)[0].Entered, want) {
		t.Fatalf("nested start: %v %+v", in.Paths(), moves(d.Messages))
	}
	replays(t, m, log, want)
	in, _, log = runLog(t, m, Z{})
	want = []string{"ko", "ko.kp", "ko.kp.ka.ka2", "ko.kp.kb.kb2"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("parallel start: %v", in.Paths())
	}
	replays(t, m, log, want)
}

func TestStartsAtDefinitionErrors(t *testing.T) {
	cases := []struct {
		name  string
		elems []statechart.Elem
		want  string
	}{
		{"outside", []statechart.Elem{statechart.StartsAt(kO), statechart.Started(kS1)}, "starts at states below it"},
		{"itself", []statechart.Elem{statechart.StartsAt(kS), statechart.Started(kS1)}, "starts at states below it"},
		{"twice", []statechart.Elem{statechart.StartsAt(kS1), statechart.StartsAt(kS1), statechart.Place(kS1)}, "two StartsAt"},
		{"history without default, no start", []statechart.Elem{statechart.StartsAt(statechart.History(kS)), statechart.Place(kS1)}, "has no start"},
	}
	for _, c := range cases {
		m := statechart.Machine[tctx]{Group: "t", Context: tContext}.Chart(
			statechart.Initial(statechart.Command[Go](kS)),
			statechart.Place(kS, c.elems...),
			statechart.Place(kO),
		)
		if err := m.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, core.ErrDefinition) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	// A history without default is fine when the region has its own start.
	m := statechart.Machine[tctx]{Group: "t", Context: tContext}.Chart(
		statechart.Initial(statechart.Command[Go](kS)),
		statechart.Place(kS, statechart.StartsAt(statechart.History(kS)), statechart.Started(kS1)),
	)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
}

// SCXML 3.6 and 3.10: a state's <initial> may target the history of a
// state below it; the history's memory is entered, else its default, as
// a transition to it would. (The history was ignored: the state below
// was entered at its own start.)
func TestStartsAtHistoryBelowTheState(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](kS)),
		statechart.Place(kS,
			statechart.StartsAt(statechart.History(kS2, kS22)),
			statechart.Command[Leave](kO),
			statechart.Place(kS1),
			statechart.Place(kS2,
				statechart.Started(kS21, statechart.Command[Y](kS22)),
				statechart.Place(kS22, statechart.Command[Y](kS21)),
			),
		),
		statechart.Place(kO, statechart.Command[Back](kS)),
	)
	cases := []struct {
		name     string
		payloads []any
		want     []string
	}{
		{"first entry: the history's default, not the state's start", []any{Go{}}, []string{"ks", "ks.ks2", "ks.ks2.ks22"}},
		{"entered again: as the state below was left", []any{Go{}, Y{}, Leave{}, Back{}}, []string{"ks", "ks.ks2", "ks.ks2.ks21"}},
		{"left at the default, entered at it", []any{Go{}, Y{}, Y{}, Leave{}, Back{}}, []string{"ks", "ks.ks2", "ks.ks2.ks22"}},
	}
	for _, c := range cases {
		in, _, log := runLog(t, m, c.payloads...)
		if !slices.Equal(in.Paths(), c.want) {
			t.Errorf("%s: %v, want %v", c.name, in.Paths(), c.want)
		}
		replays(t, m, log, c.want)
	}
}
