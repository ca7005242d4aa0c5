package shell

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell/driver"
)

// TimeoutProvider is implemented by hand-written reactors that declare
// how long one of their batches may run (definitions declare it in
// core.Hooks.Timeout): see RouterOptions.BatchTimeout.
type TimeoutProvider interface {
	BatchTimeout() time.Duration
}

// BatchTimeoutError is the failure of a batch that ran longer than its
// reactor's timeout (core.Hooks.Timeout, TimeoutProvider, else
// RouterOptions.BatchTimeout: Config.MaxClaimAge in a Runtime). The
// batch's context was cancelled at the deadline, and what the reactor
// returned then is Err. It goes to the group's error strategy like any
// failure of the reactor's: the batch is not handed to another worker.
type BatchTimeoutError struct {
	Group   string
	Timeout time.Duration
	// Err is what the reactor returned after its context was cancelled.
	Err error
}

// Error says what timed out and how to give the reactor longer.
func (e *BatchTimeoutError) Error() string {
	return fmt.Sprintf("sourced: a batch of consumer group %s ran longer than its timeout (%v) and was cancelled (declare a longer core.Hooks.Timeout, or BatchTimeout, for this reactor): %v", e.Group, e.Timeout, e.Err)
}

// Unwrap returns what the reactor returned.
func (e *BatchTimeoutError) Unwrap() error { return e.Err }

// timeoutOf is the reactor's batch timeout: its own, else the router's;
// 0 (or negative) means none.
func (rt *Router) timeoutOf(re *reactor) time.Duration {
	if re.hooks.Timeout != 0 {
		return re.hooks.Timeout
	}
	return rt.opts.BatchTimeout
}

// handleTimed is handle under the reactor's timeout: past it the batch's
// context is cancelled, and a batch that then fails fails with a
// *BatchTimeoutError (the reactor's failure, not a cancellation of the
// worker's: ctx is still live).
func (rt *Router) handleTimed(ctx context.Context, re *reactor, claim *driver.ClaimedPartition, read historyReader) (pairs []effects.Pair, handleErr, err error) {
	d := rt.timeoutOf(re)
	if d <= 0 {
		return rt.handle(ctx, re, claim, read)
	}
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	pairs, handleErr, err = rt.handle(bctx, re, claim, read)
	if ctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) {
		if err != nil {
			handleErr, err = err, nil
		}
		if handleErr != nil {
			handleErr = &BatchTimeoutError{Group: re.info.Group, Timeout: d, Err: handleErr}
		}
	}
	return pairs, handleErr, err
}

// holding records the claims each worker is handling, for the runtime to
// renew (see driver.ClaimRenewer).
type holding struct {
	mu     sync.Mutex
	claims map[string][]*driver.ClaimedPartition // by worker id
}

func (h *holding) hold(workerID string, claims []*driver.ClaimedPartition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.claims == nil {
		h.claims = map[string][]*driver.ClaimedPartition{}
	}
	if len(claims) == 0 {
		delete(h.claims, workerID)
		return
	}
	h.claims[workerID] = claims
}

// held returns every claim being handled.
func (h *holding) held() []*driver.ClaimedPartition {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*driver.ClaimedPartition
	for _, cs := range h.claims {
		out = append(out, cs...)
	}
	return out
}
