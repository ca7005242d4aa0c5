package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testRegister(t *testing.T) {
	t.Run("a new group is active with nothing processed", func(t *testing.T) {
		e := s.genv(t, enrolments, devices)
		got := e.info(enrolments)
		want := driver.GroupInfo{ID: enrolments, Label: enrolments, Status: driver.StatusActive, PartitionBy: []string{"course_name", "user_id"}}
		if !sameInfo(got, want) {
			t.Fatalf("group info %+v, want %+v (the label defaults to the id, partition keys sorted)", got, want)
		}
		if got := e.info(devices); got.Label != "Devices" || got.Exclusive {
			t.Fatalf("group info %+v, want label Devices, not exclusive", got)
		}
		e.register(groupSpec(jobs))
		if got := e.info(jobs); !got.Exclusive || got.Status != driver.StatusActive || len(got.PartitionBy) > 1 || len(got.PartitionBy) == 1 && got.PartitionBy[0] != core.IDKey {
			t.Fatalf("queue info %+v, want exclusive and active, partitioned by message id (no keys, or %s)", got, core.IDKey)
		}
	})

	t.Run("registering again keeps the status, the failure and the offsets", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "Boiler"})
		e.ack(e.claim(devices, "w1", 10), 1)
		f := driver.Failure{OffsetID: 7, ErrorType: "*errors.errorString", Error: "boom", Stack: "main.go:1"}
		if err := e.gs.FailGroup(e.ctx, devices, f); err != nil {
			t.Fatal(err)
		}
		spec := groupSpec(devices)
		spec.Label = "Device decider"
		e.register(spec)
		e.register(spec)
		got := e.info(devices)
		if got.Status != driver.StatusFailed || !sameFailure(got.Failure, f) || got.Label != "Device decider" || got.HighestPosition != 1 {
			t.Fatalf("after registering a failed group again: %+v, want failed with %+v, the new label, highest 1", got, f)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		e.register(spec)
		e.noClaim(devices, "w1")
		e.lastAt(devices, part("device_id", "d1"), 1)
	})

	t.Run("bad specs are refused and register nothing", func(t *testing.T) {
		e := s.genv(t)
		cases := []struct {
			name string
			spec driver.GroupSpec
			is   error
		}{
			{"no id", driver.GroupSpec{Handled: []string{typeCourseCreated}, PartitionBy: []string{"course_name"}}, nil},
			{"no handled types", driver.GroupSpec{ID: "storetest.bad", PartitionBy: []string{"course_name"}}, nil},
			{"id-partitioned but not exclusive", driver.GroupSpec{ID: "storetest.bad", Handled: []string{typeDeposit}}, nil},
			{"the reserved key as a partition key", driver.GroupSpec{ID: "storetest.bad", Exclusive: true, PartitionBy: []string{core.IDKey}, Handled: []string{typeDeposit}}, nil},
			{"an id that is not normalised", driver.GroupSpec{ID: "Storetest::BadGroup", PartitionBy: []string{"course_name"}, Handled: []string{typeCourseCreated}}, nil},
			{"an unknown handled type", driver.GroupSpec{ID: "storetest.bad", PartitionBy: []string{"course_name"}, Handled: []string{typeCourseCreated, "course.renamed"}}, codec.ErrUnknownType},
		}
		for _, c := range cases {
			err := e.gs.RegisterGroup(e.ctx, c.spec)
			if err == nil {
				t.Fatalf("%s: registered %+v", c.name, c.spec)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("%s: error %v, want %v", c.name, err, c.is)
			}
			if c.spec.ID != "" {
				_, err := e.gs.Group(e.ctx, c.spec.ID)
				unknownGroup(t, err, c.spec.ID)
			}
		}
	})

	t.Run("an exclusive group owns its types", func(t *testing.T) {
		e := s.genv(t, jobs, devices)
		conflict := func(spec driver.GroupSpec, other string, types ...string) {
			t.Helper()
			err := e.gs.RegisterGroup(e.ctx, spec)
			var ce *driver.GroupConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("registering %+v: error %v, want a *GroupConflictError", spec, err)
			}
			if ce.Group != spec.ID || ce.Other != other || !slices.Equal(ce.Types, types) {
				t.Fatalf("conflict %+v, want %s against %s over %v", ce, spec.ID, other, types)
			}
			_, err = e.gs.Group(e.ctx, spec.ID)
			unknownGroup(t, err, spec.ID, devices, jobs)
		}
		conflict(driver.GroupSpec{ID: "storetest.ledger", PartitionBy: []string{"account"}, Handled: []string{typeDeposit}}, jobs, typeDeposit)
		conflict(driver.GroupSpec{ID: "storetest.ledger", Exclusive: true, PartitionBy: []string{"account"}, Handled: []string{typeDeposit}}, jobs, typeDeposit)
		conflict(driver.GroupSpec{ID: "storetest.device_queue", Exclusive: true, Handled: []string{typeDeviceBound, typeDeviceRegistered}}, devices, typeDeviceRegistered)
		e.register(groupSpec(jobs)) // itself is no conflict
	})

	t.Run("groups sharing a type each get its messages", func(t *testing.T) {
		e := s.genv(t, devices)
		e.register(driver.GroupSpec{ID: "storetest.device_names", PartitionBy: []string{"name"}, Handled: []string{typeDeviceRegistered}})
		e.append(deviceRegistered{DeviceID: "d1", Name: "Boiler"}, deviceRegistered{DeviceID: "d2", Name: "Boiler"})
		if got := e.drain(devices, "w1"); !maps.EqualFunc(got, map[string][]int64{"device_id:d1": {1}, "device_id:d2": {2}}, slices.Equal) {
			t.Fatalf("devices received %v", got)
		}
		if got := e.drain("storetest.device_names", "w1"); !maps.EqualFunc(got, map[string][]int64{"name:Boiler": {1, 2}}, slices.Equal) {
			t.Fatalf("device names received %v", got)
		}
	})
}

