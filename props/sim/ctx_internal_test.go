package sim

import (
	"context"
	"errors"
	"testing"
)

// A cancellation may land on any look at the context, those
// context.WithCancel takes while it derives a child included: the child
// is cancelled (at once, or at the next look), and nothing deadlocks.
func TestFaultCtxCancelsDerivedContexts(t *testing.T) {
	for at := 1; at <= 6; at++ {
		c := newFaultCtx(at)
		child, cancel := context.WithCancel(c)
		for range 6 {
			_ = c.Err()
		}
		if !c.fired() {
			t.Fatalf("at %d: never cancelled", at)
		}
		select {
		case <-child.Done():
		default:
			t.Fatalf("at %d: the derived context was not cancelled", at)
		}
		if !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("at %d: child error %v", at, child.Err())
		}
		cancel()
	}
	// Never cancelled when at is 0.
	c := newFaultCtx(0)
	for range 10 {
		if c.Err() != nil {
			t.Fatal("cancelled with at 0")
		}
	}
}
