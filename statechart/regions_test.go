package statechart_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/statechart"
)

// Regions are matched by name, as the manual's Hash patterns: each named
// region at its state or at its initial position; a region that is not
// active does not match.
func TestMatchRegionsByName(t *testing.T) {
	m := orderMachine(nil)
	c, err := m.ActiveStates([]string{"placed", "placed.payment.paying"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		region string
		want   statechart.State
	}{{"root", Placed}, {"payment", Paying}, {"shipping", statechart.InitialPosition}} {
		if at, ok, err := c.RegionAt(r.region); !ok || err != nil || at != r.want {
			t.Errorf("RegionAt(%q) = %v, %v, %v; want %v", r.region, at, ok, err, r.want)
		}
	}
	for _, p := range []struct {
		pattern map[string]statechart.State
		want    bool
	}{
		{map[string]statechart.State{"payment": Paying, "shipping": statechart.InitialPosition}, true},
		{map[string]statechart.State{"root": Placed, "payment": Paying}, true},
		{map[string]statechart.State{"payment": Paid}, false},
		{map[string]statechart.State{"payment": statechart.InitialPosition}, false},
		{map[string]statechart.State{"payment": Paying, "shipping": Paying}, false},
	} {
		if got, err := c.MatchRegions(p.pattern); got != p.want || err != nil {
			t.Errorf("MatchRegions(%v) = %v, %v; want %v", p.pattern, got, err, p.want)
		}
	}
	cancelled, err := m.ActiveStates([]string{"cancelled"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := cancelled.MatchRegions(map[string]statechart.State{"payment": statechart.InitialPosition}); ok || err != nil {
		t.Errorf("an inactive region matched: %v %v", ok, err)
	}
	if _, ok, err := cancelled.RegionAt("payment"); ok || err != nil {
		t.Errorf("RegionAt of an inactive region: %v %v", ok, err)
	}
	if _, err := c.MatchRegions(map[string]statechart.State{"billing": Paying}); !errors.Is(err, statechart.ErrUnknownRegion) {
		t.Errorf("an unknown region: %v", err)
	}
}

// A part mounted twice brings two regions of one name: naming it is an
// *AmbiguousRegionError listing both, not a silent pick.
func TestAmbiguousRegion(t *testing.T) {
	holder := statechart.Named("holder")
	twin := statechart.NewPart("twin", statechart.State{},
		statechart.Initial(statechart.Command[Z](holder)),
		statechart.Place(holder, statechart.Region("inner", statechart.Initial(statechart.Command[X](pCaptured)), statechart.Final(pCaptured))),
	)
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP, statechart.RegionPart("card", twin), statechart.RegionPart("cash", twin)),
	)
	in, _ := decideAll(t, m, m.New(nil), Go{}, Z{})
	c := in.ActiveStates()
	if at, ok, err := c.RegionAt("card"); !ok || err != nil || at != holder {
		t.Fatalf("RegionAt(card) = %v %v %v", at, ok, err)
	}
	var amb *statechart.AmbiguousRegionError
	if _, err := c.MatchRegions(map[string]statechart.State{"inner": statechart.InitialPosition}); !errors.As(err, &amb) || amb.Region != "inner" || !slices.Equal(amb.Paths, []string{"p.card.holder.inner", "p.cash.holder.inner"}) {
		t.Fatalf("err = %v (%+v)", err, amb)
	}
	if _, _, err := c.RegionAt("inner"); !errors.As(err, &amb) {
		t.Fatalf("RegionAt: %v", err)
	}
}
