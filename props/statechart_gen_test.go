package props_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// Random charts: compound and parallel states, regions headed by states
// (RegionState), starts elsewhere than the first sub-state (StartsAt),
// history targets with defaults, multi-target histories, External
// handlers, several guarded handlers of one type in one state. The
// generator keeps its own tree, from which configurations are judged legal
// without the interpreter.

type gKind uint8

const (
	gAtomic gKind = iota
	gCompound
	gParallel
)

type gState struct {
	name    string
	path    string
	kind    gKind
	parent  *gState
	region  *gRegion // the region holding it (nil at the root)
	subs    []*gState
	regions []*gRegion
	st      statechart.State
	// handlers and startAt are elements, built once the tree is complete.
	handlers []statechart.Elem
	startAt  statechart.Target
}

type gRegion struct {
	name   string
	owner  *gState
	head   *gState // RegionState
	states []*gState
}

type gChart struct {
	root   []*gState
	all    []*gState
	byPath map[string]*gState
	n      int
}

var gCommands = []any{scA{}, scB{}, scC{}, scD{}, scTick{}}

func (g *gChart) state(t *rapid.T, parent *gState, region *gRegion, prefix string, depth int) *gState {
	s := &gState{name: fmt.Sprintf("s%d", g.n), parent: parent, region: region}
	g.n++
	s.st = statechart.Named(s.name)
	s.path = prefix + s.name
	if region != nil && region.head == nil && len(region.states) == 0 && region.owner.kind == gParallel && depth > 0 && rapid.IntRange(0, 2).Draw(t, "headed?") == 0 {
		region.head = s
		region.name = s.name                      // a headed region is named after its state
		s.path = region.owner.path + "." + s.name // and the state has the region's path
	}
	g.all = append(g.all, s)
	g.byPath[s.path] = s
	if depth > 0 {
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 1:
			s.kind = gCompound
			n := rapid.IntRange(1, 3).Draw(t, "subs")
			for range n {
				s.subs = append(s.subs, g.state(t, s, nil, s.path+".", depth-1))
			}
		case 2:
			s.kind = gParallel
			n := rapid.IntRange(2, 3).Draw(t, "regions")
			for range n {
				r := &gRegion{name: fmt.Sprintf("g%d", g.n), owner: s}
				g.n++
				s.regions = append(s.regions, r)
				first := g.state(t, s, r, s.path+"."+r.name+".", depth-1)
				if r.head == nil {
					r.states = append(r.states, first)
					for range rapid.IntRange(0, 2).Draw(t, "more") {
						r.states = append(r.states, g.state(t, s, r, s.path+"."+r.name+".", depth-1))
					}
				}
			}
		}
	}
	return s
}

// ancestors returns s and the states above it, innermost first.
func (s *gState) ancestors() []*gState {
	var out []*gState
	for x := s; x != nil; x = x.parent {
		out = append(out, x)
	}
	return out
}

func (s *gState) below(o *gState) bool {
	for x := o.parent; x != nil; x = x.parent {
		if x == s {
			return true
		}
	}
	return false
}

// topRegion returns the region of parallel state p that holds s (a state
// below p).
func (p *gState) topRegion(s *gState) *gRegion {
	for x := s; x != nil; x = x.parent {
		if x.parent == p {
			return x.region
		}
	}
	return nil
}

// legalTarget: never a state in a sibling region (the two are in different
// regions of a parallel state and neither is above the other).
func legalTarget(src, dst *gState) bool {
	if src == dst || src.below(dst) || dst.below(src) {
		return true
	}
	for _, a := range src.ancestors()[1:] {
		if a == dst || a.below(dst) {
			if a.kind == gParallel {
				return a.topRegion(src) == a.topRegion(dst)
			}
			return true
		}
	}
	return true // both at the root
}

