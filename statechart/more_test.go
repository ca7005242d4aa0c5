package statechart_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

var (
	sC2 = statechart.Named("c2")
	sCC = statechart.Named("cc")
)

// A transition from a parallel state to its own regions' states is
// internal: with one region targeted, the others are left alone; with
// several, every region is exited and the untargeted ones re-enter their
// start.
func TestInternalTransitionsOfAParallelState(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP,
			statechart.Command[X](sA2),
			statechart.Command[Y](statechart.All(sA2, sB2)),
			statechart.Region("a", statechart.Started(sA1, statechart.Command[Z](sA2)), statechart.Place(sA2)),
			statechart.Region("b", statechart.Started(sB1, statechart.Command[Z](sB2)), statechart.Place(sB2)),
			statechart.Region("c", statechart.Started(sCC, statechart.Command[Z](sC2)), statechart.Place(sC2)),
		),
	)
	in, _ := decideAll(t, m, m.New(nil), Go{}, Z{})
	if !slices.Equal(in.Paths(), []string{"p", "p.a.a2", "p.b.b2", "p.c.c2"}) {
		t.Fatalf("%v", in.Paths())
	}
	_, d := decideAll(t, m, in, X{})
	want := statechart.Move{Trigger: "X", Source: "p", Target: "p.a.a2", Exited: []string{"p.a.a2"}, Entered: []string{"p.a.a2"}}
	if mv := moves(d.Messages); len(mv) != 1 || !equalMove(mv[0], want) {
		t.Fatalf("%+v", mv)
	}
	next, d := decideAll(t, m, in, Y{})
	want = statechart.Move{Trigger: "Y", Source: "p", Target: "p.a.a2", Exited: []string{"p.c.c2", "p.b.b2", "p.a.a2"}, Entered: []string{"p.a.a2", "p.b.b2", "p.c.cc"}}
	if mv := moves(d.Messages); len(mv) != 1 || !equalMove(mv[0], want) || !next.In(sCC) {
		t.Fatalf("%+v", mv)
	}
}

func equalMove(a, b statechart.Move) bool {
	return a.Trigger == b.Trigger && a.Source == b.Source && a.Target == b.Target && slices.Equal(a.Exited, b.Exited) && slices.Equal(a.Entered, b.Entered)
}

type Ping struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// OnFunc decides events like commands; Do.In reads the configuration; Not
// and And combine guards; Entry may dispatch delayed commands.
func TestOnFuncGuardsAndDelayedDispatch(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP,
			statechart.Region("a",
				statechart.Started(sA1,
					statechart.OnFunc(func(c tctx, e Ping, do *statechart.Do) error {
						if do.In(sB1) && e.N > 0 {
							do.Event(Noted{Who: "ping"})
							do.To(sA2)
						}
						return nil
					}, sA2, statechart.Stay)),
				statechart.Place(sA2, statechart.Entry(func(tctx, statechart.Move) []any {
					return []any{core.After(time.Minute, Tick{}), core.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Back{})}
				})),
			),
			statechart.Region("b",
				statechart.Started(sB1,
					statechart.Always(sB2, statechart.And(statechart.In(sA2), statechart.Not(statechart.If(func(c tctx) bool { return len(c.Notes) == 0 }))))),
				statechart.Place(sB2),
			),
		),
	)
	in, _ := decideAll(t, m, m.New(map[string]string{"id": "1"}), Go{})
	next, d := decideAll(t, m, in, Ping{N: 0})
	if len(d.Messages) != 0 || !next.In(sA1) {
		t.Fatalf("%v", summary(d.Messages))
	}
	ping := core.NewMessage(Ping{N: 1}).At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	next, d = decideAll(t, m, in, ping)
	if !slices.Equal(summary(d.Messages), []string{"noted ping", "Ping>p.a.a2", "Tick", "Back", "always>p.b.b2"}) || !next.In(sB2) {
		t.Fatalf("%v", summary(d.Messages))
	}
	if !d.Dispatched[0].CreatedAt.Equal(ping.CreatedAt.Add(time.Minute)) || d.Dispatched[1].CreatedAt.Year() != 2030 {
		t.Fatalf("%+v", d.Dispatched)
	}
	if d.Events[0].Payload.(Noted).ID != "1" {
		t.Fatal("keys")
	}
}

type unexportedRef struct {
	ID string `json:"id"`
}

type hiddenKeyEvent struct {
	unexportedRef
	Other string `json:"other"`
}

func TestKeysFilledThroughUnexportedEmbedding(t *testing.T) {
	m := tm(t, statechart.Initial(statechart.CommandFunc(func(_ tctx, _ Go, do *statechart.Do) error {
		do.Event(hiddenKeyEvent{Other: "x"}, &hiddenKeyEvent{Other: "y"})
		return nil
	})))
	_, d, err := m.Decide(m.New(map[string]string{"id": "k1"}), Go{})
	if err != nil {
		t.Fatal(err)
	}
	if e := d.Events[0].Payload.(hiddenKeyEvent); e.ID != "k1" || e.Other != "x" {
		t.Fatalf("%+v", e)
	}
	if e := d.Events[1].Payload.(*hiddenKeyEvent); e.ID != "k1" || e.Other != "y" {
		t.Fatalf("a pointer payload stays a pointer, to a filled copy: %+v", e)
	}
}

func TestMermaidLabels(t *testing.T) {
	got := shop(t).Mermaid()
	for _, want := range []string{
		"open --> lines_done : children_done line_item_machine",
		"awaiting_payment --> shop_paid : on_done captured",
		"[*] --> open : Go",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	child := lineItems.Mermaid()
	if !strings.Contains(child, "[*] --> added\n") {
		t.Fatalf("a started start has no label:\n%s", child)
	}
	hist := historyChart(t).Mermaid()
	if !strings.Contains(hist, "o --> h_history : Back") || !strings.Contains(hist, "o --> h_history_deep : Deep") {
		t.Fatalf("%s", hist)
	}
	if !strings.Contains(hist, "  state \"h\" as h {\n    state \"h1\" as h_h1\n") {
		t.Fatalf("%s", hist)
	}
}

func TestStateHandles(t *testing.T) {
	if Paying.Name() != "paying" || Paying.String() != "paying" || Paying.EventType().Name() != "PayingEvent" || Paying.IsZero() || !(statechart.State{}).IsZero() {
		t.Fatal("handles")
	}
	if sA1.EventType() != nil {
		t.Fatal("named states have no event type")
	}
	m := orderMachine(nil)
	if len(m.States()) != 8 || len(m.StateTypes()) != 8 || len(m.HandledCommands()) != 6 {
		t.Fatalf("%v", m.States())
	}
	if paymentPart.Prefix() != "payment" || workingPart.State() != pWorking {
		t.Fatal("parts")
	}
}
