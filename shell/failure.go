package shell

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"strings"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// GroupFailedError is returned by Router.Drain and Runtime.WaitIdle when a
// batch failed while they ran and went to its group's error strategy: the
// group is failed (or retrying, or stopped, as Status says), and the work
// is not done. It names the batch's partition and the message that failed,
// and wraps the cause (errors.Is and errors.As see through it).
type GroupFailedError struct {
	Group string
	// Status is the group's status after the error strategy.
	Status Status
	// RetryCount is the group's retry count after the error strategy.
	RetryCount int
	// Parked is true when the parking strategy parked the partition (see
	// ErrorStrategy.Park): the group goes on with its other partitions.
	Parked    bool
	Partition core.Partition
	// MessageType, MessageID and Position name the message that failed:
	// the first of the batch that was not processed.
	MessageType string
	MessageID   uuid.UUID
	Position    int64
	// Err is the cause.
	Err error
}

func (e *GroupFailedError) Error() string {
	what := "failed"
	switch {
	case e.Parked:
		what = "parked a partition"
	case e.Status == StatusRetrying:
		what = fmt.Sprintf("is retrying (retry %d)", e.RetryCount)
	case e.Status == StatusStopped:
		what = "failed a batch (the group is stopped)"
	}
	at := ""
	if e.MessageType != "" {
		at = fmt.Sprintf(" at message %s (%s at position %d)", e.MessageID, e.MessageType, e.Position)
	}
	return fmt.Sprintf("sourced: consumer group %s %s%s in partition %s: %v", e.Group, what, at, core.Partition(e.Partition).String(), e.Err)
}

// Unwrap returns the cause.
func (e *GroupFailedError) Unwrap() error { return e.Err }

// atMessage ties an error to the message whose signals failed; it is
// transparent (same message, unwraps to the error).
type atMessage struct {
	msg core.PositionedMessage
	err error
}

func (a *atMessage) Error() string { return a.err.Error() }
func (a *atMessage) Unwrap() error { return a.err }

// failedMessage is the message a batch failed at: the one the error names
// (a *core.BatchError, or the pair whose signals failed), else the first
// of the claim after the position processed.
func failedMessage(claim *driver.ClaimedPartition, err error, processed int64) core.PositionedMessage {
	var at *atMessage
	if errors.As(err, &at) && at.msg.Position > 0 {
		return at.msg
	}
	var be *core.BatchError
	if errors.As(err, &be) && be.Message.Position > 0 {
		return be.Message
	}
	for _, m := range claim.Messages {
		if m.Position > processed {
			return m
		}
	}
	return core.PositionedMessage{}
}

// failureOf records a batch's failure: the claim's partition, the message
// it failed at, the error's type and message, and a stack: a panic's, or
// for a returned error where it surfaced and its own stack when it
// carries one (see returnedStack).
func failureOf(claim *driver.ClaimedPartition, err error, processed int64) Failure {
	m := failedMessage(claim, err, processed)
	f := Failure{
		OffsetID:    claim.OffsetID,
		Partition:   core.Partition(claim.Partition).String(),
		MessageType: m.Type,
		Position:    m.Position,
		ErrorType:   errorType(err),
		Error:       err.Error(),
	}
	if m.ID != uuid.Nil {
		f.MessageID = m.ID.String()
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		f.Stack = pe.Stack
	} else {
		f.Stack = returnedStack(claim.Group, err)
	}
	return f
}

// returnedStack is what a failure records as the stack of a returned
// error, which Go does not give: where the error surfaced (the decide
// handler that returned it, named by its function and file:line, when
// the definition knows it; else the reactor's HandleClaim, or the batch's
// commit), then the error's own stack when an error of its chain carries
// one (see errorOwnStack).
func returnedStack(group string, err error) string {
	var b strings.Builder
	var be *core.BatchError
	var at *atMessage
	switch {
	case errors.As(err, &be) && be.Where != "":
		fmt.Fprintf(&b, "error returned by %s", be.Where)
	case errors.As(err, &at):
		fmt.Fprintf(&b, "error returned while committing the batch of %s (its sync work, appends or acknowledgement)", group)
	default:
		fmt.Fprintf(&b, "error returned by the reactor of %s (its HandleClaim, or the history or query it read)", group)
	}
	if s := errorOwnStack(err); s != "" {
		b.WriteString("\n\nthe error's own stack:\n")
		b.WriteString(s)
	}
	return b.String()
}

