package storetest

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testParking: the parking strategy's store side (driver.CmdPark through
// ChangeGroup, and driver.Parking): a parked partition is set aside with
// its failure while the group's other partitions flow, until an operator
// retries it, skips its failed message or resets it.
func (s suite) testParking(t *testing.T) {
	// park claims d1's batch, and parks d1 at the message of position at
	// with the retry count given, the claim still held (as the router
	// does), then releases the claim.
	park := func(e *genv, group string, c *driver.ClaimedPartition, at int64, retries int) driver.GroupState {
		e.t.Helper()
		var msg core.PositionedMessage
		for _, m := range c.Messages {
			if m.Position == at {
				msg = m
			}
		}
		f := driver.Failure{RetryCount: retries, OffsetID: c.OffsetID, Partition: core.Partition(c.Partition).String(), MessageType: msg.Type, MessageID: msg.ID.String(), Position: at, ErrorType: "*errors.errorString", Error: "poison"}
		st, err := e.gs.ChangeGroup(e.ctx, group, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdPark, Failure: f}, nil
		})
		if err != nil {
			e.t.Fatalf("park %v: %v", c.Partition, err)
		}
		e.release(c)
		return st
	}
	d1, d2 := part("device_id", "d1"), part("device_id", "d2")

	t.Run("a parked partition is skipped while the others flow, and listed with its failure", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 1, 2)
		e.ack(c, 1)
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 2)
		st := park(e, devices, c, 2, 3)
		if st.Status != driver.StatusActive {
			t.Fatalf("after parking: the group is %s, want active", st.Status)
		}
		e.noClaim(devices, "w1")
		e.append(deviceRegistered{DeviceID: "d2", Name: "c"}, deviceRegistered{DeviceID: "d1", Name: "d"})
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d2, false, 3)
		e.ack(c, 3)
		e.noClaim(devices, "w1")

		parked, err := e.gs.ParkedPartitions(e.ctx, devices)
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) != 1 {
			t.Fatalf("parked partitions %+v, want d1 alone", parked)
		}
		p := parked[0]
		log := e.log()
		want := driver.Failure{RetryCount: 3, OffsetID: p.OffsetID, Partition: "device_id:d1", MessageType: typeDeviceRegistered, MessageID: log[1].ID.String(), Position: 2, ErrorType: "*errors.errorString", Error: "poison"}
		if p.Group != devices || !maps.Equal(p.Partition, d1) || p.LastPosition != 1 || !sameFailure(p.Failure, want) || p.Attempts() != 4 || !p.ParkedAt.Equal(epoch) {
			t.Fatalf("parked %+v, want %s d1 at offset 1, parked at %v with %+v and 4 attempts", p, devices, epoch, want)
		}
		all, err := e.gs.ParkedPartitions(e.ctx, "")
		if err != nil || len(all) != 1 || all[0].OffsetID != p.OffsetID {
			t.Fatalf("every group's parked partitions: %+v, %v; want d1's", all, err)
		}
		o, _ := e.offset(devices, d1)
		if !o.Parked || o.Claimed || o.LastPosition != 1 {
			t.Fatalf("offset of the parked partition %+v, want parked, unclaimed, at 1", o)
		}
		if o, _ := e.offset(devices, d2); o.Parked {
			t.Fatalf("offset of d2 %+v: parked, want not", o)
		}
	})

	t.Run("parking recovers a retrying group, and leaves a stopped one stopped", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceBound{"d1", "x"})
		c := e.claim(devices, "w1", 10)
		if err := e.gs.RetryGroup(e.ctx, devices, epoch.Add(-time.Second), driver.Failure{RetryCount: 2, OffsetID: c.OffsetID, Error: "poison"}); err != nil {
			t.Fatal(err)
		}
		st := park(e, devices, c, 1, 2)
		if st.Status != driver.StatusActive || st.Failure.RetryCount != 0 || !st.RetryAt.IsZero() {
			t.Fatalf("a retrying group after parking: %+v, want active with retry count 0", st)
		}
		if info := e.info(devices); info.Status != driver.StatusActive || !info.RetryAt.IsZero() {
			t.Fatalf("group %+v, want active", info)
		}
		c = e.claim(bindings, "w1", 10)
		if err := e.gs.StopGroup(e.ctx, bindings, "maintenance"); err != nil {
			t.Fatal(err)
		}
		if st := park(e, bindings, c, 2, 0); st.Status != driver.StatusStopped {
			t.Fatalf("a stopped group after parking: %s, want stopped", st.Status)
		}
		if parked, err := e.gs.ParkedPartitions(e.ctx, bindings); err != nil || len(parked) != 1 {
			t.Fatalf("parked partitions of the stopped group: %+v, %v; want its partition", parked, err)
		}
	})

	t.Run("retry hands the failed message to the workers again", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		c := e.claim(devices, "w1", 10)
		park(e, devices, c, 1, 0)
		e.noClaim(devices, "w1")
		p, err := e.gs.RetryPartition(e.ctx, devices, d1)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(p.Partition, d1) || p.Failure.Position != 1 {
			t.Fatalf("RetryPartition returned %+v, want d1's parking at position 1", p)
		}
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 1, 2)
		e.ack(c, 2)
		if parked, err := e.gs.ParkedPartitions(e.ctx, devices); err != nil || len(parked) != 0 {
			t.Fatalf("parked after retry: %+v, %v; want none", parked, err)
		}
	})

	t.Run("skip moves past the failed message only", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		c := e.claim(devices, "w1", 10)
		e.ack(c, 1)
		c = e.claim(devices, "w1", 10)
		park(e, devices, c, 2, 1)
		if _, err := e.gs.SkipFailedMessage(e.ctx, devices, d1); err != nil {
			t.Fatal(err)
		}
		e.lastAt(devices, d1, 2)
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 3)
		e.ack(c, 3)
		if len(e.log()) != 3 {
			t.Fatal("skipping a message removed it from the log")
		}
		// Skipping the last message of a partition leaves it caught up.
		e.append(deviceRegistered{DeviceID: "d1", Name: "d"})
		c = e.claim(devices, "w1", 10)
		park(e, devices, c, 4, 0)
		if _, err := e.gs.SkipFailedMessage(e.ctx, devices, d1); err != nil {
			t.Fatal(err)
		}
		e.noClaim(devices, "w1")
		e.lastAt(devices, d1, 4)
	})

	t.Run("reset replays the partition", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		got := e.drain(devices, "w1")
		if !slices.Equal(got["device_id:d1"], []int64{1, 3}) {
			t.Fatalf("drained %v", got)
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "d"})
		c := e.claim(devices, "w1", 10)
		park(e, devices, c, 4, 0)
		if _, err := e.gs.ResetPartition(e.ctx, devices, d1); err != nil {
			t.Fatal(err)
		}
		e.lastAt(devices, d1, 0)
		c = e.claim(devices, "w1", 1)
		e.expectClaim(c, d1, true, 1)
		e.ack(c, 1)
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 3, 4)
		e.ack(c, 4)
		e.noClaim(devices, "w1")
		e.lastAt(devices, d2, 2)
	})

	t.Run("operations on a partition that is not parked are refused and change nothing", func(t *testing.T) {
		e := s.genv(t, devices, jobs)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		c := e.claim(devices, "w1", 10)
		park(e, devices, c, 1, 0)
		before := e.offsets(devices)
		ops := map[string]func(group string, p map[string]string) (driver.ParkedPartition, error){
			"retry": func(g string, p map[string]string) (driver.ParkedPartition, error) {
				return e.gs.RetryPartition(e.ctx, g, p)
			},
			"skip": func(g string, p map[string]string) (driver.ParkedPartition, error) {
				return e.gs.SkipFailedMessage(e.ctx, g, p)
			},
			"reset": func(g string, p map[string]string) (driver.ParkedPartition, error) {
				return e.gs.ResetPartition(e.ctx, g, p)
			},
		}
		for name, op := range ops {
			for _, p := range []map[string]string{d2, part("device_id", "nope")} {
				_, err := op(devices, p)
				var ne *driver.NotParkedError
				if !errors.Is(err, driver.ErrNotParked) || !errors.As(err, &ne) {
					t.Fatalf("%s %v: %v, want ErrNotParked", name, p, err)
				}
				if ne.Group != devices || !maps.Equal(ne.Partition, p) || !slices.Equal(ne.Parked, []string{"device_id:d1"}) {
					t.Fatalf("%s %v: %+v, want the group, the partition and the parked d1", name, p, ne)
				}
			}
			if _, err := op(devices, part("name", "a")); err == nil || errors.Is(err, driver.ErrNotParked) {
				t.Fatalf("%s with the wrong attributes: %v, want an error naming the group's partition attributes", name, err)
			}
			if _, err := op(jobs, part("device_id", "d1")); err == nil {
				t.Fatalf("%s on an id-partitioned group with attributes: no error", name)
			}
			_, err := op("storetest.nope", d1)
			unknownGroup(t, err, "storetest.nope", devices, jobs)
		}
		if after := e.offsets(devices); !sameOffsets(after, before) {
			t.Fatalf("refused operations changed the offsets: %+v, were %+v", after, before)
		}
		_, err := e.gs.ParkedPartitions(e.ctx, "storetest.nope")
		unknownGroup(t, err, "storetest.nope", devices, jobs)
	})

	t.Run("an id-partitioned queue parks a message and skips it", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"a", 1}, deposit{"b", 2})
		c := e.claim(jobs, "w1", 10)
		id := c.Partition[core.IDKey]
		park(e, jobs, c, c.Messages[0].Position, 0)
		c = e.claim(jobs, "w1", 10)
		if c.Partition[core.IDKey] == id {
			t.Fatalf("claimed the parked message %s again", id)
		}
		e.ack(c, c.Last())
		e.noClaim(jobs, "w1")
		if _, err := e.gs.SkipFailedMessage(e.ctx, jobs, map[string]string{core.IDKey: id}); err != nil {
			t.Fatal(err)
		}
		e.noClaim(jobs, "w1")
	})

	t.Run("a group reset unparks its partitions", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		c := e.claim(devices, "w1", 10)
		park(e, devices, c, 1, 0)
		if err := e.gs.StopGroup(e.ctx, devices, "rebuild"); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.ResetGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		if parked, err := e.gs.ParkedPartitions(e.ctx, devices); err != nil || len(parked) != 0 {
			t.Fatalf("parked after a group reset: %+v, %v; want none", parked, err)
		}
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 1)
	})

	t.Run("parking in a transaction that rolls back parks nothing", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		c := e.claim(devices, "w1", 10)
		boom := errors.New("storetest: decide failed")
		_, err := e.gs.ChangeGroup(e.ctx, devices, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdPark, Failure: driver.Failure{OffsetID: c.OffsetID, Position: 1}}, boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("ChangeGroup: %v, want the decide error", err)
		}
		e.release(c)
		if parked, err := e.gs.ParkedPartitions(e.ctx, devices); err != nil || len(parked) != 0 {
			t.Fatalf("parked: %+v, %v; want none", parked, err)
		}
		e.claim(devices, "w1", 10)
	})
}

