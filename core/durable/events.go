package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// PartitionKey is the attribute every lifecycle event carries: the run's
// id, which is the workflow's partition.
const PartitionKey = "workflow_id"

// The lifecycle events of a run. Every workflow stores them under its own
// type strings, "<workflow>.<suffix>" (see Types), all with the same Go
// structs (codec.RegisterAs). Only workflow_id is indexed: inputs, outputs,
// results and contexts are JSON documents (json.RawMessage is never
// indexed), and step names, keys and error texts are tagged noindex, so a
// large output is not copied into the key index.
type (
	// WorkflowStarted starts a run with its input and seeded context.
	WorkflowStarted struct {
		WorkflowID string          `json:"workflow_id" sourced:"required"`
		Input      json.RawMessage `json:"input,omitempty"`
		Context    json.RawMessage `json:"context,omitempty"`
	}
	// StepStarted records that attempt Attempt (1-based) of the step at
	// Seq is due. It is committed before the step runs; a retry's is
	// scheduled for the retry's time.
	StepStarted struct {
		WorkflowID string `json:"workflow_id" sourced:"required"`
		Seq        int    `json:"seq" sourced:"noindex"`
		Name       string `json:"name" sourced:"noindex"`
		Key        string `json:"key" sourced:"noindex"`
		Attempt    int    `json:"attempt" sourced:"noindex"`
	}
	// StepComplete memoises a step's result.
	StepComplete struct {
		WorkflowID string          `json:"workflow_id" sourced:"required"`
		Seq        int             `json:"seq" sourced:"noindex"`
		Name       string          `json:"name" sourced:"noindex"`
		Key        string          `json:"key" sourced:"noindex"`
		Attempt    int             `json:"attempt" sourced:"noindex"`
		Result     json.RawMessage `json:"result,omitempty"`
	}
	// StepFailed records a failed attempt: the error's Go type, its
	// message and, for a panic, the stack. RetryAt is when the next attempt
	// is scheduled; nil when this failure is final.
	StepFailed struct {
		WorkflowID string     `json:"workflow_id" sourced:"required"`
		Seq        int        `json:"seq" sourced:"noindex"`
		Name       string     `json:"name" sourced:"noindex"`
		Key        string     `json:"key" sourced:"noindex"`
		Attempt    int        `json:"attempt" sourced:"noindex"`
		ErrorType  string     `json:"error_type" sourced:"noindex"`
		Error      string     `json:"error" sourced:"noindex"`
		Stack      string     `json:"stack,omitempty" sourced:"noindex"`
		RetryAt    *time.Time `json:"retry_at,omitempty" sourced:"noindex"`
		// RetryID is the id of the retry's StepStarted, scheduled for
		// RetryAt, so that a cancellation withdraws it (empty in runs
		// recorded before it was kept).
		RetryID string `json:"retry_id,omitempty" sourced:"noindex"`
		// ErrorDataType and ErrorData are the error's value, for an error
		// of a type the workflow registered (workflow.WithStepError): its
		// type's name and its JSON encoding.
		ErrorDataType string          `json:"error_data_type,omitempty" sourced:"noindex"`
		ErrorData     json.RawMessage `json:"error_data,omitempty" sourced:"noindex"`
	}
	// ContextUpdated persists the run's context as it was after the
	// operation at Seq (Seq = the number of operations when the run ends).
	ContextUpdated struct {
		WorkflowID string          `json:"workflow_id" sourced:"required"`
		Seq        int             `json:"seq" sourced:"noindex"`
		Context    json.RawMessage `json:"context"`
	}
	// WaitStarted suspends the run at Seq: a sleep until Until, or a
	// receive of the signal Signal (Until zero: no timeout). TimeoutID is
	// the id of the WaitEnded scheduled for Until (a sleep's end, a timed
	// receive's timeout), which the signal's delivery, or the run's
	// cancellation, withdraws from the schedule (empty for a sleep
	// recorded before it was kept).
	WaitStarted struct {
		WorkflowID string    `json:"workflow_id" sourced:"required"`
		Seq        int       `json:"seq" sourced:"noindex"`
		Name       string    `json:"name" sourced:"noindex"`
		Key        string    `json:"key" sourced:"noindex"`
		Signal     string    `json:"signal,omitempty" sourced:"noindex"`
		Until      time.Time `json:"until,omitzero" sourced:"noindex"`
		TimeoutID  string    `json:"timeout_id,omitempty" sourced:"noindex"`
	}
	// WaitEnded resumes the run: a sleep's end or a receive's timeout
	// (TimedOut), scheduled for Until; or a signal delivered to a receive
	// (SignalID and Payload). Only the first WaitEnded of a wait counts.
	WaitEnded struct {
		WorkflowID string          `json:"workflow_id" sourced:"required"`
		Seq        int             `json:"seq" sourced:"noindex"`
		Key        string          `json:"key" sourced:"noindex"`
		TimedOut   bool            `json:"timed_out,omitempty" sourced:"noindex"`
		SignalID   string          `json:"signal_id,omitempty" sourced:"noindex"`
		Payload    json.RawMessage `json:"payload,omitempty"`
	}
	// SignalSent is a message for a run, sent from outside (Send): the
	// run's receives of Name take them in order.
	SignalSent struct {
		WorkflowID string          `json:"workflow_id" sourced:"required"`
		Name       string          `json:"name" sourced:"noindex"`
		Payload    json.RawMessage `json:"payload,omitempty"`
	}
	// WorkflowCancelled ends a run from outside (Cancel).
	WorkflowCancelled struct {
		WorkflowID string `json:"workflow_id" sourced:"required"`
		Reason     string `json:"reason,omitempty" sourced:"noindex"`
	}
	// WorkflowComplete ends a run with its output.
	WorkflowComplete struct {
		WorkflowID string          `json:"workflow_id" sourced:"required"`
		Output     json.RawMessage `json:"output,omitempty"`
	}
	// WorkflowFailed ends a run with the error its function returned (or
	// its panic, or a NonDeterminismError). Step names the step whose
	// failure it returned, if any.
	WorkflowFailed struct {
		WorkflowID string `json:"workflow_id" sourced:"required"`
		Step       string `json:"step,omitempty" sourced:"noindex"`
		ErrorType  string `json:"error_type" sourced:"noindex"`
		Error      string `json:"error" sourced:"noindex"`
		Stack      string `json:"stack,omitempty" sourced:"noindex"`
		// NonDeterminism is the mismatch of a run failed because its
		// function no longer matches its history (absent for others, and
		// in events written before it was recorded).
		NonDeterminism *NonDeterminismError `json:"non_determinism,omitempty" sourced:"noindex"`
	}
)

