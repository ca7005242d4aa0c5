package groupstatus_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/statechart"
	"github.com/sourced-go/sourced/statechart/groupstatus"
)

const manualDiagram = `stateDiagram-v2
  [*] --> active : Start
  active --> stopped : Stop
  active --> retrying : Retry
  active --> failed : Fail
  retrying --> retrying : Retry
  retrying --> active : Recover
  retrying --> active : Start
  retrying --> failed : Fail
  retrying --> stopped : Stop
  stopped --> active : Start
  stopped --> stopped : Reset
  failed --> active : Start
  failed --> stopped : Stop
  failed --> failed : Reset
`

func TestMermaidIsTheManuals(t *testing.T) {
	m := groupstatus.Machine()
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	if got := m.Mermaid(); got != manualDiagram {
		t.Fatalf("got\n%s\nwant\n%s", got, manualDiagram)
	}
}

func TestEveryTransitionOfTheManual(t *testing.T) {
	all := []any{groupstatus.Start{}, groupstatus.Stop{}, groupstatus.Reset{}, groupstatus.Retry{}, groupstatus.Recover{}, groupstatus.Fail{}}
	want := map[string]map[string]string{
		"":         {"Start": "active"},
		"active":   {"Stop": "stopped", "Retry": "retrying", "Fail": "failed"},
		"retrying": {"Retry": "retrying", "Recover": "active", "Start": "active", "Fail": "failed", "Stop": "stopped"},
		"stopped":  {"Start": "active", "Reset": "stopped"},
		"failed":   {"Start": "active", "Stop": "stopped", "Reset": "failed"},
	}
	for status, moves := range want {
		for _, cmd := range all {
			name := typeName(cmd)
			next, err := groupstatus.Next(status, cmd)
			to, ok := moves[name]
			switch {
			case ok && (err != nil || next != to):
				t.Errorf("%q + %s = %q, %v; want %q", status, name, next, err, to)
			case !ok && !errors.Is(err, groupstatus.ErrInvalidTransition):
				t.Errorf("%q + %s = %q, %v; want an invalid transition", status, name, next, err)
			case !ok && next != status:
				t.Errorf("a refused command changes nothing: %q became %q", status, next)
			}
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case groupstatus.Start:
		return "Start"
	case groupstatus.Stop:
		return "Stop"
	case groupstatus.Reset:
		return "Reset"
	case groupstatus.Retry:
		return "Retry"
	case groupstatus.Recover:
		return "Recover"
	case groupstatus.Fail:
		return "Fail"
	}
	return ""
}

func TestTheErrorNamesWhatTheStatusAccepts(t *testing.T) {
	_, err := groupstatus.Next("active", groupstatus.Reset{})
	var te *groupstatus.TransitionError
	if !errors.As(err, &te) || te.Status != "active" || !slices.Equal(te.Accepts, []string{"Stop", "Retry", "Fail"}) {
		t.Fatalf("%v", err)
	}
	if err.Error() != "groupstatus: can't reset a group that is active: it accepts Stop, Retry, Fail" {
		t.Fatal(err.Error())
	}
}

func TestOperatorCommandsAvailable(t *testing.T) {
	c, err := groupstatus.Machine().ActiveStates([]string{"active"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, t := range c.AvailableCommands() {
		if slices.Contains(groupstatus.OperatorCommands, t) {
			ops = append(ops, t.Name())
		}
	}
	if !slices.Equal(ops, []string{"Stop"}) {
		t.Fatalf("%v", ops)
	}
	if _, err := groupstatus.Next("paused", groupstatus.Start{}); !errors.Is(err, statechart.ErrUnresolvablePath) {
		t.Fatalf("unknown status: %v", err)
	}
}
