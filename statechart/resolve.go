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
			if len(spec.parts) == 0 {
				b.errorf("%s: %s: All() with no states", where(t.src), what)
				continue
			}
			opt, ok := b.resolveOption(t, spec, what)
			if !ok {
				continue
			}
			for _, o := range t.options {
				if o.spec.equal(spec) {
					b.errorf("%s: %s lists %s twice", where(t.src), what, spec)
					ok = false
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

// checkStartsAt checks each StartsAt once its target resolved: every part
// is below the state or is the state's own history, and every region of the
// state without a start of its own is entered by it.
func (b *builder) checkStartsAt() {
	for _, n := range b.c.nodes {
		t := n.startAt
		if t == nil || len(t.options) != 1 {
			continue
		}
		o := t.options[0]
		bad := false
		for i, x := range o.nodes {
			own := x == n && o.spec.parts[i].hist != histNone
			if !own && !n.contains(x) {
				b.errorf("state %q: StartsAt(%s): a state starts at states below it or at its own history", n.path, o.spec)
				bad = true
			}
		}
		if bad {
			continue
		}
		check := func(s *node) {
			for _, reg := range s.children {
				if reg.start != nil {
					continue
				}
				covered := false
				for i, x := range o.nodes {
					if x != n && (reg.contains(x) || x.contains(reg)) {
						covered = true
					}
					if x == n {
						for _, d := range o.defaults[i] {
							if reg.contains(d) {
								covered = true
							}
						}
					}
				}
				if !covered {
					b.errorf("%s has no start and the StartsAt of %q does not enter it: give it an Initial position or a Started state, or a history default in it", where(reg), n.path)
				}
			}
		}
		check(n)
	}
}

// resolveOption resolves one declared target of t: each part's node, its
// history's defaults, and the rules of multi-targets.
func (b *builder) resolveOption(t *transition, spec targetSpec, what string) (option, bool) {
	opt := option{spec: spec}
	ok := true
	for _, p := range spec.parts {
		if p.state.d == nil && p.hist == histNone && len(p.defaults) == 0 {
			b.errorf("%s: %s: All takes states and histories (not nil or Stay)", where(t.src), what)
			return opt, false
		}
		n := b.lookup(t.src, p.state, what)
		if n == nil {
			ok = false
			opt.nodes = append(opt.nodes, nil)
			opt.defaults = append(opt.defaults, nil)
			continue
		}
		if !b.legal(t, n) {
			ok = false
		}
		opt.nodes = append(opt.nodes, n)
		var defs []*node
		if p.hist != histNone {
			if len(n.children) == 0 {
				b.errorf("%s: %s targets the history of %q, which has no sub-states or regions", where(t.src), what, n.path)
				ok = false
			}
			if p.hist == histDeep {
				n.deep = true
			} else {
				n.history = true
			}
			for _, d := range p.defaults {
				dn := b.lookup(t.src, d, what+" (a history default)")
				if dn == nil {
					ok = false
					continue
				}
				if !n.contains(dn) {
					b.errorf("%s: %s: the default %q of %s's history is not below it: a history's defaults are states below its state", where(t.src), what, dn.path, n.path)
					ok = false
					continue
				}
				if p.hist == histShallow && dn.parent.parent != n {
					b.errorf("%s: %s: the default %q of %s's shallow history is not one of its sub-states (a deep history's defaults may be nested)", where(t.src), what, dn.path, n.path)
					ok = false
					continue
				}
				defs = append(defs, dn)
			}
			if !b.distinctRegions(defs) {
				b.errorf("%s: %s: the defaults of %s must each be in a different region of one parallel state", where(t.src), what, p)
				ok = false
			}
		}
		opt.defaults = append(opt.defaults, defs)
	}
	if ok && !b.distinctRegions(opt.nodes) {
		b.errorf("%s: %s: the states of All(%s) must each be in a different region of one parallel state", where(t.src), what, spec)
		ok = false
	}
	return opt, ok
}

// distinctRegions reports whether no node is another's ancestor or sibling
// in one region: every pair's lowest common ancestor is a parallel state.
func (b *builder) distinctRegions(ns []*node) bool {
	for i := range ns {
		for j := i + 1; j < len(ns); j++ {
			x := common(ns[i], ns[j])
			if x == nil || x.kind != kState || x == ns[i] || x == ns[j] {
				return false
			}
		}
	}
	return true
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
