package statechart_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

var (
	dS   = statechart.Named("ds")
	dA   = statechart.Named("da")
	dB   = statechart.Named("db")
	dB1  = statechart.Named("db1")
	dB2  = statechart.Named("db2")
	dB21 = statechart.Named("db21")
	dR   = statechart.Named("dr")
	dR1  = statechart.Named("dr1")
)

// replays checks that the state events a run appended reload to the
// configuration the run reached.
func replays(t *testing.T, m statechart.Machine[tctx], log []core.Message, want []string) {
	t.Helper()
	loaded, err := m.Load(nil, log)
	if err != nil {
		t.Fatalf("the appended events do not reload: %v", err)
	}
	if !slices.Equal(loaded.Paths(), want) {
		t.Fatalf("reloaded %v, want %v", loaded.Paths(), want)
	}
}

// run decides payloads in turn and returns the instance, the last decision
// and every message appended.
func runLog(t *testing.T, m statechart.Machine[tctx], payloads ...any) (statechart.Instance[tctx], statechart.Decision, []core.Message) {
	t.Helper()
	in := m.New(nil)
	var log []core.Message
	var d statechart.Decision
	for _, p := range payloads {
		in, d = decideAll(t, m, in, p)
		log = append(log, d.Messages...)
	}
	return in, d, log
}

// A handler on a compound state targeting a grandchild below its other,
// inactive child: the domain is the compound state's region (SCXML's
// findLCCA of an internal transition is the source), so the active child is
// exited and the whole path down to the target entered.
func TestDomainCompoundTargetBelowInactiveChild(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](dS)),
		statechart.Place(dS,
			statechart.Command[X](dB2),
			statechart.Started(dA),
			statechart.Place(dB, statechart.Started(dB1), statechart.Place(dB2)),
		),
	)
	in, d, log := runLog(t, m, Go{}, X{})
	want := []string{"ds", "ds.db", "ds.db.db2"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("paths %v, want %v", in.Paths(), want)
	}
	mv := statechart.Move{Trigger: "X", Source: "ds", Target: "ds.db.db2", Exited: []string{"ds.da"}, Entered: []string{"ds.db", "ds.db.db2"}}
	if got := moves(d.Messages); !reflect.DeepEqual(got, []statechart.Move{mv}) {
		t.Fatalf("move %+v, want %+v", got, mv)
	}
	replays(t, m, log, want)
}

// The same from a sibling: a transition declared on the active child
// targeting a state two levels below the other child.
func TestDomainSiblingTargetTwoLevelsDown(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](dS)),
		statechart.Place(dS,
			statechart.Started(dA, statechart.Command[X](dB21)),
			statechart.Place(dB, statechart.Started(dB1), statechart.Place(dB2, statechart.Started(dB21))),
		),
	)
	in, d, log := runLog(t, m, Go{}, X{})
	want := []string{"ds", "ds.db", "ds.db.db2", "ds.db.db2.db21"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("paths %v, want %v", in.Paths(), want)
	}
	if got := moves(d.Messages)[0]; !slices.Equal(got.Exited, []string{"ds.da"}) || !slices.Equal(got.Entered, want[1:]) {
		t.Fatalf("move %+v", got)
	}
	replays(t, m, log, want)
}

// From inside a parallel region: a handler on the parallel state targeting
// a grandchild of its region's inactive compound state exits the region's
// active state and enters the path down; the other region is untouched.
func TestDomainInsideParallelRegion(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](dS)),
		statechart.Place(dS,
			statechart.Command[X](dB2),
			statechart.Region("left",
				statechart.Started(dA),
				statechart.Place(dB, statechart.Started(dB1), statechart.Place(dB2))),
			statechart.Region("right", statechart.Started(dR, statechart.Command[Y](dR1)), statechart.Place(dR1)),
		),
	)
	in, d, log := runLog(t, m, Go{}, Y{}, X{})
	want := []string{"ds", "ds.left.db", "ds.left.db.db2", "ds.right.dr1"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("paths %v, want %v", in.Paths(), want)
	}
	if got := moves(d.Messages)[0]; !slices.Equal(got.Exited, []string{"ds.left.da"}) || !slices.Equal(got.Entered, []string{"ds.left.db", "ds.left.db.db2"}) {
		t.Fatalf("move %+v", got)
	}
	replays(t, m, log, want)

	// From a state of the region itself.
	m = tm(t,
		statechart.Initial(statechart.Command[Go](dS)),
		statechart.Place(dS,
			statechart.Region("left",
				statechart.Started(dA, statechart.Command[X](dB2)),
				statechart.Place(dB, statechart.Started(dB1), statechart.Place(dB2))),
			statechart.Region("right", statechart.Started(dR)),
		),
	)
	in, _, log = runLog(t, m, Go{}, X{})
	want = []string{"ds", "ds.left.db", "ds.left.db.db2", "ds.right.dr"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("paths %v, want %v", in.Paths(), want)
	}
	replays(t, m, log, want)
}

// SCXML's internal transition: a compound source is its own domain, so a
// handler on it targeting a sibling below its active child exits that
// child too and re-enters it on the way down (as SCXML and XState v5).
func TestDomainInternalExitsBelowTheSource(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](dS)),
		statechart.Place(dS,
			statechart.Command[X](dB2),
			statechart.Started(dB, statechart.Started(dB1), statechart.Place(dB2)),
			statechart.Place(dA),
		),
	)
	_, d, log := runLog(t, m, Go{}, X{})
	mv := moves(d.Messages)[0]
	if !slices.Equal(mv.Exited, []string{"ds.db.db1", "ds.db"}) || !slices.Equal(mv.Entered, []string{"ds.db", "ds.db.db2"}) {
		t.Fatalf("%+v", mv)
	}
	replays(t, m, log, []string{"ds", "ds.db", "ds.db.db2"})
}
