package storetest

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testLag: driver.Lagger, a group's pending work counted at a bounded cost
// (issue 30, item 1): the pending and parked partitions in full, the
// messages of only the partitions asked for (a page of offsets, or the
// ones furthest behind), each up to a limit.
func (s suite) testLag(t *testing.T) {
	lagOf := func(e *genv, group string, q driver.LagQuery) driver.Lag {
		e.t.Helper()
		l, ok := e.gs.(driver.Lagger)
		if !ok {
			e.t.Fatalf("the store %T is not a driver.Lagger", e.gs)
		}
		lag, err := l.GroupLag(e.ctx, group, q)
		if err != nil {
			e.t.Fatalf("GroupLag %s %+v: %v", group, q, err)
		}
		return lag
	}
	// devicesBehind appends d1 d1 d2 d3 d1 d3 (positions 1 to 6) and acks
	// d1 at 1: d1 has 2 pending messages, d2 1, d3 2.
	devicesBehind := func(e *genv) (d1, d2, d3 int64) {
		e.t.Helper()
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d2", Name: "c"},
			deviceRegistered{DeviceID: "d3", Name: "d"}, deviceRegistered{DeviceID: "d1", Name: "e"}, deviceRegistered{DeviceID: "d3", Name: "f"})
		c := e.claim(devices, "w1", 1)
		e.expectClaim(c, part("device_id", "d1"), false, 1)
		e.ack(c, 1)
		ids := make([]int64, 3)
		for i, d := range []string{"d1", "d2", "d3"} {
			o, ok := e.offset(devices, part("device_id", d))
			if !ok {
				e.t.Fatalf("no offset for %s", d)
			}
			ids[i] = o.ID
		}
		return ids[0], ids[1], ids[2]
	}
	expect := func(t *testing.T, got driver.Lag, pending, parked int64, by map[int64]int) {
		t.Helper()
		if got.Pending != pending || got.Parked != parked || !maps.Equal(got.ByOffset, by) {
			t.Fatalf("lag: pending %d, parked %d, by offset %v; want %d, %d, %v", got.Pending, got.Parked, got.ByOffset, pending, parked, by)
		}
	}

	t.Run("pending partitions counted in full, messages of the ones asked for", func(t *testing.T) {
		e := s.genv(t, devices)
		d1, d2, d3 := devicesBehind(e)
		got := lagOf(e, devices, driver.LagQuery{})
		expect(t, got, 3, 0, map[int64]int{})
		if got.Limit != driver.DefaultLagLimit || !got.Partial() {
			t.Fatalf("lag with nothing counted: limit %d, partial %v; want %d, true", got.Limit, got.Partial(), driver.DefaultLagLimit)
		}
		// The two furthest behind: d2 and d3 (at 0, by offset id), not d1 (at 1).
		expect(t, lagOf(e, devices, driver.LagQuery{Partitions: 2}), 3, 0, map[int64]int{d2: 1, d3: 2})
		got = lagOf(e, devices, driver.LagQuery{Partitions: 10})
		expect(t, got, 3, 0, map[int64]int{d1: 2, d2: 1, d3: 2})
		if got.Total() != 5 || got.Partial() {
			t.Fatalf("lag of every partition: total %d, partial %v; want 5, false", got.Total(), got.Partial())
		}
		got = lagOf(e, devices, driver.LagQuery{Partitions: 10, Limit: 1})
		expect(t, got, 3, 0, map[int64]int{d1: 1, d2: 1, d3: 1})
		if !got.Partial() {
			t.Fatal("counts at the limit: want partial")
		}
		// A page of offsets: ids of no pending partition are left out.
		expect(t, lagOf(e, devices, driver.LagQuery{Offsets: []int64{d1, d3, d3 + 1000}}), 3, 0, map[int64]int{d1: 2, d3: 2})
		e.drain(devices, "w1")
		expect(t, lagOf(e, devices, driver.LagQuery{Partitions: 10, Offsets: []int64{d1}}), 0, 0, map[int64]int{})
	})

	t.Run("parked partitions are counted, and still pending", func(t *testing.T) {
		e := s.genv(t, devices)
		_, d2, _ := devicesBehind(e)
		c := e.claim(devices, "w1", 10) // d2, furthest behind
		e.expectClaim(c, part("device_id", "d2"), false, 3)
		f := driver.Failure{OffsetID: c.OffsetID, Partition: core.Partition(c.Partition).String(), MessageType: c.Messages[0].Type, MessageID: c.Messages[0].ID.String(), Position: 3, ErrorType: "*errors.errorString", Error: "poison"}
		if _, err := e.gs.ChangeGroup(e.ctx, devices, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdPark, Failure: f}, nil
		}); err != nil {
			t.Fatal(err)
		}
		e.release(c)
		expect(t, lagOf(e, devices, driver.LagQuery{Offsets: []int64{d2}}), 3, 1, map[int64]int{d2: 1})
	})

	t.Run("many partitions behind: only those asked for are counted", func(t *testing.T) {
		e := s.genv(t, devices)
		var payloads []any
		for i := range 300 {
			payloads = append(payloads, deviceRegistered{DeviceID: fmt.Sprintf("d%03d", i), Name: "x"})
		}
		e.append(payloads...)
		got := lagOf(e, devices, driver.LagQuery{Partitions: 5})
		if got.Pending != 300 || len(got.ByOffset) != 5 || got.Total() != 5 || !got.Partial() {
			t.Fatalf("lag of 300 partitions behind, 5 counted: %+v", got)
		}
	})

	t.Run("unknown group and queries out of bounds are refused", func(t *testing.T) {
		e := s.genv(t, devices)
		l, ok := e.gs.(driver.Lagger)
		if !ok {
			t.Fatalf("the store %T is not a driver.Lagger", e.gs)
		}
		_, err := l.GroupLag(e.ctx, "nope", driver.LagQuery{})
		unknownGroup(t, err, "nope", devices)
		for _, q := range []driver.LagQuery{
			{Partitions: -1},
			{Partitions: driver.MaxLagPartitions + 1},
			{Limit: -1},
			{Limit: driver.MaxLagLimit + 1},
			{Offsets: make([]int64, driver.MaxLagPartitions+1)},
		} {
			if _, err := l.GroupLag(e.ctx, devices, q); !errors.Is(err, driver.ErrInvalidLagQuery) {
				t.Errorf("GroupLag %+v: %v, want ErrInvalidLagQuery", q, err)
			}
		}
	})
}

