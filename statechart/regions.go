package statechart

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// InitialPosition stands, in RegionAt's result and MatchRegions' patterns,
// for a region at its initial position (no state of it active yet).
var InitialPosition = State{d: &stateDecl{name: "initial"}}

// ErrUnknownRegion is matched by the error of RegionAt and MatchRegions
// given a region name the machine does not have.
var ErrUnknownRegion = errors.New("statechart: unknown region")

// AmbiguousRegionError is returned by RegionAt and MatchRegions for a
// region name that names several active regions: a part's regions are
// named in the part, so a part mounted twice brings two regions of one
// name. Match those by path (ActiveStates.InPath).
type AmbiguousRegionError struct {
	Region string
	// Paths are the paths of the active regions with that name.
	Paths []string
}

func (e *AmbiguousRegionError) Error() string {
	return fmt.Sprintf("statechart: region %q names %d active regions (%s): match them by path with InPath", e.Region, len(e.Paths), strings.Join(e.Paths, ", "))
}

// regionsNamed returns the regions named name ("root": the root region),
// active or not.
func (c ActiveStates) regionsNamed(name string) []*node {
	if name == "root" {
		return []*node{c.ch.root}
	}
	var out []*node
	for _, n := range c.ch.nodes {
		if n.kind == kRegion && !n.anonymous && n.parent != nil && n.name == name {
			out = append(out, n)
		}
	}
	return out
}

// activeRegion returns the active region named name, nil when none is.
func (c ActiveStates) activeRegion(name string) (*node, error) {
	if c.ch == nil {
		return nil, fmt.Errorf("%w %q: the configuration has no machine", ErrUnknownRegion, name)
	}
	all := c.regionsNamed(name)
	if len(all) == 0 {
		return nil, fmt.Errorf("%w %q: name a region of the machine (Region, RegionState, a part's region) or \"root\"", ErrUnknownRegion, name)
	}
	var active []*node
	for _, r := range all {
		if c.act.has(r.id) {
			active = append(active, r)
		}
	}
	switch len(active) {
	case 0:
		return nil, nil
	case 1:
		return active[0], nil
	}
	e := &AmbiguousRegionError{Region: name}
	for _, r := range active {
		e.Paths = append(e.Paths, r.path)
	}
	return nil, e
}

// RegionAt returns the state the active region named region is at (the
// root region is "root"): its active state, or InitialPosition when it is
// at its initial position. For a RegionState's region, whose one state is
// its head, it is the state the head is at, as Value shows it. false when
// no region of that name is active. A name the machine has no region of is
// an error matching ErrUnknownRegion; a name of several active regions an
// *AmbiguousRegionError.
func (c ActiveStates) RegionAt(region string) (State, bool, error) {
	r, err := c.activeRegion(region)
	if err != nil || r == nil {
		return State{}, false, err
	}
	if r.headed {
		if head := r.children[0]; !head.parallel && len(head.children) > 0 {
			r = head.children[0] // the region is its head's contents
		}
	}
	n := c.ch.activeChild(r, c.act)
	if n == nil || n.kind != kState {
		return InitialPosition, true, nil
	}
	return n.state, true, nil
}

// MatchRegions reports whether the configuration matches pattern, regions
// by name (the root region is "root"), as the manual's Hash patterns do:
// every region named is active and at the state given, that state or one
// below it active in the region (InitialPosition: the region is at its
// initial position). A region that is not active does not match. Errors
// as RegionAt's: an unknown name (ErrUnknownRegion), a name of several
// active regions (*AmbiguousRegionError).
//
//	if ok, _ := cfg.MatchRegions(map[string]statechart.State{"payment": paid, "shipping": shipped}); ok { ... }
func (c ActiveStates) MatchRegions(pattern map[string]State) (bool, error) {
	match := true
	for _, name := range slices.Sorted(maps.Keys(pattern)) {
		want := pattern[name]
		r, err := c.activeRegion(name)
		if err != nil {
			return false, err
		}
		if r == nil {
			match = false
			continue
		}
		if want == InitialPosition {
			if at, _, _ := c.RegionAt(name); at != InitialPosition {
				match = false
			}
			continue
		}
		if !c.activeIn(r, want) {
			match = false
		}
	}
	return match, nil
}

// activeIn reports whether state s is active inside region r.
func (c ActiveStates) activeIn(r *node, s State) bool {
	if s.d == nil {
		return false
	}
	for _, n := range c.ch.placed[s.d] {
		if !c.act.has(n.id) {
			continue
		}
		for p := n.parent; p != nil; p = p.parent {
			if p == r {
				return true
			}
		}
	}
	return false
}
