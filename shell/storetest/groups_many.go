package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// claimMany claims up to n partitions of group for worker with
// driver.ClaimManyTx in a transaction of its own, batches of up to batch
// messages, and checks each claim's group, worker and size.
func (e *genv) claimMany(group, worker string, batch, n int) []*driver.ClaimedPartition {
	e.t.Helper()
	var out []*driver.ClaimedPartition
	err := e.update(func(tx driver.Tx, _ driver.GroupTx) error {
		var err error
		out, err = manyTx(e.t, tx).ClaimMany(group, worker, batch, n)
		return err
	})
	if err != nil {
		e.t.Fatalf("claim %d partitions of %s as %s: %v", n, group, worker, err)
	}
	e.checkMany(out, group, worker, batch, n)
	return out
}

// checkMany checks claims ClaimMany returned: at most n, distinct
// partitions, each of group for worker with 1 to batch messages.
func (e *genv) checkMany(out []*driver.ClaimedPartition, group, worker string, batch, n int) {
	e.t.Helper()
	if len(out) > n {
		e.t.Fatalf("claim %d partitions of %s: %d claims", n, group, len(out))
	}
	seen := map[int64]bool{}
	for _, c := range out {
		if c == nil {
			e.t.Fatalf("claim %d partitions of %s: a nil claim among %d", n, group, len(out))
		}
		if c.Group != group || c.WorkerID != worker {
			e.t.Fatalf("claim %s as %s: the claim names %s and %s", group, worker, c.Group, c.WorkerID)
		}
		if len(c.Messages) == 0 || len(c.Messages) > batch {
			e.t.Fatalf("claim %s as %s: %d messages in %v, want 1 to %d", group, worker, len(c.Messages), c.Partition, batch)
		}
		if seen[c.OffsetID] {
			e.t.Fatalf("claim %d partitions of %s: offset %d (%v) claimed twice", n, group, c.OffsetID, c.Partition)
		}
		seen[c.OffsetID] = true
	}
}

// manyTx is tx as a driver.ClaimManyTx (every store of the suite has it).
func manyTx(t tb, tx driver.Tx) driver.ClaimManyTx {
	t.Helper()
	m, ok := tx.(driver.ClaimManyTx)
	if !ok {
		t.Fatalf("the transaction %T is not a driver.ClaimManyTx", tx)
	}
	return m
}

// noClaims fails the test unless ClaimMany claims nothing of group.
func (e *genv) noClaims(group, worker string) {
	e.t.Helper()
	if got := e.claimMany(group, worker, 10, 10); len(got) != 0 {
		e.t.Fatalf("claim many of %s as %s: %d claims (the first %v), want none", group, worker, len(got), got[0].Partition)
	}
}

