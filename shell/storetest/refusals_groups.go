package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testGroupRefusals(t *testing.T) {
	t.Run("an ack past the claim's last message", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"}, deviceRegistered{DeviceID: "d2", Name: "c"})
		c := e.claim(devices, "w1", 1)
		e.expectClaim(c, part("device_id", "d1"), false, 1)
		for _, pos := range []int64{2, 3, 99} {
			err := e.gs.Ack(e.ctx, c, pos)
			if !errors.Is(err, driver.ErrAckBeyondClaim) {
				t.Fatalf("ack at %d of a claim ending at 1: %v, want ErrAckBeyondClaim", pos, err)
			}
			err = e.update(func(_ driver.Tx, gtx driver.GroupTx) error { return gtx.Ack(c, pos) })
			if !errors.Is(err, driver.ErrAckBeyondClaim) {
				t.Fatalf("ack at %d in a transaction: %v, want ErrAckBeyondClaim", pos, err)
			}
		}
		// Nothing changed: the offset is where it was, and still claimed.
		e.lastAt(devices, part("device_id", "d1"), 0)
		if got := e.info(devices); got.HighestPosition != 0 {
			t.Fatalf("highest position %d after refused acks, want 0", got.HighestPosition)
		}
		e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d2"), false, 3)
		e.ack(c, 1)
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 2)
	})

	t.Run("an ack of a claim the worker does not hold", func(t *testing.T) {
		// Whoever holds the partition now, and whatever the position: a
		// worker acking a claim it does not hold gets ErrNotClaimant (its
		// work was superseded), never ErrAckBeyondClaim, and nothing
		// changes; the holder's claim is untouched.
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		lost := e.claim(devices, "w1", 1)
		if got, err := e.gs.ReleaseClaimsOlderThan(e.ctx, e.clock.Now()); err != nil || len(got) != 1 {
			t.Fatalf("release the claim: %+v, %v", got, err)
		}
		holder := e.claim(devices, "w2", 2)
		e.expectClaim(holder, part("device_id", "d1"), false, 1, 2)
		forged := *holder
		forged.WorkerID = "w9"
		empty := *holder
		empty.WorkerID, empty.Messages = "w9", nil
		for _, tc := range []struct {
			what  string
			claim *driver.ClaimedPartition
			at    int64
		}{
			{"a released claim, at its last message", lost, 1},
			{"a released claim, past its last message", lost, 2},
			{"another worker's claim", &forged, 2},
			{"another worker's claim, past its last message", &forged, 3},
			{"a claim with no messages", &empty, 2},
		} {
			notClaimant(t, e.gs.Ack(e.ctx, tc.claim, tc.at), tc.what)
			notClaimant(t, e.update(func(_ driver.Tx, gtx driver.GroupTx) error { return gtx.Ack(tc.claim, tc.at) }), tc.what+", in a transaction")
		}
		e.lastAt(devices, part("device_id", "d1"), 0)
		e.ack(holder, 2)
		e.lastAt(devices, part("device_id", "d1"), 2)
	})

	t.Run("a negative claim ttl", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		c := e.claim(devices, "w1", 10)
		if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, epoch); err != nil {
			t.Fatal(err)
		}
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, epoch, -time.Minute); err == nil {
			t.Fatalf("release stale claims with a negative ttl released %d, want an error", n)
		}
		e.ack(c, 1) // still held
	})

	t.Run("a partition key no handled type indexes", func(t *testing.T) {
		for _, spec := range []driver.GroupSpec{
			{ID: "storetest.typo", PartitionBy: []string{"device"}, Handled: []string{typeDeviceRegistered}},
			{ID: "storetest.typo", PartitionBy: []string{"device_id", "asset"}, Handled: []string{typeDeviceRegistered, typeDeviceBound}},
			{ID: "storetest.typo", PartitionBy: []string{"user_id"}, Handled: []string{typeCourseCreated, typeCourseClosed}},
		} {
			e := s.genv(t)
			err := e.gs.RegisterGroup(e.ctx, spec)
			if err == nil || !strings.Contains(err.Error(), "partition key") {
				t.Fatalf("register %v handling %v: %v, want an error about the partition key", spec.PartitionBy, spec.Handled, err)
			}
			if _, err := e.gs.Group(e.ctx, spec.ID); !errors.Is(err, driver.ErrGroupNotRegistered) {
				t.Fatalf("group after a refused registration: %v, want ErrGroupNotRegistered", err)
			}
		}
		e := &genv{env: s.envWith(t, withNote)}
		e.gs = e.store
		err := e.gs.RegisterGroup(e.ctx, driver.GroupSpec{ID: "storetest.notes", PartitionBy: []string{"body"}, Handled: []string{typeNote}})
		if err == nil || !strings.Contains(err.Error(), "noindex") {
			t.Fatalf("register a group partitioned by a noindex attribute: %v, want an error naming the tag", err)
		}
		e.register(driver.GroupSpec{ID: "storetest.notes", PartitionBy: []string{"topic"}, Handled: []string{typeNote}})
	})
}

