package statechart

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

// ErrCommandNotHandled is matched by the error of deciding a command that
// no active state accepts. A Machine's Step acknowledges such a command with
// no events. It also matches core.ErrNotHandled.
var ErrCommandNotHandled = errors.New("statechart: command not handled")

// CommandNotHandledError is the error of deciding a command no active state
// accepts: it names the command and the active paths.
type CommandNotHandledError struct {
	Command string
	Paths   []string
}

func (e *CommandNotHandledError) Error() string {
	at := "at its initial position"
	if len(e.Paths) > 0 {
		at = "in " + strings.Join(e.Paths, ", ")
	}
	return fmt.Sprintf("statechart: command %s not handled: no active state accepts it (the machine is %s)", e.Command, at)
}

// Is matches ErrCommandNotHandled and core.ErrNotHandled.
func (e *CommandNotHandledError) Is(target error) bool {
	return target == ErrCommandNotHandled || target == core.ErrNotHandled
}

// ErrTransition is matched by every *TransitionError.
var ErrTransition = errors.New("statechart: transition error")

// TransitionError is a handler that moved the machine to a target it did
// not declare, moved it twice, appended a state event as data, or gave
// neither a move nor Stay where one was required. Nothing of the decision
// is kept.
type TransitionError struct {
	// Source is the path of the state whose handler failed.
	Source string
	// Trigger is the message type.
	Trigger string
	// Problem says what went wrong and what to do.
	Problem string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("statechart: transition from %s on %s: %s", e.Source, e.Trigger, e.Problem)
}

// Is makes errors.Is(err, ErrTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrTransition }

// ErrUnresolvablePath is matched by every *UnresolvablePathError.
var ErrUnresolvablePath = errors.New("statechart: unresolvable path")

// UnresolvablePathError is a stored path that names no state of the
// machine's definition: a state or region was renamed or removed after
// events using it were stored. Type and ID name the state event it came
// from, when it came from one.
type UnresolvablePathError struct {
	Path string
	Type string
	ID   uuid.UUID
}

func (e *UnresolvablePathError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "statechart: path %q names no state of the machine", e.Path)
	if e.Type != "" {
		fmt.Fprintf(&b, " (in %s", e.Type)
		if e.ID != uuid.Nil {
			fmt.Fprintf(&b, " %s", e.ID)
		}
		b.WriteString(")")
	}
	b.WriteString(": stored events use state and region names, so keep them (rename the Go identifiers instead)")
	return b.String()
}

// Is makes errors.Is(err, ErrUnresolvablePath) true.
func (e *UnresolvablePathError) Is(target error) bool { return target == ErrUnresolvablePath }

// ErrInvalidActiveStates is matched by the error of reading paths that
// resolve but form no configuration: an initial position, a state in an
// inactive region, two states in one region, a region missing a state
// where it has no initial position.
var ErrInvalidActiveStates = errors.New("statechart: invalid configuration")

type configError struct{ problem string }

func (e *configError) Error() string { return "statechart: invalid configuration: " + e.problem }
func (e *configError) Is(target error) bool {
	return target == ErrInvalidActiveStates
}

// ErrEventlessLoop is matched by the error of a decision whose eventless
// transitions (Always, Done, ...) kept applying without settling: the
// chart's guards allow a cycle.
var ErrEventlessLoop = errors.New("statechart: eventless transitions do not settle")

// ErrStart is matched by the error of a handler that started children its
// declaration does not allow (too few, or of a machine Starts does not
// name).
var ErrStart = errors.New("statechart: start error")

// ErrMissingPartitionKey is matched by the error of building an instance
// without a value for each partition key.
var ErrMissingPartitionKey = errors.New("statechart: missing partition key")