// testClaimMany: driver.ClaimManyTx, several partitions claimed in one
// step, held to what successive ClaimNext calls would do.
func (s suite) testClaimMany(t *testing.T) {
	d := func(id string) map[string]string { return part("device_id", id) }

	t.Run("claims distinct partitions in ClaimNext's order, each up to the batch size", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"}, deviceRegistered{DeviceID: "d1", Name: "d"})
		e.ack(e.claim(devices, "w1", 1), 1) // d1 is ahead now, at 1
		e.append(deviceRegistered{DeviceID: "d4", Name: "e"}, deviceRegistered{DeviceID: "d1", Name: "f"}, deviceRegistered{DeviceID: "d2", Name: "g"})
		first := e.claimMany(devices, "w1", 1, 3)
		if len(first) != 3 {
			t.Fatalf("%d claims, want 3", len(first))
		}
		// Furthest behind first (all at 0: the oldest offset first).
		e.expectClaim(first[0], d("d2"), false, 2)
		e.expectClaim(first[1], d("d3"), false, 3)
		e.expectClaim(first[2], d("d4"), false, 5)
		got := e.claimMany(devices, "w1", 10, 10)
		if len(got) != 1 {
			t.Fatalf("%d claims of the rest, want d1's alone", len(got))
		}
		e.expectClaim(got[0], d("d1"), false, 4, 6)
		e.noClaims(devices, "w1")
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			for _, c := range append(first, got...) {
				if err := gtx.Ack(c, c.Last()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// d2's claim was of one of its two messages: it comes back with
		// the other.
		got = e.claimMany(devices, "w2", 10, 3)
		if len(got) != 1 {
			t.Fatalf("%d claims after the acks, want d2's", len(got))
		}
		e.expectClaim(got[0], d("d2"), false, 7)
		e.ack(got[0], 7)
		e.noClaims(devices, "w2")
	})

	t.Run("never claims a partition another worker holds", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"}, deviceRegistered{DeviceID: "d4", Name: "d"})
		held := e.claim(devices, "w1", 10)
		e.expectClaim(held, d("d1"), false, 1)
		var first *driver.ClaimedPartition
		var rest []*driver.ClaimedPartition
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			var err error
			if first, err = gtx.ClaimNext(devices, "w2", 10); err != nil {
				return err
			}
			rest, err = manyTx(t, tx).ClaimMany(devices, "w2", 10, 10)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		e.expectClaim(first, d("d2"), false, 2)
		e.checkMany(rest, devices, "w2", 10, 10)
		if len(rest) != 2 {
			t.Fatalf("%d claims after d2's in its transaction, want d3 and d4", len(rest))
		}
		e.expectClaim(rest[0], d("d3"), false, 3)
		e.expectClaim(rest[1], d("d4"), false, 4)
		e.noClaims(devices, "w3")
		// The holder acks; the others' claims are theirs.
		e.ack(held, 1)
		for _, c := range append(rest, first) {
			notClaimant(t, e.gs.Ack(e.ctx, &driver.ClaimedPartition{Group: c.Group, WorkerID: "w1", OffsetID: c.OffsetID, Partition: c.Partition, Messages: c.Messages}, c.Last()), "w1 acking w2's claim")
			e.ack(c, c.Last())
		}
		e.noClaims(devices, "w1")
	})

	t.Run("an idle group answers with no claims until an append or a release", func(t *testing.T) {
		e := s.genv(t, devices)
		for range 3 {
			e.noClaims(devices, "w1")
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		got := e.claimMany(devices, "w1", 10, 5)
		if len(got) != 1 {
			t.Fatalf("%d claims, want d1's", len(got))
		}
		e.expectClaim(got[0], d("d1"), false, 1, 2)
		// Scans that find nothing latch the group while d1 is held; the
		// release wakes it.
		e.noClaims(devices, "w2")
		e.noClaims(devices, "w2")
		e.noClaim(devices, "w2")
		e.release(got[0])
		got = e.claimMany(devices, "w2", 10, 5)
		if len(got) != 1 {
			t.Fatalf("%d claims after the release, want d1's", len(got))
		}
		e.expectClaim(got[0], d("d1"), false, 1, 2)
		e.ack(got[0], 2)
		e.noClaims(devices, "w2")
		e.noClaim(devices, "w2")
	})

	t.Run("the claims roll back with the transaction", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		offsets := e.offsets(devices)
		var got []*driver.ClaimedPartition
		err := e.update(func(tx driver.Tx, _ driver.GroupTx) error {
			var err error
			if got, err = manyTx(t, tx).ClaimMany(devices, "w1", 10, 2); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("update: %v, want the rollback", err)
		}
		if len(got) != 2 {
			t.Fatalf("%d claims in the rolled back transaction, want 2", len(got))
		}
		if after := e.offsets(devices); !sameOffsets(after, offsets) {
			t.Fatalf("offsets after the rollback %+v, want %+v", after, offsets)
		}
		for _, c := range got {
			notClaimant(t, e.gs.Ack(e.ctx, c, c.Last()), "acking a claim rolled back")
		}
		again := e.claimMany(devices, "w2", 10, 10)
		if len(again) != 3 {
			t.Fatalf("%d claims after the rollback, want all 3 partitions", len(again))
		}
		e.expectClaim(again[0], d("d1"), false, 1)
		e.expectClaim(again[1], d("d2"), false, 2)
		e.expectClaim(again[2], d("d3"), false, 3)
	})

	t.Run("a stopped group, and a retrying one before its time, give no claims", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		if err := e.gs.StopGroup(e.ctx, devices, "maintenance"); err != nil {
			t.Fatal(err)
		}
		e.noClaims(devices, "w1")
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		got := e.claimMany(devices, "w1", 10, 10)
		if len(got) != 2 {
			t.Fatalf("%d claims once started, want 2", len(got))
		}
		for _, c := range got {
			e.release(c)
		}
		at := e.clock.Now().Add(time.Minute)
		if err := e.gs.RetryGroup(e.ctx, devices, at, driver.Failure{RetryCount: 1, OffsetID: got[0].OffsetID, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		e.noClaims(devices, "w1")
		e.clock.Advance(59 * time.Second)
		e.noClaims(devices, "w1")
		e.clock.Advance(time.Second)
		got = e.claimMany(devices, "w1", 10, 10)
		if len(got) != 2 {
			t.Fatalf("%d claims once the retry time came, want 2", len(got))
		}
		e.expectClaim(got[0], d("d1"), false, 1)
		e.expectClaim(got[1], d("d2"), false, 2)
		if err := e.gs.FailGroup(e.ctx, devices, driver.Failure{OffsetID: got[0].OffsetID, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		for _, c := range got {
			e.release(c)
		}
		e.noClaims(devices, "w1")
	})

	t.Run("parked partitions are skipped", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, d("d1"), false, 1)
		f := driver.Failure{OffsetID: c.OffsetID, Partition: core.Partition(c.Partition).String(), MessageType: typeDeviceRegistered, MessageID: c.Messages[0].ID.String(), Position: 1, ErrorType: "*errors.errorString", Error: "poison"}
		if _, err := e.gs.ChangeGroup(e.ctx, devices, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdPark, Failure: f}, nil
		}); err != nil {
			t.Fatal(err)
		}
		e.release(c)
		e.append(deviceRegistered{DeviceID: "d1", Name: "d"})
		got := e.claimMany(devices, "w1", 10, 10)
		if len(got) != 2 {
			t.Fatalf("%d claims, want d2's and d3's (d1 is parked)", len(got))
		}
		e.expectClaim(got[0], d("d2"), false, 2)
		e.expectClaim(got[1], d("d3"), false, 3)
		e.noClaims(devices, "w2")
	})

	t.Run("a delete-on-ack queue: many jobs claimed, acknowledged and deleted in one transaction", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"a1", 1}, deposit{"a2", 2}, deposit{"a3", 3}, deposit{"a4", 4}, deposit{"a5", 5})
		var got []*driver.ClaimedPartition
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			var err error
			if got, err = manyTx(t, tx).ClaimMany(jobs, "w1", 10, 4); err != nil {
				return err
			}
			for _, c := range got {
				if err := gtx.Delete(c.Last()); err != nil {
					return err
				}
				if err := gtx.Ack(c, c.Last()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		e.checkMany(got, jobs, "w1", 10, 4)
		for i, c := range got {
			e.expectPositions("job", c.Messages, int64(i+1))
		}
		last := e.claimMany(jobs, "w2", 10, 4)
		if len(last) != 1 {
			t.Fatalf("%d claims of the last job, want 1", len(last))
		}
		e.expectPositions("the last job", last[0].Messages, 5)
		e.noClaims(jobs, "w3")
		if log := e.log(); len(log) != 1 || log[0].Position != 5 {
			t.Fatalf("the log after deleting four jobs: %s, want the fifth alone", describe(log))
		}
	})

	// A queue (a group partitioned by message id, one job per
	// partition) is claimed by a statement of its own in some stores:
	// the same contract, job by job.
	t.Run("a queue: the oldest jobs first, held and deleted ones skipped, other types never", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"a1", 1}, deposit{"a2", 2}, deposit{"a3", 3}, deviceRegistered{DeviceID: "d1", Name: "x"}, deposit{"a4", 4}, deposit{"a5", 5})
		held := e.claim(jobs, "w1", 10)
		e.expectPositions("the held job", held.Messages, 1)
		// Job 3 is deleted before a worker claims it: its partition has
		// nothing left to claim.
		if err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error { return gtx.Delete(3) }); err != nil {
			t.Fatal(err)
		}
		got := e.claimMany(jobs, "w2", 10, 10)
		if len(got) != 3 {
			t.Fatalf("%d claims of the queue, want jobs 2, 5 and 6 (1 is held, 3 deleted, 4 not a job)", len(got))
		}
		for i, want := range []int64{2, 5, 6} {
			e.expectPositions("a queued job", got[i].Messages, want)
		}
		e.noClaims(jobs, "w3")
		e.noClaim(jobs, "w3")
		// Released, a job comes back first: it is the oldest.
		e.release(got[1])
		again := e.claimMany(jobs, "w3", 10, 10)
		if len(again) != 1 {
			t.Fatalf("%d claims after releasing job 5, want it alone", len(again))
		}
		e.expectPositions("the released job", again[0].Messages, 5)
		for _, c := range []*driver.ClaimedPartition{held, got[0], again[0], got[2]} {
			e.ack(c, c.Last())
		}
		e.noClaims(jobs, "w1")
		e.append(deposit{"a6", 6})
		last := e.claimMany(jobs, "w1", 10, 10)
		if len(last) != 1 {
			t.Fatalf("%d claims of the job appended after the acks, want 1", len(last))
		}
		e.expectPositions("the new job", last[0].Messages, 7)
	})

	t.Run("a queue: rolled back, stopped, retrying and parked jobs give no claims", func(t *testing.T) {
		e := s.genv(t, jobs)
		e.append(deposit{"a1", 1}, deposit{"a2", 2}, deposit{"a3", 3})
		offsets := e.offsets(jobs)
		err := e.update(func(tx driver.Tx, _ driver.GroupTx) error {
			got, err := manyTx(t, tx).ClaimMany(jobs, "w1", 10, 2)
			if err == nil && len(got) != 2 {
				t.Errorf("%d claims in the transaction rolled back, want 2", len(got))
			}
			if err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("update: %v, want the rollback", err)
		}
		if after := e.offsets(jobs); !sameOffsets(after, offsets) {
			t.Fatalf("offsets after the rollback %+v, want %+v", after, offsets)
		}
		if err := e.gs.StopGroup(e.ctx, jobs, "maintenance"); err != nil {
			t.Fatal(err)
		}
		e.noClaims(jobs, "w1")
		if err := e.gs.StartGroup(e.ctx, jobs); err != nil {
			t.Fatal(err)
		}
		got := e.claimMany(jobs, "w1", 10, 10)
		if len(got) != 3 {
			t.Fatalf("%d claims once started, want the 3 jobs", len(got))
		}
		for _, c := range got {
			e.release(c)
		}
		at := e.clock.Now().Add(time.Minute)
		if err := e.gs.RetryGroup(e.ctx, jobs, at, driver.Failure{RetryCount: 1, OffsetID: got[0].OffsetID, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		e.noClaims(jobs, "w1")
		e.clock.Advance(time.Minute)
		first := e.claim(jobs, "w1", 10)
		e.expectPositions("the first job once the retry time came", first.Messages, 1)
		f := driver.Failure{OffsetID: first.OffsetID, Partition: core.Partition(first.Partition).String(), MessageType: typeDeposit, MessageID: first.Messages[0].ID.String(), Position: 1, ErrorType: "*errors.errorString", Error: "poison"}
		if _, err := e.gs.ChangeGroup(e.ctx, jobs, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdPark, Failure: f}, nil
		}); err != nil {
			t.Fatal(err)
		}
		e.release(first)
		rest := e.claimMany(jobs, "w2", 10, 10)
		if len(rest) != 2 {
			t.Fatalf("%d claims with job 1 parked, want jobs 2 and 3", len(rest))
		}
		e.expectPositions("a job beside the parked one", rest[0].Messages, 2)
		e.expectPositions("a job beside the parked one", rest[1].Messages, 3)
	})

	t.Run("bad arguments are refused and claim nothing", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		for _, c := range []struct {
			worker       string
			batch, parts int
		}{{"", 10, 10}, {"w1", 0, 10}, {"w1", 10, 0}} {
			err := e.update(func(tx driver.Tx, _ driver.GroupTx) error {
				_, err := manyTx(t, tx).ClaimMany(devices, c.worker, c.batch, c.parts)
				return err
			})
			if err == nil {
				t.Fatalf("ClaimMany(%q, batch %d, partitions %d) accepted", c.worker, c.batch, c.parts)
			}
		}
		err := e.update(func(tx driver.Tx, _ driver.GroupTx) error {
			_, err := manyTx(t, tx).ClaimMany("storetest.nope", "w1", 10, 10)
			return err
		})
		unknownGroup(t, err, "storetest.nope", devices)
		e.expectClaim(e.claim(devices, "w1", 10), d("d1"), false, 1)
	})

	t.Run("ClaimManyUpdate, where a store has it: the claims and fn's writes commit or roll back together", func(t *testing.T) {
		e := s.genv(t, devices)
		m, ok := e.gs.(driver.ClaimManyUpdater)
		if !ok {
			t.Skip("this store is no driver.ClaimManyUpdater: a worker claims with ClaimUpdate, then ClaimMany")
		}
		calls := 0
		did, err := m.ClaimManyUpdate(e.ctx, devices, "w1", 10, 3, func(driver.Tx, []*driver.ClaimedPartition) error { calls++; return nil })
		if did || err != nil || calls != 0 {
			t.Fatalf("an idle group: (%v, %v) after %d calls of fn, want (false, nil) and none", did, err, calls)
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"}, deviceRegistered{DeviceID: "d4", Name: "d"})
		// fn fails: the claims roll back with what it appended.
		boom := errors.New("boom")
		did, err = m.ClaimManyUpdate(e.ctx, devices, "w1", 10, 3, func(tx driver.Tx, claims []*driver.ClaimedPartition) error {
			e.checkMany(claims, devices, "w1", 10, 3)
			if len(claims) != 3 {
				t.Errorf("%d claims, want 3", len(claims))
			}
			if _, err := tx.Append(core.Messages(deviceRegistered{DeviceID: "d9", Name: "rolled back"}), driver.AppendOptions{}); err != nil {
				return err
			}
			return boom
		})
		if !did || !errors.Is(err, boom) {
			t.Fatalf("fn failing: (%v, %v), want (true, boom)", did, err)
		}
		if page := e.readAll(driver.ReadAllOptions{}); len(page.Messages) != 4 {
			t.Fatalf("the log holds %d messages after fn failed, want the 4 before it", len(page.Messages))
		}
		// fn succeeds: the claims stay held, in ClaimNext's order.
		var held []*driver.ClaimedPartition
		did, err = m.ClaimManyUpdate(e.ctx, devices, "w1", 10, 3, func(tx driver.Tx, claims []*driver.ClaimedPartition) error {
			held = claims
			return nil
		})
		if !did || err != nil || len(held) != 3 {
			t.Fatalf("fn succeeding: (%v, %v) with %d claims, want (true, nil) with 3", did, err, len(held))
		}
		for i, id := range []string{"d1", "d2", "d3"} {
			e.expectClaim(held[i], d(id), false, int64(i+1))
		}
		got := e.claimMany(devices, "w2", 10, 10)
		if len(got) != 1 {
			t.Fatalf("another worker claimed %d partitions beside the held ones, want d4's alone", len(got))
		}
		e.expectClaim(got[0], d("d4"), false, 4)
		for _, bad := range []struct {
			worker         string
			batch, howMany int
		}{{"", 10, 3}, {"w1", 0, 3}, {"w1", 10, 0}} {
			did, err := m.ClaimManyUpdate(e.ctx, devices, bad.worker, bad.batch, bad.howMany, func(driver.Tx, []*driver.ClaimedPartition) error { calls++; return nil })
			if did || err == nil || calls != 0 {
				t.Fatalf("worker %q, batch %d, %d partitions: (%v, %v) after %d calls of fn, want a refusal", bad.worker, bad.batch, bad.howMany, did, err, calls)
			}
		}
	})
}
