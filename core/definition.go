package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sourced-go/sourced/codec"
)

// Definition is the type-erased view of a reactor definition (Decider,
// Projector) that the effects package turns into a reactor: what its
// consumer group handles, and a pure step from a claimed batch to outcomes.
// Definitions built with this package implement it; effects.FromDefinition
// adapts any Definition to the reactor protocol.
type Definition interface {
	// Spec describes the definition's consumer group.
	Spec() Spec
	// Check validates the definition against a registry: handler errors
	// and the partition schema. Routers and test helpers call it.
	Check(reg *codec.Registry) error
	// Step decides a claimed batch: one Outcome per message, in order. If a
	// message fails, Step returns the outcomes of the messages before it and
	// a *BatchError naming the failed one.
	Step(in StepInput) ([]Outcome, error)
}

// SpecProvider is what describes a consumer group with a Spec: every
// Definition, Decider and Projector, statechart.Machine and a workflow
// definition. The shell probes for it where it may be given something
// else too: shell.Load checks the partition it is given against the
// spec's PartitionBy (a bare Projection has none), and the snapshots of a
// definition are filed under the spec's Group.
type SpecProvider interface {
	Spec() Spec
}

// CommandDecider is a definition that can decide one command on a
// partition's history outside a claimed batch: what synchronous command
// handling (shell.Handle) needs. Decider and statechart.Machine implement
// it.
type CommandDecider interface {
	Definition
	// DecideCommand decides cmd (already appended at its position) on the
	// partition's history (its messages of the Spec's Evolved types, in
	// position order): the outcome's Events are appended with the command,
	// its Sync work runs in the same transaction. A rejection is returned
	// as the handler's error (matching ErrNotHandled when nothing accepts
	// the command).
	DecideCommand(partition Partition, history []PositionedMessage, cmd PositionedMessage) (Outcome, error)
}

// Evolver is what loading a state from the log needs: Decider, Projector
// and Projection all implement it.
type Evolver[S any] interface {
	Initial() S
	Evolve(s S, events ...Message) S
	EvolvedTypes() []reflect.Type
}

// DecidedByKey is the metadata key under which synchronous command handling
// records the group that already decided a command, so that the group's
// workers acknowledge it without deciding it again.
const DecidedByKey = "sourced_decided_by"

// StateLoader is implemented by definitions that load their state from the
// user's own storage before a batch (state-stored projectors).
type StateLoader interface {
	LoadState(ctx context.Context, partition Partition) (state any, found bool, err error)
}

// Folder is an event-sourced definition (Spec.History, not LoadsState)
// that lets a shell fold its partitions' states itself, so that it can
// keep them between batches (shell.StateCache) and fold only the history
// appended since: Step(in) is StepFolded(in, FoldState(InitialState(),
// in.History)). Decider and Projector implement it.
type Folder interface {
	// StateType is the Go type of the definition's state.
	StateType() reflect.Type
	// InitialState returns a fresh initial state.
	InitialState() any
	// FoldState evolves s, a state of StateType, with the messages in
	// order.
	FoldState(s any, history []PositionedMessage) any
	// StepFolded is Step on s, the state folded from the partition's
	// whole history: in.History is not read.
	StepFolded(in StepInput, s any) ([]Outcome, error)
}

// Spec describes a definition's consumer group.
type Spec struct {
	// Group is the consumer group id, normalised (see NormalizeGroup).
	Group string
	// Label is a human name for the group (defaults to Group).
	Label string
	// PartitionBy are the partition attribute names, sorted. Empty means
	// the group is id-partitioned (only allowed when Exclusive).
	PartitionBy []string
	// Exclusive marks the group as the only one handling its types.
	Exclusive bool
	// Handled are the payload types the group claims.
	Handled []reflect.Type
	// Evolved are the payload types read as history. When History is true
	// the shell reads the partition's messages of these types before each
	// batch and passes them as StepInput.History.
	Evolved []reflect.Type
	History bool
	// LoadsState is true when the definition loads its state from the
	// application's storage before each batch (a state-stored projector,
	// through StateLoader). Other definitions are pure: their Step only
	// computes, so the shell may run it inside the write transaction.
	LoadsState bool
	// Hooks are the definition's lifecycle hooks and error strategy.
	Hooks Hooks
}

// StepInput is a claimed batch as a definition's Step sees it.
type StepInput struct {
	// Partition is the claimed partition's values.
	Partition Partition
	// History is the partition's messages of the Evolved types (when the
	// Spec asks for history), in position order.
	History []PositionedMessage
	// Batch are the claimed messages, in position order.
	Batch []PositionedMessage
	// Replaying is true when every message of the batch was processed
	// before (the group was reset): reactions are skipped.
	Replaying bool
	// ReplayUpto is the highest position of the partition processed
	// before the group was last reset (0: none): a message at or below it
	// is a replay (see Replayed), even in a batch that reaches past it.
	ReplayUpto int64
	// RecordRefusals, when set (the shell's router sets it), makes a
	// decider record a business refusal (an error its Decide returns for
	// a command) as a CommandRejected reaction to the command and go on,
	// instead of failing the batch (see CommandRejected).
	RecordRefusals bool
	// State is the state a StateLoader loaded, when Loaded is true.
	State  any
	Loaded bool
	// Queries holds, aligned with Batch, what the query of each command
	// with one (see Reads and Querier) read; nil for the other messages.
	// Index gives the type and key pairs of a message, to match those
	// reads against each part's conditions.
	Queries []*QueryRead
	Index   Indexer
}