func (s suite) testClaim(t *testing.T) {
	t.Run("a claim holds its partition's messages under conditional AND", func(t *testing.T) {
		e := s.genv(t, enrolments)
		courseLog(e.env)
		// Partitions come from userJoinedCourse, the only handled type
		// carrying both keys; all are at 0, so the oldest offset goes
		// first.
		algebraJoe := e.claim(enrolments, "w1", 10)
		e.expectClaim(algebraJoe, part("course_name", "Algebra", "user_id", "joe"), false, 1, 2, 3, 7, 10)
		e.expectClaim(e.claim(enrolments, "w2", 10), part("course_name", "Algebra", "user_id", "jake"), false, 1, 4, 5, 7)
		e.expectClaim(e.claim(enrolments, "w3", 10), part("course_name", "History", "user_id", "joe"), false, 2, 6, 8)
		e.noClaim(enrolments, "w4")
		e.noClaim(enrolments, "w1")
	})

	t.Run("a batch holds at most batch size messages; the next continues after the ack", func(t *testing.T) {
		e := s.genv(t, devices)
		for i := range 5 {
			e.append(deviceRegistered{DeviceID: "d1", Name: fmt.Sprint("name ", i)})
		}
		d1 := part("device_id", "d1")
		c := e.claim(devices, "w1", 2)
		e.expectClaim(c, d1, false, 1, 2)
		e.ack(c, 2)
		c = e.claim(devices, "w1", 2)
		e.expectClaim(c, d1, false, 3, 4)
		e.release(c)
		c = e.claim(devices, "w2", 2)
		e.expectClaim(c, d1, false, 3, 4)
		e.ack(c, 4)
		c = e.claim(devices, "w1", 2)
		e.expectClaim(c, d1, false, 5)
		e.ack(c, 5)
		e.noClaim(devices, "w1")
		e.lastAt(devices, d1, 5)
	})

	t.Run("a claim says where its offset stood (After)", func(t *testing.T) {
		e := s.genv(t, devices)
		for i := range 5 {
			e.append(deviceRegistered{DeviceID: "d1", Name: fmt.Sprint("name ", i)})
		}
		for _, step := range []struct {
			after, ack int64
		}{{0, 1}, {1, 3}, {3, 5}} {
			c := e.claim(devices, "w1", 2)
			if c == nil || c.After != step.after {
				t.Fatalf("claim %+v, want one whose After is %d (where the ack left the offset)", c, step.after)
			}
			e.ack(c, step.ack)
		}
		// Through ClaimMany too, where a store has it.
		e.append(deviceRegistered{DeviceID: "d1", Name: "again"}, deviceRegistered{DeviceID: "d2", Name: "new"})
		err := e.gs.Update(e.ctx, func(tx driver.Tx) error {
			m, ok := tx.(driver.ClaimManyTx)
			if !ok {
				return nil
			}
			cs, err := m.ClaimMany(devices, "w1", 10, 5)
			if err != nil {
				return err
			}
			for _, c := range cs {
				want := map[string]int64{"d1": 5, "d2": 0}[c.Partition["device_id"]]
				if c.After != want {
					t.Errorf("ClaimMany's claim of %v: After %d, want %d", c.Partition, c.After, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a message of several partitions is delivered once to each", func(t *testing.T) {
		e := s.genv(t, accounts)
		e.append(transfer{[]string{"acc1", "acc2"}, 1}, transfer{[]string{"acc2"}, 2}, transfer{[]string{"acc3", "acc1"}, 3})
		got := map[string][]int64{}
		for _, w := range []string{"w1", "w2", "w3"} {
			c := e.claim(accounts, w, 10)
			got[core.Partition(c.Partition).String()] = positionsOf(c.Messages)
		}
		e.noClaim(accounts, "w4")
		want := map[string][]int64{"accounts:acc1": {1, 3}, "accounts:acc2": {1, 2}, "accounts:acc3": {3}}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("partitions received %v, want %v", got, want)
		}
	})

	t.Run("only handled messages carrying every partition key make partitions", func(t *testing.T) {
		e := s.genv(t, enrolments, devices)
		e.append(
			deviceRegistered{DeviceID: "d1", Name: "Boiler"}, // 1: devices only
			courseCreated{CourseName: "Algebra"},             // 2: some keys of enrolments
			userRegistered{UserID: "joe", Name: "Joe"},       // 3
			courseClosed{CourseName: "Algebra"},              // 4
			deviceBound{"d7", "a1"},                          // 5: carries device_id, not handled by devices
		)
		e.noClaim(enrolments, "w1")
		if got := e.offsets(enrolments); len(got) != 0 {
			t.Fatalf("enrolments has offsets %+v before a message carries both keys", got)
		}
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, part("device_id", "d1"), false, 1)
		e.ack(c, 1)
		e.noClaim(devices, "w1")
		if _, ok := e.offset(devices, part("device_id", "d7")); ok {
			t.Fatal("a deviceBound made a partition of devices, which does not handle it")
		}
		e.append(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}) // 6
		c = e.claim(enrolments, "w1", 10)
		e.expectClaim(c, part("course_name", "Algebra", "user_id", "joe"), false, 2, 3, 4, 6)
		e.ack(c, 6)

		// A message carrying only some keys does not wake the partition: it
		// waits for one that carries them all.
		e.append(courseClosed{CourseName: "Algebra"}, userRegistered{UserID: "joe", Name: "Joseph"}) // 7, 8
		e.noClaim(enrolments, "w1")
		e.append(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}) // 9
		e.expectClaim(e.claim(enrolments, "w1", 10), part("course_name", "Algebra", "user_id", "joe"), false, 7, 8, 9)
	})

	t.Run("the partition furthest behind goes first, then the oldest", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d2", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		c := e.claim(devices, "w1", 1)
		e.expectClaim(c, part("device_id", "d2"), false, 1)
		e.ack(c, 1)
		e.append(deviceRegistered{DeviceID: "d2", Name: "d"}) // 4
		for _, want := range []struct {
			device string
			pos    int64
		}{{"d1", 2}, {"d3", 3}, {"d2", 4}} {
			c := e.claim(devices, "w1", 10)
			e.expectClaim(c, part("device_id", want.device), false, want.pos)
			e.ack(c, want.pos)
		}
		e.noClaim(devices, "w1")
	})

	t.Run("a group registered late claims the messages appended before", func(t *testing.T) {
		e := s.genv(t)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, courseCreated{CourseName: "Algebra"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		e.register(groupSpec(devices))
		got := e.drain(devices, "w1")
		if want := map[string][]int64{"device_id:d1": {1, 4}, "device_id:d2": {3}}; !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("received %v, want %v", got, want)
		}
		e.noClaim(devices, "w2")
	})

	t.Run("the claim guard conflicts with a later message of the partition", func(t *testing.T) {
		e := s.genv(t, enrolments)
		e.append(userJoinedCourse{CourseName: "Algebra", UserID: "joe"})
		c := e.claim(enrolments, "w1", 10)
		e.expectClaim(c, part("course_name", "Algebra", "user_id", "joe"), false, 1)
		e.append(userJoinedCourse{CourseName: "History", UserID: "jake"}) // 2: another partition
		if _, err := e.appendGuarded(c.Guard, deviceRegistered{DeviceID: "d1", Name: "a"}); err != nil {
			t.Fatalf("append under the claim guard after another partition's message: %v", err)
		}
		e.append(courseClosed{CourseName: "Algebra"}) // 4: this partition (conditional AND)
		_, err := e.appendGuarded(c.Guard, deviceRegistered{DeviceID: "d2", Name: "b"})
		e.conflict(err, 4)
	})

	t.Run("bad input", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		_, err := e.gs.ClaimNext(e.ctx, "storetest.nope", "w1", 10)
		unknownGroup(t, err, "storetest.nope", devices)
		for _, n := range []int{0, -1} {
			if c, err := e.gs.ClaimNext(e.ctx, devices, "w1", n); err == nil {
				t.Fatalf("claim with batch size %d: %v, no error", n, c)
			}
		}
		if c, err := e.gs.ClaimNext(e.ctx, devices, "", 10); err == nil {
			t.Fatalf("claim with no worker id: %v, no error", c)
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})
}