// errorOwnStack is the stack an error of err's chain carries, formatted:
// a StackTrace() method (github.com/pkg/errors and the libraries that
// follow it, formatted with %+v), Callers() []uintptr or StackFrames()
// (program counters), or Stack() / ErrorStack() giving text or bytes.
func errorOwnStack(err error) string {
	for e := err; e != nil; {
		if s := stackOf(e); s != "" {
			return s
		}
		switch u := e.(type) {
		case unwrapper:
			e = u.Unwrap()
		case multiUnwrapper:
			for _, inner := range u.Unwrap() {
				if s := errorOwnStack(inner); s != "" {
					return s
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// stackOf is the stack e itself carries (not its chain's), or "".
func stackOf(e error) string {
	switch s := e.(type) {
	case callersStack:
		return framesText(s.Callers())
	case errorStackText:
		return s.ErrorStack()
	case stackBytes:
		return string(s.Stack())
	case stackText:
		return s.Stack()
	}
	// StackTrace() returns a type of its library's own (pkg/errors'
	// errors.StackTrace): called by reflection, formatted with %+v.
	m := reflect.ValueOf(e).MethodByName("StackTrace")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return ""
	}
	out := m.Call(nil)[0]
	if pcs, ok := out.Interface().([]uintptr); ok {
		return framesText(pcs)
	}
	return strings.TrimLeft(fmt.Sprintf("%+v", out.Interface()), "\n")
}

// framesText formats program counters as runtime/debug.Stack does.
func framesText(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function != "" {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			return b.String()
		}
	}
}

// groupFailed describes a failure the error strategy met, for Drain and
// WaitIdle.
func groupFailed(group string, claim *driver.ClaimedPartition, st GroupState, err error, processed int64) *GroupFailedError {
	m := failedMessage(claim, err, processed)
	return &GroupFailedError{
		Group:       group,
		Status:      st.Status,
		RetryCount:  st.Failure.RetryCount,
		Partition:   maps.Clone(claim.Partition),
		MessageType: m.Type,
		MessageID:   m.ID,
		Position:    m.Position,
		Err:         err,
	}
}

// errorType names an error's type for the record: the innermost type of
// its chain that is not a generic wrapper (fmt.Errorf's, errors.Join's,
// errors.New's, core.BatchError and the router's own); for a chain of
// such only, ending in an error with no type of its own (errors.New, a
// sentinel such as io.EOF, fmt.Errorf without %w: all *errors.errorString),
// that error named by its text, as errors.New("card declined") (a
// sentinel's variable is not known at run time, its text is what tells it
// apart, and what to search the code for); else the innermost type;
// "panic(T)" for a panic with a value of type T (or panic(errors.New(…))).
func errorType(err error) string {
	var pe *PanicError
	if errors.As(err, &pe) {
		if inner, ok := pe.Value.(error); ok {
			return "panic(" + errorType(inner) + ")"
		}
		return fmt.Sprintf("panic(%T)", pe.Value)
	}
	meaningful, innermost := "", ""
	var leaf error
	for e := err; e != nil; {
		t := fmt.Sprintf("%T", e)
		innermost, leaf = t, e
		if !genericError(e, t) {
			meaningful = t
		}
		switch u := e.(type) {
		case unwrapper:
			e = u.Unwrap()
		case multiUnwrapper:
			if errs := u.Unwrap(); len(errs) > 0 {
				e = errs[0]
			} else {
				e = nil
			}
		default:
			e = nil
		}
	}
	if meaningful != "" {
		return meaningful
	}
	if innermost == plainErrorType {
		return fmt.Sprintf("errors.New(%q)", shortText(leaf.Error()))
	}
	return innermost
}

// plainErrorType is the type of errors.New's errors (and of fmt.Errorf's
// without %w).
const plainErrorType = "*errors.errorString"

// shortText cuts text to maxTypeText runes, marking the cut with "…": a
// type name stays short however long the error's message.
func shortText(text string) string {
	const maxTypeText = 60
	n := 0
	for i := range text {
		if n == maxTypeText {
			return text[:i] + "…"
		}
		n++
	}
	return text
}

func genericError(err error, typ string) bool {
	switch err.(type) {
	case *core.BatchError, *batchFailure, *atMessage:
		return true
	}
	switch typ {
	case "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError", plainErrorType:
		return true
	}
	return false
}

// unwrapper is an error wrapping one error (fmt.Errorf with %w): the
// standard library's convention, which errors.Unwrap follows.
type unwrapper interface{ Unwrap() error }

// multiUnwrapper is an error wrapping several (errors.Join, fmt.Errorf with
// several %w): the standard library's convention, which errors.Is follows.
type multiUnwrapper interface{ Unwrap() []error }

// The stacks an error may carry, by the conventions of the error libraries
// that record them (see errorOwnStack; Failure.Stack shows them).
type (
	// callersStack is an error carrying its program counters
	// (github.com/go-errors/errors and others).
	callersStack interface{ Callers() []uintptr }
	// errorStackText is an error formatting its own stack
	// (github.com/go-errors/errors' ErrorStack).
	errorStackText interface{ ErrorStack() string }
	// stackBytes is an error carrying its stack as text, in bytes
	// (runtime/debug.Stack's form).
	stackBytes interface{ Stack() []byte }
	// stackText is an error carrying its stack as text.
	stackText interface{ Stack() string }
)