// QueryRead is what a command's query read: the resolved plan, the
// messages matching its union in position order, and the guard of that
// read (the union, after the last position read).
type QueryRead struct {
	Plan     Plan
	Messages []PositionedMessage
	Guard    Guard
}

// Querier is a definition some of whose commands read a query of their
// own (Reads) instead of their partition's history: the shell resolves
// the query, reads its union once, and decides on what it read, under a
// guard on that union. Decider implements it.
type Querier interface {
	// QueryPlan resolves cmd's query; false when cmd has none.
	QueryPlan(reg *codec.Registry, cmd Message) (Plan, bool, error)
	// DecideQuery decides cmd on what its plan's union read.
	DecideQuery(plan Plan, index Indexer, partition Partition, read []PositionedMessage, cmd PositionedMessage) (Outcome, error)
}

// Outcome is what one claimed message produced.
type Outcome struct {
	// Source is the claimed message.
	Source PositionedMessage
	// Events are appended under the decision's guard (a decider's events,
	// correlated with Source).
	Events []Message
	// Guard, when set, is the guard Events are appended under instead of
	// the batch's history guard: a queried decision's own (see Reads).
	Guard *Guard
	// Reactions are appended without a guard (dispatched follow-ups,
	// correlated with the event they react to).
	Reactions []Message
	// Sync is work for the batch's transaction; AfterSync runs after commit.
	Sync      []func(ctx context.Context, tx SyncTx) error
	AfterSync []func(ctx context.Context) error
}

// Replayed tells whether m, a message of the batch, was processed before
// the group was last reset: its reactions and decisions were made then,
// and are not made again.
func (in StepInput) Replayed(m PositionedMessage) bool {
	return in.Replaying || (m.Position > 0 && m.Position <= in.ReplayUpto)
}

// BatchError reports the message of a batch that failed; the outcomes
// returned with it cover the messages before it.
type BatchError struct {
	Message PositionedMessage
	Index   int
	Err     error
	// Where names the user function that returned Err, and where it is
	// defined ("pkg.func1 (file.go:12)"), when known (a decide handler's
	// error): a returned Go error carries no stack, so this is where it
	// surfaced.
	Where string
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("sourced: message %d (%s at position %d) failed: %v", e.Index, e.Message.Type, e.Message.Position, e.Err)
}

// Unwrap returns the cause.
func (e *BatchError) Unwrap() error { return e.Err }

// ErrDefinition is matched by every definition error.
var ErrDefinition = errors.New("sourced: definition error")

// ErrNotHandled is matched by the error of deciding a command the decider
// has no handler for.
var ErrNotHandled = errors.New("sourced: message not handled")

// DefinitionError is a mistake in a definition, found when it is built or
// checked: it names the group, and where relevant the message type and the
// partition key.
type DefinitionError struct {
	Group   string
	Message string
	Key     string
	Problem string
}