func descendants(s *gState) []*gState {
	var out []*gState
	for _, c := range s.subs {
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	for _, r := range s.regions {
		for _, c := range r.all() {
			out = append(out, c)
			out = append(out, descendants(c)...)
		}
	}
	return out
}

func (r *gRegion) all() []*gState {
	if r.head != nil {
		return []*gState{r.head}
	}
	return r.states
}

// direct returns s's sub-states: a compound state's, or the states placed
// directly in a parallel state's regions.
func direct(s *gState) []*gState {
	out := slices.Clone(s.subs)
	for _, r := range s.regions {
		out = append(out, r.all()...)
	}
	return out
}

func (g *gChart) target(t *rapid.T, src *gState) statechart.Target {
	var cands []*gState
	for _, s := range g.all {
		if legalTarget(src, s) {
			cands = append(cands, s)
		}
	}
	dst := rapid.SampledFrom(cands).Draw(t, "target")
	if dst.kind == gAtomic {
		return dst.st
	}
	switch rapid.IntRange(0, 4).Draw(t, "history") {
	case 1:
		return statechart.History(dst.st)
	case 2:
		return statechart.History(dst.st, rapid.SampledFrom(direct(dst)).Draw(t, "default").st)
	case 3:
		return statechart.DeepHistory(dst.st, rapid.SampledFrom(descendants(dst)).Draw(t, "deep default").st)
	case 4:
		if dst.kind == gParallel && len(dst.regions) >= 2 && !dst.below(src) {
			a, b := dst.regions[0].all()[0], dst.regions[1].all()[0]
			ta, tb := statechart.Target(a.st), statechart.Target(b.st)
			if a.kind != gAtomic {
				ta = statechart.History(a.st)
			}
			if b.kind != gAtomic {
				tb = statechart.DeepHistory(b.st)
			}
			return statechart.All(ta, tb)
		}
	}
	return dst.st
}

func genChart(t *rapid.T) (*gChart, statechart.Machine[scCtx]) {
	g := &gChart{byPath: map[string]*gState{}}
	for range rapid.IntRange(1, 3).Draw(t, "roots") {
		g.root = append(g.root, g.state(t, nil, nil, "", 3))
	}
	even := statechart.If(func(c scCtx) bool { return c.N%2 == 0 })
	for _, s := range g.all {
		unguarded := map[reflect.Type]bool{}
		for range rapid.IntRange(0, 3).Draw(t, "handlers") {
			cmd := rapid.SampledFrom(gCommands).Draw(t, "command")
			typ := reflect.TypeOf(cmd)
			if unguarded[typ] {
				continue
			}
			var e statechart.Elem
			tg := g.target(t, s)
			if rapid.Bool().Draw(t, "notes?") {
				e = noting(cmd, tg)
			} else {
				e = command(cmd, tg)
			}
			if rapid.Bool().Draw(t, "external?") {
				e = e.External()
			}
			if rapid.Bool().Draw(t, "guarded?") {
				e = e.When(even)
			} else {
				unguarded[typ] = true
			}
			s.handlers = append(s.handlers, e)
		}
		if s.kind != gAtomic && rapid.IntRange(0, 3).Draw(t, "startsAt?") == 0 {
			ds := descendants(s)
			switch rapid.IntRange(0, 2).Draw(t, "startsAt") {
			case 0:
				s.startAt = rapid.SampledFrom(ds).Draw(t, "start").st
			case 1:
				s.startAt = statechart.History(s.st)
			default:
				s.startAt = statechart.DeepHistory(s.st, rapid.SampledFrom(ds).Draw(t, "start default").st)
			}
		}
	}
	var elems []statechart.Elem
	elems = append(elems, statechart.Initial(statechart.Command[scGo](g.root[0].st)))
	for _, s := range g.root {
		elems = append(elems, g.elem(s, false))
	}
	m := statechart.Machine[scCtx]{
		Group: "props.random", PartitionBy: []string{"id"},
		Context: core.Projection[scCtx]{}.With(core.Evolve(func(c scCtx, _ scNoted) scCtx { c.N++; return c })),
	}.Chart(elems...)
	return g, m
}

func (g *gChart) elem(s *gState, started bool) statechart.Elem {
	elems := g.contents(s)
	if started {
		return statechart.Started(s.st, elems...)
	}
	return statechart.Place(s.st, elems...)
}

// contents returns a state's elements (for a RegionState head).
func (g *gChart) contents(s *gState) []statechart.Elem {
	elems := slices.Clone(s.handlers)
	if s.startAt != nil {
		elems = append(elems, statechart.StartsAt(s.startAt))
	}
	for i, c := range s.subs {
		elems = append(elems, g.elem(c, i == 0))
	}
	for _, r := range s.regions {
		if r.head != nil {
			elems = append(elems, statechart.RegionState(r.head.st, g.contents(r.head)...))
			continue
		}
		var rs []statechart.Elem
		for i, c := range r.states {
			rs = append(rs, g.elem(c, i == 0))
		}
		elems = append(elems, statechart.Region(r.name, rs...))
	}
	return elems
}

func command(cmd any, tg statechart.Target) statechart.Elem {
	switch cmd.(type) {
	case scA:
		return statechart.Command[scA](tg)
	case scB:
		return statechart.Command[scB](tg)
	case scC:
		return statechart.Command[scC](tg)
	case scD:
		return statechart.Command[scD](tg)
	}
	return statechart.Command[scTick](tg)
}

func noting(cmd any, tg statechart.Target) statechart.Elem {
	note := func(do *statechart.Do) error { do.Event(scNoted{}); return nil }
	switch cmd.(type) {
	case scA:
		return statechart.CommandFunc(func(_ scCtx, _ scA, do *statechart.Do) error { return note(do) }, tg)
	case scB:
		return statechart.CommandFunc(func(_ scCtx, _ scB, do *statechart.Do) error { return note(do) }, tg)
	case scC:
		return statechart.CommandFunc(func(_ scCtx, _ scC, do *statechart.Do) error { return note(do) }, tg)
	case scD:
		return statechart.CommandFunc(func(_ scCtx, _ scD, do *statechart.Do) error { return note(do) }, tg)
	}
	return statechart.CommandFunc(func(_ scCtx, _ scTick, do *statechart.Do) error { return note(do) }, tg)
}

// legal judges a configuration by the generator's tree: every path names a
// state, its parent state is active, one state is active at the root, in
// each active compound state and in each region of each active parallel
// state.
func (g *gChart) legal(t *rapid.T, paths []string) {
	active := map[*gState]bool{}
	for _, p := range paths {
		s, ok := g.byPath[p]
		if !ok {
			t.Fatalf("unknown path %q in %v", p, paths)
		}
		active[s] = true
	}
	count := func(ss []*gState) int {
		n := 0
		for _, s := range ss {
			if active[s] {
				n++
			}
		}
		return n
	}
	if len(paths) > 0 && count(g.root) != 1 {
		t.Fatalf("%d states active at the root: %v", count(g.root), paths)
	}
	for s := range active {
		if s.parent != nil && !active[s.parent] {
			t.Fatalf("%q is active without its parent: %v", s.path, paths)
		}
		if s.kind == gCompound && count(s.subs) != 1 {
			t.Fatalf("compound %q has %d active sub-states: %v", s.path, count(s.subs), paths)
		}
		for _, r := range s.regions {
			if count(r.all()) != 1 {
				t.Fatalf("region %q of %q has %d active states: %v", r.name, s.path, count(r.all()), paths)
			}
		}
	}
}

func TestStatechartRandomCharts(t *testing.T) {
	keys := map[string]string{"id": "k"}
	rapid.Check(t, func(t *rapid.T) {
		g, m := genChart(t)
		if err := m.Err(); err != nil {
			t.Fatalf("a generated chart is refused: %v", err)
		}
		in, d0, err := m.Decide(m.New(keys), scGo{})
		if err != nil {
			t.Fatal(err)
		}
		g.legal(t, in.Paths())
		log := slices.Clone(d0.Messages)
		for range rapid.IntRange(1, 30).Draw(t, "steps") {
			cmd := rapid.SampledFrom(gCommands).Draw(t, "command")
			next, d, err := m.Decide(in, cmd)
			if errors.Is(err, statechart.ErrCommandNotHandled) {
				continue
			}
			if err != nil {
				t.Fatalf("%T: %v", cmd, err)
			}
			in = next
			g.legal(t, in.Paths())
			log = append(log, d.Messages...)
		}
		loaded, err := m.Load(keys, log)
		if err != nil {
			t.Fatalf("the recorded events do not reload: %v", err)
		}
		if !slices.Equal(loaded.Paths(), in.Paths()) || loaded.Context != in.Context {
			t.Fatalf("replayed %v, live %v", loaded.Paths(), in.Paths())
		}
		for _, c := range gCommands {
			a, da, errA := m.Decide(in, c)
			b, db, errB := m.Decide(loaded, c)
			if (errA == nil) != (errB == nil) || !slices.Equal(a.Paths(), b.Paths()) || !slices.Equal(moveSummary(da), moveSummary(db)) {
				t.Fatalf("after %T: live %v %v, replayed %v %v", c, a.Paths(), moveSummary(da), b.Paths(), moveSummary(db))
			}
		}
	})
}
