package props_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// A chart with every kind of move the interpreter makes: parallel regions
// moving together on one command, a compound state with an eventless step,
// timers, a done join, history targets.

type (
	scGo         struct{}
	scA          struct{}
	scB          struct{}
	scC          struct{}
	scD          struct{}
	scTick       struct{}
	scAbort      struct{}
	scResume     struct{}
	scResumeDeep struct{}
)

type scNoted struct {
	ID string `json:"id"`
}

type scCtx struct{ N int }

var (
	scWork = statechart.Named("work")
	scL1   = statechart.Named("l1")
	scL2   = statechart.Named("l2")
	scL3   = statechart.Named("l3")
	scL31  = statechart.Named("l31")
	scL32  = statechart.Named("l32")
	scLF   = statechart.Named("lf")
	scR1   = statechart.Named("r1")
	scR2   = statechart.Named("r2")
	scRF   = statechart.Named("rf")
	scHalt = statechart.Named("halt")
	scFin  = statechart.Named("fin")
)

func scMachine() statechart.Machine[scCtx] {
	even := statechart.If(func(c scCtx) bool { return c.N%2 == 0 })
	return statechart.Machine[scCtx]{
		Group: "props.chart", PartitionBy: []string{"id"},
		Context: core.Projection[scCtx]{}.With(core.Evolve(func(c scCtx, _ scNoted) scCtx { c.N++; return c })),
	}.Chart(
		statechart.Initial(statechart.Command[scGo](scWork)),
		statechart.Place(scWork,
			statechart.Command[scAbort](scHalt),
			statechart.Region("left",
				statechart.Started(scL1, statechart.Command[scA](scL2), statechart.Command[scB](scL3)),
				statechart.Place(scL2, statechart.Command[scA](scL1), statechart.Command[scD](scLF)),
				statechart.Place(scL3,
					statechart.Command[scD](scL1),
					statechart.Started(scL31, statechart.Command[scB](scL32)),
					statechart.Place(scL32, statechart.Always(scL31, even)),
				),
				statechart.Final(scLF),
			),
			statechart.Region("right",
				statechart.Initial(statechart.Command[scA](scR1)),
				statechart.Place(scR1, statechart.After(time.Minute, scTick{}), statechart.Command[scTick](scR2), statechart.Command[scB](scR2)),
				statechart.Place(scR2,
					statechart.CommandFunc(func(_ scCtx, _ scC, do *statechart.Do) error { do.Event(scNoted{}); return nil }, scR1),
					statechart.Command[scD](scRF)),
				statechart.Final(scRF),
			),
			statechart.Done(scFin),
		),
		statechart.Place(scHalt,
			statechart.Command[scResume](statechart.History(scWork)),
			statechart.Command[scResumeDeep](statechart.DeepHistory(scWork)),
			statechart.Command[scGo](scWork),
		),
		statechart.Final(scFin),
	)
}

var scCommands = []any{scGo{}, scA{}, scB{}, scC{}, scD{}, scTick{}, scAbort{}, scResume{}, scResumeDeep{}}

// The chart's tree, written out by hand: each state's parent state and
// region, and the regions that always hold a state when active.
var scParent = map[string]string{
	"work": "", "halt": "", "fin": "",
	"work.left.l1": "work", "work.left.l2": "work", "work.left.l3": "work", "work.left.lf": "work",
	"work.left.l3.l31": "work.left.l3", "work.left.l3.l32": "work.left.l3",
	"work.right.r1": "work", "work.right.r2": "work", "work.right.rf": "work",
}

func scRegion(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return "root"
}

