package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/sourced-go/sourced/codec"
)

// Decider handles commands: it evolves a state from the events of its
// partition, decides each command against that state (returning events or
// an error), and reacts to events by dispatching follow-up messages.
//
// A Decider is a value: With returns a new one, and copies share nothing
// mutable. Its consumer group claims the commands it decides and the events
// it reacts to; the events it evolves are read as the partition's history.
type Decider[S any] struct {
	// Group is the consumer group id (normalised by NormalizeGroup).
	Group string
	// Label is a human name shown by monitoring (defaults to Group).
	Label string
	// PartitionBy are the payload attributes that define the consistency
	// boundary, e.g. {"course_id"}.
	PartitionBy []string
	// KeyTypes gives the Go type of partition keys that are not strings.
	KeyTypes map[string]reflect.Type
	// Exclusive marks the decider as the only reactor handling its types.
	Exclusive bool
	// Init builds the state before the first event (nil: the zero S).
	Init func() S
	// Hooks are the group's lifecycle hooks (OnStart, OnStop, OnReset)
	// and error strategy, called and applied by the shell's router.
	Hooks Hooks
	// Snapshots, when its Codec is set, lets the shell persist the
	// decider's folded state per partition and start from the latest
	// snapshot instead of the partition's whole history (see Snapshots).
	Snapshots Snapshots[S]

	h *handlers[S]
}

// Decision is the outcome of Run: the state after the command's events, the
// events, and the reactions those events trigger.
type Decision[S any] struct {
	State     S
	Events    []Message
	Reactions []Message
}

// With returns a copy of d with more handlers.
func (d Decider[S]) With(hs ...Handler[S]) Decider[S] {
	d.h = d.compiled().with(hs)
	return d
}

func (d Decider[S]) compiled() *handlers[S] {
	if d.h == nil {
		return emptyHandlers[S]()
	}
	return d.h
}

// Projection returns the decider's evolve side as a projection.
func (d Decider[S]) Projection() Projection[S] {
	h := d.compiled().clone()
	h.decide, h.decideOrder = map[reflect.Type]func(S, Message) ([]any, error){}, nil
	h.react, h.reactOrder, h.reactAny = map[reflect.Type]func(S, Message) []any{}, nil, nil
	h.sync, h.after = nil, nil
	return Projection[S]{Init: d.Init, h: h}
}

// Initial returns a fresh initial state.
func (d Decider[S]) Initial() S { return initial(d.Init, d.compiled()) }

// Evolve applies events to s in order (events without a handler are
// skipped).
func (d Decider[S]) Evolve(s S, events ...Message) S { return d.compiled().fold(s, events) }

// EvolveHistory is Evolve for a history as a store reads it (positioned
// messages), without copying it into a slice of messages first.
func (d Decider[S]) EvolveHistory(s S, history []PositionedMessage) S {
	h := d.compiled()
	for i := range history {
		s, _ = h.evolveOne(s, history[i].Message)
	}
	return s
}

// Fold evolves a fresh initial state with the history (Messages or bare
// payloads).
func (d Decider[S]) Fold(history ...any) S {
	return d.Evolve(d.Initial(), Messages(history...)...)
}

// Decide decides cmd against s: the events, correlated with cmd, or the
// handler's error. A command with no handler is an error matching
// ErrNotHandled.
func (d Decider[S]) Decide(s S, cmd Message) ([]Message, error) {
	t := PayloadType(cmd.Payload)
	fn, ok := d.compiled().decide[t]
	if !ok {
		return nil, fmt.Errorf("%w: decider %q has no decide handler for %v", ErrNotHandled, d.Group, t)
	}
	out, err := fn(s, cmd)
	if err != nil {
		return nil, err
	}
	return events(out, cmd)
}

// React returns the follow-up messages for event in state s (none when the
// decider does not react to its type), correlated with the event and with
// metadata "producer" set to the group.
func (d Decider[S]) React(s S, event Message) ([]Message, error) {
	fn := d.compiled().reactFn(PayloadType(event.Payload))
	if fn == nil {
		return nil, nil
	}
	return dispatch(fn(s, event), event, d.Group)
}

