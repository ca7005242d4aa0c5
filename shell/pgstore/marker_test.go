package pgstore_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestPendingMarkerReadsNoHistory: the pending marker of a keyed
// partition (the first message after its offset that its group handles)
// is recomputed at each acknowledgement from the messages after the
// offset, not from the partition's history. It used to be looked up in
// the index of key pairs alone, which yields every message the partition
// ever had: an acknowledgement of a partition 2,000 messages long read
// all 2,000. The marker is still found past the messages read in order (a
// partition's next message 100 others later), and a caught-up partition's
// recomputation reads no message at all.
func TestPendingMarkerReadsNoHistory(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	const g = "test.marker"
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: g, PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	appendN := func(n int, body func(i int) any) (last int64) {
		t.Helper()
		for i := 0; i < n; i += 500 {
			var msgs []core.Message
			for j := i; j < min(n, i+500); j++ {
				msgs = append(msgs, core.NewMessage(body(j)))
			}
			res, err := s.Append(ctx, msgs, driver.AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last = res.Last
		}
		return last
	}
	d1 := func(i int) any { return fixtures.DeviceRegistered{DeviceID: "d1", Name: fmt.Sprint(i)} }
	history := appendN(2000, d1)
	claim := func(want int) *driver.ClaimedPartition {
		t.Helper()
		c, err := s.ClaimNext(ctx, g, "w1", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil || len(c.Messages) != want {
			t.Fatalf("claim: %+v, want d1 with %d messages", c, want)
		}
		return c
	}
	c := claim(2000)
	// The partition's next message, 100 messages of another group's type
	// after the last it had: past the window read in order.
	appendN(100, func(i int) any { return fixtures.AssetRegistered{AssetID: fmt.Sprint(i), Label: "x"} })
	next := appendN(1, d1)
	if err := s.Ack(ctx, c, history); err != nil {
		t.Fatal(err)
	}
	c = claim(1)
	if got := c.Messages[0].Position; got != next {
		t.Fatalf("claimed position %d after the acknowledgement of the history, want %d", got, next)
	}
	if err := s.Ack(ctx, c, next); err != nil {
		t.Fatal(err)
	}
	// Caught up: what the recomputation of its marker reads, from the
	// plan's counts (rows returned and rows filtered out, every loop).
	messages := s.Prefix() + "_messages"
	var read float64
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == messages {
			rows, _ := n["Actual Rows"].(float64)
			removed, _ := n["Rows Removed by Filter"].(float64)
			loops, _ := n["Actual Loops"].(float64)
			read += (rows + removed) * loops
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			if c, ok := c.(map[string]any); ok {
				walk(c)
			}
		}
	}
	var marker *int64
	// In a transaction rolled back: EXPLAIN ANALYZE runs the update.
	err = func() error {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		var plan []map[string]any
		var js []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+pgstore.RemarkSQL(s), c.OffsetID).Scan(&js); err != nil {
			return err
		}
		if err := json.Unmarshal(js, &plan); err != nil {
			return err
		}
		walk(plan[0]["Plan"].(map[string]any))
		if read > pgstore.MarkWindow {
			t.Errorf("the marker's recomputation read %v messages of the log for a caught-up partition (%d messages long), want at most %d:\n%s", read, 2001, pgstore.MarkWindow, js)
		}
		if err := tx.QueryRow(ctx, pgstore.RemarkSQL(s), c.OffsetID).Scan(&marker); err != nil {
			return err
		}
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	if marker != nil {
		t.Fatalf("marker of the caught-up partition %d, want none", *marker)
	}
}