// testResumeWakes: resuming a group (StartGroup) or unparking one of its
// partitions announces the group's handled types to the notifier after
// the commit, as an append of them would, so that workers wake at once
// (the manual's reactor_resumed) instead of at the next catch-up poll; a
// refused command announces nothing.
func (s suite) testResumeWakes(t *testing.T) {
	e := s.genv(t, devices, bindings)
	e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
	e.notes.take()
	if err := e.gs.StopGroup(e.ctx, devices, "x"); err != nil {
		t.Fatal(err)
	}
	e.expectNotes()
	if err := e.gs.StartGroup(e.ctx, devices); err != nil {
		t.Fatal(err)
	}
	e.expectNotes([]string{typeDeviceRegistered})
	if err := e.gs.StartGroup(e.ctx, devices); err == nil {
		t.Fatal("start of an active group: no error")
	}
	e.expectNotes()
	if err := e.gs.RetryGroup(e.ctx, bindings, epoch.Add(time.Hour), driver.Failure{RetryCount: 1}); err != nil {
		t.Fatal(err)
	}
	e.notes.take()
	if err := e.gs.StartGroup(e.ctx, bindings); err != nil { // retry now
		t.Fatal(err)
	}
	e.expectNotes([]string{typeDeviceBound})

	c := e.claim(devices, "w1", 10)
	f := driver.Failure{OffsetID: c.OffsetID, Position: 1, Error: "poison"}
	if _, err := e.gs.ChangeGroup(e.ctx, devices, func(driver.GroupState) (driver.GroupChange, error) {
		return driver.GroupChange{Command: driver.CmdPark, Failure: f}, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.release(c)
	e.notes.take()
	if _, err := e.gs.RetryPartition(e.ctx, devices, part("device_id", "d1")); err != nil {
		t.Fatal(err)
	}
	e.expectNotes([]string{typeDeviceRegistered})
	if _, err := e.gs.RetryPartition(e.ctx, devices, part("device_id", "d1")); !errors.Is(err, driver.ErrNotParked) {
		t.Fatalf("retry of an unparked partition: %v", err)
	}
	e.expectNotes()
}
