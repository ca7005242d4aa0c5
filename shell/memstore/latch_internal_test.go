package memstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/storetest"
)

// An idle group's poll does no scan: the first empty scan latches the
// group, and only an append or a release makes it scan again.
func TestLatchIdlePollsDoNotScan(t *testing.T) {
	ctx := context.Background()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := New(reg)
	const group = "memstore.devices"
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: group, PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	var batch []core.Message
	for i := range 1000 {
		batch = append(batch, core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprint("d", i), Name: "x"}))
	}
	if _, err := s.Append(ctx, batch, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		c, err := s.ClaimNext(ctx, group, "w1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		if err := s.Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
	}
	g := s.groups[group]
	if g.scan >= 0 {
		t.Fatalf("after an empty scan the latch is %d, want clean (< 0)", g.scan)
	}
	scans := s.scans
	for range 100 {
		if c, err := s.ClaimNext(ctx, group, "w1", 10); c != nil || err != nil {
			t.Fatalf("idle poll: %v, %v", c, err)
		}
	}
	if s.scans != scans {
		t.Fatalf("100 idle polls ran %d scans, want none", s.scans-scans)
	}

	// An append makes the group dirty; a scan that finds the new work
	// claims it, and the release of the claim makes it dirty again.
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d7", Name: "y"})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if g.scan < 0 {
		t.Fatalf("after an append the latch is %d, want dirty (>= 0)", g.scan)
	}
	c, err := s.ClaimNext(ctx, group, "w1", 10)
	if err != nil || c == nil {
		t.Fatalf("claim after an append: %v, %v", c, err)
	}
	if c, err := s.ClaimNext(ctx, group, "w2", 10); c != nil || err != nil {
		t.Fatalf("claim while the only partition is held: %v, %v", c, err)
	}
	latched := g.scan
	if latched >= 0 {
		t.Fatalf("after an empty scan the latch is %d, want clean", latched)
	}
	if err := s.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if g.scan <= -latched {
		t.Fatalf("after a release the latch is %d, want a version above %d", g.scan, -latched)
	}
	if c, err := s.ClaimNext(ctx, group, "w2", 10); err != nil || c == nil {
		t.Fatalf("claim after the release: %v, %v", c, err)
	}
}

// A rolled back transaction restores the latch with everything else.
func TestLatchRollback(t *testing.T) {
	ctx := context.Background()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := New(reg)
	const group = "memstore.devices"
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: group, PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimNext(ctx, group, "w1", 10); c != nil || err != nil {
		t.Fatalf("claim of an empty group: %v, %v", c, err)
	}
	before := s.groups[group].scan
	errNo := fmt.Errorf("no")
	err = s.Update(ctx, func(tx driver.Tx) error {
		if _, err := tx.Append([]core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d1", Name: "x"})}, driver.AppendOptions{}); err != nil {
			return err
		}
		return errNo
	})
	if err != errNo {
		t.Fatal(err)
	}
	if got := s.groups[group].scan; got != before || len(s.groups[group].ready) != 0 || len(s.offsets) != 0 {
		t.Fatalf("after a rollback: latch %d (was %d), %d ready, %d offsets", got, before, len(s.groups[group].ready), len(s.offsets))
	}
}

// ClaimMany keeps ClaimNext's latch: a scan that finds nothing latches the
// group, and an idle group's ClaimMany then does no scan.
func TestLatchClaimManyIdleDoesNotScan(t *testing.T) {
	ctx := context.Background()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := New(reg)
	const group = "memstore.devices"
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: group, PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	var batch []core.Message
	for i := range 100 {
		batch = append(batch, core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprint("d", i), Name: "x"}))
	}
	if _, err := s.Append(ctx, batch, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	many := func() []*driver.ClaimedPartition {
		var out []*driver.ClaimedPartition
		err := s.Update(ctx, func(tx driver.Tx) error {
			var err error
			out, err = tx.(driver.ClaimManyTx).ClaimMany(group, "w1", 10, 16)
			if err != nil {
				return err
			}
			for _, c := range out {
				if err := tx.(driver.GroupTx).Ack(c, c.Last()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	total := 0
	for {
		got := many()
		if len(got) == 0 {
			break
		}
		total += len(got)
	}
	if total != 100 {
		t.Fatalf("ClaimMany claimed %d partitions, want 100", total)
	}
	if g := s.groups[group]; g.scan >= 0 {
		t.Fatalf("after an empty ClaimMany the latch is %d, want clean (< 0)", g.scan)
	}
	scans := s.scans
	for range 100 {
		if got := many(); len(got) != 0 {
			t.Fatalf("idle ClaimMany claimed %d", len(got))
		}
	}
	if s.scans != scans {
		t.Fatalf("100 idle ClaimMany calls ran %d scans, want none", s.scans-scans)
	}
}
