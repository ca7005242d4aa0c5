package storetest

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testLifecycle(t *testing.T) {
	t.Run("operator commands follow the status chart and write nothing when refused", func(t *testing.T) {
		e := s.genv(t)
		statuses := []driver.Status{driver.StatusActive, driver.StatusRetrying, driver.StatusStopped, driver.StatusFailed}
		commands := []driver.GroupCommand{driver.CmdStart, driver.CmdStop, driver.CmdReset}
		for _, from := range statuses {
			for _, cmd := range commands {
				id := fmt.Sprintf("storetest.chart_%s_%s", from, cmd)
				e.register(driver.GroupSpec{ID: id, PartitionBy: []string{"device_id"}, Handled: []string{typeDeviceRegistered}})
				var err error
				switch from {
				case driver.StatusRetrying:
					err = e.gs.RetryGroup(e.ctx, id, epoch.Add(time.Hour), driver.Failure{RetryCount: 1, Error: "boom"})
				case driver.StatusStopped:
					err = e.gs.StopGroup(e.ctx, id, "maintenance")
				case driver.StatusFailed:
					err = e.gs.FailGroup(e.ctx, id, driver.Failure{Error: "boom"})
				}
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				before := e.info(id)
				if before.Status != from {
					t.Fatalf("%s: status %s, want %s", id, before.Status, from)
				}
				switch cmd {
				case driver.CmdStart:
					err = e.gs.StartGroup(e.ctx, id)
				case driver.CmdStop:
					err = e.gs.StopGroup(e.ctx, id, "stop")
				case driver.CmdReset:
					err = e.gs.ResetGroup(e.ctx, id)
				}
				next, terr := driver.Transition(id, from, cmd)
				if terr != nil {
					var ie *driver.InvalidTransitionError
					if !errors.As(err, &ie) {
						t.Fatalf("%s %s: error %v, want an *InvalidTransitionError", cmd, id, err)
					}
					if ie.Group != id || ie.Status != from || ie.Command != cmd || !slices.Equal(ie.Accepts, driver.Accepts(from)) {
						t.Fatalf("%s %s: %+v, want the group, its status %s, the command and what it accepts %v", cmd, id, ie, from, driver.Accepts(from))
					}
					if after := e.info(id); !sameInfo(after, before) {
						t.Fatalf("%s %s was refused but changed the group: %+v, was %+v", cmd, id, after, before)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s %s: %v", cmd, id, err)
				}
				if got := e.info(id).Status; got != next {
					t.Fatalf("%s %s: status %s, want %s", cmd, id, got, next)
				}
			}
		}
	})

	t.Run("unknown groups are refused, naming the registered ones", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		const nope = "storetest.nope"
		known := []string{bindings, devices}
		unknownGroup(t, e.gs.StopGroup(e.ctx, nope, "x"), nope, known...)
		unknownGroup(t, e.gs.StartGroup(e.ctx, nope), nope, known...)
		unknownGroup(t, e.gs.ResetGroup(e.ctx, nope), nope, known...)
		unknownGroup(t, e.gs.RetryGroup(e.ctx, nope, epoch, driver.Failure{}), nope, known...)
		unknownGroup(t, e.gs.FailGroup(e.ctx, nope, driver.Failure{}), nope, known...)
		_, err := e.gs.Group(e.ctx, nope)
		unknownGroup(t, err, nope, known...)
		_, err = e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{Group: nope})
		unknownGroup(t, err, nope, known...)
		unknownGroup(t, e.gs.Release(e.ctx, &driver.ClaimedPartition{Group: nope, WorkerID: "w1", OffsetID: 1}), nope, known...)
	})

	t.Run("stop keeps a reason and a failure; start clears them", func(t *testing.T) {
		e := s.genv(t, devices)
		at := epoch.Add(time.Minute)
		f := driver.Failure{RetryCount: 3, RetryAt: &at, OffsetID: 2, ErrorType: "*fs.PathError", Error: "open x: no such file", Stack: "goroutine 1 [running]:\nmain.main()"}
		if err := e.gs.FailGroup(e.ctx, devices, f); err != nil {
			t.Fatal(err)
		}
		got := e.info(devices)
		if got.Status != driver.StatusFailed || !sameFailure(got.Failure, f) || !got.RetryAt.IsZero() {
			t.Fatalf("failed group %+v, want failed with %+v as given and no retry time", got, f)
		}
		if err := e.gs.StopGroup(e.ctx, devices, "investigating"); err != nil {
			t.Fatal(err)
		}
		stopped := f
		stopped.Reason = "investigating"
		if got := e.info(devices); got.Status != driver.StatusStopped || !sameFailure(got.Failure, stopped) {
			t.Fatalf("stopped group %+v, want stopped with %+v", got, stopped)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		if got := e.info(devices); got.Status != driver.StatusActive || !sameFailure(got.Failure, driver.Failure{}) || !got.RetryAt.IsZero() {
			t.Fatalf("started group %+v, want active with an empty failure", got)
		}
	})

	t.Run("worker commands never fail on a status", func(t *testing.T) {
		e := s.genv(t, devices)
		if err := e.gs.StopGroup(e.ctx, devices, "deploy"); err != nil {
			t.Fatal(err)
		}
		before := e.info(devices)
		if err := e.gs.RetryGroup(e.ctx, devices, epoch.Add(time.Second), driver.Failure{RetryCount: 1, Error: "late"}); err != nil {
			t.Fatalf("retry of a stopped group: %v", err)
		}
		if err := e.gs.FailGroup(e.ctx, devices, driver.Failure{Error: "late"}); err != nil {
			t.Fatalf("fail of a stopped group: %v", err)
		}
		if got := e.info(devices); !sameInfo(got, before) {
			t.Fatalf("a stopped group moved by worker commands: %+v, was %+v", got, before)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		f := driver.Failure{Error: "first"}
		if err := e.gs.FailGroup(e.ctx, devices, f); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.FailGroup(e.ctx, devices, driver.Failure{Error: "second"}); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.RetryGroup(e.ctx, devices, epoch, driver.Failure{Error: "third"}); err != nil {
			t.Fatal(err)
		}
		if got := e.info(devices); got.Status != driver.StatusFailed || !sameFailure(got.Failure, f) {
			t.Fatalf("failed group %+v, want failed with its first failure", got)
		}
	})

	t.Run("stopped and failed groups are not claimed", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		if err := e.gs.StopGroup(e.ctx, devices, ""); err != nil {
			t.Fatal(err)
		}
		e.noClaim(devices, "w1")
		e.append(deviceRegistered{DeviceID: "d2", Name: "b"})
		e.noClaim(devices, "w1")
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
		if err := e.gs.FailGroup(e.ctx, devices, driver.Failure{Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		e.noClaim(devices, "w2")
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d2"), false, 2)
	})

	t.Run("a retrying group is claimed from its retry time and recovers with its failed partition", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		c1 := e.claim(devices, "w1", 10)
		e.release(c1)
		at := e.clock.Now().Add(10 * time.Second)
		f := driver.Failure{RetryCount: 1, RetryAt: &at, OffsetID: c1.OffsetID, ErrorType: "*errors.errorString", Error: "boom"}
		if err := e.gs.RetryGroup(e.ctx, devices, at, f); err != nil {
			t.Fatal(err)
		}
		if got := e.info(devices); got.Status != driver.StatusRetrying || !got.RetryAt.Equal(at) || !sameFailure(got.Failure, f) {
			t.Fatalf("retrying group %+v, want retrying until %v with %+v", got, at, f)
		}
		e.noClaim(devices, "w1")
		e.clock.Advance(9 * time.Second)
		e.noClaim(devices, "w1")
		e.clock.Advance(time.Second)
		c1 = e.claim(devices, "w1", 10)
		e.expectClaim(c1, part("device_id", "d1"), false, 1)
		c2 := e.claim(devices, "w2", 10)
		e.expectClaim(c2, part("device_id", "d2"), false, 2)
		e.ack(c2, 2)
		if got := e.info(devices); got.Status != driver.StatusRetrying || got.Failure.RetryCount != 1 {
			t.Fatalf("after another partition's ack: %+v, want still retrying (only the failed partition recovers it)", got)
		}
		e.ack(c1, 1)
		if got := e.info(devices); got.Status != driver.StatusActive || !got.RetryAt.IsZero() || !sameFailure(got.Failure, driver.Failure{}) {
			t.Fatalf("after the failed partition's ack: %+v, want active with an empty failure", got)
		}
	})

	t.Run("a reset group replays the log once started", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		e.drain(devices, "w1")
		e.append(deviceRegistered{DeviceID: "d3", Name: "d"}) // 4
		held := e.claim(devices, "w2", 10)
		if err := e.gs.StopGroup(e.ctx, devices, "replay"); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.ResetGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		notClaimant(t, e.gs.Ack(e.ctx, held, 4), "ack of a claim held across a reset")
		for _, o := range e.offsets(devices) {
			if o.LastPosition != 0 || o.Claimed {
				t.Fatalf("offset %+v after a reset, want at 0 and unclaimed", o)
			}
		}
		info := e.info(devices)
		if info.Status != driver.StatusStopped || info.HighestPosition != 3 {
			t.Fatalf("reset group %+v, want still stopped with highest position 3", info)
		}
		e.noClaim(devices, "w1")
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		e.append(deviceRegistered{DeviceID: "d2", Name: "e"}) // 5
		got := map[string]*driver.ClaimedPartition{}
		for range 3 {
			c := e.claim(devices, "w1", 10)
			got[c.Partition["device_id"]] = c
		}
		e.noClaim(devices, "w2")
		e.expectClaim(got["d1"], part("device_id", "d1"), true, 1, 3)
		e.expectClaim(got["d2"], part("device_id", "d2"), false, 2, 5) // reaches past the old high-water mark
		e.expectClaim(got["d3"], part("device_id", "d3"), false, 4)
		// Replay is per message: a claim reaching past the mark still
		// names it, so that 2 (processed before the reset) is a replay
		// and 5 is not; 4 was claimed, never acknowledged.
		for key, want := range map[string]int64{"d1": 3, "d2": 2, "d3": 0} {
			if got[key].ReplayUpto != want {
				t.Fatalf("claim of %s after a reset: ReplayUpto %d, want %d (how far it had been acknowledged)", key, got[key].ReplayUpto, want)
			}
		}
	})

	t.Run("reset leaves a queue as it is", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"acc1", 1}, deposit{"acc1", 2})
		e.ack(e.claim(jobs, "w1", 10), 1)
		before := e.offsets(jobs)
		if err := e.gs.StopGroup(e.ctx, jobs, ""); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.ResetGroup(e.ctx, jobs); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.StartGroup(e.ctx, jobs); err != nil {
			t.Fatal(err)
		}
		if after := e.offsets(jobs); !sameOffsets(after, before) {
			t.Fatalf("queue offsets after a reset %+v, want %+v", after, before)
		}
		c := e.claim(jobs, "w1", 10)
		e.expectPositions("claim after a reset", c.Messages, 2)
		e.noClaim(jobs, "w2")
	})
}

