package statechart_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// Small charts over Named states (their events are bare Moves) and these
// messages.
type (
	Go    struct{}
	X     struct{}
	Y     struct{}
	Z     struct{}
	Tick  struct{}
	Back  struct{}
	Leave struct{}
	Deep  struct{}
	Flag  struct{}
)

type Noted struct {
	ID  string `json:"id"`
	Who string `json:"who"`
}

type Sent struct {
	ID   string `json:"id"`
	What string `json:"what"`
}

type tctx struct {
	N     int
	Flag  bool
	Notes []string
}

var tContext = core.Projection[tctx]{}.With(
	core.Evolve(func(c tctx, e Noted) tctx {
		c.Notes = append(c.Notes[:len(c.Notes):len(c.Notes)], e.Who)
		if e.Who == "flag" {
			c.Flag = true
		}
		return c
	}),
)

func tm(t *testing.T, elems ...statechart.Elem) statechart.Machine[tctx] {
	t.Helper()
	m := statechart.Machine[tctx]{Group: "t", PartitionBy: []string{"id"}, Context: tContext}.Chart(elems...)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func decideAll(t *testing.T, m statechart.Machine[tctx], in statechart.Instance[tctx], payloads ...any) (statechart.Instance[tctx], statechart.Decision) {
	t.Helper()
	var d statechart.Decision
	for _, p := range payloads {
		var err error
		in, d, err = m.Decide(in, p)
		if err != nil {
			t.Fatalf("%T: %v", p, err)
		}
	}
	return in, d
}

func moves(ms []core.Message) []statechart.Move {
	var out []statechart.Move
	for _, m := range ms {
		if mv, ok := statechart.MoveOf(m.Payload); ok {
			out = append(out, mv)
		}
	}
	return out
}

func summary(ms []core.Message) []string {
	var out []string
	for _, m := range ms {
		if mv, ok := statechart.MoveOf(m.Payload); ok {
			out = append(out, mv.Trigger+">"+mv.Target)
			continue
		}
		switch p := m.Payload.(type) {
		case Noted:
			out = append(out, "noted "+p.Who)
		case Sent:
			out = append(out, "sent "+p.What)
		default:
			out = append(out, reflect.TypeOf(p).Name())
		}
	}
	return out
}

func note(who string) func(tctx, X, *statechart.Do) error {
	return func(_ tctx, _ X, do *statechart.Do) error { do.Event(Noted{Who: who}); return nil }
}

var (
	sP   = statechart.Named("p")
	sA1  = statechart.Named("a1")
	sA2  = statechart.Named("a2")
	sB1  = statechart.Named("b1")
	sB2  = statechart.Named("b2")
	sOut = statechart.Named("out")
)

func regionsChart(t *testing.T, a, b []statechart.Elem, p ...statechart.Elem) statechart.Machine[tctx] {
	return tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP, append(p,
			statechart.Region("a", a...),
			statechart.Region("b", b...))...),
		statechart.Final(sOut),
	)
}

// One transition per active leaf, in document order: a later one whose exit
// set intersects an earlier one's is dropped, with its data events.
func TestSiblingRegionConflictLaterDropped(t *testing.T) {
	m := regionsChart(t,
		[]statechart.Elem{statechart.Started(sA1, statechart.CommandFunc(note("a"), sA2)), statechart.Place(sA2)},
		[]statechart.Elem{statechart.Started(sB1, statechart.CommandFunc(note("b"), sOut))},
	)
	in, _ := decideAll(t, m, m.New(nil), Go{})
	in, d := decideAll(t, m, in, X{})
	if !slices.Equal(summary(d.Messages), []string{"noted a", "X>p.a.a2"}) || !slices.Equal(in.Paths(), []string{"p", "p.a.a2", "p.b.b1"}) {
		t.Fatalf("%v %v", summary(d.Messages), in.Paths())
	}
	if !slices.Equal(in.Context.Notes, []string{"a"}) {
		t.Fatalf("the dropped handler's data is not evolved: %v", in.Context.Notes)
	}
}

