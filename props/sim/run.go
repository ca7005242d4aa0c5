package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/enginehooks"
	"github.com/sourced-go/sourced/shell/driver"
)

// Plan draws a run from a seed: its setup (store aside, which the caller
// chooses) and steps actions. The same seed always gives the same plan.
func Plan(seed uint64, store string, steps int) (Setup, []Action) {
	r := rand.New(rand.NewPCG(seed, 0x51a7e))
	s := Setup{Store: store, Processes: 2 + r.IntN(2), Workers: 1 + r.IntN(2), BatchSize: 1 + r.IntN(4), BatchesPerHandle: 1 + r.IntN(3)}
	// Swarm testing: each seed its own domains (a few, so that their
	// actions are not diluted among all) and its own fault rate, so that
	// some runs are calm enough to build up state and others are storms.
	reactors := 0
	for _, name := range DomainNames {
		if r.IntN(2) == 0 {
			s.Domains = append(s.Domains, name)
			reactors += len(Domains[name](NewClock()).Reactors())
		}
	}
	if len(s.Domains) == 0 {
		name := DomainNames[r.IntN(len(DomainNames))]
		s.Domains = []string{name}
		reactors = len(Domains[name](NewClock()).Reactors())
	}
	g := gen{r: r, s: s, domains: len(s.Domains), reactors: reactors, faults: []int{10, 30, 50}[r.IntN(3)]}
	out := make([]Action, steps)
	for i := range out {
		out[i] = g.action(true)
	}
	return s, out
}

type gen struct {
	r        *rand.Rand
	s        Setup
	domains  int
	reactors int
	faults   int // percentage of actions that carry a fault
}

// action draws one action; top-level ones may carry a fault.
func (g gen) action(top bool) Action {
	r := g.r
	a := Action{Proc: r.IntN(g.s.Processes), Worker: r.IntN(g.s.Workers)}
	switch x := r.IntN(100); {
	case x < 34:
		a.Kind, a.Target, a.Op, a.N = ClientOp, r.IntN(g.domains), r.IntN(3), int64(r.IntN(1000))
		if g.s.Domains[a.Target] == "jobs" && a.Op == 1 && r.IntN(2) > 0 {
			a.Op = 0 // poison is rarer than work
		}
	case x < 72:
		a.Kind, a.Target = Work, r.IntN(g.reactors)
	case x < 80:
		a.Kind = Reap
	case x < 83:
		a.Kind = Promote
	case x < 85:
		a.Kind = CatchUp
	case x < 97:
		a.Kind, a.N = ClockStep, g.clockStep()
	case x < 99:
		a.Kind = Kill
	default:
		a.Kind = CrashAll
	}
	if !top || a.Kind == ClockStep || a.Kind == Kill || a.Kind == CrashAll || r.IntN(100) >= g.faults {
		return a
	}
	a.Fault.At = 1 + r.IntN(4)
	if r.IntN(4) == 0 {
		a.Fault.At = 1 + r.IntN(12)
	}
	switch x := r.IntN(100); {
	case x < 20:
		a.Fault.Kind = Busy
	case x < 40:
		a.Fault.Kind, a.Fault.At = Cancel, 1+r.IntN(24)
	case x < 50:
		a.Fault.Kind = Crash
	case x < 60:
		a.Fault.Kind = CrashAfter
	default:
		a.Fault.Kind = Interleave
		for range 1 + r.IntN(3) {
			b := g.nested(a)
			if n := len(a.Fault.Then); n > 0 && a.Fault.Then[n-1].Kind == ClockStep && r.IntN(2) == 0 {
				// After a clock step, the reaper: what finds a claim stale.
				b = Action{Kind: Reap, Proc: r.IntN(g.s.Processes)}
			}
			a.Fault.Then = append(a.Fault.Then, b)
		}
	}
	return a
}

// nested draws an action that runs while a's is at a store call: mostly
// what hurts a call in flight (a clock step, the reaper, a rival worker of
// the same reactor).
func (g gen) nested(a Action) Action {
	r := g.r
	switch x := r.IntN(100); {
	case x < 40:
		n := g.clockStep()
		if r.IntN(2) == 0 {
			n = int64(ClaimTTL/time.Millisecond) + int64(r.IntN(60_000)) // past the claim TTL
		}
		return Action{Kind: ClockStep, N: n}
	case x < 60:
		return Action{Kind: Reap, Proc: r.IntN(g.s.Processes)}
	case x < 90:
		b := Action{Kind: Work, Proc: r.IntN(g.s.Processes), Worker: r.IntN(g.s.Workers), Target: r.IntN(g.reactors)}
		if a.Kind == Work && r.IntN(3) > 0 {
			b.Target = a.Target // a rival worker of the same group
		}
		return b
	default:
		return Action{Kind: ClientOp, Target: r.IntN(g.domains), N: int64(r.IntN(1000))}
	}
}

