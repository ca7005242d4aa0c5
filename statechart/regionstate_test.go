package statechart_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/statechart"
)

var (
	rP   = statechart.Named("rp")
	rA   = statechart.Named("ra")
	rA1  = statechart.Named("ra1")
	rA2  = statechart.Named("ra2")
	rB1  = statechart.Named("rb1")
	rB2  = statechart.Named("rb2")
	rOut = statechart.Named("rout")
	rEnd = statechart.Named("rend")
)

type W struct{}

// A parallel state's children as full states (SCXML <parallel> children):
// the region headed by ra holds handlers and is a target.
func regionStateChart(t *testing.T) statechart.Machine[tctx] {
	return tm(t,
		statechart.Initial(statechart.Command[Go](rP), statechart.Command[Z](rA)),
		statechart.Place(rP,
			statechart.RegionState(rA,
				statechart.Entry(sent("enter ra")),
				statechart.Exit(sent("exit ra")),
				statechart.Command[X](rA2),
				statechart.Command[Y](rA2).External(),
				statechart.Command[W](rA2).External(),
				statechart.Command[Leave](rOut),
				statechart.Started(rA1),
				statechart.Final(rA2)),
			statechart.Region("rb",
				statechart.Started(rB1, statechart.Command[W](rB2), statechart.Command[Back](rB2)),
				statechart.Final(rB2)),
			statechart.Done(rEnd),
		),
		statechart.Place(rOut, statechart.Command[Back](rA)),
		statechart.Final(rEnd),
	)
}

func TestRegionStatePathsValueAndTargets(t *testing.T) {
	m := regionStateChart(t)
	in, d, log := runLog(t, m, Go{})
	want := []string{"rp", "rp.ra", "rp.ra.ra1", "rp.rb.rb1"}
	if !slices.Equal(in.Paths(), want) || !slices.Equal(summary(d.Messages), []string{"Go>rp", "sent enter ra"}) {
		t.Fatalf("%v %v", in.Paths(), summary(d.Messages))
	}
	if v := in.ActiveStates().Value(); !reflect.DeepEqual(v, map[string]any{"rp": map[string]any{"ra": "ra1", "rb": "rb1"}}) {
		t.Fatalf("value %v", v)
	}
	replays(t, m, log, want)
	// Targeted from outside: the parallel state is entered, the other
	// region at its start.
	in, _, log = runLog(t, m, Z{})
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("targeted: %v", in.Paths())
	}
	replays(t, m, log, want)
	// Its own handler leaving the parallel state, and coming back to it.
	in, _, log = runLog(t, m, Go{}, Back{}, Leave{}, Back{})
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("left and re-entered: %v", in.Paths())
	}
	replays(t, m, log, want)
}

// Internal (the default), a handler on the region's state moves inside it
// and the state stays; External leaves and re-enters the parallel state
// (SCXML's findLCCA skips parallel states), so the other region restarts.
func TestRegionStateInternalExternal(t *testing.T) {
	m := regionStateChart(t)
	_, d, _ := runLog(t, m, Go{}, X{})
	if mv := moves(d.Messages); len(mv) != 1 || !slices.Equal(mv[0].Exited, []string{"rp.ra.ra1"}) || !slices.Equal(summary(d.Messages), []string{"X>rp.ra.ra2"}) {
		t.Fatalf("internal: %+v %v", mv, summary(d.Messages))
	}
	in, d, log := runLog(t, m, Go{}, Back{}, Y{})
	want := []string{"rp", "rp.ra", "rp.ra.ra2", "rp.rb.rb1"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("external: %v", in.Paths())
	}
	mv := moves(d.Messages)[0]
	if !slices.Equal(mv.Exited, []string{"rp.rb.rb2", "rp.ra.ra1", "rp.ra", "rp"}) || !slices.Equal(mv.Entered, []string{"rp", "rp.ra", "rp.ra.ra2", "rp.rb.rb1"}) {
		t.Fatalf("external: %+v", mv)
	}
	replays(t, m, log, want)
}

// Which sibling moves conflict: W is taken by the region's state (External,
// leaving the parallel state) and by rb1; the earlier in document order
// wins and rb1's handler is not run. With both regions final, the parallel
// state's Done applies.
func TestRegionStateConflictsAndDone(t *testing.T) {
	m := regionStateChart(t)
	in, d, _ := runLog(t, m, Go{}, W{})
	if !slices.Equal(summary(d.Messages), []string{"sent exit ra", "W>rp.ra.ra2", "sent enter ra"}) || !slices.Equal(in.Paths(), []string{"rp", "rp.ra", "rp.ra.ra2", "rp.rb.rb1"}) {
		t.Fatalf("%v %v", summary(d.Messages), in.Paths())
	}
	in, _, log := runLog(t, m, Go{}, X{}, Back{})
	if !slices.Equal(in.Paths(), []string{"rend"}) || !in.Final() {
		t.Fatalf("done: %v", in.Paths())
	}
	replays(t, m, log, []string{"rend"})
}
