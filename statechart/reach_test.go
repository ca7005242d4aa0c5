package statechart_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/statechart"
)

var (
	eP  = statechart.Named("ep")
	eA1 = statechart.Named("ea1")
	eA2 = statechart.Named("ea2")
	eB1 = statechart.Named("eb1")
	eB2 = statechart.Named("eb2")
)

// SCXML 3.13: an external transition to its source's descendant exits and
// re-enters the source; an internal one does not. The manual's default is
// internal; External and Internal say it explicitly.
func TestInternalAndExternalHandlers(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sS)),
		statechart.Place(sS,
			statechart.Entry(sent("enter s")),
			statechart.Exit(sent("exit s")),
			statechart.Command[X](sS2).Internal(),
			statechart.Command[Y](sS2).External(),
			statechart.Command[Z](sS2),
			statechart.Started(sS1, statechart.Command[Back](sS1)),
			statechart.Place(sS2, statechart.Command[Back](sS1)),
		),
	)
	in, _ := decideAll(t, m, m.New(map[string]string{"id": "1"}), Go{})
	for _, c := range []struct {
		cmd  any
		want statechart.Move
		msgs []string
	}{
		{X{}, statechart.Move{Trigger: "X", Source: "s", Target: "s.s2", Exited: []string{"s.s1"}, Entered: []string{"s.s2"}}, []string{"X>s.s2"}},
		{Z{}, statechart.Move{Trigger: "Z", Source: "s", Target: "s.s2", Exited: []string{"s.s1"}, Entered: []string{"s.s2"}}, []string{"Z>s.s2"}},
		{Y{}, statechart.Move{Trigger: "Y", Source: "s", Target: "s.s2", Exited: []string{"s.s1", "s"}, Entered: []string{"s", "s.s2"}}, []string{"sent exit s", "Y>s.s2", "sent enter s"}},
	} {
		from, _ := decideAll(t, m, in, Back{})
		_, d := decideAll(t, m, from, c.cmd)
		if !reflect.DeepEqual(moves(d.Messages), []statechart.Move{c.want}) || !slices.Equal(summary(d.Messages), c.msgs) {
			t.Errorf("%T: %+v %v", c.cmd, moves(d.Messages), summary(d.Messages))
		}
	}
}

// On a parallel state an internal handler is scoped to the region holding
// its target; an external one leaves and re-enters the parallel state, so
// every region restarts (SCXML, where a parallel source is never internal).
func TestInternalAndExternalOnParallel(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](eP)),
		statechart.Place(eP,
			statechart.Command[X](eA2),
			statechart.Command[Y](eA2).External(),
			statechart.Region("ea", statechart.Started(eA1), statechart.Place(eA2)),
			statechart.Region("eb", statechart.Started(eB1, statechart.Command[Z](eB2)), statechart.Place(eB2)),
		),
	)
	in, _, log := runLog(t, m, Go{}, Z{}, X{})
	want := []string{"ep", "ep.ea.ea2", "ep.eb.eb2"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("internal: %v", in.Paths())
	}
	replays(t, m, log, want)
	in, d, log := runLog(t, m, Go{}, Z{}, Y{})
	want = []string{"ep", "ep.ea.ea2", "ep.eb.eb1"}
	if !slices.Equal(in.Paths(), want) {
		t.Fatalf("external: %v", in.Paths())
	}
	if mv := moves(d.Messages)[0]; !slices.Equal(mv.Exited, []string{"ep.eb.eb2", "ep.ea.ea1", "ep"}) || !slices.Equal(mv.Entered, []string{"ep", "ep.ea.ea2", "ep.eb.eb1"}) {
		t.Fatalf("external: %+v", mv)
	}
	replays(t, m, log, want)
}

// SCXML 3.5.1's document order: several handlers of one message type in
// one state, each guarded, the first whose guards pass taken; when none
// passes the state does not accept the message, and an ancestor may.
func TestSeveralHandlersOfOneType(t *testing.T) {
	flag := statechart.If(func(c tctx) bool { return c.Flag })
	m := tm(t,
		statechart.Initial(statechart.Command[Go](eP)),
		statechart.Place(eP,
			statechart.Command[Y](eB1),
			statechart.CommandFunc(note("flag"), statechart.Stay),
			statechart.Started(eA1,
				statechart.Command[Y](eA2).When(flag),
				statechart.Command[Back](eB1).When(flag),
				statechart.Command[Back](eB2).When(statechart.Not(flag)),
				statechart.Command[Back](eA2)),
			statechart.Place(eA2),
			statechart.Place(eB1),
			statechart.Place(eB2),
		),
	)
	for _, c := range []struct {
		name     string
		payloads []any
		want     string
	}{
		{"first guard fails, the second passes", []any{Go{}, Back{}}, "ep.eb2"},
		{"first guard passes", []any{Go{}, X{}, Back{}}, "ep.eb1"},
		{"the state's guard fails: its ancestor's handler", []any{Go{}, Y{}}, "ep.eb1"},
		{"the state's guard passes: its own", []any{Go{}, X{}, Y{}}, "ep.ea2"},
	} {
		in, _, log := runLog(t, m, c.payloads...)
		if p := in.Paths(); p[len(p)-1] != c.want {
			t.Errorf("%s: %v, want %s", c.name, p, c.want)
		}
		replays(t, m, log, in.Paths())
	}
	bad := statechart.Machine[tctx]{Group: "t", Context: tContext}.Chart(
		statechart.Initial(statechart.Command[Go](eA1), statechart.Command[Go](eA2).When(flag)),
		statechart.Place(eA1), statechart.Place(eA2),
	)
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("a handler after an unguarded one: %v", err)
	}
	bad = statechart.Machine[tctx]{Group: "t", Context: tContext}.Chart(
		statechart.Initial(statechart.Command[Go](eA1)),
		statechart.Place(eA1, statechart.Entry(sent("x")).When(flag)),
	)
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "When guards handlers") {
		t.Fatalf("When on an action: %v", err)
	}
}
