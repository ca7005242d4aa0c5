package shell

import (
	"context"
	"fmt"
	"slices"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// LoadMachine reads machine m's instance for partition from the store in
// one call: the partition's messages of the machine's history types
// (statechart.Machine.Spec's Evolved: state events, the context's events,
// children's lifecycle messages and state events), replayed by
// Machine.Load. The instance is the machine's snapshot: its configuration
// (with each active state's EnteredBy, the stored state event), domain
// context, children and history memory. The guard is the read's: append
// with it to decide on that snapshot. Every partition key needs a value.
//
// opts may be nil: the defaults.
func LoadMachine[C any](ctx context.Context, store Store, m statechart.Machine[C], partition core.Partition, opts *ReadOptions) (statechart.Instance[C], core.Guard, error) {
	o := orDefaults(opts)
	if err := m.Err(); err != nil {
		return statechart.Instance[C]{}, core.Guard{}, err
	}
	for _, k := range m.PartitionBy {
		if _, ok := partition[k]; !ok {
			return statechart.Instance[C]{}, core.Guard{}, fmt.Errorf("%w: %q (machine %s is partitioned by %v)", statechart.ErrMissingPartitionKey, k, m.Group, m.PartitionBy)
		}
	}
	types, err := store.Registry().Names(m.Spec().Evolved...)
	if err != nil {
		return statechart.Instance[C]{}, core.Guard{}, err
	}
	res, err := store.ReadPartition(ctx, partition, types, o)
	if err != nil {
		return statechart.Instance[C]{}, core.Guard{}, err
	}
	in, err := m.Load(partition, core.MessagesOf(res.Messages))
	if err != nil {
		return statechart.Instance[C]{}, core.Guard{}, err
	}
	return in, res.Guard, nil
}

// MachineResult is what HandleMachine returns: the stored command and
// events, and the machine's instance after them.
type MachineResult[C any] struct {
	CommandResult
	Instance statechart.Instance[C]
}

// HandleMachine is HandleCommand for a statechart machine, returning the
// new instance too: rebuilt from the history the decision read and the
// events it stored (so EnteredBy names the stored state events). A command
// no active state accepts returns an error matching
// statechart.ErrCommandNotHandled and core.ErrNotHandled, and stores
// nothing.
//
// opts may be nil: the defaults.
func HandleMachine[C any](ctx context.Context, store Store, m statechart.Machine[C], cmd any, opts *HandleOptions) (MachineResult[C], error) {
	var history []core.PositionedMessage
	res, err := handle(ctx, store, m, cmd, orDefaults(opts), func(h []core.PositionedMessage, _ *core.Plan) { history = slices.Clone(h) }, nil)
	out := MachineResult[C]{CommandResult: res}
	if err != nil {
		return out, err
	}
	keys, err := store.Registry().Keys(res.Command.Payload, nil)
	if err != nil {
		return out, err
	}
	partition := map[string]string{}
	for _, k := range keys {
		if slices.Contains(m.PartitionBy, k.Name) {
			partition[k.Name] = k.Value
		}
	}
	msgs := append(core.MessagesOf(history), res.Events...)
	if out.Instance, err = m.Load(partition, msgs); err != nil {
		return out, fmt.Errorf("sourced: the command and its events are stored, but the machine does not reload from them: %w", err)
	}
	return out, nil
}
