package pgstore_test

import (
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// Workers counts the claims each worker holds, in the same query (the
// dashboard's partitions page read every offset to count them: issue 30,
// item 1).
func TestWorkersCountTheirClaims(t *testing.T) {
	ctx := t.Context()
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	spec := driver.GroupSpec{ID: "test.devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}
	if err := s.RegisterGroup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	msgs := core.Messages(fixtures.DeviceRegistered{DeviceID: "d1", Name: "a"}, fixtures.DeviceRegistered{DeviceID: "d2", Name: "b"}, fixtures.DeviceRegistered{DeviceID: "d3", Name: "c"})
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, []string{"w1", "w2"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if c, err := s.ClaimNext(ctx, spec.ID, "w1", 10); err != nil || c == nil {
			t.Fatalf("claim: %v, %v", c, err)
		}
	}
	ws, err := s.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].ID != "w1" || ws[0].Claims != 2 || ws[1].ID != "w2" || ws[1].Claims != 0 {
		t.Fatalf("workers %+v, want w1 with 2 claims and w2 with none", ws)
	}
}
