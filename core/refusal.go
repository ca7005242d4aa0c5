package core

import (
	"errors"
	"fmt"
	"slices"
)

// CommandRejectedType is the registered type name of CommandRejected
// (the shell's router registers it in the store's registry).
const CommandRejectedType = "sourced.command_rejected"

// CommandRejected records a business refusal of a command decided by a
// background worker: appended correlated with the command (its causation
// id is the command's id), in place of the events the command would have
// produced.
type CommandRejected struct {
	// CommandID and CommandType name the refused command.
	CommandID   string `json:"command_id"`
	CommandType string `json:"command_type"`
	// Group is the decider's consumer group.
	Group string `json:"group"`
	// Error is the refusal's message (err.Error()).
	Error string `json:"error" sourced:"noindex"`
	// Reasons are the messages of the refusal's error chain, outermost
	// first (the error itself, then what it wraps, depth first), so that a
	// reader matches a sentinel by its text (RefusalError.Is).
	Reasons []string `json:"reasons,omitempty" sourced:"noindex"`
}

// RefusalError is a business refusal as the sender of a command sees it
// once a background worker refused it (shell.AwaitCommand). The refusal
// was recorded in the log as text (CommandRejected), so errors.Is matches
// a target by its text: errors.Is(err, ErrCourseFull) is true when the
// decider's error was ErrCourseFull or wrapped it. Every RefusalError
// matches ErrRefused. Typed errors (errors.As) do not survive the log.
type RefusalError struct {
	CommandID   string
	CommandType string
	Group       string
	// Message is the refusal's message; Reasons its chain (see
	// CommandRejected.Reasons).
	Message string
	Reasons []string
}

// ErrRefused is matched by every RefusalError.
var ErrRefused = errors.New("sourced: command refused")

func (e *RefusalError) Error() string {
	return fmt.Sprintf("sourced: command %s (%s) refused by %s: %s", e.CommandID, e.CommandType, e.Group, e.Message)
}

// Is makes errors.Is match ErrRefused, and any error whose message is one
// of the refusal's reasons (the decider's sentinel).
func (e *RefusalError) Is(target error) bool {
	if target == ErrRefused {
		return true
	}
	if target == nil {
		return false
	}
	return slices.Contains(e.Reasons, target.Error())
}

// Refusal returns the refusal a CommandRejected records.
func (r CommandRejected) Refusal() *RefusalError {
	return &RefusalError{CommandID: r.CommandID, CommandType: r.CommandType, Group: r.Group, Message: r.Error, Reasons: slices.Clone(r.Reasons)}
}

// rejection is the CommandRejected message recording err, Decide's
// refusal of cmd, correlated with cmd.
func rejection(group string, cmd PositionedMessage, err error) Message {
	return NewMessage(CommandRejected{
		CommandID: cmd.ID.String(), CommandType: cmd.Type, Group: group,
		Error: err.Error(), Reasons: reasons(err, nil),
	}).Correlate(cmd.Message)
}

// reasons appends the messages of err's chain, depth first.
func reasons(err error, out []string) []string {
	if err == nil || len(out) >= 32 {
		return out
	}
	if !slices.Contains(out, err.Error()) {
		out = append(out, err.Error())
	}
	switch u := err.(type) {
	case unwrapper:
		return reasons(u.Unwrap(), out)
	case multiUnwrapper:
		for _, e := range u.Unwrap() {
			out = reasons(e, out)
		}
	}
	return out
}

// unwrapper is an error wrapping one error (fmt.Errorf with %w): the
// standard library's convention, which errors.Unwrap follows.
type unwrapper interface{ Unwrap() error }

// multiUnwrapper is an error wrapping several (errors.Join, fmt.Errorf with
// several %w): the standard library's convention, which errors.Is follows.
type multiUnwrapper interface{ Unwrap() []error }
