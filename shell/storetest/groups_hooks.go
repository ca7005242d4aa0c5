package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
)

// testHooks: the operator transitions of a group registered with
// GroupSpec.Hooks (StopGroup, StartGroup, ResetGroup, whoever calls them)
// wait, numbered and in order, for a process to run their lifecycle hooks
// (ClaimTransition, FinishTransition: one claimant at a time), and the
// group's work is not claimed until they all ran: a reset's replay never
// lands on a read model its OnReset has not cleared.
func (s suite) testHooks(t *testing.T) {
	hooked := func() driver.GroupSpec {
		spec := groupSpec(devices)
		spec.Hooks = true
		return spec
	}
	const lease = time.Minute
	claimT := func(e *genv, claimant string, now time.Time) *driver.GroupTransition {
		e.t.Helper()
		tr, err := e.gs.ClaimTransition(e.ctx, devices, claimant, now, lease)
		if err != nil {
			e.t.Fatalf("claim a transition as %s: %v", claimant, err)
		}
		return tr
	}
	expect := func(e *genv, tr *driver.GroupTransition, seq int64, cmd driver.GroupCommand, reason, claimant string) {
		e.t.Helper()
		if tr == nil {
			e.t.Fatalf("no transition claimed, want %d (%s)", seq, cmd)
		}
		if tr.Group != devices || tr.Seq != seq || tr.Command != cmd || tr.Reason != reason || tr.Claimant != claimant || !tr.At.Equal(epoch) {
			e.t.Fatalf("claimed %+v, want %s's transition %d (%s, reason %q) claimed by %s, made at %v", tr, devices, seq, cmd, reason, claimant, epoch)
		}
	}
	finish := func(e *genv, tr *driver.GroupTransition, ran bool) {
		e.t.Helper()
		if err := e.gs.FinishTransition(e.ctx, tr, ran); err != nil {
			e.t.Fatalf("finish transition %d (ran %v): %v", tr.Seq, ran, err)
		}
	}
	pending := func(e *genv, want int64) {
		e.t.Helper()
		if got := e.info(devices).HooksPending; got != want {
			e.t.Fatalf("%d transitions wait for their hooks, want %d", got, want)
		}
	}
	gated := func(e *genv) {
		e.t.Helper()
		e.noClaim(devices, "w1")
		e.noClaims(devices, "w1")
		err := e.update(func(_ driver.Tx, gtx driver.GroupTx) error {
			c, err := gtx.ClaimNext(devices, "w1", 10)
			if err == nil && c != nil {
				e.t.Fatalf("claimed %v in a transaction while transitions wait for their hooks", c.Partition)
			}
			return err
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}

	t.Run("transitions wait for their hooks, in order, and hold the group's work", func(t *testing.T) {
		e := s.genv(t)
		e.register(hooked())
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		if err := e.gs.StopGroup(e.ctx, devices, "rebuild"); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.ResetGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		pending(e, 3)
		gated(e)

		now := e.clock.Now()
		t1 := claimT(e, "p1", now)
		expect(e, t1, 1, driver.CmdStop, "rebuild", "p1")
		if tr := claimT(e, "p2", now); tr != nil {
			t.Fatalf("p2 claimed %+v while p1 holds it", tr)
		}
		if tr := claimT(e, "p1", now); tr != nil {
			t.Fatalf("p1 claimed %+v again while it holds it", tr)
		}
		finish(e, t1, true)
		notClaimant(t, e.gs.FinishTransition(e.ctx, t1, true), "finishing a transition twice")
		pending(e, 2)

		t2 := claimT(e, "p1", now)
		expect(e, t2, 2, driver.CmdReset, "", "p1")
		finish(e, t2, false) // its hook failed: claimed again, by anyone
		pending(e, 2)
		gated(e)
		t2 = claimT(e, "p2", now)
		expect(e, t2, 2, driver.CmdReset, "", "p2")
		finish(e, t2, true)

		gated(e)
		t3 := claimT(e, "p2", now)
		expect(e, t3, 3, driver.CmdStart, "", "p2")
		e.notes.take()
		finish(e, t3, true)
		pending(e, 0)
		if tr := claimT(e, "p1", now); tr != nil {
			t.Fatalf("claimed %+v with none pending", tr)
		}
		if got := e.notes.take(); !slices.ContainsFunc(got, func(types []string) bool { return slices.Contains(types, typeDeviceRegistered) }) {
			t.Fatalf("notifications after the last hook ran: %v, want the group's types announced (its workers wake)", got)
		}
		c := e.claim(devices, "w1", 10)
		e.expectClaim(c, map[string]string{"device_id": "d1"}, false, 1)
	})

	t.Run("a claim past its lease is taken over, and its claimant's finish refused", func(t *testing.T) {
		e := s.genv(t)
		e.register(hooked())
		if err := e.gs.StopGroup(e.ctx, devices, "x"); err != nil {
			t.Fatal(err)
		}
		now := e.clock.Now()
		t1 := claimT(e, "p1", now)
		expect(e, t1, 1, driver.CmdStop, "x", "p1")
		if tr := claimT(e, "p2", now.Add(lease-time.Second)); tr != nil {
			t.Fatalf("p2 took over %+v within p1's lease", tr)
		}
		t2 := claimT(e, "p2", now.Add(lease))
		expect(e, t2, 1, driver.CmdStop, "x", "p2")
		notClaimant(t, e.gs.FinishTransition(e.ctx, t1, true), "the finish of a claim taken over")
		pending(e, 1)
		finish(e, t2, true)
		pending(e, 0)
	})

	t.Run("of concurrent claimants exactly one gets the transition", func(t *testing.T) {
		e := s.genv(t)
		e.register(hooked())
		if err := e.gs.StopGroup(e.ctx, devices, "x"); err != nil {
			t.Fatal(err)
		}
		const claimants = 8
		got := make([]*driver.GroupTransition, claimants)
		errs := make([]error, claimants)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range claimants {
			wg.Go(func() {
				<-start
				got[i], errs[i] = e.gs.ClaimTransition(e.ctx, devices, string(rune('a'+i)), e.clock.Now(), lease)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range claimants {
			if errs[i] != nil {
				t.Fatalf("claimant %d: %v", i, errs[i])
			}
			if got[i] != nil {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("%d claimants got the transition, want exactly 1", won)
		}
	})

	t.Run("a group without hooks records no transitions and is not held", func(t *testing.T) {
		e := s.genv(t, devices)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		for _, err := range []error{e.gs.StopGroup(e.ctx, devices, "x"), e.gs.ResetGroup(e.ctx, devices), e.gs.StartGroup(e.ctx, devices)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		pending(e, 0)
		if tr := claimT(e, "p1", e.clock.Now()); tr != nil {
			t.Fatalf("claimed %+v of a group registered without hooks", tr)
		}
		e.expectClaim(e.claim(devices, "w1", 10), map[string]string{"device_id": "d1"}, false, 1)
	})

	t.Run("registering again with hooks keeps the pending transitions; without forgets them", func(t *testing.T) {
		e := s.genv(t)
		e.register(hooked())
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		if err := e.gs.StopGroup(e.ctx, devices, "x"); err != nil {
			t.Fatal(err)
		}
		if err := e.gs.StartGroup(e.ctx, devices); err != nil {
			t.Fatal(err)
		}
		e.register(hooked()) // another process starting
		pending(e, 2)
		gated(e)
		e.register(groupSpec(devices)) // the reactor has no hooks any more
		pending(e, 0)
		if tr := claimT(e, "p1", e.clock.Now()); tr != nil {
			t.Fatalf("claimed %+v after the group was registered without hooks", tr)
		}
		e.expectClaim(e.claim(devices, "w1", 10), map[string]string{"device_id": "d1"}, false, 1)
	})

	t.Run("a refused command records no transition", func(t *testing.T) {
		e := s.genv(t)
		e.register(hooked())
		if err := e.gs.StartGroup(e.ctx, devices); !errors.As(err, new(*driver.InvalidTransitionError)) {
			t.Fatalf("starting an active group: %v, want an *InvalidTransitionError", err)
		}
		pending(e, 0)
	})

	t.Run("bad arguments and unknown groups are refused", func(t *testing.T) {
		e := s.genv(t)
		e.register(hooked())
		if err := e.gs.StopGroup(e.ctx, devices, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.gs.ClaimTransition(e.ctx, devices, "", e.clock.Now(), lease); err == nil {
			t.Fatal("a claim with no claimant was accepted")
		}
		if _, err := e.gs.ClaimTransition(e.ctx, devices, "p1", e.clock.Now(), 0); err == nil {
			t.Fatal("a claim with no lease was accepted")
		}
		_, err := e.gs.ClaimTransition(e.ctx, "storetest.nope", "p1", e.clock.Now(), lease)
		unknownGroup(t, err, "storetest.nope", devices)
		pending(e, 1)
	})
}