// A region whose move leaves the parallel state wins over a later region's
// handler, which does not even run: its state is being left.
func TestSiblingRegionEarlierLeavesTheParallelState(t *testing.T) {
	m := regionsChart(t,
		[]statechart.Elem{statechart.Started(sA1, statechart.CommandFunc(note("a"), sOut))},
		[]statechart.Elem{statechart.Started(sB1, statechart.CommandFunc(note("b"), sB2)), statechart.Place(sB2)},
	)
	in, _ := decideAll(t, m, m.New(nil), Go{})
	in, d := decideAll(t, m, in, X{})
	want := []statechart.Move{{Trigger: "X", Source: "p.a.a1", Target: "out", Exited: []string{"p.b.b1", "p.a.a1", "p"}, Entered: []string{"out"}}}
	if !slices.Equal(summary(d.Messages), []string{"noted a", "X>out"}) || !reflect.DeepEqual(moves(d.Messages), want) || !in.Final() {
		t.Fatalf("%v %+v", summary(d.Messages), moves(d.Messages))
	}
}

// Non-conflicting moves in sibling regions are taken in the same step:
// data events first, then one state event per move, in document order.
func TestSiblingRegionsMoveTogether(t *testing.T) {
	m := regionsChart(t,
		[]statechart.Elem{statechart.Started(sA1, statechart.CommandFunc(note("a"), sA2)), statechart.Place(sA2)},
		[]statechart.Elem{statechart.Started(sB1, statechart.CommandFunc(note("b"), sB2)), statechart.Place(sB2)},
	)
	in, _ := decideAll(t, m, m.New(nil), Go{})
	in, d := decideAll(t, m, in, X{})
	if !slices.Equal(summary(d.Messages), []string{"noted a", "noted b", "X>p.a.a2", "X>p.b.b2"}) {
		t.Fatalf("%v", summary(d.Messages))
	}
	if !slices.Equal(in.Paths(), []string{"p", "p.a.a2", "p.b.b2"}) || !slices.Equal(in.Context.Notes, []string{"a", "b"}) {
		t.Fatalf("%v %v", in.Paths(), in.Context)
	}
}

// A state's handler runs only when none of its active descendants accepts
// the command.
func TestRegionBeatsAncestor(t *testing.T) {
	m := regionsChart(t,
		[]statechart.Elem{statechart.Started(sA1, statechart.CommandFunc(note("a"), sA2)), statechart.Place(sA2)},
		[]statechart.Elem{statechart.Started(sB1)},
		statechart.CommandFunc(note("p"), sOut),
	)
	in, _ := decideAll(t, m, m.New(nil), Go{})
	in, d := decideAll(t, m, in, X{})
	if !slices.Equal(summary(d.Messages), []string{"noted a", "X>p.a.a2"}) {
		t.Fatalf("the region's handler, not the ancestor's: %v", summary(d.Messages))
	}
	in, d = decideAll(t, m, in, X{})
	if !slices.Equal(summary(d.Messages), []string{"noted p", "X>out"}) || !in.Final() {
		t.Fatalf("no active region accepts X: the ancestor's: %v", summary(d.Messages))
	}
}

var (
	sS  = statechart.Named("s")
	sS1 = statechart.Named("s1")
	sS2 = statechart.Named("s2")
)

func sent(what string) func(tctx, statechart.Move) []any {
	return func(tctx, statechart.Move) []any { return []any{Sent{What: what}} }
}