// Run decides cmd on history as a unit test would: it folds history,
// decides, evolves the events, and reacts to each event in turn. No store
// is involved; messages are not stamped (ids and times stay zero unless the
// inputs had them).
func (d Decider[S]) Run(history []Message, cmd Message) (Decision[S], error) {
	s := d.Evolve(d.Initial(), history...)
	evs, err := d.Decide(s, cmd)
	if err != nil {
		return Decision[S]{State: s}, err
	}
	s = d.Evolve(s, evs...)
	var reactions []Message
	for _, e := range evs {
		r, err := d.React(s, e)
		if err != nil {
			return Decision[S]{State: s, Events: evs}, err
		}
		reactions = append(reactions, r...)
	}
	return Decision[S]{State: s, Events: evs, Reactions: reactions}, nil
}

// DecideCommand folds the history and decides cmd (CommandDecider), with
// the decider's sync work bound to the decision.
func (d Decider[S]) DecideCommand(partition Partition, history []PositionedMessage, cmd PositionedMessage) (Outcome, error) {
	out, _, err := d.DecideOn(d.Evolve(d.Initial(), MessagesOf(history)...), partition, cmd)
	return out, err
}

// DecideOn is DecideCommand on a state already folded from the
// partition's history (a cached one, say): it decides cmd on s and returns
// the outcome and the state after the decision's events.
func (d Decider[S]) DecideOn(s S, partition Partition, cmd PositionedMessage) (Outcome, S, error) {
	evs, err := d.Decide(s, cmd.Message)
	if err != nil {
		return Outcome{Source: cmd}, s, err
	}
	s = d.Evolve(s, evs...)
	out := Outcome{Source: cmd, Events: evs}
	out.Sync, out.AfterSync = bindSync(d.compiled(), Batch[S]{State: s, Partition: partition, Messages: []PositionedMessage{cmd}, Events: evs})
	return out, s, nil
}

// Query returns the query cmd's decision reads (see Reads), and false when
// cmd's type has none: it is decided on the partition's history.
func (d Decider[S]) Query(cmd Message) (Query[S], bool) {
	fn, ok := d.compiled().query[PayloadType(cmd.Payload)]
	if !ok {
		return nil, false
	}
	return fn(cmd), true
}

// QueryPlan resolves cmd's query against reg (see Query.Plan), and false
// when cmd's type has none (Querier).
func (d Decider[S]) QueryPlan(reg *codec.Registry, cmd Message) (Plan, bool, error) {
	q, ok := d.Query(cmd)
	if !ok {
		return Plan{}, false, nil
	}
	plan, err := q.Plan(reg)
	if err != nil {
		var de *DefinitionError
		if errors.As(err, &de) {
			de.Group, de.Message = d.Spec().Group, PayloadType(cmd.Payload).String()
		}
		return Plan{}, true, err
	}
	return plan, true, nil
}

// DecideQuery decides cmd on the state its query composes from read (what
// the union of plan read, in position order), with the decider's sync
// work bound to the decision (Querier).
func (d Decider[S]) DecideQuery(plan Plan, index Indexer, partition Partition, read []PositionedMessage, cmd PositionedMessage) (Outcome, error) {
	out, _, err := d.DecideQueryState(plan, index, partition, read, cmd)
	return out, err
}

// DecideQueryState is DecideQuery that also returns the state after the
// decision's events (each event folded into the parts it matches).
func (d Decider[S]) DecideQueryState(plan Plan, index Indexer, partition Partition, read []PositionedMessage, cmd PositionedMessage) (Outcome, S, error) {
	f, ok := d.startQuery(plan, index, cmd)
	if !ok {
		return Outcome{Source: cmd}, d.Initial(), fmt.Errorf("%w: decider %q has no query (core.Reads) for %v", ErrNotHandled, d.Group, PayloadType(cmd.Payload))
	}
	for _, m := range read {
		f.add(m.Message)
	}
	return d.finishQuery(f, partition, cmd)
}

func (d Decider[S]) startQuery(plan Plan, index Indexer, cmd PositionedMessage) (*folding[S], bool) {
	q, ok := d.Query(cmd.Message)
	if !ok {
		return nil, false
	}
	return q.folding(plan, index), true
}

