package pgstore_test

import (
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A claim of n partitions claims and locks no more than n, whatever bound
// its statement was planned for (claimBound rounds n up to a power of
// two): while a transaction holds a claim of 3 of 5 partitions (planned
// for 4), another worker claims the other 2, of a keyed group and of a
// queue, and a claim of 5 (planned for 8) takes all 5 once they are
// back.
func TestClaimTakesNoMoreThanAskedFor(t *testing.T) {
	handled := []string{fixtures.TypeDeviceRegistered}
	for _, spec := range []driver.GroupSpec{
		{ID: "test.keyed", PartitionBy: []string{"device_id"}, Handled: handled},
		{ID: "test.queue", Exclusive: true, Handled: handled},
	} {
		t.Run(spec.ID, func(t *testing.T) { claimNoMore(t, spec) })
	}
}

func claimNoMore(t *testing.T, spec driver.GroupSpec) {
	ctx := t.Context()
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	if err := s.RegisterGroup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var msgs []core.Message
	for _, id := range []string{"d1", "d2", "d3", "d4", "d5"} {
		msgs = append(msgs, core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id}))
	}
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	claimMany := func(group, worker string, n int) []*driver.ClaimedPartition {
		t.Helper()
		var got []*driver.ClaimedPartition
		err := s.Update(ctx, func(tx driver.Tx) error {
			var err error
			got, err = tx.(driver.ClaimManyTx).ClaimMany(group, worker, 10, n)
			return err
		})
		if err != nil {
			t.Fatalf("%s claims %d of %s: %v", worker, n, group, err)
		}
		return got
	}
	g := spec.ID
	var held, others []*driver.ClaimedPartition
	did, err := s.ClaimManyUpdate(ctx, g, "w1", 10, 3, func(_ driver.Tx, claims []*driver.ClaimedPartition) error {
		held = claims
		others = claimMany(g, "w2", 10) // another session, meanwhile
		return nil
	})
	if err != nil || !did {
		t.Fatalf("%s: claim 3: %v, %v", g, did, err)
	}
	if len(held) != 3 || len(others) != 2 {
		t.Fatalf("%s: w1 claimed %d of 3 asked, w2 meanwhile %d; want 3 and the other 2", g, len(held), len(others))
	}
	err = s.Update(ctx, func(tx driver.Tx) error {
		for _, c := range append(held, others...) {
			if err := tx.(driver.GroupTx).Release(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimMany(g, "w3", 5); len(got) != 5 {
		t.Fatalf("%s: %d claims of 5 asked, with 5 claimable", g, len(got))
	}
}
