package shell_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/shell"
)

// The status chart of the manual, transition by transition.
func TestTransition(t *testing.T) {
	ok := []struct {
		from shell.Status
		cmd  shell.GroupCommand
		to   shell.Status
	}{
		{shell.StatusActive, shell.CmdStop, shell.StatusStopped},
		{shell.StatusActive, shell.CmdRetry, shell.StatusRetrying},
		{shell.StatusActive, shell.CmdFail, shell.StatusFailed},
		{shell.StatusRetrying, shell.CmdStart, shell.StatusActive},
		{shell.StatusRetrying, shell.CmdStop, shell.StatusStopped},
		{shell.StatusRetrying, shell.CmdRetry, shell.StatusRetrying},
		{shell.StatusRetrying, shell.CmdRecover, shell.StatusActive},
		{shell.StatusRetrying, shell.CmdFail, shell.StatusFailed},
		{shell.StatusStopped, shell.CmdStart, shell.StatusActive},
		{shell.StatusStopped, shell.CmdReset, shell.StatusStopped},
		{shell.StatusFailed, shell.CmdStart, shell.StatusActive},
		{shell.StatusFailed, shell.CmdStop, shell.StatusStopped},
		{shell.StatusFailed, shell.CmdReset, shell.StatusFailed},
	}
	for _, tc := range ok {
		got, err := shell.Transition("g", tc.from, tc.cmd)
		if err != nil || got != tc.to {
			t.Errorf("%s --%s--> %s, %v; want %s", tc.from, tc.cmd, got, err, tc.to)
		}
	}
	_, err := shell.Transition("course_app.course_decider", shell.StatusActive, shell.CmdReset)
	var it *shell.InvalidTransitionError
	if !errors.As(err, &it) || err.Error() != "sourced: can't reset consumer group course_app.course_decider: it's active. It accepts: stop, retry, fail" {
		t.Fatalf("reset of an active group: %v", err)
	}
	for _, bad := range []struct {
		from shell.Status
		cmd  shell.GroupCommand
	}{{shell.StatusActive, shell.CmdStart}, {shell.StatusStopped, shell.CmdStop}, {shell.StatusStopped, shell.CmdRetry}, {shell.StatusFailed, shell.CmdRecover}} {
		if _, err := shell.Transition("g", bad.from, bad.cmd); err == nil {
			t.Errorf("%s accepted %s", bad.from, bad.cmd)
		}
	}
	if got := shell.Accepts(shell.StatusStopped); !slices.Equal(got, []shell.GroupCommand{shell.CmdStart, shell.CmdReset}) {
		t.Fatalf("stopped accepts %v", got)
	}
}
