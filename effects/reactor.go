package effects

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Claim is a batch of messages of one partition claimed for a consumer
// group by a worker.
type Claim struct {
	// Group is the consumer group id.
	Group string
	// Partition is the claimed partition's values (for an id-partitioned
	// group, {"__id": message id}).
	Partition core.Partition
	// Messages are the claimed messages in position order.
	Messages []core.PositionedMessage
	// Guard covers every handled type that declares the partition's
	// attributes, up to the last claimed message.
	Guard core.Guard
	// Replaying is true when every claimed message was processed before
	// the group was reset (see driver.ClaimedPartition).
	Replaying bool
	// ReplayUpto is the highest position of the partition processed before
	// the group was last reset (see driver.ClaimedPartition): a message at or below it
	// is a replay, whose side effects are not made again.
	ReplayUpto int64
	// Now is when the claim is handled, read from the router's clock (the
	// runtime's, by default the store's: see driver.Clocked): what a
	// reactor dates the work it schedules by (a workflow's sleeps and
	// retries), so that a simulated clock given to the store drives it
	// too.
	Now time.Time
	// RecordRefusals makes deciders record business refusals instead of
	// failing (see core.StepInput; the router sets it).
	RecordRefusals bool
	// History holds the partition's messages of the reactor's history types
	// (see Historian), read when the batch was claimed, and HistoryGuard the
	// guard of that read. Empty for reactors that want no history.
	History      []core.PositionedMessage
	HistoryGuard core.Guard
	// Queries holds, aligned with Messages, what the query of each claimed
	// command that has one read (see Querier); nil for the others. Index
	// gives a message's type and key pairs, to match those reads against
	// each part of the query (core.IndexWith of the registry).
	Queries []*core.QueryRead
	Index   core.Indexer
}

// Reactor is the reactor protocol: the message types a reactor's consumer
// group claims, and the handling of a claimed batch.
//
// HandleClaim returns one Pair per message it handled, in order. If a
// message fails, it returns the pairs of the messages before it and an
// error (ideally a *core.BatchError naming the message): the shell commits
// those pairs, acknowledges up to the last of them, and hands the error to
// the group's error strategy.
//
// The shell acknowledges a batch up to the last pair's source: messages
// without a pair of their own before it count as handled, those after it
// are claimed again. No pairs and no error mean the reactor handled the
// whole batch with no effects (it had nothing to do for these messages):
// the batch is acknowledged up to its last message, and not handed again.
// A reactor that cannot handle a batch yet returns an error instead: the
// group's error strategy then retries it later (shell.ErrorStrategy,
// with its delay), rather than the batch coming straight back.
type Reactor interface {
	HandledTypes() []string
	HandleClaim(ctx context.Context, c Claim) ([]Pair, error)
}

// Grouper overrides a reactor's consumer group id (default: its Go type's
// package and name, normalised: jobs.Worker becomes "jobs.worker").
type Grouper interface{ GroupID() string }

// Labeler overrides a reactor's human label (default: the group id).
type Labeler interface{ Label() string }

// Partitioner gives a reactor's partition keys (default: none, which is
// only allowed for exclusive reactors: one partition per message).
type Partitioner interface{ PartitionKeys() []string }

// Exclusiver marks a reactor as the only one handling its types (default:
// false). An exclusive reactor with no partition keys is a concurrent,
// unordered, delete-on-ack work queue (Queue is one, ready made).
type Exclusiver interface{ Exclusive() bool }

// Historian asks the shell to read the partition's messages of these types
// before each batch (Claim.History).
type Historian interface{ HistoryTypes() []string }

// Querier is implemented by reactors whose claimed commands may each read
// a query of their own (a decider's core.Reads) rather than the partition's
// history: for each claimed message with a plan, the shell reads the plan's
// union (in the batch's transaction when the reactor is pure) and passes
// what it read as Claim.Queries.
type Querier interface {
	QueryPlan(m core.Message) (core.Plan, bool, error)
}

// Pure marks a reactor whose HandleClaim does no I/O and returns quickly
// (it only computes pairs from the claim and its history). The shell may
// then run it inside the write transaction that commits its signals, and
// claim and handle several partitions in one transaction: one commit for
// many batches instead of two per batch. Reactors that call services,
// sleep or read other databases must not be pure: they would hold the
// store's write lock meanwhile. Deciders, event-sourced projectors and
// projections are pure (FromDefinition); state-stored projectors are not
// (their Load reads the application's own storage).
type Pure interface{ Pure() bool }

// Checker is implemented by reactors that validate themselves against the
// registry when registered.
type Checker interface {
	Check(reg *codec.Registry) error
}

// DefinitionProvider is a reactor adapted from a core.Definition that
// gives the definition back: the reactors FromDefinition returns implement
// it, and the shell's router reads the definition's hooks, error strategy
// and snapshot policy through it. A hand-written reactor wrapping a
// definition implements it to keep those.
type DefinitionProvider interface {
	Definition() core.Definition
}