// clockStep draws a clock step in milliseconds: mostly small, some past
// the claim TTL, a few past MaxClaimAge, some back (a clock jump).
func (g gen) clockStep() int64 {
	r := g.r
	switch x := r.IntN(100); {
	case x < 45:
		return int64(1 + r.IntN(5000))
	case x < 70:
		return int64(10_000 + r.IntN(50_000))
	case x < 85:
		return int64(ClaimTTL/time.Millisecond) + int64(r.IntN(60_000))
	case x < 88:
		return int64(MaxClaimAge/time.Millisecond) + int64(r.IntN(60_000))
	default:
		return -int64(1 + r.IntN(10_000))
	}
}

// Result is the outcome of a run.
type Result struct {
	// Hash identifies the run: the run log (every action and what it
	// returned) and the final state, hashed. Two runs of a plan give the
	// same hash.
	Hash string
	// Steps is how many actions ran (the drain's not counted).
	Steps int
	// Failure is the invariant that broke, if one did.
	Failure *Failure
	// Log is the run log.
	Log []string
}

// Failure is an invariant broken at a step.
type Failure struct {
	// Step is the index of the action after which it broke (len(actions)
	// for the drain that follows the actions).
	Step int
	// Violation is what broke.
	Violation *Violation
}

func (f *Failure) Error() string {
	return fmt.Sprintf("step %d: %v", f.Step, f.Violation)
}