func (s suite) testHousekeeping(t *testing.T) {
	t.Run("a worker that stops heartbeating loses its batch to another", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		t0 := e.clock.Now()
		if err := e.gs.Heartbeat(e.ctx, []string{"w1", "w2", "w1"}, t0); err != nil {
			t.Fatal(err)
		}
		stuck := e.claim(devices, "w1", 2)
		e.expectClaim(stuck, part("device_id", "d1"), false, 1, 2)
		e.clock.Advance(time.Minute)
		if err := e.gs.Heartbeat(e.ctx, []string{"w2"}, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, e.clock.Now(), 90*time.Second); err != nil || n != 0 {
			t.Fatalf("release stale claims while w1 is fresh: %d, %v; want 0", n, err)
		}
		e.noClaim(devices, "w2")
		now := e.clock.Advance(time.Minute)
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, now, 90*time.Second); err != nil || n != 1 {
			t.Fatalf("release stale claims: %d, %v; want w1's one", n, err)
		}
		c := e.claim(devices, "w2", 10)
		e.expectClaim(c, part("device_id", "d1"), false, 1, 2, 3)
		notClaimant(t, e.gs.Ack(e.ctx, stuck, 2), "the stale worker's late ack")
		e.ack(c, 3)
		e.noClaim(devices, "w1")
		e.lastAt(devices, part("device_id", "d1"), 3)
	})

	t.Run("the claim of a worker that never heartbeat expires by its age", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		silent := e.claim(devices, "w9", 10)
		now := e.clock.Advance(30 * time.Second)
		if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, now); err != nil {
			t.Fatal(err)
		}
		live := e.claim(devices, "w1", 10)
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, now, time.Minute); err != nil || n != 0 {
			t.Fatalf("release stale claims of a 30 s old claim with a 1 min ttl: %d, %v; want 0", n, err)
		}
		now = e.clock.Advance(45 * time.Second)
		if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, now); err != nil {
			t.Fatal(err)
		}
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, now, time.Minute); err != nil || n != 1 {
			t.Fatalf("release stale claims of a 75 s old claim with a 1 min ttl: %d, %v; want 1", n, err)
		}
		notClaimant(t, e.gs.Release(e.ctx, silent), "release of an expired claim")
		e.ack(live, live.Last())
		again := e.claim(devices, "w1", 10)
		if !maps.Equal(again.Partition, silent.Partition) {
			t.Fatalf("claimed %v, want the expired claim's %v", again.Partition, silent.Partition)
		}
		e.expectPositions("the expired claim's messages", again.Messages, positionsOf(silent.Messages)...)
	})

	t.Run("heartbeats", func(t *testing.T) {
		e := s.genv(t)
		if err := e.gs.Heartbeat(e.ctx, nil, epoch); err != nil {
			t.Fatalf("heartbeat of no workers: %v", err)
		}
		if err := e.gs.Heartbeat(e.ctx, []string{"w1", ""}, epoch); err == nil {
			t.Fatal("heartbeat of a worker with no id: no error")
		}
	})

	t.Run("drained offsets are released", func(t *testing.T) {
		e := s.genv(t, devices, enrolments)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		// d1 is processed and deleted, d2 processed and kept, d3 deleted
		// while a worker holds it.
		for range 2 {
			c := e.claim(devices, "w1", 10)
			err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
				if c.Partition["device_id"] == "d1" {
					if err := gtx.Delete(c.Last()); err != nil {
						return err
					}
				}
				return gtx.Ack(c, c.Last())
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		held := e.claim(devices, "w2", 10)
		if err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error { return gtx.Delete(held.Last()) }); err != nil {
			t.Fatal(err)
		}
		// A composite partition keeps its offset while a message carrying
		// some of its keys remains: a new offset would deliver it again.
		e.append(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}, courseClosed{CourseName: "Algebra"}) // 4, 5
		c := e.claim(enrolments, "w1", 10)
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			if err := gtx.Delete(4); err != nil {
				return err
			}
			return gtx.Ack(c, 5)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 1 {
			t.Fatalf("release drained offsets: %d, %v; want 1 (d1)", n, err)
		}
		if _, ok := e.offset(devices, part("device_id", "d1")); ok {
			t.Fatal("the drained offset of d1 is still there")
		}
		e.lastAt(devices, part("device_id", "d2"), 2)
		if _, ok := e.offset(enrolments, part("course_name", "Algebra", "user_id", "joe")); !ok {
			t.Fatal("the offset of a partition still holding a courseClosed was released")
		}
		e.release(held)
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 1 {
			t.Fatalf("release drained offsets after the release: %d, %v; want 1 (d3)", n, err)
		}
		e.noClaim(devices, "w1")
		e.noClaim(enrolments, "w1")
		if got := e.info(devices).Partitions; got != 1 {
			t.Fatalf("%d partitions left, want 1", got)
		}
		for range 2 {
			if n, err := e.gs.PruneOrphanKeyPairs(e.ctx); err != nil || n < 0 {
				t.Fatalf("prune orphan key pairs: %d, %v", n, err)
			}
		}
		if n, err := e.gs.PruneOrphanKeyPairs(e.ctx); err != nil || n != 0 {
			t.Fatalf("prune orphan key pairs again: %d, %v; want 0", n, err)
		}
		// A new message of a released partition starts it afresh.
		e.append(deviceRegistered{DeviceID: "d1", Name: "f"}) // 6
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 6)
	})
}

