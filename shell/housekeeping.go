package shell

import (
	"context"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
)

// housekeep runs the store's own upkeep (driver.Housekeeper), on every heartbeat.
func housekeep(ctx context.Context, store Store) error {
	if hk, ok := store.(driver.Housekeeper); ok {
		return hk.Housekeep(ctx)
	}
	return nil
}

// firstTickNow makes a task tick as soon as it starts, then every
// Interval: the planner statistics are refreshed when a runtime starts (a
// process that opens a large store claims with them from the start), then
// hourly.
func firstTickNow(t *periodicTask) time.Duration {
	if t.Ticks() == 0 {
		return 0
	}
	return t.Interval
}
