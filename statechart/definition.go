package statechart

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

var (
	_ core.Definition = Machine[struct{}]{}
	_ core.Describer  = Machine[struct{}]{}
)

// group returns the normalised group id.
func (m Machine[C]) group() string {
	g, err := core.NormalizeGroup(m.Group)
	if err != nil {
		return m.Group
	}
	return g
}

func appendNew(ts []reflect.Type, more ...reflect.Type) []reflect.Type {
	for _, t := range more {
		if t != nil && !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// handled are the types the machine's group claims: its commands and
// events, its own lifecycle Started and Stop, and its children's Finished.
func (m Machine[C]) handled() []reflect.Type {
	mc := m.core()
	out := appendNew(nil, mc.ch.commands...)
	out = appendNew(out, mc.ch.events...)
	if mc.lc != nil {
		out = appendNew(out, mc.lc.started, mc.lc.stop)
	}
	for _, d := range mc.ch.children {
		if d.lc != nil {
			out = appendNew(out, d.lc.finished)
		}
	}
	rts, _ := m.reactionTypes()
	return appendNew(out, rts...)
}

// evolved are the types read as history: state events, the context's
// events, the children's Started and Finished, and the children's state
// events (each ChildRef's Paths).
func (m Machine[C]) evolved() []reflect.Type {
	mc := m.core()
	out := appendNew(nil, m.StateTypes()...)
	out = appendNew(out, m.Context.EvolvedTypes()...)
	for _, d := range mc.ch.children {
		if d.lc != nil {
			out = appendNew(out, d.lc.started, d.lc.finished)
		}
		if d.mc != nil {
			for _, t := range childStateTypes(d) {
				if mc.childMoves[t] == d {
					out = appendNew(out, t)
				}
			}
		}
	}
	return out
}

// Spec describes the machine's consumer group: it claims its commands, the
// events it reacts to (On), its lifecycle messages and its children's
// Finished, and reads as history its state events, the events its context
// evolves, its children's Started and Finished and its children's state
// events.
func (m Machine[C]) Spec() core.Spec {
	label := m.Label
	if label == "" {
		label = m.group()
	}
	return core.Spec{
		Group:       m.group(),
		Label:       label,
		PartitionBy: slices.Sorted(slices.Values(m.PartitionBy)),
		Handled:     m.handled(),
		Evolved:     m.evolved(),
		History:     true,
		Hooks:       m.Hooks,
	}
}

// Check validates the machine against reg: its definition errors, its
// group id, its partition keys (a machine is always partitioned), states
// without an event type, and the partition schema: commands, events,
// lifecycle messages and state events declare every key; other evolved
// events at least one. Its children are checked too.
func (m Machine[C]) Check(reg *codec.Registry) error {
	errs := []error{m.Err()}
	group := m.group()
	if _, err := core.NormalizeGroup(m.Group); err != nil {
		errs = append(errs, &core.DefinitionError{Group: m.Group, Problem: err.Error()})
	}
	defErr := func(msg, key, format string, args ...any) {
		errs = append(errs, &core.DefinitionError{Group: group, Message: msg, Key: key, Problem: fmt.Sprintf(format, args...)})
	}
	if len(m.PartitionBy) == 0 {
		defErr("", "", "a machine needs PartitionBy: its configuration lives in a partition")
	}
	mc := m.core()
	for _, s := range mc.ch.states {
		if s.d.typ == nil {
			defErr("", "", "state %q has no event type (declared with Named): declare it with Declare[T] to store its moves", s.d.name)
		}
	}
	all := appendNew(m.handled(), m.StateTypes()...)
	for _, t := range m.evolved() {
		ct, err := reg.ByGoType(t)
		if err != nil {
			defErr(t.String(), "", "%v", err)
			continue
		}
		if slices.Contains(all, t) {
			continue
		}
		n := 0
		for _, k := range m.PartitionBy {
			if ct.Has(k) {
				n++
			}
		}
		if n == 0 && len(m.PartitionBy) > 0 {
			defErr(ct.Name, "", "evolved events must declare at least one partition key of %v", m.PartitionBy)
		}
	}
	for _, t := range all {
		ct, err := reg.ByGoType(t)
		if err != nil {
			if !slices.Contains(m.evolved(), t) {
				defErr(t.String(), "", "%v", err)
			}
			continue
		}
		for _, k := range m.PartitionBy {
			f, ok := ct.Field(k)
			switch {
			case !ok:
				defErr(ct.Name, k, "commands, events, lifecycle messages and state events of a machine must declare every partition key")
			case !f.Required && (slices.Contains(mc.ch.commands, t) || slices.Contains(mc.ch.events, t)):
				defErr(ct.Name, k, "a machine's commands and On events must declare every partition key as a required attribute (tag it `sourced:\"required\"`), so that one without it is refused instead of decided in the partition \"\"")
			}
		}
	}
	for _, d := range mc.ch.children {
		for _, k := range m.PartitionBy {
			if !slices.Contains(d.keys, k) {
				defErr("", k, "child machine %q must be partitioned by every key of its parent's", d.group)
			}
		}
	}
	return errors.Join(errs...)
}

// Register registers the machine's state event types in reg, as
// "<group>.runtime.<state name>" (a part's states as
// "<group>.runtime.<part prefix>.<name>", its compound state as
// "<group>.runtime.<part prefix>"), then, for each child machine, its
// lifecycle messages and its own states. Types already registered under
// those names are skipped. Commands and data events are the user's to
// register.
func (m Machine[C]) Register(reg *codec.Registry) error {
	return m.core().register(reg, m.group())
}

func (mc *machineCore) register(reg *codec.Registry, group string) error {
	var errs []error
	for _, s := range mc.ch.states {
		if s.d.typ == nil || s.d.register == nil {
			continue
		}
		name := mc.ch.stateTypeName(group, s)
		if t, err := reg.ByGoType(s.d.typ); err == nil && t.Name == name {
			continue
		}
		if err := s.d.register(reg, name); err != nil {
			errs = append(errs, err)
		}
	}
	if mc.lc != nil {
		if err := mc.lc.register(reg, group); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range mc.ch.children {
		if d.mc != nil {
			if err := d.mc.register(reg, d.group); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Step decides a claimed batch (core.Definition). The instance is rebuilt
// from the whole history read with the claim (every message of it but the
// claimed ones themselves, which are decided rather than replayed): a
// command is decided on the machine as it is now, which is what the
// history's guard protects. Each message is then decided in turn, and its
// messages are the outcome's Events, in append order, correlated with it.
// A command no active state accepts, an event nothing reacts to and a
// stale timer are acknowledged with no events. A replayed batch is only
// acknowledged: its messages were decided before; so is a command this
// machine's group decided synchronously (core.DecidedByKey), whose events
// are in the history already.
func (m Machine[C]) Step(in core.StepInput) ([]core.Outcome, error) {
	outs := make([]core.Outcome, 0, len(in.Batch))
	group := m.group()
	inst, err := m.current(in.Partition, in.History, in.Batch)
	if err != nil {
		if len(in.Batch) > 0 {
			return outs, &core.BatchError{Message: in.Batch[0], Err: fmt.Errorf("loading the machine: %w", err)}
		}
		return outs, err
	}
	for i, b := range in.Batch {
		out := core.Outcome{Source: b}
		if m.reacts(b.Message) {
			// An event the machine reacts to: applied, then reacted to.
			next, follow, err := m.react(inst, b.Message)
			if err != nil {
				return outs, &core.BatchError{Message: b, Index: i, Err: err}
			}
			inst = next
			if !in.Replayed(b) {
				out.Reactions = follow
			}
			outs = append(outs, out)
			continue
		}
		if in.Replayed(b) || b.Metadata[core.DecidedByKey] == group {
			// Decided before: in a replayed batch, or synchronously
			// (shell.HandleCommand marks the command, and its events are
			// already in the history).
			outs = append(outs, out)
			continue
		}
		next, dec, err := m.Decide(inst, b.Message)
		switch {
		case errors.Is(err, ErrCommandNotHandled):
		case err != nil:
			return outs, &core.BatchError{Message: b, Index: i, Err: err}
		default:
			out.Events = dec.Messages
			inst = next
			if !dec.Ignored {
				out.Sync, out.AfterSync = m.bindSync(core.Batch[Instance[C]]{State: inst, Partition: in.Partition, Messages: []core.PositionedMessage{b}, Events: dec.Messages})
			}
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// reacts reports whether msg is an event the machine reacts to and does not
// decide.
func (m Machine[C]) reacts(msg core.Message) bool {
	return len(m.Reactions) > 0 && m.reaction(core.PayloadType(msg.Payload)) != nil
}

// current rebuilds the instance from history, leaving out the messages of
// batch (they are decided, not replayed).
func (m Machine[C]) current(partition core.Partition, history, batch []core.PositionedMessage) (Instance[C], error) {
	inst := m.New(partition)
	skip := make(map[int64]bool, len(batch))
	for _, b := range batch {
		skip[b.Position] = true
	}
	for _, h := range history {
		if skip[h.Position] {
			continue
		}
		if err := m.apply(&inst, h.Message); err != nil {
			return inst, err
		}
	}
	return inst, nil
}

// DecideCommand decides cmd on the machine rebuilt from the partition's
// history, for synchronous handling (core.CommandDecider): the messages to
// append, or ErrCommandNotHandled when no active state accepts it.
func (m Machine[C]) DecideCommand(partition core.Partition, history []core.PositionedMessage, cmd core.PositionedMessage) (core.Outcome, error) {
	out := core.Outcome{Source: cmd}
	inst, err := m.current(partition, history, []core.PositionedMessage{cmd})
	if err != nil {
		return out, err
	}
	next, dec, err := m.Decide(inst, cmd.Message)
	if err != nil {
		return out, err
	}
	out.Events = dec.Messages
	out.Sync, out.AfterSync = m.bindSync(core.Batch[Instance[C]]{State: next, Partition: partition, Messages: []core.PositionedMessage{cmd}, Events: dec.Messages})
	return out, nil
}