// The type-string suffixes of the lifecycle events.
const (
	SuffixWorkflowStarted   = "workflow_started"
	SuffixStepStarted       = "step_started"
	SuffixStepComplete      = "step_complete"
	SuffixStepFailed        = "step_failed"
	SuffixContextUpdated    = "context_updated"
	SuffixWaitStarted       = "wait_started"
	SuffixWaitEnded         = "wait_ended"
	SuffixSignalSent        = "signal_sent"
	SuffixWorkflowCancelled = "workflow_cancelled"
	SuffixWorkflowComplete  = "workflow_complete"
	SuffixWorkflowFailed    = "workflow_failed"
)

// Types are the type strings of a workflow's lifecycle events.
type Types struct {
	WorkflowStarted, StepStarted, StepComplete, StepFailed, ContextUpdated string
	WaitStarted, WaitEnded, SignalSent, WorkflowCancelled                  string
	WorkflowComplete, WorkflowFailed                                       string
}

// TypesOf returns the type strings of the workflow named prefix.
func TypesOf(prefix string) Types {
	p := prefix + "."
	return Types{
		WorkflowStarted: p + SuffixWorkflowStarted, StepStarted: p + SuffixStepStarted,
		StepComplete: p + SuffixStepComplete, StepFailed: p + SuffixStepFailed,
		ContextUpdated: p + SuffixContextUpdated, WaitStarted: p + SuffixWaitStarted,
		WaitEnded: p + SuffixWaitEnded, SignalSent: p + SuffixSignalSent,
		WorkflowCancelled: p + SuffixWorkflowCancelled, WorkflowComplete: p + SuffixWorkflowComplete,
		WorkflowFailed: p + SuffixWorkflowFailed,
	}
}

// All returns every type string, in the order of the struct.
func (t Types) All() []string {
	return []string{t.WorkflowStarted, t.StepStarted, t.StepComplete, t.StepFailed, t.ContextUpdated,
		t.WaitStarted, t.WaitEnded, t.SignalSent, t.WorkflowCancelled, t.WorkflowComplete, t.WorkflowFailed}
}

// Runner are the types the run's own runner appends: the ones its
// appends are guarded by (a signal or a cancellation arriving while a step
// runs is no conflict: the step's outcome is kept and the next handling
// sees them).
func (t Types) Runner() []string {
	return []string{t.WorkflowStarted, t.StepStarted, t.StepComplete, t.StepFailed, t.ContextUpdated,
		t.WaitStarted, t.WaitEnded, t.WorkflowComplete, t.WorkflowFailed}
}

