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
	hH   = statechart.Named("hh")
	hH1  = statechart.Named("hh1")
	hH2  = statechart.Named("hh2")
	hH21 = statechart.Named("hh21")
	hH22 = statechart.Named("hh22")
	hO   = statechart.Named("ho")
)

// SCXML 3.10: a history state's default transition is taken when its
// parent has no memory yet, instead of the parent's initial.
func historyDefaultsChart(t *testing.T) statechart.Machine[tctx] {
	return tm(t,
		statechart.Initial(statechart.Command[Go](statechart.History(hH, hH2)), statechart.Command[Z](hO)),
		statechart.Place(hH,
			statechart.Command[Leave](hO),
			statechart.Started(hH1, statechart.Command[X](hH2)),
			statechart.Place(hH2, statechart.Started(hH21), statechart.Place(hH22)),
		),
		statechart.Place(hO,
			statechart.Command[Back](statechart.History(hH, hH2)),
			statechart.Command[Deep](statechart.DeepHistory(hH, hH22)),
			statechart.Command[Y](hH),
		),
	)
}

func TestHistoryDefaults(t *testing.T) {
	m := historyDefaultsChart(t)
	paths := func(payloads ...any) []string {
		t.Helper()
		in, _, log := runLog(t, m, payloads...)
		replays(t, m, log, in.Paths())
		return in.Paths()
	}
	cases := []struct {
		name     string
		payloads []any
		want     []string
	}{
		{"shallow default, not the start", []any{Go{}}, []string{"hh", "hh.hh2", "hh.hh2.hh21"}},
		{"deep default names a nested state", []any{Z{}, Deep{}}, []string{"hh", "hh.hh2", "hh.hh2.hh22"}},
		{"shallow default from outside", []any{Z{}, Back{}}, []string{"hh", "hh.hh2", "hh.hh2.hh21"}},
		{"memory wins over the shallow default", []any{Z{}, Y{}, Leave{}, Back{}}, []string{"hh", "hh.hh1"}},
		{"memory wins over the deep default", []any{Z{}, Y{}, Leave{}, Deep{}}, []string{"hh", "hh.hh1"}},
		{"deep memory", []any{Z{}, Deep{}, Leave{}, Deep{}}, []string{"hh", "hh.hh2", "hh.hh2.hh22"}},
		{"memory is of the last exit", []any{Z{}, Deep{}, Leave{}, Back{}, Leave{}, Deep{}}, []string{"hh", "hh.hh2", "hh.hh2.hh21"}},
		{"shallow memory enters the remembered state by default", []any{Z{}, Deep{}, Leave{}, Back{}}, []string{"hh", "hh.hh2", "hh.hh2.hh21"}},
	}
	for _, c := range cases {
		if got := paths(c.payloads...); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// An instance built from paths has no memory: the defaults apply.
	at, err := m.At([]string{"ho"}, tctx{}, map[string]string{"id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if next, _ := decideAll(t, m, at, Deep{}); !slices.Equal(next.Paths(), []string{"hh", "hh.hh2", "hh.hh2.hh22"}) {
		t.Fatalf("detached: %v", next.Paths())
	}
}

func TestHistoryDefaultsDefinitionErrors(t *testing.T) {
	cases := []struct {
		name   string
		target statechart.Target
		want   string
	}{
		{"shallow default nested", statechart.History(hH, hH22), "shallow history is not one of its sub-states"},
		{"default not below", statechart.DeepHistory(hH, hO), "is not below it"},
		{"two defaults in one region", statechart.DeepHistory(hH, hH21, hH22), "different region"},
	}
	for _, c := range cases {
		m := statechart.Machine[tctx]{Group: "t", Context: tContext}.Chart(
			statechart.Initial(statechart.Command[Go](c.target)),
			statechart.Place(hH, statechart.Started(hH1), statechart.Place(hH2, statechart.Started(hH21), statechart.Place(hH22))),
			statechart.Place(hO),
		)
		if err := m.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, core.ErrDefinition) {
			t.Errorf("%s: %v, want an ErrDefinition saying %q", c.name, err, c.want)
		}
	}
}

var (
	mP   = statechart.Named("mp")
	mA   = statechart.Named("ma")
	mA1  = statechart.Named("ma1")
	mA2  = statechart.Named("ma2")
	mB   = statechart.Named("mb")
	mB1  = statechart.Named("mb1")
	mB2  = statechart.Named("mb2")
	mB21 = statechart.Named("mb21")
	mB22 = statechart.Named("mb22")
	mOut = statechart.Named("mout")
)

// A multi-target transition whose targets are histories in two regions of
// one parallel state (SCXML: target="a_hist b_deep_hist").
func TestMultiTargetHistories(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](mP)),
		statechart.Place(mP,
			statechart.Command[Leave](mOut),
			statechart.Region("ra",
				statechart.Started(mA, statechart.Started(mA1, statechart.Command[X](mA2)), statechart.Place(mA2))),
			statechart.Region("rb",
				statechart.Started(mB,
					statechart.Started(mB1, statechart.Command[Y](mB2)),
					statechart.Place(mB2, statechart.Started(mB21, statechart.Command[Z](mB22)), statechart.Place(mB22)))),
		),
		statechart.Place(mOut,
			statechart.Command[Back](statechart.All(statechart.History(mA), statechart.DeepHistory(mB, mB22))),
		),
	)
	// With no memory: ma by default, mb at its deep default.
	at, err := m.At([]string{"mout"}, tctx{}, map[string]string{"id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	next, d := decideAll(t, m, at, Back{})
	want := []string{"mp", "mp.ra.ma", "mp.ra.ma.ma1", "mp.rb.mb", "mp.rb.mb.mb2", "mp.rb.mb.mb2.mb22"}
	if !slices.Equal(next.Paths(), want) || !slices.Equal(moves(d.Messages)[0].Entered, want) {
		t.Fatalf("no memory: %v %+v", next.Paths(), moves(d.Messages))
	}
	in, _, log := runLog(t, m, Go{}, X{}, Y{}, Z{}, Leave{}, Back{})
	want = []string{"mp", "mp.ra.ma", "mp.ra.ma.ma2", "mp.rb.mb", "mp.rb.mb.mb2", "mp.rb.mb.mb2.mb22"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("memory: %v, want %v", in.Paths(), want)
	}
	replays(t, m, log, want)
	in, _, _ = runLog(t, m, Go{}, X{}, Y{}, Leave{}, Back{})
	want = []string{"mp", "mp.ra.ma", "mp.ra.ma.ma2", "mp.rb.mb", "mp.rb.mb.mb2", "mp.rb.mb.mb2.mb21"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("deep memory: %v, want %v", in.Paths(), want)
	}
}

// Deliberate, and unlike SCXML (whose history is a child of its state, so
// a transition from inside the state to its history keeps the state
// active and enters the memory of its last exit): a transition to the
// history of a state holding its source, or of the source itself, exits
// the state and enters it again, its exit and entry actions running, and
// the history recorded at that exit is the configuration just left, so
// the state comes back as it was (a restart of its actions and timers).
// The package doc says so.
func TestHistoryOfAnEnclosingStateExitsAndReentersIt(t *testing.T) {
	var entries, exits int
	count := func(n *int) func(tctx, statechart.Move) []any {
		return func(tctx, statechart.Move) []any { *n++; return nil }
	}
	m := tm(t,
		statechart.Initial(statechart.Command[Go](hH)),
		statechart.Place(hH,
			statechart.Entry(count(&entries)),
			statechart.Exit(count(&exits)),
			statechart.Command[Leave](hO),
			statechart.Command[Z](statechart.History(hH)),
			statechart.Started(hH1, statechart.Command[X](hH2)),
			statechart.Place(hH2, statechart.Command[Back](statechart.History(hH))),
		),
		statechart.Place(hO, statechart.Command[Y](hH)),
	)
	for _, last := range []any{Back{}, Z{}} {
		// Left at hh2 once, entered again at hh1, then moved to hh2: the
		// history entered is hh2 as just left, not the memory of the
		// earlier exit.
		entries, exits = 0, 0
		in, d, log := runLog(t, m, Go{}, X{}, Leave{}, Y{}, X{}, last)
		mv := moves(d.Messages)
		if len(mv) != 1 || mv[0].Target != "hh" || !slices.Equal(mv[0].Exited, []string{"hh.hh2", "hh"}) || !slices.Equal(mv[0].Entered, []string{"hh", "hh.hh2"}) || !slices.Equal(in.Paths(), []string{"hh", "hh.hh2"}) {
			t.Fatalf("%T: %+v, %v", last, mv, in.Paths())
		}
		if entries != 3 || exits != 2 {
			t.Errorf("%T: hh entered %d times and exited %d times, want 3 and 2", last, entries, exits)
		}
		replays(t, m, log, []string{"hh", "hh.hh2"})
	}
}