func (s suite) testOffsets(t *testing.T) {
	t.Run("Stats describe every group, by id", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		c := e.claim(devices, "w1", 10)
		e.ack(c, c.Last())
		if err := e.gs.StopGroup(e.ctx, bindings, "paused"); err != nil {
			t.Fatal(err)
		}
		st := e.stats()
		if len(st.Groups) != 2 || st.Groups[0].ID != bindings || st.Groups[1].ID != devices {
			t.Fatalf("stats groups %+v, want %s then %s", st.Groups, bindings, devices)
		}
		for _, g := range st.Groups {
			if want := e.info(g.ID); !reflect.DeepEqual(g, want) {
				t.Fatalf("stats of %s: %+v, want what Group says: %+v", g.ID, g, want)
			}
		}
		if st.Groups[0].Status != driver.StatusStopped || st.Groups[0].Failure.Reason != "paused" || st.Groups[1].NewestProcessed != c.Last() || st.Groups[1].Label != "Devices" {
			t.Fatalf("stats groups %+v", st.Groups)
		}
	})
	t.Run("ReadOffsets pages by id, filtered by group", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceBound{"d1", "a1"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceBound{"d2", "a2"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		all := e.offsets("")
		if len(all) != 5 {
			t.Fatalf("%d offsets, want 5: %+v", len(all), all)
		}
		var ids []int64
		var order []string
		for _, o := range all {
			ids = append(ids, o.ID)
			order = append(order, o.Group+" "+core.Partition(o.Partition).String())
		}
		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != 5 {
			t.Fatalf("offset ids %v, want 5 ascending", ids)
		}
		wantOrder := []string{devices + " device_id:d1", bindings + " device_id:d1", devices + " device_id:d2", bindings + " device_id:d2", devices + " device_id:d3"}
		if !slices.Equal(order, wantOrder) {
			t.Fatalf("offsets in order %v, want %v (by creation)", order, wantOrder)
		}
		page, err := e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{Group: devices, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 3 || len(page.Offsets) != 2 || page.Offsets[0].ID != ids[0] || page.Offsets[1].ID != ids[2] {
			t.Fatalf("first page of devices: %+v, want offsets %d and %d of 3", page, ids[0], ids[2])
		}
		page, err = e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{Group: devices, Limit: 2, From: page.Offsets[1].ID + 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 3 || len(page.Offsets) != 1 || page.Offsets[0].ID != ids[4] {
			t.Fatalf("second page of devices: %+v, want offset %d of 3", page, ids[4])
		}
		page, err = e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{From: ids[1]})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 5 || len(page.Offsets) != 4 || page.Offsets[0].ID != ids[1] {
			t.Fatalf("offsets from %d: %+v, want 4 from it (inclusive) of 5", ids[1], page)
		}
		page, err = e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{From: ids[4] + 1})
		if err != nil || page.Total != 5 || len(page.Offsets) != 0 {
			t.Fatalf("offsets past the last: %+v, %v; want none of 5", page, err)
		}

		var iterated []driver.Offset
		for o, err := range e.gs.Offsets(e.ctx, driver.OffsetQuery{Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			iterated = append(iterated, o)
		}
		if !sameOffsets(iterated, all) {
			t.Fatalf("Offsets yields %+v, want %+v", iterated, all)
		}
		n := 0
		for _, err := range e.gs.Offsets(e.ctx, driver.OffsetQuery{Group: bindings, Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			break
		}
		if n != 1 {
			t.Fatalf("breaking out of Offsets after %d offsets", n)
		}
		var iterErr error
		for _, err := range e.gs.Offsets(e.ctx, driver.OffsetQuery{Group: "storetest.nope"}) {
			iterErr = err
		}
		unknownGroup(t, iterErr, "storetest.nope", bindings, devices)
	})

	t.Run("an offset shows its claim and its group", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		claimedAt := e.clock.Advance(1500 * time.Millisecond)
		c := e.claim(devices, "w1", 10)
		e.clock.Advance(time.Second)
		o, _ := e.offset(devices, part("device_id", "d1"))
		want := driver.Offset{ID: c.OffsetID, Group: devices, GroupStatus: driver.StatusActive, Partition: part("device_id", "d1"), Claimed: true, ClaimedAt: claimedAt, ClaimedBy: "w1"}
		if !sameOffsets([]driver.Offset{o}, []driver.Offset{want}) {
			t.Fatalf("claimed offset %+v, want %+v", o, want)
		}
		e.ack(c, 1)
		if err := e.gs.StopGroup(e.ctx, devices, ""); err != nil {
			t.Fatal(err)
		}
		o, _ = e.offset(devices, part("device_id", "d1"))
		want = driver.Offset{ID: c.OffsetID, Group: devices, GroupStatus: driver.StatusStopped, Partition: part("device_id", "d1"), LastPosition: 1}
		if !sameOffsets([]driver.Offset{o}, []driver.Offset{want}) {
			t.Fatalf("acked offset %+v, want %+v", o, want)
		}
	})

	t.Run("pages hold DefaultPageSize offsets unless told", func(t *testing.T) {
		e := s.genv(t, devices)
		batch := make([]any, 60)
		for i := range batch {
			batch[i] = deviceRegistered{DeviceID: fmt.Sprint("d", i), Name: "x"}
		}
		e.append(batch...)
		page, err := e.gs.ReadOffsets(e.ctx, driver.OffsetQuery{})
		if err != nil || len(page.Offsets) != driver.DefaultPageSize || page.Total != 60 {
			t.Fatalf("default page: %d offsets of %d, %v; want %d of 60", len(page.Offsets), page.Total, err, driver.DefaultPageSize)
		}
		n := 0
		for _, err := range e.gs.Offsets(e.ctx, driver.OffsetQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 60 {
			t.Fatalf("Offsets yields %d offsets, want 60", n)
		}
	})

	t.Run("group figures", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"}, deviceRegistered{DeviceID: "d1", Name: "d"})
		e.ack(e.claim(devices, "w1", 10), 4) // d1
		e.ack(e.claim(devices, "w1", 10), 2) // d2
		got := e.info(devices)
		want := driver.GroupInfo{ID: devices, Label: "Devices", Status: driver.StatusActive, OldestProcessed: 2, NewestProcessed: 4, Partitions: 3, HighestPosition: 4, PartitionBy: []string{"device_id"}}
		if !sameInfo(got, want) {
			t.Fatalf("group info %+v, want %+v", got, want)
		}
	})
}

func (s suite) testQueue(t *testing.T) {
	t.Run("a queue hands each message alone to concurrent workers and deletes it on ack", func(t *testing.T) {
		e := s.genv(t, jobs, devices)
		res := e.append(deposit{"acc1", 1}, deviceRegistered{DeviceID: "d1", Name: "a"}, deposit{"acc1", 2}, deposit{"acc1", 3})
		ids := map[int64]string{1: res.Messages[0].ID.String(), 3: res.Messages[2].ID.String(), 4: res.Messages[3].ID.String()}
		var claims []*driver.ClaimedPartition
		seen := map[int64]bool{}
		for _, w := range []string{"w1", "w2", "w3"} {
			c := e.claim(jobs, w, 10)
			if len(c.Messages) != 1 {
				t.Fatalf("a queue claim holds %s, want one message", describe(c.Messages))
			}
			pos := c.Last()
			if seen[pos] {
				t.Fatalf("job %d claimed twice", pos)
			}
			seen[pos] = true
			e.expectClaim(c, part(core.IDKey, ids[pos]), false, pos)
			claims = append(claims, c)
		}
		e.noClaim(jobs, "w4")
		for _, c := range claims {
			err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
				if err := gtx.Delete(c.Last()); err != nil {
					return err
				}
				return gtx.Ack(c, c.Last())
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		e.expectPositions("log after the jobs", e.log(), 2)
		e.noClaim(jobs, "w1")
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 3 {
			t.Fatalf("release drained offsets: %d, %v; want the 3 jobs", n, err)
		}
		if got := e.info(jobs); got.Partitions != 0 || got.HighestPosition != 4 {
			t.Fatalf("drained queue %+v, want no partitions and highest position 4", got)
		}
		if n, err := e.gs.PruneOrphanKeyPairs(e.ctx); err != nil || n < 0 {
			t.Fatalf("prune orphan key pairs: %d, %v", n, err)
		}
		e.append(deposit{"acc2", 4}) // 5: positions are not reused
		c := e.claim(jobs, "w1", 10)
		e.expectPositions("a new job", c.Messages, 5)
	})

	t.Run("a scheduled job is claimed once promoted", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(core.NewMessage(deposit{"acc1", 1}).At(epoch.Add(time.Hour)))
		e.noClaim(jobs, "w1")
		if n, err := e.store.PromoteScheduled(e.ctx, epoch.Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("promote: %d, %v", n, err)
		}
		e.expectPositions("promoted job", e.claim(jobs, "w1", 10).Messages, 1)
	})

	t.Run("a job handled synchronously is skipped", func(t *testing.T) {
		e := s.genv(t, jobs)
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			res, err := tx.Append(msgs(deposit{"acc1", 1}), driver.AppendOptions{})
			if err != nil {
				return err
			}
			moved, err := gtx.AdvanceOffset(jobs, part(core.IDKey, res.Messages[0].ID.String()), res.Last)
			if err == nil && !moved {
				err = errors.New("the offset did not move")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		e.noClaim(jobs, "w1")
	})

	t.Run("deletes then an ack in one transaction: a partition with messages left stays pending", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"}, deviceRegistered{DeviceID: "d2", Name: "d"})
		c := e.claim(devices, "w1", 1)
		e.expectClaim(c, part("device_id", "d1"), false, 1)
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			if err := gtx.Delete(1); err != nil {
				return err
			}
			if err := gtx.Delete(2, 4); err != nil { // d1's next message, and d2's only one
				return err
			}
			return gtx.Ack(c, 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 1 {
			t.Fatalf("release drained offsets: %d, %v; want d2's alone (d1 has message 3 left)", n, err)
		}
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d1"), false, 3)
		e.noClaim(devices, "w3")
	})

	t.Run("deletes of every message of a partition across calls drain it", func(t *testing.T) {
		e := s.genv(t, devices, jobs)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deposit{"acc1", 1}, deviceRegistered{DeviceID: "d1", Name: "b"}, deposit{"acc1", 2})
		job := e.claim(jobs, "w1", 10)
		e.expectPositions("the first job", job.Messages, 2)
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			for _, pos := range []int64{1, 2, 3} {
				if err := gtx.Delete(pos); err != nil {
					return err
				}
			}
			// An ack of another group's offset between the deletes and the
			// commit leaves d1's marker to be recomputed.
			return gtx.Ack(job, 2)
		})
		if err != nil {
			t.Fatal(err)
		}
		e.noClaim(devices, "w1")
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 2 {
			t.Fatalf("release drained offsets: %d, %v; want d1's and the first job's", n, err)
		}
		e.expectPositions("the second job", e.claim(jobs, "w1", 10).Messages, 4)
		e.append(deviceRegistered{DeviceID: "d1", Name: "c"}) // 5
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 5)
	})

	t.Run("a delete of a claimed message and a rolled-back ack write nothing", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"acc1", 1}, deposit{"acc1", 2})
		c := e.claim(jobs, "w1", 10)
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			if err := gtx.Delete(c.Last()); err != nil {
				return err
			}
			if err := gtx.Ack(c, c.Last()); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("update: %v, want the rollback", err)
		}
		e.expectPositions("log after the rollback", e.log(), 1, 2)
		e.release(c)
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 0 {
			t.Fatalf("release drained offsets: %d, %v; want none", n, err)
		}
		e.expectPositions("the job again", e.claim(jobs, "w2", 10).Messages, c.Last())
	})

	t.Run("deleting positions not in the log does nothing", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"acc1", 1})
		if err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error { return gtx.Delete(7, 0, -1) }); err != nil {
			t.Fatalf("delete of missing positions: %v", err)
		}
		e.expectPositions("log", e.log(), 1)
	})
}

