package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
)

// testChangeGroup: a worker command decided on the group's state and
// applied in one write transaction (Groups.ChangeGroup), so that two
// workers failing at once each see the other's change.
func (s suite) testChangeGroup(t *testing.T) {
	t.Run("decides on the group's state and applies retry, then fail", func(t *testing.T) {
		e := s.genv(t, devices)
		var seen []driver.GroupState
		fail := func(retries int) func(driver.GroupState) (driver.GroupChange, error) {
			return func(st driver.GroupState) (driver.GroupChange, error) {
				seen = append(seen, st)
				f := driver.Failure{RetryCount: st.Failure.RetryCount + 1, Error: "boom", MessageType: typeDeviceRegistered, Position: 7, Partition: "device_id:d1"}
				if f.RetryCount <= retries {
					return driver.GroupChange{Command: driver.CmdRetry, RetryAt: e.clock.Now().Add(time.Duration(f.RetryCount) * time.Second), Failure: f}, nil
				}
				f.RetryCount = st.Failure.RetryCount
				return driver.GroupChange{Command: driver.CmdFail, Failure: f}, nil
			}
		}
		st, err := e.gs.ChangeGroup(e.ctx, devices, fail(1))
		if err != nil {
			t.Fatal(err)
		}
		want := driver.Failure{RetryCount: 1, Error: "boom", MessageType: typeDeviceRegistered, Position: 7, Partition: "device_id:d1"}
		if st.Status != driver.StatusRetrying || !st.RetryAt.Equal(epoch.Add(time.Second)) || !sameFailure(st.Failure, want) {
			t.Fatalf("after the first change: %+v, want retrying at +1s with %+v", st, want)
		}
		if got := e.info(devices); got.Status != st.Status || !got.RetryAt.Equal(st.RetryAt) || !sameFailure(got.Failure, st.Failure) {
			t.Fatalf("the group %+v, want what ChangeGroup returned %+v", got, st)
		}
		st, err = e.gs.ChangeGroup(e.ctx, devices, fail(1))
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != driver.StatusFailed || !st.RetryAt.IsZero() || !sameFailure(st.Failure, want) {
			t.Fatalf("after the second change: %+v, want failed with %+v", st, want)
		}
		if len(seen) != 2 || seen[0].Status != driver.StatusActive || !seen[0].Failure.IsZero() || seen[1].Status != driver.StatusRetrying || seen[1].Failure.RetryCount != 1 {
			t.Fatalf("decide saw %+v, want active with no failure, then retrying with retry count 1", seen)
		}
		if got := e.info(devices); got.Status != driver.StatusFailed || !sameFailure(got.Failure, want) {
			t.Fatalf("the group %+v, want failed with %+v", got, want)
		}
	})

	t.Run("a refused or zero command changes nothing; an error from decide writes nothing", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		if err := e.gs.StopGroup(e.ctx, devices, "maintenance"); err != nil {
			t.Fatal(err)
		}
		before := e.info(devices)
		retry := func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdRetry, RetryAt: epoch.Add(time.Hour), Failure: driver.Failure{RetryCount: 1, Error: "late"}}, nil
		}
		st, err := e.gs.ChangeGroup(e.ctx, devices, retry)
		if err != nil || st.Status != driver.StatusStopped {
			t.Fatalf("retry of a stopped group: %+v, %v; want it stopped and no error", st, err)
		}
		if got := e.info(devices); !sameInfo(got, before) {
			t.Fatalf("a refused retry changed the group: %+v, was %+v", got, before)
		}
		before = e.info(bindings)
		if _, err := e.gs.ChangeGroup(e.ctx, bindings, func(driver.GroupState) (driver.GroupChange, error) { return driver.GroupChange{}, nil }); err != nil {
			t.Fatalf("a zero command: %v", err)
		}
		boom := errors.New("storetest: decide failed")
		_, err = e.gs.ChangeGroup(e.ctx, bindings, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdFail, Failure: driver.Failure{Error: "x"}}, boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("an error from decide: %v, want it returned", err)
		}
		_, err = e.gs.ChangeGroup(e.ctx, bindings, func(driver.GroupState) (driver.GroupChange, error) {
			return driver.GroupChange{Command: driver.CmdStart}, nil
		})
		if err == nil {
			t.Fatal("ChangeGroup with an operator command: no error, want one (it applies retry or fail)")
		}
		if got := e.info(bindings); !sameInfo(got, before) {
			t.Fatalf("the group changed: %+v, was %+v", got, before)
		}
		called := false
		_, err = e.gs.ChangeGroup(e.ctx, "storetest.nope", func(driver.GroupState) (driver.GroupChange, error) {
			called = true
			return driver.GroupChange{}, nil
		})
		unknownGroup(t, err, "storetest.nope", bindings, devices)
		if called {
			t.Fatal("decide called for an unknown group")
		}
	})

	t.Run("concurrent changes each see the others", func(t *testing.T) {
		e := s.genv(t, devices)
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.gs.ChangeGroup(e.ctx, devices, func(st driver.GroupState) (driver.GroupChange, error) {
					time.Sleep(time.Millisecond) // widen the window a read-modify-write in two transactions would lose
					f := st.Failure
					f.RetryCount++
					f.Error = fmt.Sprintf("failure %d", f.RetryCount)
					return driver.GroupChange{Command: driver.CmdRetry, RetryAt: epoch, Failure: f}, nil
				})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := e.info(devices); got.Status != driver.StatusRetrying || got.Failure.RetryCount != n {
			t.Fatalf("after %d concurrent retries: %s with retry count %d, want retrying with %d", n, got.Status, got.Failure.RetryCount, n)
		}
	})
}