func (e *DefinitionError) Error() string {
	var b strings.Builder
	b.WriteString("sourced: definition of ")
	if e.Group != "" {
		fmt.Fprintf(&b, "%q", e.Group)
	} else {
		b.WriteString("an unnamed group")
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ", message %s", e.Message)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ", key %q", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Is makes errors.Is(err, ErrDefinition) true.
func (e *DefinitionError) Is(target error) bool { return target == ErrDefinition }

// groupSpec is the part of a definition every kind shares.
type groupSpec struct {
	group     string
	label     string
	partition []string
	keyTypes  map[string]reflect.Type
	exclusive bool
	hooks     Hooks
}

// check validates the group id and the partition schema against reg:
// commands (required, also in allKeys) declare every key as a required
// attribute, reactions (allKeys) declare every key, other evolved events
// (someKeys) declare at least one, at least one handled type declares all,
// and each key has the schema's Go type. It returns the normalised group.
func (g groupSpec) check(reg *codec.Registry, handlerErr error, required, allKeys, someKeys []reflect.Type) (string, error) {
	var errs []error
	group, err := NormalizeGroup(g.group)
	if err != nil {
		errs = append(errs, &DefinitionError{Group: g.group, Problem: err.Error()})
		group = g.group
	}
	if handlerErr != nil {
		errs = append(errs, &DefinitionError{Group: group, Problem: handlerErr.Error()})
	}
	defErr := func(t *codec.Type, key, format string, args ...any) {
		name := ""
		if t != nil {
			name = t.Name
		}
		errs = append(errs, &DefinitionError{Group: group, Message: name, Key: key, Problem: fmt.Sprintf(format, args...)})
	}
	if len(g.partition) == 0 && !g.exclusive {
		defErr(nil, "", "no PartitionBy: only an Exclusive group may be partitioned by message id (a delete-on-ack queue)")
	}
	for _, k := range g.partition {
		if k == IDKey {
			defErr(nil, k, "%s is reserved for id-partitioned groups: leave PartitionBy empty instead", IDKey)
		}
	}
	types := func(ts []reflect.Type) []*codec.Type {
		var out []*codec.Type
		for _, t := range ts {
			ct, err := reg.ByGoType(t)
			if err != nil {
				errs = append(errs, &DefinitionError{Group: group, Message: t.String(), Problem: err.Error()})
				continue
			}
			out = append(out, ct)
		}
		return out
	}
	all, some := types(allKeys), types(someKeys)
	if len(g.partition) > 0 {
		full := false
		for _, t := range all {
			for _, k := range g.partition {
				f, ok := t.Field(k)
				switch {
				case !ok:
					defErr(t, k, "commands and reactions must declare every partition key")
				case !f.Required && slices.Contains(required, t.GoType):
					defErr(t, k, "a command must declare every partition key as a required attribute (tag it `sourced:\"required\"`), so that a command without it is refused instead of decided in the partition \"\"")
				}
			}
		}
		for _, t := range slices.Concat(all, some) {
			n := 0
			for _, k := range g.partition {
				f, ok := t.Field(k)
				if !ok {
					continue
				}
				n++
				want := g.keyType(k)
				got := f.GoType
				if f.Multi {
					got = got.Elem()
				}
				if got.Kind() == reflect.Pointer {
					got = got.Elem()
				}
				if got != want && got.Kind() != want.Kind() {
					defErr(t, k, "key has Go type %v, the partition schema says %v", got, want)
				}
				switch {
				case f.NoIndex:
					defErr(t, k, "key attribute is tagged `sourced:\"noindex\"`, so no message is indexed under it: remove the tag")
				case !f.Indexed:
					defErr(t, k, "key attribute is not indexable (scalar or slice of scalars)")
				}
			}
			if n == 0 && slices.Contains(some, t) {
				defErr(t, "", "evolved events must declare at least one partition key of %v", g.partition)
			}
			if n == len(g.partition) {
				full = true
			}
		}
		if !full && len(all)+len(some) > 0 {
			defErr(nil, "", "no handled message declares every partition key %v, so no partition would ever be created", g.partition)
		}
	}
	return group, errors.Join(errs...)
}

func (g groupSpec) keyType(k string) reflect.Type {
	if t, ok := g.keyTypes[k]; ok {
		return t
	}
	return reflect.TypeFor[string]()
}

func (g groupSpec) spec(handled, evolved []reflect.Type, history bool) Spec {
	group, err := NormalizeGroup(g.group)
	if err != nil {
		group = g.group
	}
	label := g.label
	if label == "" {
		label = group
	}
	return Spec{
		Group:       group,
		Label:       label,
		PartitionBy: slices.Sorted(slices.Values(g.partition)),
		Exclusive:   g.exclusive,
		Handled:     handled,
		Evolved:     evolved,
		History:     history,
		Hooks:       g.hooks,
	}
}

// dispatch turns what a reaction returned into messages correlated with the
// event and tagged with the producing group.
func dispatch(out []any, event Message, group string) ([]Message, error) {
	msgs := make([]Message, 0, len(out))
	for i, o := range out {
		var m Message
		switch v := o.(type) {
		case nil:
			return nil, fmt.Errorf("reaction to %s returned nil at index %d", event.Type, i)
		case undeclared:
			return nil, v.err
		case Delayed:
			if m = v.Dated(event); m.Err() != nil {
				return nil, fmt.Errorf("reaction to %s at index %d: %w", event.Type, i, m.Err())
			}
		default:
			m = NewMessage(v)
		}
		if m.Payload == nil {
			return nil, fmt.Errorf("reaction to %s returned a message with no payload at index %d", event.Type, i)
		}
		m = m.Correlate(event).WithMetadata(map[string]any{"producer": group})
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// events turns what a decide handler returned into messages correlated with
// the command.
func events(out []any, cmd Message) ([]Message, error) {
	msgs := make([]Message, 0, len(out))
	for i, o := range out {
		if o == nil {
			return nil, fmt.Errorf("decide %s returned nil at index %d", cmd.Type, i)
		}
		m := NewMessage(o)
		if m.Payload == nil {
			return nil, fmt.Errorf("decide %s returned a message with no payload at index %d", cmd.Type, i)
		}
		msgs = append(msgs, m.Correlate(cmd))
	}
	return msgs, nil
}

// MessagesOf returns the messages of positioned messages, in order.
func MessagesOf(msgs []PositionedMessage) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.Message
	}
	return out
}