// testReadParked: driver.ParkedReader, parked partitions a page at a time
// (issue 30, item 1: the dashboard listed every parked partition on each
// page).
func (s suite) testReadParked(t *testing.T) {
	e := s.genv(t, devices, bindings)
	r, ok := e.gs.(driver.ParkedReader)
	if !ok {
		t.Fatalf("the store %T is not a driver.ParkedReader", e.gs)
	}
	e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceBound{"d9", "x"}, deviceRegistered{DeviceID: "d3", Name: "c"}, deviceRegistered{DeviceID: "d4", Name: "d"})
	park := func(group string) {
		t.Helper()
		c := e.claim(group, "w1", 10)
		m := c.Messages[0]
		f := driver.Failure{OffsetID: c.OffsetID, Partition: core.Partition(c.Partition).String(), MessageType: m.Type, MessageID: m.ID.String(), Position: m.Position, ErrorType: "*errors.errorString", Error: "poison"}
		if _, err := e.gs.ChangeGroup(e.ctx, group, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdPark, Failure: f}, nil
		}); err != nil {
			t.Fatal(err)
		}
		e.release(c)
	}
	park(devices) // d1
	park(devices) // d2
	park(bindings)
	park(devices) // d3; d4 stays pending
	read := func(q driver.ParkedQuery) []driver.ParkedPartition {
		t.Helper()
		ps, err := r.ReadParked(e.ctx, q)
		if err != nil {
			t.Fatalf("ReadParked %+v: %v", q, err)
		}
		return ps
	}
	keys := func(ps []driver.ParkedPartition) string {
		var out []string
		for i, p := range ps {
			if i > 0 && p.OffsetID <= ps[i-1].OffsetID {
				t.Fatalf("parked partitions out of offset order: %+v", ps)
			}
			out = append(out, p.Group+" "+core.Partition(p.Partition).String())
		}
		return fmt.Sprint(out)
	}
	want, err := e.gs.ParkedPartitions(e.ctx, devices)
	if err != nil {
		t.Fatal(err)
	}
	first := read(driver.ParkedQuery{Group: devices, Limit: 2})
	rest := read(driver.ParkedQuery{Group: devices, Limit: 2, From: first[len(first)-1].OffsetID + 1})
	if got := append(first, rest...); len(first) != 2 || len(rest) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("pages of 2 of the devices' parked partitions: %+v then %+v; want %+v", first, rest, want)
	}
	if k := keys(read(driver.ParkedQuery{})); k != fmt.Sprint([]string{devices + " device_id:d1", devices + " device_id:d2", bindings + " device_id:d9", devices + " device_id:d3"}) {
		t.Fatalf("every group's parked partitions: %s", k)
	}
	if ps := read(driver.ParkedQuery{Group: bindings, From: rest[0].OffsetID + 1}); len(ps) != 0 {
		t.Fatalf("parked partitions past the last: %+v", ps)
	}
	_, err = r.ReadParked(e.ctx, driver.ParkedQuery{Group: "nope"})
	unknownGroup(t, err, "nope", bindings, devices)
	for _, q := range []driver.ParkedQuery{{Limit: -1}, {Limit: driver.MaxParkedPage + 1}} {
		if _, err := r.ReadParked(e.ctx, q); err == nil {
			t.Errorf("ReadParked %+v: no error", q)
		}
	}
}