// Info is a reactor's protocol with every default filled in.
type Info struct {
	Group       string
	Label       string
	PartitionBy []string
	Exclusive   bool
	Handled     []string
	History     []string
	// Pure: see the Pure interface.
	Pure bool
}

// IDPartitioned reports whether the group is partitioned by message id.
func (i Info) IDPartitioned() bool { return len(i.PartitionBy) == 0 }

// Describe resolves r's protocol with defaults, and checks what can be
// checked without a registry: a group id that normalises, handled types,
// and partition keys unless the reactor is exclusive.
func Describe(r Reactor) (Info, error) {
	info := Info{Handled: slices.Clone(r.HandledTypes())}
	group := defaultGroup(r)
	if g, ok := r.(Grouper); ok {
		group = g.GroupID()
	}
	var err error
	if info.Group, err = core.NormalizeGroup(group); err != nil {
		return info, &core.DefinitionError{Group: group, Problem: err.Error()}
	}
	info.Label = info.Group
	if l, ok := r.(Labeler); ok && l.Label() != "" {
		info.Label = l.Label()
	}
	if p, ok := r.(Partitioner); ok {
		info.PartitionBy = slices.Sorted(slices.Values(p.PartitionKeys()))
	}
	if e, ok := r.(Exclusiver); ok {
		info.Exclusive = e.Exclusive()
	}
	if h, ok := r.(Historian); ok {
		info.History = slices.Clone(h.HistoryTypes())
	}
	if p, ok := r.(Pure); ok {
		info.Pure = p.Pure()
	}
	if len(info.Handled) == 0 {
		return info, &core.DefinitionError{Group: info.Group, Problem: "handles no message types"}
	}
	if info.IDPartitioned() && !info.Exclusive {
		return info, &core.DefinitionError{Group: info.Group, Problem: "no partition keys: only an exclusive reactor may be partitioned by message id"}
	}
	if slices.Contains(info.PartitionBy, core.IDKey) {
		return info, &core.DefinitionError{Group: info.Group, Key: core.IDKey, Problem: "reserved key: leave the partition keys empty for id-partitioning"}
	}
	return info, nil
}

func defaultGroup(r Reactor) string {
	t := reflect.TypeOf(r)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := t.PkgPath()
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		pkg = pkg[i+1:]
	}
	name := t.Name()
	if pkg == "" {
		return name
	}
	return pkg + "." + name
}

// FromDefinition adapts a core definition (Decider, Projector, or any
// core.Definition) to the reactor protocol, resolving its types' names in
// reg. The definition is checked (core.Definition.Check) first.
func FromDefinition(reg *codec.Registry, def core.Definition) (Reactor, error) {
	if err := def.Check(reg); err != nil {
		return nil, err
	}
	spec := def.Spec()
	names := func(ts []reflect.Type) ([]string, error) {
		out, err := reg.Names(ts...)
		if err != nil {
			return nil, &core.DefinitionError{Group: spec.Group, Problem: err.Error()}
		}
		return out, nil
	}
	handled, err := names(spec.Handled)
	if err != nil {
		return nil, err
	}
	var history []string
	if spec.History {
		if history, err = names(spec.Evolved); err != nil {
			return nil, err
		}
	}
	return &definitionReactor{def: def, reg: reg, spec: spec, handled: handled, history: history}, nil
}

// definitionReactor runs a core.Definition as a Reactor.
type definitionReactor struct {
	def     core.Definition
	reg     *codec.Registry
	spec    core.Spec
	handled []string
	history []string
}

// Definition is the definition the reactor runs (for the shell, which
// reads its hooks and, for a machine, its children).
func (d *definitionReactor) Definition() core.Definition { return d.def }

func (d *definitionReactor) HandledTypes() []string { return d.handled }
func (d *definitionReactor) GroupID() string        { return d.spec.Group }
func (d *definitionReactor) Label() string          { return d.spec.Label }
func (d *definitionReactor) PartitionKeys() []string {
	return d.spec.PartitionBy
}
func (d *definitionReactor) Exclusive() bool        { return d.spec.Exclusive }
func (d *definitionReactor) HistoryTypes() []string { return d.history }

// Pure is true unless the definition loads its state (Spec.LoadsState).
func (d *definitionReactor) Pure() bool { return !d.spec.LoadsState }

// QueryPlan resolves the query of a command of a definition that has
// queries (core.Querier); false for every other message.
func (d *definitionReactor) QueryPlan(m core.Message) (core.Plan, bool, error) {
	q, ok := d.def.(core.Querier)
	if !ok {
		return core.Plan{}, false, nil
	}
	return q.QueryPlan(d.reg, m)
}