// finishQuery decides cmd on what f folded so far, then folds the events.
func (d Decider[S]) finishQuery(f *folding[S], partition Partition, cmd PositionedMessage) (Outcome, S, error) {
	s := f.state(d.Initial())
	evs, err := d.Decide(s, cmd.Message)
	if err != nil {
		return Outcome{Source: cmd}, s, err
	}
	for _, e := range evs {
		f.add(e)
	}
	s = f.state(d.Initial())
	out := Outcome{Source: cmd, Events: evs}
	out.Sync, out.AfterSync = bindSync(d.compiled(), Batch[S]{State: s, Partition: partition, Messages: []PositionedMessage{cmd}, Events: evs})
	return out, s, nil
}

// QueryState is the state cmd's query composes from events (what its
// union read, in position order, and any events decided since).
func (d Decider[S]) QueryState(cmd Message, plan Plan, index Indexer, events []Message) S {
	q, ok := d.Query(cmd)
	if !ok {
		return d.Evolve(d.Initial(), events...)
	}
	return q.Fold(d.Initial(), plan, events, index)
}

// Handles reports whether the decider decides commands of type t.
func (d Decider[S]) Handles(t reflect.Type) bool {
	_, ok := d.compiled().decide[t]
	return ok
}

// CommandTypes are the command types the decider decides.
func (d Decider[S]) CommandTypes() []reflect.Type { return slices.Clone(d.compiled().decideOrder) }

// EvolvedTypes are the event types the decider evolves.
func (d Decider[S]) EvolvedTypes() []reflect.Type { return slices.Clone(d.compiled().evolveOrder) }

// Err returns the errors found while building the decider, if any (an
// invalid Snapshots option included).
func (d Decider[S]) Err() error {
	return errors.Join(d.compiled().err(), d.Snapshots.check(d.Group, len(d.PartitionBy) > 0))
}

func (d Decider[S]) groupSpec() groupSpec {
	return groupSpec{group: d.Group, label: d.Label, partition: d.PartitionBy, keyTypes: d.KeyTypes, exclusive: d.Exclusive, hooks: d.Hooks}
}

// Spec describes the decider's consumer group: it claims its commands and
// the events it reacts to, and reads the events it evolves as history.
func (d Decider[S]) Spec() Spec {
	h := d.compiled()
	handled := slices.Clone(h.decideOrder)
	for _, t := range h.reactionTypes() {
		if !slices.Contains(handled, t) {
			handled = append(handled, t)
		}
	}
	return d.groupSpec().spec(handled, slices.Clone(h.evolveOrder), true)
}

// Check validates the decider against reg: its handlers, its group id, and
// the partition schema (commands declare every key as a required
// attribute, reactions every key, evolved events at least one, keys have
// the schema's types).
func (d Decider[S]) Check(reg *codec.Registry) error {
	h := d.compiled()
	all := slices.Clone(h.decideOrder)
	all = append(all, h.reactOrder...)
	var some []reflect.Type
	for _, t := range h.evolveOrder {
		if !slices.Contains(all, t) {
			some = append(some, t)
		}
	}
	_, err := d.groupSpec().check(reg, h.err(), h.decideOrder, all, some)
	return errors.Join(err, d.checkQueries(reg), d.Snapshots.check(d.Spec().Group, len(d.PartitionBy) > 0))
}