func (s suite) testAck(t *testing.T) {
	t.Run("only the claimant acks or releases", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		c := e.claim(devices, "w1", 1)
		other := *c
		other.WorkerID = "w2"
		notClaimant(t, e.gs.Ack(e.ctx, &other, 1), "ack as another worker")
		notClaimant(t, e.gs.Release(e.ctx, &other), "release as another worker")
		bogus := *c
		bogus.OffsetID += 1000
		notClaimant(t, e.gs.Ack(e.ctx, &bogus, 1), "ack of an offset that does not exist")
		unknown := *c
		unknown.Group = "storetest.nope"
		unknownGroup(t, e.gs.Ack(e.ctx, &unknown, 1), "storetest.nope", devices)
		if err := e.gs.Ack(e.ctx, nil, 1); err == nil {
			t.Fatal("ack of a nil claim succeeded")
		}
		e.lastAt(devices, part("device_id", "d1"), 0)
		e.ack(c, 1)
		notClaimant(t, e.gs.Ack(e.ctx, c, 1), "a second ack")
		notClaimant(t, e.gs.Release(e.ctx, c), "release after the ack")
		e.lastAt(devices, part("device_id", "d1"), 1)
		c = e.claim(devices, "w2", 1)
		e.release(c)
		notClaimant(t, e.gs.Release(e.ctx, c), "a second release")
		notClaimant(t, e.gs.Ack(e.ctx, c, 2), "ack after the release")
		e.lastAt(devices, part("device_id", "d1"), 1)
	})

	t.Run("release frees the partition without moving its offset", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		c := e.claim(devices, "w1", 10)
		e.noClaim(devices, "w2")
		e.release(c)
		e.lastAt(devices, part("device_id", "d1"), 0)
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d1"), false, 1, 2)
		if got := e.info(devices); got.HighestPosition != 0 {
			t.Fatalf("highest position %d after a release, want 0", got.HighestPosition)
		}
	})

	t.Run("acks never move an offset back; the highest position is the furthest ack", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		e.ack(e.claim(devices, "w1", 10), 3)
		e.ack(e.claim(devices, "w1", 10), 2)
		if got := e.info(devices); got.HighestPosition != 3 {
			t.Fatalf("highest position %d, want 3", got.HighestPosition)
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "d"}) // 4
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, part("device_id", "d1"), false, 4)
		e.ack(c, 1)
		e.lastAt(devices, part("device_id", "d1"), 3)
		if got := e.info(devices); got.HighestPosition != 3 {
			t.Fatalf("highest position %d, want 3", got.HighestPosition)
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 4)
	})

	t.Run("acking part of a batch leaves the rest to any worker", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d1", Name: "c"})
		c := e.claim(devices, "w1", 10)
		e.noClaim(devices, "w2") // the group latches while w1 holds the partition
		e.ack(c, 1)
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d1"), false, 2, 3)
	})

	t.Run("an Update appends a batch's events and acks it together", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		c := e.claim(devices, "w1", 10)
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if _, err := tx.Append(msgs(deviceBound{"d1", "a1"}), driver.AppendOptions{Guard: &c.Guard}); err != nil {
				return err
			}
			return gtx.Ack(c, c.Last())
		})
		if err != nil {
			t.Fatal(err)
		}
		e.lastAt(devices, part("device_id", "d1"), 1)
		e.expectClaim(e.claim(bindings, "w1", 10), part("device_id", "d1"), false, 3)
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d2"), false, 2)
	})
	t.Run("a lost claim's ack fails its whole Update, which writes nothing", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		held := e.claim(devices, "w1", 10)
		lost := e.claim(devices, "w1", 10)
		e.release(lost) // as the reaper would
		e.expectClaim(held, part("device_id", "d1"), false, 1)
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if err := gtx.Delete(held.Last()); err != nil {
				return err
			}
			if err := gtx.Ack(held, held.Last()); err != nil {
				return err
			}
			return gtx.Ack(lost, lost.Last())
		})
		notClaimant(t, err, "an Update acking a claim released meanwhile")
		// Nothing was written: the delete and the held claim's ack were
		// rolled back with it, and the held claim is still held.
		e.lastAt(devices, part("device_id", "d1"), 0)
		if got := e.read([]core.Condition{{Type: typeDeviceRegistered, Attrs: map[string]string{"device_id": "d1"}}}, driver.ReadOptions{}); len(got.Messages) != 1 {
			t.Fatalf("read d1 after the failed Update: %v; want its message, not deleted", got.Messages)
		}
		if got := e.info(devices); got.HighestPosition != 0 {
			t.Fatalf("highest position %d after the failed Update, want 0", got.HighestPosition)
		}
		e.ack(held, held.Last())
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d2"), false, 2)
	})
}

