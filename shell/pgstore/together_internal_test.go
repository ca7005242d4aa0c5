package pgstore

import (
	"slices"
	"testing"

	"github.com/sourced-go/sourced/core"
)

func TestCompatible(t *testing.T) {
	many := boundarySet{}
	for k := range int32(maxBoundaryKeys) {
		many.add(k+100, false)
	}
	for _, c := range []struct {
		name string
		a, b boundarySet
		want int
	}{
		{"disjoint", boundarySet{1: false}, boundarySet{2: true}, fitting},
		{"a key both share", boundarySet{1: false, 2: false}, boundarySet{1: false}, fitting},
		{"a guard's key the other writes", boundarySet{1: true}, boundarySet{1: false}, conflicting},
		{"a key written where the other guards", boundarySet{1: false}, boundarySet{1: true}, conflicting},
		{"the same guard", boundarySet{1: true}, boundarySet{1: true}, conflicting},
		{"too many keys together", many, boundarySet{1: false}, tooMany},
		{"keys already held add none", many, boundarySet{100: false}, fitting},
	} {
		if got := compatible(c.a, c.b); got != c.want {
			t.Errorf("%s: compatible(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}

// pick takes the first waiting append and every later one that may go
// with those taken, in order; the others keep their order.
func TestPick(t *testing.T) {
	gs, other := &groupSet{}, &groupSet{}
	mk := func(gs *groupSet, keys boundarySet, n int) *appendMember {
		return &appendMember{gs: gs, keys: keys, stamped: make([]core.Message, n)}
	}
	first := mk(gs, boundarySet{1: true, 2: false}, 1)
	guarded := mk(gs, boundarySet{1: false}, 1)        // writes what first guards
	free := mk(gs, boundarySet{3: false, 2: false}, 1) // shares first's shared key
	stale := mk(other, boundarySet{4: false}, 1)       // another configuration
	big := mk(gs, boundarySet{5: false}, maxGroupMessages)
	last := mk(gs, boundarySet{6: false}, 1)
	g := &appendGroups{waiting: []*appendMember{first, guarded, free, stale, big, last}}
	group, alone, _ := g.pick()
	if want := []*appendMember{first, free, last}; !slices.Equal(group, want) {
		t.Errorf("picked %d members, want first, free and last", len(group))
	}
	if want := []*appendMember{guarded}; !slices.Equal(alone, want) {
		t.Errorf("%d sent alone, want guarded", len(alone))
	}
	if want := []*appendMember{stale, big}; !slices.Equal(g.waiting, want) {
		t.Errorf("%d left waiting, want stale and big in order", len(g.waiting))
	}
}
