package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A claim that meets a payload it cannot decode returns a
// *driver.DecodeError naming the message, its type, and the claim's
// group, partition and offset (the router fails the group with it), and
// claims nothing (issue 28, item 1).
func TestClaimOfAnUndecodableMessage(t *testing.T) {
	ctx := context.Background()
	prefix := pgtest.Prefix()
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	spec := driver.GroupSpec{ID: "test.devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}
	if err := s.RegisterGroup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d1", Name: "a"})}, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE `+prefix+`_messages SET payload = '{"device_id": 7}' WHERE position = $1`, res.Last); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimNext(ctx, spec.ID, "w1", 10)
	var de *driver.DecodeError
	if c != nil || !errors.As(err, &de) {
		t.Fatalf("ClaimNext = %+v, %v; want a *driver.DecodeError", c, err)
	}
	if de.Group != spec.ID || de.Partition["device_id"] != "d1" || de.OffsetID == 0 || de.MessageType != "device.registered" || de.MessageID != res.Messages[0].ID || de.Position != res.Last {
		t.Fatalf("decode error %+v", de)
	}
	page, err := s.ReadOffsets(ctx, driver.OffsetQuery{Group: spec.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range page.Offsets {
		if o.Claimed {
			t.Fatalf("offset %+v claimed by a claim that failed", o)
		}
	}
}
