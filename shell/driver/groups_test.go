package driver_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/shell/driver"
)

// The status chart of the manual, transition by transition.
func TestTransition(t *testing.T) {
	ok := []struct {
		from driver.Status
		cmd  driver.GroupCommand
		to   driver.Status
	}{
		{driver.StatusActive, driver.CmdStop, driver.StatusStopped},
		{driver.StatusActive, driver.CmdRetry, driver.StatusRetrying},
		{driver.StatusActive, driver.CmdFail, driver.StatusFailed},
		{driver.StatusRetrying, driver.CmdStart, driver.StatusActive},
		{driver.StatusRetrying, driver.CmdStop, driver.StatusStopped},
		{driver.StatusRetrying, driver.CmdRetry, driver.StatusRetrying},
		{driver.StatusRetrying, driver.CmdRecover, driver.StatusActive},
		{driver.StatusRetrying, driver.CmdFail, driver.StatusFailed},
		{driver.StatusStopped, driver.CmdStart, driver.StatusActive},
		{driver.StatusStopped, driver.CmdReset, driver.StatusStopped},
		{driver.StatusFailed, driver.CmdStart, driver.StatusActive},
		{driver.StatusFailed, driver.CmdStop, driver.StatusStopped},
		{driver.StatusFailed, driver.CmdReset, driver.StatusFailed},
	}
	for _, tc := range ok {
		got, err := driver.Transition("g", tc.from, tc.cmd)
		if err != nil || got != tc.to {
			t.Errorf("%s --%s--> %s, %v; want %s", tc.from, tc.cmd, got, err, tc.to)
		}
	}
	_, err := driver.Transition("course_app.course_decider", driver.StatusActive, driver.CmdReset)
	var it *driver.InvalidTransitionError
	if !errors.As(err, &it) || err.Error() != "sourced: can't reset consumer group course_app.course_decider: it's active. It accepts: stop, retry, fail" {
		t.Fatalf("reset of an active group: %v", err)
	}
	for _, bad := range []struct {
		from driver.Status
		cmd  driver.GroupCommand
	}{{driver.StatusActive, driver.CmdStart}, {driver.StatusStopped, driver.CmdStop}, {driver.StatusStopped, driver.CmdRetry}, {driver.StatusFailed, driver.CmdRecover}} {
		if _, err := driver.Transition("g", bad.from, bad.cmd); err == nil {
			t.Errorf("%s accepted %s", bad.from, bad.cmd)
		}
	}
	if got := driver.Accepts(driver.StatusStopped); !slices.Equal(got, []driver.GroupCommand{driver.CmdStart, driver.CmdReset}) {
		t.Fatalf("stopped accepts %v", got)
	}
}