// testQueueIndex pins how the types a delete-on-ack queue owns are
// indexed: under their payload, like every other type, as well as by
// message id for the queue, whether they were appended before the queue
// was registered or after. So reads, partition reads and guards on their
// attributes see them (a guard on them is honest).
func (s suite) testQueueIndex(t *testing.T) {
	e := s.genv(t)
	e.append(deposit{"acc1", 1}) // 1, before the queue exists
	e.register(groupSpec(jobs))
	e.append(deposit{"acc1", 2}, deposit{"acc2", 3}) // 2, 3
	acc1 := []core.Condition{cond(typeDeposit, "account", "acc1")}

	res := e.read(acc1, driver.ReadOptions{})
	e.expectPositions("deposits to acc1", res.Messages, 1, 2)
	e.expectPositions("deposits of 3", e.read([]core.Condition{cond(typeDeposit, "amount", "3")}, driver.ReadOptions{}).Messages, 3)
	e.expectPositions("acc1's partition", e.readPartition(part("account", "acc1"), []string{typeDeposit}, driver.ReadOptions{}).Messages, 1, 2)
	page := e.readAll(driver.ReadAllOptions{Conditions: acc1, Order: driver.Descending})
	e.expectPositions("acc1 newest first", page.Messages, 2, 1)

	// A guard on the payload conflicts with a later deposit to acc1 only.
	if _, err := e.appendGuarded(res.Guard, deposit{"acc2", 4}); err != nil { // 4
		t.Fatalf("a deposit to acc2 conflicted with a guard on acc1: %v", err)
	}
	e.append(deposit{"acc1", 5}) // 5
	e.conflict(e.mustFail(e.appendGuarded(res.Guard, deposit{"acc1", 6})), 5)

	// The queue still hands out every job, one per claim, and deletes it.
	seen := map[int64]bool{}
	for range 5 {
		c := e.claim(jobs, "w1", 10)
		if len(c.Messages) != 1 || seen[c.Last()] {
			t.Fatalf("queue claim %s after %v", describe(c.Messages), seen)
		}
		seen[c.Last()] = true
		e.expectClaim(c, part(core.IDKey, c.Messages[0].ID.String()), false, c.Last())
		if err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			if err := gtx.Delete(c.Last()); err != nil {
				return err
			}
			return gtx.Ack(c, c.Last())
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.noClaim(jobs, "w1")
	e.expectPositions("acc1 after the jobs ran", e.read(acc1, driver.ReadOptions{}).Messages)
	if len(seen) != 5 {
		t.Fatalf("jobs claimed %v, want 1 to 5", seen)
	}
	if _, err := e.gs.PruneOrphanKeyPairs(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.append(deposit{"acc1", 7}) // 6
	e.expectPositions("a new deposit to acc1", e.read(acc1, driver.ReadOptions{}).Messages, 6)
}