func (s suite) testGroupTx(t *testing.T) {
	t.Run("a failed Update undoes offsets, claims, acks, deletes and advances", func(t *testing.T) {
		e := s.genv(t, devices, jobs)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deposit{"acc1", 1})
		c := e.claim(devices, "w1", 10)
		job := e.claim(jobs, "w1", 10)
		e.release(job)
		// The ack would recover the group: the group's row is undone too.
		if err := e.gs.RetryGroup(e.ctx, devices, e.clock.Now(), driver.Failure{RetryCount: 1, OffsetID: c.OffsetID}); err != nil {
			t.Fatal(err)
		}
		log, offsets := e.log(), e.offsets("")
		infos := []driver.GroupInfo{e.info(devices), e.info(jobs)}
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if _, err := tx.Append(msgs(deviceRegistered{DeviceID: "d2", Name: "b"}, deposit{"acc2", 2}), driver.AppendOptions{}); err != nil {
				return err
			}
			if err := gtx.Ack(c, 1); err != nil {
				return err
			}
			if moved, err := gtx.AdvanceOffset(devices, part("device_id", "d2"), 3); err != nil || !moved {
				return fmt.Errorf("advance: %v, %w", moved, err)
			}
			if moved, err := gtx.AdvanceOffset(devices, part("device_id", "d9"), 3); err != nil || !moved {
				return fmt.Errorf("advance: %v, %w", moved, err)
			}
			if err := gtx.Delete(2, 4); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("update: %v, want the rollback", err)
		}
		e.sameMessages("log", e.log(), log)
		if got := e.offsets(""); !sameOffsets(got, offsets) {
			t.Fatalf("offsets after the rollback %+v, want %+v", got, offsets)
		}
		for i, id := range []string{devices, jobs} {
			if got := e.info(id); !sameInfo(got, infos[i]) {
				t.Fatalf("%s after the rollback: %+v, want %+v", id, got, infos[i])
			}
		}
		e.noClaim(devices, "w2")
		e.ack(c, 1)
		if got := e.info(devices).Status; got != driver.StatusActive {
			t.Fatalf("status %s after the failed partition's ack, want active", got)
		}
		e.expectPositions("the job", e.claim(jobs, "w2", 10).Messages, 2)
		res := e.append(deviceRegistered{DeviceID: "d2", Name: "c"}) // 3, or later where positions skip
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d2"), false, res.Positions[0])
	})
}