func (s suite) testAdvance(t *testing.T) {
	// handle appends a command and advances the offset past it in one
	// transaction, as shell.Handle does.
	handle := func(e *genv, group string, partition core.Partition, cmd any) (int64, bool) {
		e.t.Helper()
		var pos int64
		var moved bool
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			res, err := tx.Append(msgs(cmd), driver.AppendOptions{})
			if err != nil {
				return err
			}
			pos = res.Last
			moved, err = gtx.AdvanceOffset(group, partition, pos)
			return err
		})
		if err != nil {
			e.t.Fatalf("handle %+v: %v", cmd, err)
		}
		return pos, moved
	}

	t.Run("advancing skips a command handled synchronously", func(t *testing.T) {
		e := s.genv(t, devices)
		d1 := part("device_id", "d1")
		if pos, moved := handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "a"}); !moved || pos != 1 {
			t.Fatalf("advance to %d: moved %v, want true", pos, moved)
		}
		e.noClaim(devices, "w1")
		e.lastAt(devices, d1, 1)
		if got := e.info(devices); got.HighestPosition != 1 {
			t.Fatalf("highest position %d, want 1", got.HighestPosition)
		}
		// Other partitions, and types the group does not handle, do not
		// hold an advance back.
		e.append(deviceRegistered{DeviceID: "d2", Name: "b"}, deviceBound{"d1", "a1"}) // 2, 3
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, part("device_id", "d2"), false, 2)
		if pos, moved := handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "c"}); !moved || pos != 4 {
			t.Fatalf("advance to %d: moved %v, want true", pos, moved)
		}
		e.lastAt(devices, d1, 4)
		e.ack(c, 2)
		e.noClaim(devices, "w1")
	})

	t.Run("an offset never moves back, and an advance to where it is succeeds", func(t *testing.T) {
		e := s.genv(t, devices)
		d1 := part("device_id", "d1")
		handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "a"})
		handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "b"})
		for _, pos := range []int64{2, 1} {
			var moved bool
			err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
				var err error
				moved, err = gtx.AdvanceOffset(devices, d1, pos)
				return err
			})
			if err != nil || !moved {
				t.Fatalf("advance back to %d: %v, %v; want true (the offset covers it)", pos, moved, err)
			}
			e.lastAt(devices, d1, 2)
		}
	})

	t.Run("an advance absorbs only the pending work of the message it passes", func(t *testing.T) {
		e := s.genv(t, devices)
		d1, d2 := part("device_id", "d1"), part("device_id", "d2")
		// Two messages of one transaction wake d1; the advance past the
		// first leaves the second pending.
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if _, err := tx.Append(msgs(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}), driver.AppendOptions{}); err != nil {
				return err
			}
			if moved, err := gtx.AdvanceOffset(devices, d1, 1); err != nil || !moved {
				return fmt.Errorf("advance: %v, %w", moved, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 2)
		e.ack(c, 2)
		e.noClaim(devices, "w1")
		// A message of another transaction stays pending: the advance past
		// a later command of the partition is held back by it.
		e.append(deviceRegistered{DeviceID: "d1", Name: "c"}) // 3
		if pos, moved := handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "d"}); moved || pos != 4 {
			t.Fatalf("advance to %d over another transaction's message: moved %v, want false", pos, moved)
		}
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 3, 4)
		e.ack(c, 4)
		// An advance past an earlier position leaves the message pending.
		err = e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if _, err := tx.Append(msgs(deviceRegistered{DeviceID: "d2", Name: "e"}), driver.AppendOptions{}); err != nil { // 5
				return err
			}
			if moved, err := gtx.AdvanceOffset(devices, d2, 4); err != nil || !moved {
				return fmt.Errorf("advance: %v, %w", moved, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		e.lastAt(devices, d2, 4)
		c = e.claim(devices, "w1", 10)
		e.expectClaim(c, d2, false, 5)
		e.ack(c, 5)
		// A claim, or a delete, later in the transaction of the append sees
		// the pending work.
		err = e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if _, err := tx.Append(msgs(deviceRegistered{DeviceID: "d1", Name: "f"}, deviceRegistered{DeviceID: "d2", Name: "g"}), driver.AppendOptions{}); err != nil { // 6, 7
				return err
			}
			c, err := gtx.ClaimNext(devices, "w1", 10)
			if err != nil {
				return err
			}
			if c == nil {
				return errors.New("nothing to claim in the transaction of the append")
			}
			e.expectClaim(c, d1, false, 6)
			if err := gtx.Ack(c, 6); err != nil {
				return err
			}
			return gtx.Delete(7)
		})
		if err != nil {
			t.Fatal(err)
		}
		e.noClaim(devices, "w1")
		e.lastAt(devices, d1, 6)
		if got := e.info(devices); got.HighestPosition != 6 {
			t.Fatalf("highest position %d, want 6", got.HighestPosition)
		}
		// So does ClaimMany.
		err = e.update(func(tx driver.Tx, _ driver.GroupTx) error {
			if _, err := tx.Append(msgs(deviceRegistered{DeviceID: "d2", Name: "h"}), driver.AppendOptions{}); err != nil { // 8
				return err
			}
			cs, err := manyTx(e.t, tx).ClaimMany(devices, "w1", 10, 2)
			if err != nil {
				return err
			}
			if len(cs) != 1 {
				return fmt.Errorf("ClaimMany in the transaction of the append: %d claims, want 1", len(cs))
			}
			e.expectClaim(cs[0], d2, false, 8)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the highest position survives resets and released offsets", func(t *testing.T) {
		e := s.genv(t, devices)
		d1, d9 := part("device_id", "d1"), part("device_id", "d9")
		if _, moved := handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "a"}); !moved { // 1
			t.Fatal("the command's advance did not move")
		}
		// d9: an offset no message created, released once drained.
		e.append(deviceRegistered{DeviceID: "d2", Name: "b"}) // 2
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			moved, err := gtx.AdvanceOffset(devices, d9, 2)
			if err == nil && !moved {
				err = errors.New("the offset did not move")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.info(devices); got.HighestPosition != 2 || got.Partitions != 3 {
			t.Fatalf("after the advances: %+v, want highest 2 and 3 partitions", got)
		}
		if n, err := e.gs.ReleaseDrainedOffsets(e.ctx); err != nil || n != 1 {
			t.Fatalf("release drained offsets: %d, %v; want 1", n, err)
		}
		if got := e.info(devices); got.HighestPosition != 2 || got.Partitions != 2 {
			t.Fatalf("after releasing the drained offset: %+v, want highest 2 and 2 partitions", got)
		}
		if err := e.gs.StopGroup(e.ctx, devices, "replay"); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.ResetGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		if got := e.info(devices); got.HighestPosition != 2 || got.NewestProcessed != 0 {
			t.Fatalf("after the reset: %+v, want highest 2, nothing processed", got)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, true, 1)
	})

	t.Run("an advance does not skip an unprocessed message", func(t *testing.T) {
		e := s.genv(t, devices, enrolments)
		d1 := part("device_id", "d1")
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}) // 1, not processed yet
		if pos, moved := handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "b"}); moved || pos != 2 {
			t.Fatalf("advance to %d over an unprocessed message: moved %v, want false", pos, moved)
		}
		e.lastAt(devices, d1, 0)
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, d1, false, 1, 2)
		// Not while a worker holds it either.
		if pos, moved := handle(e, devices, d1, deviceRegistered{DeviceID: "d1", Name: "c"}); moved || pos != 3 {
			t.Fatalf("advance to %d over a claimed message: moved %v, want false", pos, moved)
		}
		e.ack(c, 2)
		e.expectClaim(e.claim(devices, "w1", 10), d1, false, 3)

		// Conditional AND: a message carrying some of the partition's keys
		// holds it back too.
		aj := part("course_name", "Algebra", "user_id", "joe")
		e.append(courseClosed{CourseName: "Algebra"}) // 4
		if pos, moved := handle(e, enrolments, aj, userJoinedCourse{CourseName: "Algebra", UserID: "joe"}); moved || pos != 5 {
			t.Fatalf("advance to %d over a courseClosed of the partition: moved %v, want false", pos, moved)
		}
		e.expectClaim(e.claim(enrolments, "w1", 10), aj, false, 4, 5)
	})

	t.Run("bad input", func(t *testing.T) {
		e := s.genv(t, devices, enrolments, jobs)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		advance := func(group string, p map[string]string, pos int64) error {
			return e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
				_, err := gtx.AdvanceOffset(group, p, pos)
				return err
			})
		}
		unknownGroup(t, advance("storetest.nope", part("device_id", "d1"), 1), "storetest.nope", devices, enrolments, jobs)
		for _, p := range []map[string]string{
			part("course_name", "Algebra"),
			part("course_name", "Algebra", "user_id", "joe", "device_id", "d1"),
			part("course_name", "Algebra", "device_id", "d1"),
			{},
		} {
			if err := advance(enrolments, p, 1); err == nil {
				t.Fatalf("advance %s over partition %v: no error", enrolments, p)
			}
		}
		if err := advance(jobs, part(core.IDKey, "not a uuid"), 1); err == nil {
			t.Fatal("advance of a queue to a partition that is not a message id: no error")
		}
		if err := advance(devices, part("device_id", "d1"), 2); err == nil {
			t.Fatal("advance past the newest position: no error")
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})
}