// checkQueries resolves each query on the zero command, so that a filter
// naming an attribute no event type has fails when the decider is
// checked, not on the first command.
func (d Decider[S]) checkQueries(reg *codec.Registry) error {
	h := d.compiled()
	var errs []error
	for _, t := range h.decideOrder {
		fn, ok := h.query[t]
		if !ok {
			continue
		}
		var q Query[S]
		func() {
			defer func() {
				if r := recover(); r != nil {
					q = nil // the query needs a real command: checked when one comes
				}
			}()
			q = fn(Message{Payload: reflect.New(t).Elem().Interface()})
		}()
		if _, err := q.plan(reg); err != nil {
			var de *DefinitionError
			if errors.As(err, &de) {
				de.Group, de.Message = d.Spec().Group, t.String()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Step decides a claimed batch. The state is folded from the history once;
// each command is decided on it plus the events of the commands before it
// in the batch, so a batch never conflicts with itself. Sync and
// after-sync work is bound to every message the decider handles: each
// command decided (with its events) and each event reacted to (with no
// events); not to the messages it skips. Commands in a
// replayed batch were decided before and are only acknowledged (deciding
// them again would append their events twice); reactions are skipped too.
// So are commands whose metadata says this group decided them already
// (DecidedByKey, set by synchronous handling).
func (d Decider[S]) Step(in StepInput) ([]Outcome, error) {
	return d.stepOn(in, d.Evolve(d.Initial(), MessagesOf(in.History)...))
}

// StateType is the Go type of the decider's state (Folder).
func (d Decider[S]) StateType() reflect.Type { return reflect.TypeFor[S]() }

// InitialState returns a fresh initial state (Folder).
func (d Decider[S]) InitialState() any { return d.Initial() }

// FoldState evolves s, an S, with history (Folder).
func (d Decider[S]) FoldState(s any, history []PositionedMessage) any {
	return d.Evolve(s.(S), MessagesOf(history)...)
}

// StepFolded is Step on s, an S folded from the partition's whole
// history (Folder).
func (d Decider[S]) StepFolded(in StepInput, s any) ([]Outcome, error) {
	return d.stepOn(in, s.(S))
}

// stepOn is Step on s, the state folded from the partition's history.
func (d Decider[S]) stepOn(in StepInput, s S) ([]Outcome, error) {
	h := d.compiled()
	group, err := NormalizeGroup(d.Group)
	if err != nil {
		group = d.Group
	}
	outs := make([]Outcome, 0, len(in.Batch))
	var decidedEvents []Message // this batch's, for the queries of the commands after them
	for i, m := range in.Batch {
		out := Outcome{Source: m}
		t := PayloadType(m.Payload)
		decided := m.Metadata[DecidedByKey] == group
		replayed := in.Replayed(m)
		if _, isCmd := h.decide[t]; isCmd && !replayed && !decided {
			if _, queried := h.query[t]; queried {
				var read *QueryRead
				if i < len(in.Queries) {
					read = in.Queries[i]
				}
				if read == nil || in.Index == nil {
					return outs, &BatchError{Message: m, Index: i, Err: fmt.Errorf("%w: the command's query (core.Reads) was not read: run the decider through the shell or sourcedtest, which read it", ErrDefinition)}
				}
				f, _ := d.startQuery(read.Plan, in.Index, m)
				for _, r := range read.Messages {
					f.add(r.Message)
				}
				for _, e := range decidedEvents {
					f.add(e)
				}
				qo, _, err := d.finishQuery(f, in.Partition, m)
				if err != nil && in.RecordRefusals {
					out.Reactions = []Message{rejection(group, m, err)}
					outs = append(outs, out)
					continue
				}
				if err != nil {
					return outs, &BatchError{Message: m, Index: i, Err: err, Where: h.decideAt[t]}
				}
				g := read.Guard
				qo.Guard = &g
				s = d.Evolve(s, qo.Events...)
				decidedEvents = append(decidedEvents, qo.Events...)
				outs = append(outs, qo)
				continue
			}
			evs, err := d.Decide(s, m.Message)
			if err != nil && in.RecordRefusals {
				out.Reactions = []Message{rejection(group, m, err)}
				outs = append(outs, out)
				continue
			}
			if err != nil {
				return outs, &BatchError{Message: m, Index: i, Err: err, Where: h.decideAt[t]}
			}
			s = d.Evolve(s, evs...)
			decidedEvents = append(decidedEvents, evs...)
			out.Events = evs
			b := Batch[S]{State: s, Partition: in.Partition, Messages: []PositionedMessage{m}, Events: evs}
			out.Sync, out.AfterSync = bindSync(h, b)
		} else if h.reacts(t) && !replayed {
			r, err := d.React(s, m.Message)
			if err != nil {
				return outs, &BatchError{Message: m, Index: i, Err: err}
			}
			out.Reactions = r
			out.Sync, out.AfterSync = bindSync(h, Batch[S]{State: s, Partition: in.Partition, Messages: []PositionedMessage{m}})
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// bindSync binds a definition's sync and after-sync work to a batch.
func bindSync[S any](h *handlers[S], b Batch[S]) ([]func(context.Context, SyncTx) error, []func(context.Context) error) {
	var syncs []func(context.Context, SyncTx) error
	for _, fn := range h.sync {
		syncs = append(syncs, func(ctx context.Context, tx SyncTx) error { return fn(ctx, tx, b) })
	}
	var afters []func(context.Context) error
	for _, fn := range h.after {
		afters = append(afters, func(ctx context.Context) error { return fn(ctx, b) })
	}
	return syncs, afters
}