// Run runs actions on a world built from s, checking every invariant
// after each, then drains (no more faults: time moves on, the reapers,
// the scheduler and every worker run until nothing is left to do) and
// checks liveness. A fault-free error of an action breaks the "no
// unexplained errors" invariant.
func Run(s Setup, actions []Action) (Result, error) {
	w, err := newWorld(s)
	if err != nil {
		return Result{}, err
	}
	defer w.close()
	res := Result{}
	fail := func(step int, err error) {
		var v *Violation
		if !errors.As(err, &v) {
			v = &Violation{Invariant: "no unexplained errors", Err: err}
		}
		res.Failure = &Failure{Step: step, Violation: v}
		w.logf("FAILED at step %d: %v", step, v)
	}
	for i, a := range actions {
		err, explained := w.step(a)
		res.Steps = i + 1
		w.logf("%d: %s -> %s", i, a, errText(err))
		var v *Violation
		if errors.As(err, &v) || (err != nil && !explained && !expected(err)) {
			fail(i, err)
			break
		}
		if err := w.check(false); err != nil {
			fail(i, err)
			break
		}
	}
	if res.Failure == nil {
		if err := w.drain(); err != nil {
			fail(len(actions), err)
		}
	}
	if res.Failure == nil {
		if err := w.check(true); err != nil {
			fail(len(actions), err)
		}
	}
	w.logState()
	res.Log = canonical(w.log)
	h := sha256.New()
	for _, l := range res.Log {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	res.Hash = hex.EncodeToString(h.Sum(nil))
	return res, nil
}

// drainRounds bounds the drain: liveness is "settled within this many
// rounds once faults stop".
const drainRounds = 30

// drain lets the system settle with no faults: each round moves the clock
// past the claim TTL and the retry delays, runs every process's reaper and
// the scheduler, and runs every worker on every reactor until none has
// work. It fails if work remains after drainRounds rounds.
func (w *World) drain() error {
	ctx := context.Background()
	quiet := 0
	for round := range drainRounds {
		w.reaps = w.reaps[:0]
		w.clock.Step(ClaimTTL + HeartbeatInterval + 5*time.Second)
		worked := false
		for _, p := range w.procs {
			if err := enginehooks.RuntimeTasks(p.rt).Reaper.RunOnce(ctx); err != nil {
				return fmt.Errorf("drain round %d: reaper of %s: %w", round, p.id, err)
			}
		}
		if err := enginehooks.RuntimeTasks(w.procs[0].rt).Scheduler.RunOnce(ctx); err != nil {
			return fmt.Errorf("drain round %d: scheduler: %w", round, err)
		}
		for pass := 0; ; pass++ {
			if pass > 500 {
				return &Violation{"liveness", fmt.Errorf("drain round %d: the workers still find work after %d passes", round, pass)}
			}
			any := false
			for _, p := range w.procs {
				for _, re := range p.rt.Router().Reactors() {
					did, err := p.rt.Router().HandleNext(ctx, re.Group, p.workers[0])
					if err != nil {
						return fmt.Errorf("drain round %d: %s on %s: %w", round, p.workers[0], re.Group, err)
					}
					any = any || did
				}
			}
			if !any {
				break
			}
			worked = true
		}
		w.logf("drain %d: worked %v", round, worked)
		if err := w.check(false); err != nil {
			return err
		}
		if worked {
			quiet = 0
			continue
		}
		quiet++
		if quiet == 2 && w.claimsLeft() {
			// A claim a live worker still holds (its release failed) comes
			// back at MaxClaimAge: that is the bound to wait for.
			w.clock.Step(MaxClaimAge)
			continue
		}
		if quiet >= 2 {
			return nil
		}
	}
	return &Violation{"liveness", fmt.Errorf("still working after %d drain rounds", drainRounds)}
}

// claimsLeft tells whether any partition is claimed.
func (w *World) claimsLeft() bool {
	for o, err := range w.inner.Offsets(context.Background(), driver.OffsetQuery{Limit: 500}) {
		if err != nil || o.Claimed {
			return true
		}
	}
	return false
}

// logState appends the final state to the run log: the log, the offsets,
// the groups.
func (w *World) logState() {
	v, err := w.view()
	if err != nil {
		w.logf("state unreadable: %v", err)
		return
	}
	for _, m := range v.Log {
		w.logf("msg %d %s %v id=%s cause=%s corr=%s at=%s", m.Position, m.Type, m.Payload, m.ID, m.CausationID, m.CorrelationID, m.CreatedAt.Sub(Epoch))
	}
	for _, o := range v.Offsets {
		w.logf("offset %s %s %d claimed=%v by=%s", o.Group, core.Partition(o.Partition).String(), o.LastPosition, o.Claimed, o.ClaimedBy)
	}
	for _, g := range v.Groups {
		w.logf("group %s %s retries=%d highest=%d", g.ID, g.Status, g.Failure.RetryCount, g.HighestPosition)
	}
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// canonical replaces message ids (random UUIDv7s, the one thing a run does
// not choose) by their order of first appearance in the run log.
func canonical(lines []string) []string {
	ids := map[string]string{}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = uuidRE.ReplaceAllStringFunc(l, func(id string) string {
			if id == "00000000-0000-0000-0000-000000000000" {
				return "nil"
			}
			if n, ok := ids[id]; ok {
				return n
			}
			n := fmt.Sprintf("#%d", len(ids)+1)
			ids[id] = n
			return n
		})
	}
	return out
}

// Shrink looks for a shorter trace that still fails: the prefix up to the
// failing step, then chunks and single actions removed, and faults
// dropped, as long as the run still breaks an invariant, within budget.
func Shrink(s Setup, actions []Action, f *Failure, budget time.Duration) []Action {
	deadline := time.Now().Add(budget)
	fails := func(as []Action) bool {
		if time.Now().After(deadline) {
			return false
		}
		if s.Store == "sqlite" {
			dir, err := os.MkdirTemp(s.Dir, "shrink")
			if err != nil {
				return false
			}
			defer os.RemoveAll(dir)
			s.Dir = dir
		}
		res, err := Run(s, as)
		return err == nil && res.Failure != nil
	}
	cur := actions
	if f.Step < len(actions) {
		cur = actions[:f.Step+1]
	}
	for n := len(cur) / 2; n >= 1; n /= 2 {
		for i := 0; i+n <= len(cur); {
			cand := append(append([]Action{}, cur[:i]...), cur[i+n:]...)
			if fails(cand) {
				cur = cand
			} else {
				i += n
			}
		}
	}
	for i := range cur {
		if cur[i].Fault.Kind == NoFault {
			continue
		}
		cand := append([]Action{}, cur...)
		cand[i].Fault = Fault{}
		if fails(cand) {
			cur = cand
		}
	}
	return cur
}

// GoTest renders a failing trace as a Go test to paste into a regression
// test file of this package.
func GoTest(name string, s Setup, actions []Action) string {
	var b strings.Builder
	fmt.Fprintf(&b, "func %s(t *testing.T) {\n", name)
	domains := ""
	if len(s.Domains) > 0 {
		domains = fmt.Sprintf(", Domains: %#v", s.Domains)
	}
	fmt.Fprintf(&b, "\tsim.Replay(t, sim.Setup{Store: %q, Processes: %d, Workers: %d, BatchSize: %d, BatchesPerHandle: %d%s}, []sim.Action{\n",
		s.Store, s.Processes, s.Workers, s.BatchSize, s.BatchesPerHandle, domains)
	for _, a := range actions {
		fmt.Fprintf(&b, "\t\t%s,\n", a.GoString())
	}
	b.WriteString("\t})\n}\n")
	return b.String()
}

// TB is the part of testing.TB Replay uses.
type TB interface {
	Helper()
	TempDir() string
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Replay runs a trace (a regression test printed by a failed simulation)
// and fails t if an invariant breaks.
func Replay(t TB, s Setup, actions []Action) {
	t.Helper()
	if s.Store == "sqlite" && s.Dir == "" {
		s.Dir = t.TempDir()
	}
	res, err := Run(s, actions)
	if err != nil {
		t.Fatalf("sim: %v", err)
	}
	if res.Failure != nil {
		t.Fatalf("sim: %v\nrun log:\n%s", res.Failure, strings.Join(tail(res.Log, 60), "\n"))
	}
}

func tail(l []string, n int) []string {
	if len(l) > n {
		return l[len(l)-n:]
	}
	return l
}