// HandleClaim loads the state of state-stored definitions, then runs Step.
func (d *definitionReactor) HandleClaim(ctx context.Context, c Claim) ([]Pair, error) {
	if c.Index == nil && len(c.Queries) > 0 {
		c.Index = core.IndexWith(d.reg)
	}
	in := core.StepInput{}
	if l, ok := d.def.(core.StateLoader); ok {
		s, found, err := l.LoadState(ctx, c.Partition)
		if err != nil {
			if len(c.Messages) > 0 {
				return nil, &core.BatchError{Message: c.Messages[0], Err: fmt.Errorf("loading state: %w", err)}
			}
			return nil, err
		}
		in.State, in.Loaded = s, found
	}
	return step(d.def, c, in)
}

// Folding is implemented by the reactors that run an event-sourced
// core.Folder definition (FromDefinition's): the shell may fold the
// partition's history itself, from a state it kept (a state cache) and
// the history appended since, and hand the reactor the folded state.
type Folding interface {
	// Folder is the definition whose states the shell folds.
	Folder() core.Folder
	// HandleFolded is HandleClaim on s, the state folded from the
	// partition's whole history (c.History is not folded again).
	HandleFolded(ctx context.Context, c Claim, s any) ([]Pair, error)
}

// Folder returns the definition when it is an event-sourced core.Folder
// (its Spec asks for history and it loads no state), else nil.
func (d *definitionReactor) Folder() core.Folder {
	f, ok := d.def.(core.Folder)
	if !ok || !d.spec.History || d.spec.LoadsState {
		return nil
	}
	return f
}

// HandleFolded runs the definition's StepFolded on s (Folding).
func (d *definitionReactor) HandleFolded(ctx context.Context, c Claim, s any) ([]Pair, error) {
	f := d.Folder()
	if f == nil {
		return d.HandleClaim(ctx, c)
	}
	if c.Index == nil && len(c.Queries) > 0 {
		c.Index = core.IndexWith(d.reg)
	}
	return stepWith(func(in core.StepInput) ([]core.Outcome, error) { return f.StepFolded(in, s) }, c, core.StepInput{})
}

// Step is the pure step from a claimed batch to pairs for a core definition:
// it runs the definition's Step on the claim and turns each outcome into
// signals. Events are appended under the claim's history guard (a
// queried decision's under the guard of its own query's read); reactions
// without a guard; both already correlated (command -> event, event ->
// reaction). Sync work becomes Sync and AfterSync signals; every pair ends
// with an Ack. Reactions are skipped when the claim is a replay.
func Step(def core.Definition, c Claim) ([]Pair, error) {
	return step(def, c, core.StepInput{})
}

func step(def core.Definition, c Claim, in core.StepInput) ([]Pair, error) {
	return stepWith(def.Step, c, in)
}

// stepWith is step with the definition's Step given as stepFn.
func stepWith(stepFn func(core.StepInput) ([]core.Outcome, error), c Claim, in core.StepInput) ([]Pair, error) {
	in.Partition, in.History, in.Batch, in.Replaying = c.Partition, c.History, c.Messages, c.Replaying
	in.ReplayUpto, in.RecordRefusals = c.ReplayUpto, c.RecordRefusals
	in.Queries, in.Index = c.Queries, c.Index
	outs, err := stepFn(in)
	pairs := make([]Pair, 0, len(outs))
	for _, o := range outs {
		var sigs []Signal
		if len(o.Events) > 0 {
			g := c.HistoryGuard
			if o.Guard != nil {
				g = *o.Guard
			}
			sigs = append(sigs, Append{Messages: o.Events, Guard: &g, Correlated: true})
		}
		if len(o.Reactions) > 0 {
			sigs = append(sigs, Append{Messages: o.Reactions, Correlated: true})
		}
		for _, w := range o.Sync {
			sigs = append(sigs, Sync{Work: w})
		}
		for _, w := range o.AfterSync {
			sigs = append(sigs, AfterSync{Work: w})
		}
		sigs = append(sigs, Ack{})
		pairs = append(pairs, Pair{Signals: sigs, Source: o.Source})
	}
	if err != nil {
		var be *core.BatchError
		if !errors.As(err, &be) && len(c.Messages) > len(outs) {
			err = &core.BatchError{Message: c.Messages[len(outs)], Index: len(outs), Err: err}
		}
		return pairs, err
	}
	return pairs, nil
}

// Messages returns every message the pairs append, in order, correlated as
// the shell would correlate them (for tests and the Given-When-Then
// helpers).
func Messages(pairs []Pair) []core.Message {
	var out []core.Message
	for _, p := range pairs {
		for _, s := range p.Signals {
			a, ok := s.(Append)
			if !ok {
				continue
			}
			out = append(out, Correlate(a, p.Source.Message)...)
		}
	}
	return out
}

// Correlate returns the messages of a as they are to be stored: unless
// a.Correlated, each is correlated with a.Source or else with source.
func Correlate(a Append, source core.Message) []core.Message {
	if a.Correlated {
		return a.Messages
	}
	if a.Source != nil {
		source = *a.Source
	}
	out := make([]core.Message, len(a.Messages))
	for i, m := range a.Messages {
		out[i] = m.Correlate(source)
	}
	return out
}