// A transition to the source's own descendant is internal (the source is
// not left); a self-transition is external; a targetless one records no
// move.
func TestInternalExternalTargetless(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sS)),
		statechart.Place(sS,
			statechart.Entry(sent("enter s")),
			statechart.Exit(sent("exit s")),
			statechart.Command[X](sS2),
			statechart.Command[Y](sS),
			statechart.CommandFunc(func(_ tctx, _ Z, do *statechart.Do) error { do.Event(Noted{Who: "z"}); return nil }),
			statechart.Started(sS1),
			statechart.Place(sS2),
		),
	)
	in, d := decideAll(t, m, m.New(map[string]string{"id": "1"}), Go{})
	if !slices.Equal(summary(d.Messages), []string{"Go>s", "sent enter s"}) || !slices.Equal(moves(d.Messages)[0].Entered, []string{"s", "s.s1"}) {
		t.Fatalf("%v %+v", summary(d.Messages), moves(d.Messages))
	}
	in, d = decideAll(t, m, in, X{})
	want := statechart.Move{Trigger: "X", Source: "s", Target: "s.s2", Exited: []string{"s.s1"}, Entered: []string{"s.s2"}}
	if !reflect.DeepEqual(moves(d.Messages), []statechart.Move{want}) || len(d.Dispatched) != 0 {
		t.Fatalf("internal: %+v %v", moves(d.Messages), summary(d.Messages))
	}
	in, d = decideAll(t, m, in, Y{})
	want = statechart.Move{Trigger: "Y", Source: "s", Target: "s", Exited: []string{"s.s2", "s"}, Entered: []string{"s", "s.s1"}}
	if !reflect.DeepEqual(moves(d.Messages), []statechart.Move{want}) || !slices.Equal(summary(d.Messages), []string{"sent exit s", "Y>s", "sent enter s"}) {
		t.Fatalf("self: %+v %v", moves(d.Messages), summary(d.Messages))
	}
	_, d = decideAll(t, m, in, Z{})
	if !slices.Equal(summary(d.Messages), []string{"noted z"}) {
		t.Fatalf("targetless: %v", summary(d.Messages))
	}
	if d.Events[0].Payload.(Noted).ID != "1" {
		t.Fatal("partition keys are filled in")
	}
}

var (
	sAA  = statechart.Named("aa")
	sT1  = statechart.Named("t1")
	sT2  = statechart.Named("t2")
	sT3  = statechart.Named("t3")
	sC   = statechart.Named("c")
	sC1  = statechart.Named("c1")
	sC11 = statechart.Named("c11")
)

// Entered is document order (outermost first, siblings in order), exited
// the reverse.
func TestEntryAndExitOrder(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP,
			statechart.Command[X](sOut),
			statechart.Region("a", statechart.Started(sAA, statechart.Started(sA1))),
			statechart.Region("b", statechart.Started(sB1)),
		),
		statechart.Final(sOut),
	)
	in, d := decideAll(t, m, m.New(nil), Go{})
	if got := moves(d.Messages)[0].Entered; !slices.Equal(got, []string{"p", "p.a.aa", "p.a.aa.a1", "p.b.b1"}) {
		t.Fatalf("%v", got)
	}
	_, d = decideAll(t, m, in, X{})
	if got := moves(d.Messages)[0].Exited; !slices.Equal(got, []string{"p.b.b1", "p.a.aa.a1", "p.a.aa", "p"}) {
		t.Fatalf("%v", got)
	}
}

// One decision appends: data events, exit dispatches, the state event,
// entry dispatches, then each eventless move the same way.
func TestEmissionOrder(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sT1)),
		statechart.Place(sT1, statechart.Exit(sent("exit t1")), statechart.CommandFunc(note("x"), sT2)),
		statechart.Place(sT2, statechart.Entry(sent("enter t2")), statechart.Exit(sent("exit t2")),
			statechart.Always(sT3, statechart.If(func(c tctx) bool { return len(c.Notes) > 0 }))),
		statechart.Final(sT3, statechart.Entry(sent("enter t3"))),
	)
	in, _ := decideAll(t, m, m.New(nil), Go{})
	_, d := decideAll(t, m, in, X{})
	want := []string{"noted x", "sent exit t1", "X>t2", "sent enter t2", "sent exit t2", "always>t3", "sent enter t3"}
	if !slices.Equal(summary(d.Messages), want) {
		t.Fatalf("%v", summary(d.Messages))
	}
}

// Guards can read the configuration (SCXML's In()), as it is when they are
// evaluated.
func TestInGuard(t *testing.T) {
	m := regionsChart(t,
		[]statechart.Elem{statechart.Started(sA1, statechart.Command[X](sA2)), statechart.Place(sA2)},
		[]statechart.Elem{statechart.Started(sB1, statechart.Always(sB2, statechart.In(sA2))), statechart.Place(sB2)},
	)
	in, d := decideAll(t, m, m.New(nil), Go{})
	if len(moves(d.Messages)) != 1 {
		t.Fatalf("%v", summary(d.Messages))
	}
	in, d = decideAll(t, m, in, X{})
	if !slices.Equal(summary(d.Messages), []string{"X>p.a.a2", "always>p.b.b2"}) || !in.In(sB2) {
		t.Fatalf("%v", summary(d.Messages))
	}
}