// testClaimAge: claims released by their age whoever holds them
// (ReleaseClaimsOlderThan), heartbeats removed on a clean stop
// (RemoveWorkers), and a claim released inside a transaction
// (GroupTx.Release).
func (s suite) testClaimAge(t *testing.T) {
	t.Run("claims made at or before a cutoff are released, even a live worker's", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"})
		t0 := e.clock.Now()
		if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, t0); err != nil {
			t.Fatal(err)
		}
		leaked := e.claim(devices, "w1", 10)
		now := e.clock.Advance(5 * time.Minute)
		if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, now); err != nil {
			t.Fatal(err)
		}
		fresh := e.claim(devices, "w1", 10)
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, now, time.Minute); err != nil || n != 0 {
			t.Fatalf("release stale claims of a live worker: %d, %v; want 0", n, err)
		}
		got, err := e.gs.ReleaseClaimsOlderThan(e.ctx, now.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("released %+v, want the one claim made 5 min ago", got)
		}
		o := got[0]
		if o.ID != leaked.OffsetID || o.Group != devices || !maps.Equal(o.Partition, leaked.Partition) || !o.Claimed || o.ClaimedBy != "w1" || !o.ClaimedAt.Equal(t0) {
			t.Fatalf("released offset %+v, want offset %d of %s %v claimed by w1 at %v", o, leaked.OffsetID, devices, leaked.Partition, t0)
		}
		notClaimant(t, e.gs.Ack(e.ctx, leaked, leaked.Last()), "the ack of a claim released by its age")
		again := e.claim(devices, "w2", 10)
		e.expectClaim(again, leaked.Partition, false, positionsOf(leaked.Messages)...)
		e.ack(fresh, fresh.Last())
		e.ack(again, again.Last())
		if got, err := e.gs.ReleaseClaimsOlderThan(e.ctx, e.clock.Now()); err != nil || len(got) != 0 {
			t.Fatalf("release claims older than now with none held: %+v, %v", got, err)
		}
	})

	t.Run("a renewed claim is kept by its age; a claim not held is not renewed", func(t *testing.T) {
		e := s.genv(t, devices)
		r, ok := e.gs.(driver.ClaimRenewer)
		if !ok {
			t.Fatalf("%T is not a driver.ClaimRenewer: a running batch's claim would be released at MaxClaimAge", e.gs)
		}
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "d3", Name: "c"})
		running := e.claim(devices, "w1", 10)
		leaked := e.claim(devices, "w1", 10)
		other := e.claim(devices, "w2", 10)
		now := e.clock.Advance(5 * time.Minute)
		// A claim another worker holds, and one whose worker id is wrong,
		// are not renewed.
		forged := *other
		forged.WorkerID = "w1"
		n, err := r.RenewClaims(e.ctx, []*driver.ClaimedPartition{running, &forged}, now)
		if err != nil || n != 1 {
			t.Fatalf("RenewClaims = %d, %v; want 1 (the running claim only)", n, err)
		}
		got, err := e.gs.ReleaseClaimsOlderThan(e.ctx, now.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var released []int64
		for _, o := range got {
			released = append(released, o.ID)
		}
		slices.Sort(released)
		want := []int64{leaked.OffsetID, other.OffsetID}
		slices.Sort(want)
		if !slices.Equal(released, want) {
			t.Fatalf("released offsets %v, want %v (the claims nobody renewed)", released, want)
		}
		e.ack(running, running.Last())
		notClaimant(t, e.gs.Ack(e.ctx, leaked, leaked.Last()), "the ack of a claim released by its age")
		// A released claim is not renewed.
		if n, err := r.RenewClaims(e.ctx, []*driver.ClaimedPartition{leaked}, e.clock.Now()); err != nil || n != 0 {
			t.Fatalf("RenewClaims of a released claim = %d, %v; want 0", n, err)
		}
	})

	t.Run("a removed worker's claim is stale by its age", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		c := e.claim(devices, "w1", 10)
		now := e.clock.Advance(2 * time.Minute)
		if err := e.gs.Heartbeat(e.ctx, []string{"w1", "w2"}, now); err != nil {
			t.Fatal(err)
		}
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, now, time.Minute); err != nil || n != 0 {
			t.Fatalf("release stale claims of a worker seen now: %d, %v; want 0", n, err)
		}
		if err := e.gs.RemoveWorkers(e.ctx, []string{"w1", "w9"}); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.RemoveWorkers(e.ctx, nil); err != nil {
			t.Fatalf("remove no workers: %v", err)
		}
		if n, err := e.gs.ReleaseStaleClaims(e.ctx, now, time.Minute); err != nil || n != 1 {
			t.Fatalf("release stale claims after w1's heartbeat was removed: %d, %v; want its 2 min old claim", n, err)
		}
		notClaimant(t, e.gs.Release(e.ctx, c), "the release of a reaped claim")
	})

	t.Run("a release in a transaction commits or rolls back with it", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d1", Name: "b"})
		c := e.claim(devices, "w1", 1)
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if err := gtx.Release(c); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("update: %v, want the rollback", err)
		}
		e.noClaim(devices, "w2")
		err = e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			notClaimant(t, gtx.Release(&driver.ClaimedPartition{Group: c.Group, WorkerID: "w2", OffsetID: c.OffsetID}), "another worker's release")
			if err := gtx.Release(c); err != nil {
				return err
			}
			notClaimant(t, gtx.Ack(c, c.Last()), "an ack after the release")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		e.lastAt(devices, c.Partition, 0)
		e.expectClaim(e.claim(devices, "w2", 10), c.Partition, false, 1, 2)
	})
}
