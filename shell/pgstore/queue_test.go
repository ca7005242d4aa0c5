package pgstore_test

import (
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell"
)

// TestQueueClaimFollowsARepartitionElsewhere: a store claims a queue (a
// group partitioned by message id) with a statement of its own, chosen by
// the group configuration it caches. When another process re-registers
// the group partitioned by an attribute, the cache is stale: the claim
// must still find the keyed partitions, not answer "nothing to do".
func TestQueueClaimFollowsARepartitionElsewhere(t *testing.T) {
	ss := peers(t, 2)
	ctx := t.Context()
	handled := []string{fixtures.TypeDeviceRegistered}
	if err := ss[0].RegisterGroup(ctx, shell.GroupSpec{ID: "q", Exclusive: true, Handled: handled}); err != nil {
		t.Fatal(err)
	}
	appendDevices := func(s shell.Store, ids ...string) {
		t.Helper()
		var ms []core.Message
		for _, id := range ids {
			ms = append(ms, core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id}))
		}
		if _, err := s.Append(ctx, ms, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	appendDevices(ss[0], "d1")
	c, err := ss[0].ClaimNext(ctx, "q", "w", 10)
	if err != nil || c == nil {
		t.Fatalf("claim the queued job: %v, %v", c, err)
	}
	if _, ok := c.Partition[core.IDKey]; !ok || len(c.Messages) != 1 {
		t.Fatalf("the queue's claim: partition %v with %d messages, want one job by id", c.Partition, len(c.Messages))
	}
	if err := ss[0].Ack(ctx, c, c.Last()); err != nil {
		t.Fatal(err)
	}
	// Another process partitions the group by device now.
	if err := ss[1].RegisterGroup(ctx, shell.GroupSpec{ID: "q", Exclusive: true, PartitionBy: []string{"device_id"}, Handled: handled}); err != nil {
		t.Fatal(err)
	}
	appendDevices(ss[1], "d2", "d2")
	var got []map[string]string
	for range 3 {
		c, err := ss[0].ClaimNext(ctx, "q", "w", 10)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		got = append(got, c.Partition)
		if c.Partition["device_id"] == "d2" && len(c.Messages) != 2 {
			t.Fatalf("d2's claim holds %d messages, want both", len(c.Messages))
		}
		if err := ss[0].Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
	}
	found := false
	for _, p := range got {
		if p["device_id"] == "d2" {
			found = true
		}
	}
	if !found {
		t.Fatalf("claims after the repartition by the other store: %v, want d2's keyed partition", got)
	}
}