func (s suite) testLatch(t *testing.T) {
	t.Run("an idle group wakes on an append", func(t *testing.T) {
		e := s.genv(t, devices)
		for range 3 {
			e.noClaim(devices, "w1")
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})

	t.Run("a release wakes a group that latched while the partition was held", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		c := e.claim(devices, "w1", 10)
		e.noClaim(devices, "w2")
		e.noClaim(devices, "w2")
		e.release(c)
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d1"), false, 1, 2)
	})

	t.Run("an append in a transaction wakes a group latched meanwhile", func(t *testing.T) {
		e := s.genv(t, devices)
		e.noClaim(devices, "w1")
		err := e.update(func(tx driver.Tx, _ driver.GroupTx) error {
			_, err := tx.Append(msgs(deviceRegistered{DeviceID: "d1", Name: "a"}), driver.AppendOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})

	t.Run("a promoted message wakes a latched group", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(core.NewMessage(deviceRegistered{DeviceID: "d1", Name: "a"}).At(epoch.Add(time.Minute)))
		e.noClaim(devices, "w1")
		if n, err := e.store.PromoteScheduled(e.ctx, epoch.Add(time.Minute)); err != nil || n != 1 {
			t.Fatalf("promote: %d, %v", n, err)
		}
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})

	t.Run("no partition is stranded by a burst of commands that only emit events", func(t *testing.T) {
		// The scenario of the changes file: workers poll while commands
		// are appended; processing a command emits an event the group does
		// not handle, so no new handled message ever comes after the last
		// command. Every command must still be processed, once.
		e := s.genv(t, devices)
		processed := map[uuid.UUID]int{}
		held := map[string]*driver.ClaimedPartition{}
		step := func(w string) {
			if c := held[w]; c != nil {
				err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
					for _, m := range c.Messages {
						processed[m.ID]++
						if _, err := tx.Append(msgs(deviceBound{m.Payload.(deviceRegistered).DeviceID, "a"}), driver.AppendOptions{}); err != nil {
							return err
						}
					}
					return gtx.Ack(c, c.Last())
				})
				if err != nil {
					t.Fatalf("%s processes %v: %v", w, c.Partition, err)
				}
				held[w] = nil
				return
			}
			c, err := e.gs.ClaimNext(e.ctx, devices, w, 2)
			if err != nil {
				t.Fatal(err)
			}
			held[w] = c
		}
		commands := 0
		for round := range 12 {
			for i := range 1 + round%3 {
				e.append(deviceRegistered{DeviceID: fmt.Sprint("d", (round+i)%4), Name: fmt.Sprint("r", round)})
				commands++
			}
			step("w1")
			step("w2")
			step("w3")
		}
		for range 1000 {
			step("w1")
			step("w2")
			step("w3")
		}
		for w, c := range held {
			if c != nil {
				t.Fatalf("%s still holds %v after draining", w, c.Partition)
			}
		}
		if len(processed) != commands {
			t.Fatalf("%d of %d commands processed: partitions were stranded", len(processed), commands)
		}
		for id, n := range processed {
			if n != 1 {
				t.Fatalf("command %s processed %d times", id, n)
			}
		}
		e.noClaim(devices, "w1")
	})
}
