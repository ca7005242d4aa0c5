package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testWarm holds a driver.Warmer to its contract: a warm-up (which a
// runtime runs at its start, beside other processes' work) changes
// nothing anyone sees: the log, the claims held and claimable, the next
// position; and a cancelled one returns the context's error.
func (s suite) testWarm(t *testing.T) {
	e := s.genv(t, devices, jobs)
	w, ok := e.gs.(driver.Warmer)
	if !ok {
		t.Skip("this store is no driver.Warmer: it has nothing to warm")
	}
	e.append(deviceRegistered{DeviceID: "d1", Name: "a"}, deviceRegistered{DeviceID: "d2", Name: "b"}, deposit{Account: "a1", Amount: 1})
	held := e.claim(devices, "w1", 10)
	e.expectClaim(held, part("device_id", "d1"), false, 1)
	before := e.log()

	warmup := driver.Warmup{Sessions: 3, BatchSize: 10, Claims: []int{1, 4}}
	for range 2 {
		if err := w.Warm(e.ctx, warmup); err != nil {
			t.Fatalf("Warm(%+v): %v", warmup, err)
		}
	}

	after := e.log()
	if !slices.EqualFunc(before, after, func(a, b core.PositionedMessage) bool { return a.Position == b.Position && a.ID == b.ID }) {
		t.Fatalf("the log after Warm: %s, before: %s", describe(after), describe(before))
	}
	// The claim held is still held, and what was claimable still is.
	e.expectClaim(e.claim(devices, "w2", 10), part("device_id", "d2"), false, 2)
	e.noClaim(devices, "w3")
	e.ack(held, 1)
	job := e.claim(jobs, "w1", 10)
	e.expectPositions("the queue's claim", job.Messages, 3)
	// The next append takes the next position: the warm-up drew none.
	if res := e.append(deviceRegistered{DeviceID: "d3", Name: "c"}); res.Last != 4 {
		t.Fatalf("the append after Warm is at %d, want 4", res.Last)
	}

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := w.Warm(ctx, warmup); !errors.Is(err, context.Canceled) {
		t.Fatalf("Warm with a cancelled context: %v, want context.Canceled", err)
	}
	e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d3"), false, 4)
}