// A multi-target transition enters states in several regions at once; a
// deep start enters every level.
func TestMultiTargetAndDeepStart(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](statechart.All(sA2, sB2)), statechart.Command[X](sC)),
		statechart.Place(sP,
			statechart.Region("a", statechart.Started(sA1), statechart.Place(sA2)),
			statechart.Region("b", statechart.Started(sB1), statechart.Place(sB2)),
		),
		statechart.Place(sC, statechart.Started(sC1, statechart.Started(sC11))),
	)
	in, d := decideAll(t, m, m.New(nil), Go{})
	want := statechart.Move{Trigger: "Go", Source: "initial", Target: "p.a.a2", Exited: []string{}, Entered: []string{"p", "p.a.a2", "p.b.b2"}}
	if !reflect.DeepEqual(moves(d.Messages), []statechart.Move{want}) || !slices.Equal(in.Paths(), want.Entered) {
		t.Fatalf("%+v", moves(d.Messages))
	}
	in, d = decideAll(t, m, m.New(nil), X{})
	if got := moves(d.Messages)[0].Entered; !slices.Equal(got, []string{"c", "c.c1", "c.c1.c11"}) || !in.In(sC11) {
		t.Fatalf("%v", got)
	}
}

// An After timer belongs to the entry that armed it.
func TestTimerIdentity(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sT1)),
		statechart.Place(sT1, statechart.After(time.Minute, Tick{}), statechart.Command[Tick](sT3), statechart.Command[Leave](sT2)),
		statechart.Place(sT2, statechart.Command[Back](sT1)),
		statechart.Final(sT3),
	)
	start := core.NewMessage(Go{}).At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, d := decideAll(t, m, m.New(nil), start)
	first := d.Timers[0]
	if !first.CreatedAt.Equal(start.CreatedAt.Add(time.Minute)) || first.Metadata[statechart.TimerMetadata] != "t1#1" {
		t.Fatalf("%+v", first)
	}
	in, _ = decideAll(t, m, in, Leave{})
	in, d = decideAll(t, m, in, Back{})
	second := d.Timers[0]
	if second.Metadata[statechart.TimerMetadata] != "t1#2" {
		t.Fatalf("%+v", second)
	}
	next, d, err := m.Decide(in, first)
	if err != nil || !d.Ignored || !next.In(sT1) {
		t.Fatalf("the first entry's timer is ignored after a re-entry: %v %+v", err, d)
	}
	next, _ = decideAll(t, m, in, second)
	if !next.In(sT3) {
		t.Fatalf("the current entry's timer fires: %v", next.Paths())
	}
	if next, _ = decideAll(t, m, in, Tick{}); !next.In(sT3) {
		t.Fatal("the command without timer metadata is a plain command")
	}
}

var (
	sH   = statechart.Named("h")
	sH1  = statechart.Named("h1")
	sH2  = statechart.Named("h2")
	sH21 = statechart.Named("h21")
	sH22 = statechart.Named("h22")
	sO   = statechart.Named("o")
)

func historyChart(t *testing.T) statechart.Machine[tctx] {
	return tm(t,
		statechart.Initial(statechart.Command[Go](sH)),
		statechart.Place(sH,
			statechart.Command[Leave](sO),
			statechart.Started(sH1, statechart.Command[X](sH2)),
			statechart.Place(sH2,
				statechart.Started(sH21, statechart.Command[Y](sH22)),
				statechart.Place(sH22),
			),
		),
		statechart.Place(sO,
			statechart.Command[Back](statechart.History(sH)),
			statechart.Command[Deep](statechart.DeepHistory(sH)),
			statechart.Command[Z](sH),
		),
	)
}