// legal checks the configuration invariants: every active state's parent
// is active, each region has at most one active state, regions without an
// initial position have exactly one while their state is active, and no
// state of an inactive region is active.
func legal(t *rapid.T, paths []string) {
	perRegion := map[string]int{}
	for _, p := range paths {
		parent, ok := scParent[p]
		if !ok {
			t.Fatalf("unknown path %q in %v", p, paths)
		}
		if parent != "" && !slices.Contains(paths, parent) {
			t.Fatalf("%q is active without its parent %q: %v", p, parent, paths)
		}
		perRegion[scRegion(p)]++
	}
	for r, n := range perRegion {
		if n > 1 {
			t.Fatalf("region %q has %d active states: %v", r, n, paths)
		}
	}
	for state, region := range map[string]string{"work": "work.left", "work.left.l3": "work.left.l3"} {
		if slices.Contains(paths, state) && perRegion[region] != 1 {
			t.Fatalf("%q is active but its region %q holds %d states: %v", state, region, perRegion[region], paths)
		}
	}
	if len(paths) > 0 && perRegion["root"] != 1 {
		t.Fatalf("the root region holds %d states: %v", perRegion["root"], paths)
	}
}

// strip removes what differs between two runs of the same decision (ids
// are zero here: nothing is stamped).
func moveSummary(d statechart.Decision) []string {
	var out []string
	for _, m := range d.Messages {
		if mv, ok := statechart.MoveOf(m.Payload); ok {
			out = append(out, mv.Trigger+">"+mv.Target+" exited "+strings.Join(mv.Exited, ",")+" entered "+strings.Join(mv.Entered, ","))
			continue
		}
		s := reflect.TypeOf(m.Payload).Name()
		if v, ok := m.Metadata[statechart.TimerMetadata]; ok {
			s += " " + v.(string)
		}
		out = append(out, s)
	}
	return out
}

func TestStatechartProperties(t *testing.T) {
	m := scMachine()
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"id": "k"}
	rapid.Check(t, func(t *rapid.T) {
		in := m.New(keys)
		var log []core.Message
		var timers []core.Message
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			var msg core.Message
			if len(timers) > 0 && rapid.IntRange(0, 4).Draw(t, "timer?") == 0 {
				msg = timers[rapid.IntRange(0, len(timers)-1).Draw(t, "timer")]
			} else {
				msg = core.NewMessage(rapid.SampledFrom(scCommands).Draw(t, "command"))
			}
			clock = clock.Add(time.Second)
			msg.CreatedAt = clock

			next, d, err := m.Decide(in, msg)
			if errors.Is(err, statechart.ErrCommandNotHandled) {
				if len(d.Messages) != 0 || !slices.Equal(next.Paths(), in.Paths()) {
					t.Fatal("a command not handled changes nothing")
				}
				continue
			}
			if err != nil {
				t.Fatalf("%T: %v", msg.Payload, err)
			}
			// Deterministic: the same message on the same instance decides the same.
			again, d2, err := m.Decide(in, msg)
			if err != nil || !reflect.DeepEqual(d, d2) || !slices.Equal(again.Paths(), next.Paths()) || again.Context != next.Context {
				t.Fatalf("deciding %T twice differs: %v / %v", msg.Payload, moveSummary(d), moveSummary(d2))
			}
			in = next
			legal(t, in.Paths())
			if _, err := m.ActiveStates(in.Paths()); err != nil {
				t.Fatalf("the paths read back: %v", err)
			}
			log = append(log, d.Messages...)
			timers = append(timers, d.Timers...)
		}
		// Replaying the recorded events reproduces the instance, history
		// memory and timer identity included: every next decision agrees.
		loaded, err := m.Load(keys, log)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(loaded.Paths(), in.Paths()) || loaded.Context != in.Context {
			t.Fatalf("replayed %v %+v, live %v %+v", loaded.Paths(), loaded.Context, in.Paths(), in.Context)
		}
		for _, c := range append(slices.Clone(scCommands), anys(timers)...) {
			a, da, errA := m.Decide(in, c)
			b, db, errB := m.Decide(loaded, c)
			if (errA == nil) != (errB == nil) || !slices.Equal(a.Paths(), b.Paths()) || !slices.Equal(moveSummary(da), moveSummary(db)) {
				t.Fatalf("after %T: live %v %v %v, replayed %v %v %v", c, a.Paths(), moveSummary(da), errA, b.Paths(), moveSummary(db), errB)
			}
		}
	})
}

func anys(ms []core.Message) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}