// testClaimUpdate: claiming, handling and acknowledging several
// partitions in one transaction (ClaimUpdate and GroupTx.ClaimNext), and
// the rollback of all of it.
func (s suite) testClaimUpdate(t *testing.T) {
	t.Run("claims and acks several partitions in one transaction", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		var seen []string
		did, err := e.gs.ClaimUpdate(e.ctx, devices, "w1", 10, func(tx driver.Tx, c *driver.ClaimedPartition) error {
			for c != nil {
				seen = append(seen, c.Partition["device_id"])
				if err := tx.Ack(c, c.Messages[len(c.Messages)-1].Position); err != nil {
					return err
				}
				var err error
				if c, err = tx.ClaimNext(devices, "w1", 10); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || !did {
			t.Fatalf("ClaimUpdate: did %v, err %v", did, err)
		}
		if !slices.Equal(seen, []string{"d1", "d2", "d3"}) {
			t.Fatalf("claimed %v in one transaction, want d1, d2, d3", seen)
		}
		for _, d := range []string{"d1", "d2", "d3"} {
			e.lastAt(devices, part("device_id", d), map[string]int64{"d1": 1, "d2": 2, "d3": 3}[d])
		}
		e.noClaim(devices, "w2")
	})
	t.Run("an error rolls back the claims and the acks", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		offsets := e.offsets(devices)
		did, err := e.gs.ClaimUpdate(e.ctx, devices, "w1", 10, func(tx driver.Tx, c *driver.ClaimedPartition) error {
			if err := tx.Ack(c, 1); err != nil {
				return err
			}
			if c2, err := tx.ClaimNext(devices, "w1", 10); err != nil || c2 == nil {
				return fmt.Errorf("second claim: %v, %w", c2, err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) || !did {
			t.Fatalf("ClaimUpdate: did %v, err %v; want the claim reported and the rollback", did, err)
		}
		if got := e.offsets(devices); !sameOffsets(got, offsets) {
			t.Fatalf("offsets after the rollback %+v, want %+v", got, offsets)
		}
		// Nothing stays claimed: another worker gets both partitions.
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d1"), false, 1)
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d2"), false, 2)
	})
	t.Run("nothing to claim calls nothing", func(t *testing.T) {
		e := s.genv(t, devices)
		for range 2 { // the second answer may come from the idle latch
			did, err := e.gs.ClaimUpdate(e.ctx, devices, "w1", 10, func(driver.Tx, *driver.ClaimedPartition) error {
				t.Fatal("fn called for an idle group")
				return nil
			})
			if err != nil || did {
				t.Fatalf("ClaimUpdate on an idle group: did %v, err %v", did, err)
			}
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		fn := func(driver.Tx, *driver.ClaimedPartition) error { return nil }
		if _, err := e.gs.ClaimUpdate(e.ctx, devices, "", 10, fn); err == nil {
			t.Fatal("ClaimUpdate with no worker id succeeded")
		}
		if _, err := e.gs.ClaimUpdate(e.ctx, devices, "w1", 0, fn); err == nil {
			t.Fatal("ClaimUpdate of 0 messages succeeded")
		}
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			_, err := gtx.ClaimNext("nope", "w1", 10)
			return err
		})
		unknownGroup(t, err, "nope", devices)
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d1"), false, 1)
	})
}