func TestHistory(t *testing.T) {
	m := historyChart(t)
	var log []core.Message
	in := m.New(nil)
	for _, p := range []any{Go{}, X{}, Y{}, Leave{}} {
		var d statechart.Decision
		in, d = decideAll(t, m, in, p)
		log = append(log, d.Messages...)
	}
	check := func(in statechart.Instance[tctx], label string) {
		t.Helper()
		cases := []struct {
			cmd  any
			want []string
		}{
			{Back{}, []string{"h", "h.h2", "h.h2.h21"}},
			{Deep{}, []string{"h", "h.h2", "h.h2.h22"}},
			{Z{}, []string{"h", "h.h1"}},
		}
		for _, c := range cases {
			next, d := decideAll(t, m, in, c.cmd)
			if !slices.Equal(next.Paths(), c.want) || !slices.Equal(moves(d.Messages)[0].Entered, c.want) {
				t.Errorf("%s %T: %v", label, c.cmd, next.Paths())
			}
		}
	}
	check(in, "live")
	loaded, err := m.Load(nil, log)
	if err != nil {
		t.Fatal(err)
	}
	check(loaded, "replayed")
	at, err := m.At([]string{"o"}, tctx{}, map[string]string{"id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	next, _ := decideAll(t, m, at, Back{})
	if !slices.Equal(next.Paths(), []string{"h", "h.h1"}) {
		t.Fatalf("without memory, a history target enters its state by default: %v", next.Paths())
	}
	// History is remembered on every exit: leave from h.h1 and come back.
	in, _ = decideAll(t, m, in, Z{}, Leave{})
	if next, _ := decideAll(t, m, in, Deep{}); !slices.Equal(next.Paths(), []string{"h", "h.h1"}) {
		t.Fatalf("%v", next.Paths())
	}
}

var (
	sR = statechart.Named("r")
	sE = statechart.Named("e")
	sF = statechart.Named("f")
	sD = statechart.Named("d")
)

func TestAlwaysGuardsAndTransientStates(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.CommandFunc(func(_ tctx, _ X, do *statechart.Do) error { do.Event(Noted{Who: "flag"}); return nil }, sR),
			statechart.Command[Y](sR)),
		statechart.Place(sR,
			statechart.Always(sE, statechart.If(func(c tctx) bool { return c.Flag })),
			statechart.Always(sF)),
		statechart.Final(sE),
		statechart.Final(sF),
	)
	_, d := decideAll(t, m, m.New(nil), X{})
	if !slices.Equal(summary(d.Messages), []string{"noted flag", "X>r", "always>e"}) {
		t.Fatalf("guards see the decision's data: %v", summary(d.Messages))
	}
	in, d := decideAll(t, m, m.New(nil), Y{})
	if !slices.Equal(summary(d.Messages), []string{"Y>r", "always>f"}) || !in.In(sF) {
		t.Fatalf("%v", summary(d.Messages))
	}
}

func TestDoneGuardsRetriedAfterEveryDecision(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sD)),
		statechart.Place(sD,
			statechart.Started(sA1, statechart.Command[X](sA2)),
			statechart.Final(sA2),
			statechart.CommandFunc(func(_ tctx, _ Flag, do *statechart.Do) error { do.Event(Noted{Who: "flag"}); return nil }),
			statechart.Done(sE, statechart.If(func(c tctx) bool { return c.Flag })),
			statechart.Done(sF, statechart.If(func(c tctx) bool { return c.N > 0 })),
		),
		statechart.Final(sE),
		statechart.Final(sF),
	)
	in, d := decideAll(t, m, m.New(nil), Go{}, X{})
	if !slices.Equal(summary(d.Messages), []string{"X>d.a2"}) || !in.In(sD) {
		t.Fatalf("no done guard passes: the machine stays: %v", summary(d.Messages))
	}
	in, d = decideAll(t, m, in, Flag{})
	if !slices.Equal(summary(d.Messages), []string{"noted flag", "done>e"}) || !in.In(sE) {
		t.Fatalf("%v", summary(d.Messages))
	}
}

func TestEventlessLoop(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sA1)),
		statechart.Place(sA1, statechart.Always(sA2, statechart.If(func(tctx) bool { return true }))),
		statechart.Place(sA2, statechart.Always(sA1)),
	)
	if _, _, err := m.Decide(m.New(nil), Go{}); !errors.Is(err, statechart.ErrEventlessLoop) {
		t.Fatalf("%v", err)
	}
}