// Register registers the lifecycle events of the workflow named prefix in
// reg (codec.RegisterAs). Names already registered for the same struct are
// skipped, so registering twice is harmless; a name registered for another
// Go type is an error.
func Register(reg *codec.Registry, prefix string) error {
	t := TypesOf(prefix)
	var errs []error
	add := func(name string, gt reflect.Type, register func(*codec.Registry, string) error) {
		if have, err := reg.ByName(name); err == nil {
			if have.GoType != gt {
				errs = append(errs, fmt.Errorf("durable: %q is registered for %v, not the workflow event %v: rename the workflow or the message type", name, have.GoType, gt))
			}
			return
		}
		if err := register(reg, name); err != nil {
			errs = append(errs, err)
		}
	}
	add(t.WorkflowStarted, reflect.TypeFor[WorkflowStarted](), func(r *codec.Registry, n string) error { return codec.RegisterAs[WorkflowStarted](r, n) })
	add(t.StepStarted, reflect.TypeFor[StepStarted](), func(r *codec.Registry, n string) error { return codec.RegisterAs[StepStarted](r, n) })
	add(t.StepComplete, reflect.TypeFor[StepComplete](), func(r *codec.Registry, n string) error { return codec.RegisterAs[StepComplete](r, n) })
	add(t.StepFailed, reflect.TypeFor[StepFailed](), func(r *codec.Registry, n string) error { return codec.RegisterAs[StepFailed](r, n) })
	add(t.ContextUpdated, reflect.TypeFor[ContextUpdated](), func(r *codec.Registry, n string) error { return codec.RegisterAs[ContextUpdated](r, n) })
	add(t.WaitStarted, reflect.TypeFor[WaitStarted](), func(r *codec.Registry, n string) error { return codec.RegisterAs[WaitStarted](r, n) })
	add(t.WaitEnded, reflect.TypeFor[WaitEnded](), func(r *codec.Registry, n string) error { return codec.RegisterAs[WaitEnded](r, n) })
	add(t.SignalSent, reflect.TypeFor[SignalSent](), func(r *codec.Registry, n string) error { return codec.RegisterAs[SignalSent](r, n) })
	add(t.WorkflowCancelled, reflect.TypeFor[WorkflowCancelled](), func(r *codec.Registry, n string) error { return codec.RegisterAs[WorkflowCancelled](r, n) })
	add(t.WorkflowComplete, reflect.TypeFor[WorkflowComplete](), func(r *codec.Registry, n string) error { return codec.RegisterAs[WorkflowComplete](r, n) })
	add(t.WorkflowFailed, reflect.TypeFor[WorkflowFailed](), func(r *codec.Registry, n string) error { return codec.RegisterAs[WorkflowFailed](r, n) })
	return errors.Join(errs...)
}

// Event returns m's payload as a lifecycle event struct: the payload
// itself, or, for a message read raw (json.RawMessage, as the sourced CLI
// reads), the struct its type suffix names decoded from it. ok is false for
// a message that is no lifecycle event.
func Event(m core.Message) (ev any, ok bool) {
	raw, isRaw := m.Payload.(json.RawMessage)
	if !isRaw {
		switch m.Payload.(type) {
		case WorkflowStarted, StepStarted, StepComplete, StepFailed, ContextUpdated, WaitStarted,
			WaitEnded, SignalSent, WorkflowCancelled, WorkflowComplete, WorkflowFailed:
			return m.Payload, true
		}
		return nil, false
	}
	suffix := m.Type[strings.LastIndexByte(m.Type, '.')+1:]
	decode := func(v any) (any, bool) {
		if err := json.Unmarshal(raw, v); err != nil {
			return nil, false
		}
		return reflect.ValueOf(v).Elem().Interface(), true
	}
	switch suffix {
	case SuffixWorkflowStarted:
		return decode(&WorkflowStarted{})
	case SuffixStepStarted:
		return decode(&StepStarted{})
	case SuffixStepComplete:
		return decode(&StepComplete{})
	case SuffixStepFailed:
		return decode(&StepFailed{})
	case SuffixContextUpdated:
		return decode(&ContextUpdated{})
	case SuffixWaitStarted:
		return decode(&WaitStarted{})
	case SuffixWaitEnded:
		return decode(&WaitEnded{})
	case SuffixSignalSent:
		return decode(&SignalSent{})
	case SuffixWorkflowCancelled:
		return decode(&WorkflowCancelled{})
	case SuffixWorkflowComplete:
		return decode(&WorkflowComplete{})
	case SuffixWorkflowFailed:
		return decode(&WorkflowFailed{})
	}
	return nil, false
}
