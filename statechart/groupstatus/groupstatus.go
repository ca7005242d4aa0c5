// Package groupstatus defines the statuses of a consumer group (active,
// retrying, stopped, failed) and the commands that move between them, as a
// statechart built with package statechart. It is only the rules: it is
// never registered as a reactor, and a group's status is stored as its path
// (the status name) in the store's groups table.
//
//	stateDiagram-v2
//	  [*] --> active : Start
//	  active --> stopped : Stop
//	  active --> retrying : Retry
//	  active --> failed : Fail
//	  retrying --> retrying : Retry
//	  retrying --> active : Recover
//	  retrying --> active : Start
//	  retrying --> failed : Fail
//	  retrying --> stopped : Stop
//	  stopped --> active : Start
//	  stopped --> stopped : Reset
//	  failed --> active : Start
//	  failed --> stopped : Stop
//	  failed --> failed : Reset
//
// Operators send Start, Stop and Reset (OperatorCommands): for a status
// that does not accept one, the store reports an error and writes nothing.
// Workers send Retry, Fail and Recover, which never fail: where a status
// does not accept one, the group stays as it is (Next reports ok=false).
package groupstatus

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/sourced-go/sourced/statechart"
)

// Start makes a group active: a new group, or one stopped, failed or
// retrying (retry now).
type Start struct{}

// Stop stops a group: workers no longer claim it.
type Stop struct{}

// Reset clears a stopped or failed group's offsets; it stays where it is.
type Reset struct{}

// Retry marks an active or retrying group to be retried later (the error
// strategy's retry).
type Retry struct{}

// Recover makes a retrying group active again once the partition it failed
// on is processed.
type Recover struct{}

// Fail marks a group failed (the error strategy gave up).
type Fail struct{}

// The statuses.
var (
	Active   = statechart.Named("active")
	Retrying = statechart.Named("retrying")
	Stopped  = statechart.Named("stopped")
	Failed   = statechart.Named("failed")
)

// OperatorCommands are the commands operators send (the others come from
// workers).
var OperatorCommands = []reflect.Type{reflect.TypeFor[Start](), reflect.TypeFor[Stop](), reflect.TypeFor[Reset]()}

// Machine returns the status chart. It is a statechart.Machine over no
// context, used for its rules (ActiveStates, Decide, Mermaid, JSON), never
// run as a reactor.
func Machine() statechart.Machine[struct{}] {
	return statechart.Machine[struct{}]{Group: "sourced.consumer_group_status"}.Chart(
		statechart.Initial(statechart.Command[Start](Active)),
		statechart.Place(Active,
			statechart.Command[Stop](Stopped),
			statechart.Command[Retry](Retrying),
			statechart.Command[Fail](Failed),
		),
		statechart.Place(Retrying,
			statechart.Command[Retry](Retrying),
			statechart.Command[Recover](Active),
			statechart.Command[Start](Active),
			statechart.Command[Fail](Failed),
			statechart.Command[Stop](Stopped),
		),
		statechart.Place(Stopped,
			statechart.Command[Start](Active),
			statechart.Command[Reset](Stopped),
		),
		statechart.Place(Failed,
			statechart.Command[Start](Active),
			statechart.Command[Stop](Stopped),
			statechart.Command[Reset](Failed),
		),
	)
}

// ErrInvalidTransition is matched by the error of a command a status does
// not accept.
var ErrInvalidTransition = errors.New("groupstatus: invalid transition")

// TransitionError is a command the group's status does not accept: it
// names the status, the command and what the status accepts.
type TransitionError struct {
	Status  string
	Command string
	Accepts []string
}

func (e *TransitionError) Error() string {
	status := e.Status
	if status == "" {
		status = "new"
	}
	return fmt.Sprintf("groupstatus: can't %s a group that is %s: it accepts %s", strings.ToLower(e.Command), status, strings.Join(e.Accepts, ", "))
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// Next returns the status a group at status moves to on command (one of
// this package's command values); "" is a group with no status yet. A
// command the status does not accept returns a *TransitionError; a status
// that is no status of the chart an error matching
// statechart.ErrUnresolvablePath.
func Next(status string, command any) (string, error) {
	m := Machine()
	var paths []string
	if status != "" {
		paths = []string{status}
	}
	in, err := m.At(paths, struct{}{}, nil)
	if err != nil {
		return status, err
	}
	next, _, err := m.Decide(in, command)
	if errors.Is(err, statechart.ErrCommandNotHandled) {
		return status, &TransitionError{Status: status, Command: reflect.TypeOf(command).Name(), Accepts: Accepts(status)}
	}
	if err != nil {
		return status, err
	}
	return next.Paths()[0], nil
}

// Accepts returns the names of the commands a status accepts ("Start",
// "Stop", ...), in the chart's order; nil for a status that is no status.
func Accepts(status string) []string {
	var paths []string
	if status != "" {
		paths = []string{status}
	}
	c, err := Machine().ActiveStates(paths)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range c.AvailableCommands() {
		out = append(out, t.Name())
	}
	return out
}
