package statechart

// common returns the lowest node that is an ancestor-or-self of both a and
// b.
func common(a, b *node) *node {
	x := a
	for x != nil && x != b && !x.contains(b) {
		x = x.parent
	}
	return x
}

// lookup finds the node of state s that a transition declared on src can
// target: the placement in src's own chart (the machine's, or the part
// mounting src belongs to).
func (b *builder) lookup(src *node, s State, what string) *node {
	if s.d == nil {
		b.errorf("%s: %s targets a zero State", where(src), what)
		return nil
	}
	nodes := b.placed[s.d]
	for _, n := range nodes {
		if n.mount == src.mount {
			return n
		}
	}
	if len(nodes) > 0 {
		b.errorf("%s: %s targets %q, a state of a part: a part's states are reached only from inside it (map its finals with OnFinal)", where(src), what, s.d.name)
		return nil
	}
	b.errorf("%s: %s targets state %q, which is not placed in the chart (place it with Place, Final, Started or Stopped)", where(src), what, s.d.name)
	return nil
}

func describeTrans(t *transition) string {
	if t.msgType != nil {
		return elemNames[t.kind] + "[" + t.msgType.Name() + "]"
	}
	return elemNames[t.kind]
}

// resolve turns every declared target into nodes and checks it is one a
// transition may take: a state of the source's region or an ancestor's, or
// below the source; never a sibling region's.
func (b *builder) resolve() {
	for _, p := range b.pending {
		t := p.t
		what := describeTrans(t)
		for i, tg := range p.targets {
			if tg == nil {
				b.errorf("%s: %s has a nil target (use statechart.Stay to allow staying put)", where(t.src), what)
				continue
			}
			spec := tg.target()
			if spec.stay {
				if t.stay {
					b.errorf("%s: %s lists Stay twice", where(t.src), what)
				}
				if i != len(p.targets)-1 {
					b.errorf("%s: %s: Stay goes last among the targets", where(t.src), what)
				}
				t.stay = true
				continue
			}
			if len(spec.states) == 0 {
				b.errorf("%s: %s: All() with no states", where(t.src), what)
				continue
			}
			opt := option{spec: spec}
			ok := true
			for _, s := range spec.states {
				n := b.lookup(t.src, s, what)
				if n == nil {
					ok = false
					continue
				}
				if !b.legal(t, n) {
					ok = false
				}
				opt.nodes = append(opt.nodes, n)
			}
			if !ok {
				continue
			}
			if spec.history {
				n := opt.nodes[0]
				if len(n.children) == 0 {
					b.errorf("%s: %s targets the history of %q, which has no sub-states or regions", where(t.src), what, n.path)
					continue
				}
				if spec.deep {
					n.deep = true
				} else {
					n.history = true
				}
			}
			for i := range opt.nodes {
				for j := i + 1; j < len(opt.nodes); j++ {
					x := common(opt.nodes[i], opt.nodes[j])
					if x == nil || x.kind != kState || x == opt.nodes[i] || x == opt.nodes[j] {
						b.errorf("%s: %s: the states of All(%s) must each be in a different region of one parallel state", where(t.src), what, spec)
						ok = false
					}
				}
			}
			for _, o := range t.options {
				if o.spec.String() == spec.String() {
					b.errorf("%s: %s lists %s twice", where(t.src), what, spec)
				}
			}
			if ok {
				t.options = append(t.options, opt)
			}
		}
		if t.handle == nil && len(t.starts) > 1 {
			b.errorf("%s: %s starts one of several children without a handler: give it a handler that calls Do.Start", where(t.src), what)
		}
		if t.handle == nil && t.startsNil {
			b.errorf("%s: %s: MayStart needs a handler that calls Do.Start", where(t.src), what)
		}
		if (t.kind == eCommand || t.kind == eOn) && t.handle == nil && (len(t.options) > 1 || (len(t.options) == 1 && t.stay)) {
			b.errorf("%s: %s has several possible targets: give it a handler that picks one (CommandFunc, OnFunc)", where(t.src), what)
		}
	}
	for _, p := range b.pendingFinal {
		t := p.t
		region := t.src
		if region.kind == kState {
			if t.src.part == nil && len(region.children) == 1 && region.children[0].part == nil {
				b.errorf("%s: OnFinal maps the finals of a part: place the part with PlacePart or RegionPart", where(t.src))
				continue
			}
			if len(region.children) != 1 {
				b.errorf("%s: OnFinal belongs in a part's compound state (PlacePart) or region (RegionPart)", where(t.src))
				continue
			}
			region = region.children[0]
		}
		for _, n := range region.children {
			if n.kind == kState && p.final.d != nil && n.state == p.final {
				if !n.final {
					b.errorf("%s: OnFinal maps %q, which is not a final state of the part", where(t.src), n.name)
				}
				t.final = n
			}
		}
		if t.final == nil {
			b.errorf("%s: OnFinal maps %q, which is not a root final state of the part placed there", where(t.src), p.final.Name())
		}
	}
}

// legal reports whether a transition declared on t.src may target n.
func (b *builder) legal(t *transition, n *node) bool {
	src := t.src
	x := common(src, n)
	if x == src || x == n || x.kind != kState {
		return true
	}
	b.errorf("%s: %s targets %q, in a sibling region: a transition targets states of its own region or an ancestor's, or below its own state", where(src), describeTrans(t), n.path)
	return false
}

// check runs the checks that need the whole chart.
func (b *builder) check() {
	for _, n := range b.c.nodes {
		if n.kind != kState {
			continue
		}
		unguarded := -1
		doneUnguarded := false
		for i, t := range n.eventless {
			if unguarded >= 0 {
				b.errorf("state %q: %s after an unguarded Always is unreachable", n.path, describeTrans(t))
				continue
			}
			if t.kind == eDone {
				if len(n.children) == 0 {
					b.errorf("state %q: Done on a state with no sub-states or regions never applies", n.path)
				}
				if doneUnguarded {
					b.errorf("state %q: a Done after an unguarded Done is unreachable", n.path)
				}
				if len(t.guards) == 0 {
					doneUnguarded = true
				}
			}
			if t.kind == eAlways && len(t.guards) == 0 {
				unguarded = i
			}
		}
		if unguarded >= 0 {
			n.transient = true
			switch {
			case len(n.handlers) > 0:
				b.errorf("state %q is transient (an unguarded Always) and cannot accept commands or events", n.path)
			case len(n.timers) > 0:
				b.errorf("state %q is transient (an unguarded Always) and cannot have timers", n.path)
			case len(n.children) > 0:
				b.errorf("state %q is transient (an unguarded Always) and cannot have regions or sub-states", n.path)
			case len(n.starts) > 0:
				b.errorf("state %q is transient (an unguarded Always) and cannot start children", n.path)
			case n.final:
				b.errorf("final state %q cannot be transient", n.path)
			}
			for _, t := range n.eventless[:unguarded] {
				if t.kind == eDone || t.kind == eChildrenDone {
					b.errorf("state %q is transient (an unguarded Always) and cannot have joins", n.path)
				}
			}
		}
	}
}
