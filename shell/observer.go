package shell

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell/driver"
)

// Observer hears what operators measure, as the router, the runtime and
// Handle do it: batches handled, appends, guard conflicts and their
// retries, claims, failures and retries by the error strategy, scheduled
// promotions. Set it in RouterOptions, Config or HandleOptions; package
// shell/otelobserver turns observations into OpenTelemetry metrics and
// spans, so the library itself carries no telemetry dependency.
//
// Observe is called synchronously, on the goroutine doing the work and
// never inside a store transaction, with one of the observation types of
// this package (BatchHandled, Appended, GuardConflict, Claimed,
// BatchFailed, ScheduledPromoted); more may come, so switch on the ones
// you want and ignore the rest. It must be quick and must not block.
type Observer interface {
	Observe(ctx context.Context, o Observation)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, o Observation)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, o Observation) { f(ctx, o) }

// Observation is one of the observation types of this package.
type Observation interface{ observation() }

// BatchHandled is a claimed batch handled and committed: its signals
// executed and the claim acknowledged, in one transaction.
type BatchHandled struct {
	Group     string
	Partition core.Partition
	WorkerID  string
	// Messages is how many claimed messages the batch held, Appended how
	// many messages its signals appended (events, reactions, scheduled).
	Messages, Appended int
	// First and Last are the positions of the batch's first and last
	// messages.
	First, Last int64
	// Correlations are the distinct correlation ids of the batch's
	// messages, in order: what links the batch to the command that began
	// each causal chain.
	Correlations []uuid.UUID
	// Started is when handling began (the history read, the reactor, the
	// commit), Duration how long it took.
	Started  time.Time
	Duration time.Duration
	// Inline is true when the batch was claimed, handled and committed in
	// one write transaction with others (a pure reactor's).
	Inline bool
}

// Appended is an append outside a router's batches: a command decided
// synchronously by Handle or HandleCommand, with its events.
type Appended struct {
	Group    string
	Messages int
	Duration time.Duration
}

// GuardConflict is a batch whose append conflicted with a message that
// arrived after its history was read: the decision's consistency boundary
// is contended. Attempt counts the conflicts of this claim (1 for the
// first); Retried is false when the retries are exhausted and the batch
// goes to the error strategy.
type GuardConflict struct {
	Group     string
	Partition core.Partition
	Attempt   int
	Retried   bool
	Err       error
}

// Claimed is a partition claimed for a group by a worker.
type Claimed struct {
	Group     string
	Partition core.Partition
	WorkerID  string
	Messages  int
	Inline    bool
}

// BatchFailed is a batch whose failure went to the group's error
// strategy: the group retries at RetryAt (Retrying), its partition was
// parked (Parked: the group goes on with the others), or it failed.
type BatchFailed struct {
	Group     string
	Partition core.Partition
	Err       error
	Retrying  bool
	Parked    bool
	// Skipped is true when the error strategy skipped the failed message
	// (core.SkipMessage): the group went on.
	Skipped    bool
	RetryCount int
	RetryAt    time.Time
}

// ScheduledPromoted is scheduled messages that came due and were promoted
// into the log by the runtime's scheduler.
type ScheduledPromoted struct {
	Count int
}

func (BatchHandled) observation()      {}
func (Appended) observation()          {}
func (GuardConflict) observation()     {}
func (Claimed) observation()           {}
func (BatchFailed) observation()       {}
func (ScheduledPromoted) observation() {}

// observe calls obs when there is one.
func observe(ctx context.Context, obs Observer, o Observation) {
	if obs != nil {
		obs.Observe(ctx, o)
	}
}

// correlations are the distinct correlation ids of a claim's messages.
func correlations(c *driver.ClaimedPartition) []uuid.UUID {
	var out []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, m := range c.Messages {
		id := m.CorrelationID
		if id == uuid.Nil {
			id = m.ID
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// batchHandled describes a committed claim.
func batchHandled(c *driver.ClaimedPartition, appended int, started time.Time, inline bool) BatchHandled {
	b := BatchHandled{Group: c.Group, Partition: c.Partition, WorkerID: c.WorkerID, Messages: len(c.Messages), Appended: appended,
		Correlations: correlations(c), Started: started, Duration: time.Since(started), Inline: inline}
	if n := len(c.Messages); n > 0 {
		b.First, b.Last = c.Messages[0].Position, c.Messages[n-1].Position
	}
	return b
}

// appendedBy counts the messages the pairs' Append signals append.
func appendedBy(pairs []effects.Pair) int {
	n := 0
	for _, p := range pairs {
		for _, s := range p.Signals {
			switch a := s.(type) {
			case effects.Append:
				n += len(a.Messages)
			case *effects.Append:
				if a != nil {
					n += len(a.Messages)
				}
			}
		}
	}
	return n
}
