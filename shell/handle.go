package shell

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"

	"github.com/sourced-go/sourced/core"
)

// CommandResult is what synchronous command handling returns: the command
// as appended (stamped) and its position, and the messages the decision
// appended with it.
type CommandResult struct {
	// Command is the command as it was stamped (its id, time and
	// metadata), also when it was refused, so that an error can name it.
	Command core.Message
	// Position is the command's position in the log; 0 when nothing was
	// stored (an error).
	Position int64
	// Events are the decision's events as appended; none on an error.
	Events []core.Message
	// Guard is the guard of the decision's read: its partition's history
	// conditions, or the union of its query (core.Reads), after the last
	// position read. It tells which boundaries the decision read.
	Guard core.Guard
}

// HandleResult is what Handle returns for a decider: the command, its
// events, and the decider's state after them.
type HandleResult[S any] struct {
	CommandResult
	State S
}

// HandleOptions tune Handle.
type HandleOptions struct {
	// Now dates the command, read inside the write transaction (default:
	// the store's clock, read once by the append). Handle decides now, so a
	// time after the store's clock is refused with ErrFutureCommand: to
	// decide a command later, append it dated later (core.Message.At) and
	// let the decider's workers claim it when the store promotes it. An
	// earlier time back-dates the command.
	Now func() time.Time
	// Metadata is merged into the command's metadata.
	Metadata map[string]any
	// Cache, when set, keeps the decider's folded state per partition
	// between commands (see StateCache), so that Handle reads and folds
	// only the messages appended since the partition's last decision,
	// whatever the decider's state type (its Evolve and Decide must then
	// treat states as values). Default: the store's own cache
	// (StateCacheKeeper: sqlitestore.Store), for the deciders whose state
	// type holds no references (CacheValueStates); the others fold their
	// partition on every command. HandleCommand ignores it.
	Cache *StateCache
	// NoCache turns the state cache off (Cache and the store's own):
	// every command folds its partition's history from the log (or from
	// the decider's latest snapshot, core.Snapshots).
	NoCache bool
	// Observer hears about the append (see Observer); nil: nobody.
	Observer Observer
}

// ErrFutureCommand is matched by the error of Handle for a command dated
// after the store's clock (HandleOptions.Now, or a core.Message given
// with a CreatedAt): the store would schedule it rather than append it.
var ErrFutureCommand = errors.New("sourced: command dated after the store's clock")

// Handle decides a command synchronously, for web handlers: it validates
// the command, reads the decider's partition (or, for a command with a
// query of its own, core.Reads, the union of that query in one read, each
// part folding what its own filters match), decides, appends the command
// and its events, and moves the decider's offset past the command so that
// workers do not decide it again, all in one write transaction (sync work
// included; after-sync work runs after commit). The transaction holds the
// store's write lock from before the read, so no concurrent append can
// come between the read and the decision's append: Handle never conflicts.
// Reactions to the events still run: the decider's workers claim the
// events as usual.
//
// An Exclusive decider with no PartitionBy is partitioned by message id (a
// concurrent, unordered queue of commands): Handle decides the command in
// its own partition, {core.IDKey: its id}, on an empty history, and moves
// the group's offset there past it.
//
// The decider's consumer group need not be registered yet: the first
// Handle registers it (after checking the decider, as NewRouter does), so
// a web handler may decide commands before, or while, the runtime that
// runs the decider's workers starts.
//
// Errors: an invalid command (codec.ErrInvalid, with every failing field),
// a command whose partition key is missing or empty included (see
// core.PartitionOf); the decider's own rejection, as returned by its
// handler; an invalid decider (core.ErrDefinition); a command dated after
// the store's clock (ErrFutureCommand); a busy store (ErrBusy: try again).
// Never ErrConcurrentAppend. In every case nothing is appended.
//
// opts may be nil: the defaults.
func Handle[S any](ctx context.Context, store Store, d core.Decider[S], cmd any, opts *HandleOptions) (HandleResult[S], error) {
	if err := d.Err(); err != nil {
		return HandleResult[S]{}, err
	}
	o := orDefaults(opts)
	// One value holds what the decision's callbacks share (one
	// allocation, not one per variable they capture).
	r := &handleRun[S]{Decider: d, store: store, spec: d.Spec()}
	if !o.NoCache && cacheable(store) {
		// The cache given takes any state; the store's own, value states
		// only (the parts of a query decision are checked one by one).
		r.anyState = o.Cache != nil
		r.cache = o.Cache
		if k, ok := store.(StateCacheKeeper); ok && r.cache == nil {
			r.cache = k.StateCache()
		}
	}
	r.parts = r.cache
	if len(r.spec.PartitionBy) == 0 || !r.anyState && !valueState[S]() {
		// (An id-partitioned decider decides each partition once: a
		// cached state would never be used again.)
		r.cache = nil
	}
	r.snaps = snapshotsOf(store, d)
	r.res.State = d.Initial()
	cr, err := handle(ctx, store, r, cmd, o, nil, r)
	res := r.res
	res.CommandResult = cr
	switch {
	case r.queried || r.query > 0:
		if err == nil && r.qf != nil {
			for _, p := range r.cachedParts {
				r.parts.putAt(r.gen, p.key, p.state, r.position, 0)
			}
		}
	case err == nil && (r.cache != nil || r.snaps != nil) && r.attempts > 0:
		r.unsaved = r.snaps.save(ctx, r.key.partition, r.folded, r.position, r.unsaved)
		if r.cache != nil {
			r.cache.putAt(r.gen, r.key, r.folded, r.position, r.unsaved)
		}
	case err != nil && r.attempts > 0:
		res.State = r.folded // nothing was stored: the state the decision read
		r.snaps.dropStale(ctx, r.key.partition)
	}
	return res, err
}

// handleRun is one Handle of a decider: the decider (whose query
// decisions keep the state after their events, for HandleResult.State),
// and the decideHook that reads and folds its partition's state from the
// cache, a snapshot or the log.
type handleRun[S any] struct {
	core.Decider[S]
	store Store
	spec  core.Spec // the decider's, computed once
	// cache keeps the partition's state; parts the states of a query
	// decision's parts (whose types anyState lets through, or value
	// types only).
	cache, parts *StateCache
	anyState     bool
	snaps        *snapshots
	// cachedParts are the parts of a query decision whose states go
	// into parts once the decision committed.
	cachedParts []cachedPart
	res         HandleResult[S]
	// queried is set by a query decision; qf is its folding, when
	// readQuery folded its parts.
	queried bool
	qf      *core.QueryFolding[S]
	query   int // readQuery's attempts
	key     stateKey
	gen     uint64 // the cache's generation when the state was taken
	base    S      // the state the history read is folded onto
	folded  S      // base and the history read
	// position is the read's guard position: folded is the state there.
	position int64
	attempts int
	unsaved  int // events folded since the state's last snapshot
	// unsavedBase is unsaved of the state the history read is folded
	// onto.
	unsavedBase int
}

// Spec is the decider's, computed once.
func (r *handleRun[S]) Spec() core.Spec { return r.spec }

func (r *handleRun[S]) DecideQuery(plan core.Plan, index core.Indexer, partition core.Partition, read []core.PositionedMessage, cmd core.PositionedMessage) (core.Outcome, error) {
	out, s, err := r.DecideQueryState(plan, index, partition, read, cmd)
	r.queried, r.res.State = true, s
	return out, err
}

func (r *handleRun[S]) readHistory(tx Tx, partition core.Partition, types []string) (ReadResult, error) {
	r.attempts++
	if r.cache == nil && r.snaps == nil {
		r.base, r.unsavedBase = r.Initial(), 0
		r.folded = r.base
		return tx.ReadPartition(partition, types, ReadOptions{})
	}
	r.key = stateKey{store: r.store, group: r.spec.Group, partition: core.Partition(partition).Key(), state: reflect.TypeFor[S]()}
	if r.cache != nil {
		r.gen = r.cache.generation()
	}
	// Only the first attempt starts from the cache: the entry is out of
	// the cache until this Handle puts it back, and a second attempt
	// (after registering the group) folds in full.
	var from int64
	r.base, from, r.unsavedBase = startState(tx, r.cache, r.snaps, r.key, r.attempts == 1, r.Initial)
	r.folded, r.unsaved = r.base, r.unsavedBase
	h, err := tx.ReadPartition(partition, types, ReadOptions{After: from})
	if err != nil || from == 0 || h.Guard.LastPosition >= from {
		return h, err
	}
	// The log ends before the state's position (a log cleared and written
	// again): fold the partition in full.
	r.base, r.unsaved, r.unsavedBase = r.Initial(), 0, 0
	r.folded = r.base
	return tx.ReadPartition(partition, types, ReadOptions{})
}

func (r *handleRun[S]) decideOn(partition core.Partition, history ReadResult, cmd core.PositionedMessage) (core.Outcome, error) {
	r.folded = r.EvolveHistory(r.base, history.Messages)
	r.position = history.Guard.LastPosition
	r.unsaved = r.unsavedBase + len(history.Messages) // the same however often it decides
	out, after, err := r.Decider.DecideOn(r.folded, partition, cmd)
	r.res.State = after
	return out, err
}

// cachedPart is a query decision's part whose state is cached.
type cachedPart struct {
	i     int // the part's index in the query
	key   stateKey
	state any // after the read, before the decision
}

// readQuery reads a query decision's union after the position every part
// of it was folded up to (its cached state's, or 0), and folds each part
// past its own position.
func (r *handleRun[S]) readQuery(tx Tx, plan core.Plan, cmd core.Message) (ReadResult, error) {
	r.query++
	r.cachedParts = r.cachedParts[:0]
	index := core.IndexWith(r.store.Registry())
	q, ok := r.StartQuery(plan, index, cmd)
	if !ok || r.parts == nil {
		r.qf = nil // decided by DecideQuery
		return tx.Read(plan.Union, ReadOptions{})
	}
	r.gen = r.parts.generation()
	from, newest := int64(-1), int64(0)
	for i := range q.Parts() {
		var at int64
		_, typ := q.PartState(i)
		if fold := q.PartKey(i); fold != nil && i < len(plan.Parts) && (r.anyState || valueTypeOf(typ)) {
			key := stateKey{store: r.store, group: r.spec.Group, partition: conditionsKey(plan.Parts[i]), state: typ, fold: fold}
			// Only the first attempt starts from the cache (see
			// readHistory).
			if e, hit := r.takePart(key); hit && q.StartPart(i, e.state, e.position) {
				at = e.position
				newest = max(newest, at)
			}
			r.cachedParts = append(r.cachedParts, cachedPart{i: i, key: key})
		}
		if from < 0 || at < from {
			from = at
		}
	}
	h, err := tx.Read(plan.Union, ReadOptions{After: max(from, 0)})
	if err == nil && h.Guard.LastPosition < newest {
		// The log ends before a part's position (a log cleared and
		// written again): fold every part in full.
		q, _ = r.StartQuery(plan, index, cmd)
		h, err = tx.Read(plan.Union, ReadOptions{})
	}
	if err != nil {
		return h, err
	}
	for _, m := range h.Messages {
		q.Add(m)
	}
	for j := range r.cachedParts {
		r.cachedParts[j].state, _ = q.PartState(r.cachedParts[j].i)
	}
	r.qf, r.position = q, h.Guard.LastPosition
	return h, nil
}

// takePart takes a part's state out of the cache on the first attempt.
func (r *handleRun[S]) takePart(key stateKey) (*stateEntry, bool) {
	if r.query != 1 {
		return nil, false
	}
	return r.parts.take(key)
}

// decideQuery decides a query decision on the parts readQuery folded.
func (r *handleRun[S]) decideQuery(plan core.Plan, index core.Indexer, partition core.Partition, read []core.PositionedMessage, cmd core.PositionedMessage) (core.Outcome, error) {
	if r.qf == nil {
		return r.DecideQuery(plan, index, partition, read, cmd)
	}
	out, s, err := r.qf.Decide(partition, cmd)
	r.queried, r.res.State = true, s
	return out, err
}

// conditionsKey writes a part's conditions as a cache key: each
// condition's type and attributes in name order, every string prefixed
// with its length (unambiguous whatever the strings hold).
func conditionsKey(conds []core.Condition) string {
	var b []byte
	str := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	for _, c := range conds {
		str(c.Type)
		b = strconv.AppendInt(b, int64(len(c.Attrs)), 10)
		b = append(b, '|')
		if len(c.Attrs) == 1 {
			for k, v := range c.Attrs {
				str(k)
				str(v)
			}
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(c.Attrs)) {
			str(k)
			str(c.Attrs[k])
		}
	}
	return string(b)
}

// valueTypes memoizes valueType by type.
var valueTypes sync.Map // reflect.Type -> bool

// valueState tells whether S holds no reference at any depth (valueType).
func valueState[S any]() bool { return valueTypeOf(reflect.TypeFor[S]()) }

// valueTypeOf is valueType, memoized.
func valueTypeOf(t reflect.Type) bool {
	if t == nil {
		return false
	}
	if v, ok := valueTypes.Load(t); ok {
		return v.(bool)
	}
	v := valueType(t)
	valueTypes.Store(t, v)
	return v
}

// decideHook lets Handle read and fold a decider's state itself (from a
// StateCache entry or a snapshot, or in full) instead of leaving it to
// DecideCommand, for the decisions on a partition's history (not those
// with a query).
type decideHook interface {
	// readHistory reads, in the attempt's transaction, the partition's
	// history of types the decision folds onto the state it starts from.
	readHistory(tx Tx, partition core.Partition, types []string) (ReadResult, error)
	// decideOn decides the command on the history read.
	decideOn(partition core.Partition, history ReadResult, cmd core.PositionedMessage) (core.Outcome, error)
	// readQuery reads a query decision's union, and decideQuery decides
	// on what it read.
	readQuery(tx Tx, plan core.Plan, cmd core.Message) (ReadResult, error)
	decideQuery(plan core.Plan, index core.Indexer, partition core.Partition, read []core.PositionedMessage, cmd core.PositionedMessage) (core.Outcome, error)
}

// HandleCommand is Handle for any definition that decides commands one at
// a time (core.CommandDecider), such as a statechart.Machine: a command no
// active state accepts returns an error matching core.ErrNotHandled.
//
// opts may be nil: the defaults.
func HandleCommand(ctx context.Context, store Store, d core.CommandDecider, cmd any, opts *HandleOptions) (CommandResult, error) {
	return handle(ctx, store, d, cmd, orDefaults(opts), nil, nil)
}

// handle decides cmd in one write transaction. A command whose decision has
// a query of its own (core.Querier) reads that query's union instead of
// its partition's history, and is decided on what it read; read, when
// given, receives what was read (and the plan, for a query); hook, when
// given, decides the decisions on the partition's history.
func handle(ctx context.Context, store Store, d core.CommandDecider, cmd any, o HandleOptions, read func([]core.PositionedMessage, *core.Plan), hook decideHook) (CommandResult, error) {
	reg := store.Registry()
	msg := core.NewMessage(cmd).WithMetadata(o.Metadata)
	res := CommandResult{Command: msg}
	if tr, ok := d.(TypeRegisterer); ok {
		if err := tr.Register(reg); err != nil {
			return res, err
		}
	}
	if err := reg.Validate(msg.Payload); err != nil {
		return res, err
	}
	spec := d.Spec()
	keys, err := reg.Keys(msg.Payload, nil)
	if err != nil {
		return res, err
	}
	typ, err := reg.TypeOf(msg.Payload)
	if err != nil {
		return res, err
	}
	partition, err := core.PartitionOf(typ.Name, spec.PartitionBy, keys)
	if err != nil {
		return res, err
	}
	history, err := reg.Names(spec.Evolved...)
	if err != nil {
		return res, err
	}
	querier, queried := d.(core.Querier)
	var plan core.Plan
	if queried {
		if plan, queried, err = querier.QueryPlan(reg, msg); err != nil {
			return res, err
		}
		if queried {
			if err := driver.CheckConditions(reg, plan.Union); err != nil {
				return res, err
			}
		}
	}
	// The time is left to the transaction: the store stamps the command
	// with the same reading of its clock that decides whether a message is
	// scheduled, so a clock stepping back cannot defer the command. So is
	// the id, unless the partition needs it: an id the store gives is one
	// it need not look for among the stored ones.
	if len(spec.PartitionBy) == 0 {
		id, err := uuid.NewV7()
		if err != nil {
			return res, err
		}
		msg = msg.Stamp(id, time.Time{})
		res.Command = msg
		// An exclusive decider with no partition keys is partitioned by
		// message id (a queue of commands): the command is decided in its
		// own partition, whose history is empty, and its offset there is
		// moved past it, as for a worker's claim of it.
		partition = map[string]string{core.IDKey: msg.ID.String()}
	}
	var afters []func(context.Context) error
	var cmdPos func() (int64, error) // a deferred command's position
	started := time.Now()
	decide := func(tx Tx) error {
		if o.Now != nil {
			msg.CreatedAt = o.Now()
		}
		var h ReadResult
		switch {
		case queried && hook != nil:
			h, err = hook.readQuery(tx, plan, msg)
		case queried:
			h, err = tx.Read(plan.Union, ReadOptions{})
		case hook != nil:
			h, err = hook.readHistory(tx, partition, history)
		default:
			h, err = tx.ReadPartition(partition, history, ReadOptions{})
		}
		if err != nil {
			return err
		}
		res.Guard = h.Guard
		if read != nil {
			if queried {
				read(h.Messages, &plan)
			} else {
				read(h.Messages, nil)
			}
		}
		// The transaction has held the write lock since before the read, so
		// nothing can have been appended since: the command and the
		// decision's events need no guard check.
		marked := msg.WithMetadata(map[string]any{core.DecidedByKey: spec.Group})
		// A decision on the partition's history, of a command the store
		// dates, goes with its offset's move and the COMMIT where the
		// store can (driver.DeferredCommandAppender): the decider is given the
		// command's position only if its sync work needs it (then it
		// decides again, on the position learnt: a decision is pure).
		cmdPos, res.Position = nil, 0
		if dc, ok := tx.(driver.DeferredCommandAppender); ok && !queried && marked.CreatedAt.IsZero() {
			if res.Command, cmdPos, err = dc.AppendCommandDeferred(marked, spec.Group, partition); err != nil {
				return err
			}
		} else {
			appended, err := tx.Append([]core.Message{marked}, AppendOptions{})
			if err != nil {
				return err
			}
			res.Command, res.Position = appended.Messages[0], appended.Positions[0]
			if res.Position == 0 {
				return fmt.Errorf("sourced: handle %s dated %v: %w (Handle decides now: append it dated later for a worker to decide when it is due)", res.Command.Type, res.Command.CreatedAt.Format(time.RFC3339Nano), ErrFutureCommand)
			}
		}
		decideAt := func(position int64) (core.Outcome, error) {
			cmdMsg := core.PositionedMessage{Message: res.Command, Position: position}
			switch {
			case queried && hook != nil:
				return hook.decideQuery(plan, core.IndexWith(reg), partition, h.Messages, cmdMsg)
			case queried:
				return querier.DecideQuery(plan, core.IndexWith(reg), partition, h.Messages, cmdMsg)
			case hook != nil:
				return hook.decideOn(partition, h, cmdMsg)
			}
			return d.DecideCommand(partition, h.Messages, cmdMsg)
		}
		out, err := decideAt(res.Position)
		if err == nil && cmdPos != nil && len(out.Sync) > 0 {
			if res.Position, err = cmdPos(); err == nil {
				out, err = decideAt(res.Position)
			}
		}
		if err != nil {
			var be *core.BatchError
			if errors.As(err, &be) {
				err = be.Err
			}
			return err
		}
		// Nothing below needs the events' positions, nor an answer from
		// the offset's move: a store over a network sends both with the
		// commit, or with the sync work's first statement
		// (AppendOptions.Deferred, driver.DeferredAdvancer).
		if len(out.Events) > 0 {
			evs, err := tx.Append(out.Events, AppendOptions{Deferred: true})
			if err != nil {
				return err
			}
			res.Events = evs.Messages
		}
		// An unregistered group fails here (*UnknownGroupError), which rolls
		// the command and its events back.
		switch da, ok := tx.(driver.DeferredAdvancer); {
		case cmdPos != nil: // moved with the command
		case ok:
			err = da.AdvanceOffsetDeferred(spec.Group, partition, res.Position)
		default:
			_, err = tx.AdvanceOffset(spec.Group, partition, res.Position)
		}
		if err != nil {
			return err
		}
		for _, w := range out.Sync {
			if err := protect(func() error { return w(ctx, tx.Context()) }); err != nil {
				return err
			}
		}
		afters = out.AfterSync
		return nil
	}
	err = store.Update(ctx, decide)
	if errors.Is(err, ErrGroupNotRegistered) {
		// The first command before any router or runtime registered the
		// decider's group (the runtime registers its groups when it
		// starts, which may be later): register it as Router.Setup would,
		// and decide again.
		if err = registerGroup(ctx, store, d); err == nil {
			err = store.Update(ctx, decide)
		}
	}
	if err == nil && cmdPos != nil && res.Position == 0 {
		// Stored with the COMMIT: known now, without a round trip (an
		// error here could only be a store's bug, and the command is
		// stored: the position stays 0 rather than the result failing).
		res.Position, _ = cmdPos()
	}
	if err != nil {
		// Nothing was stored: the position a rolled-back append was
		// given is no command's.
		res.Position, res.Events = 0, nil
		return res, err
	}
	if o.Observer != nil {
		observe(ctx, o.Observer, Appended{Group: spec.Group, Messages: 1 + len(res.Events), Duration: time.Since(started)})
	}
	for _, w := range afters {
		if err := protect(func() error { return w(ctx) }); err != nil {
			return res, fmt.Errorf("sourced: after-sync work failed (the command and its events are stored): %w", err)
		}
	}
	return res, nil
}

// registerGroup registers a definition's consumer group, checked first, as
// Router.Setup does.
func registerGroup(ctx context.Context, store Store, d core.Definition) error {
	reg := store.Registry()
	if err := d.Check(reg); err != nil {
		return err
	}
	spec := d.Spec()
	handled, err := reg.Names(spec.Handled...)
	if err != nil {
		return err
	}
	return store.RegisterGroup(ctx, driver.GroupSpec{ID: spec.Group, Label: spec.Label, PartitionBy: spec.PartitionBy, Exclusive: spec.Exclusive, Handled: handled, Hooks: hasLifecycleHooks(spec.Hooks)})
}

// Load reads a decider's, projector's or projection's state for a
// partition straight from the log, with the guard of the read (append with
// it to decide on that state). With opts.Upto it loads the state as it was
// at that position. For the state a command with a query of its own
// (core.Reads) is decided on, use LoadDecision.
//
// A decider that takes snapshots (core.Snapshots) starts, on a store that
// keeps them (SnapshotStore), from the partition's latest valid snapshot
// and reads only the history after it; the state and the guard are those
// of a full fold (see the package doc).
//
// The partition must give every partition key of a decider or projector
// (every key given, for a bare projection) a non-empty value: otherwise
// Load returns a *codec.ValidationError naming the key (see
// core.PartitionOf) and reads nothing.
//
// opts may be nil: the defaults.
func Load[S any](ctx context.Context, store Store, e core.Evolver[S], partition core.Partition, opts *ReadOptions) (S, core.Guard, error) {
	o := orDefaults(opts)
	if err := checkLoadPartition(e, partition); err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	types, err := store.Registry().Names(e.EvolvedTypes()...)
	if err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	if s, g, ok, err := loadSnapshot(ctx, store, e, partition, types, o); ok || err != nil {
		return s, g, err
	}
	res, err := store.ReadPartition(ctx, partition, types, o)
	if err != nil {
		var zero S
		return zero, core.Guard{}, err
	}
	s := e.Evolve(e.Initial(), core.MessagesOf(res.Messages)...)
	saveLoaded(ctx, store, e, partition, o, s, res)
	return s, res.Guard, nil
}

// checkLoadPartition applies core.PartitionOf to a partition Load was
// given: the definition's keys when e has a Spec, else the keys given.
func checkLoadPartition(e any, partition core.Partition) error {
	by := slices.Sorted(maps.Keys(partition))
	if d, ok := e.(core.SpecProvider); ok && len(d.Spec().PartitionBy) > 0 {
		by = d.Spec().PartitionBy
	}
	if len(by) == 0 {
		return &codec.ValidationError{Type: "partition", Fields: []codec.FieldError{{Problem: "Load needs the partition's key values, e.g. map[string]string{\"course_id\": \"c1\"}"}}}
	}
	_, err := core.PartitionOf("partition", by, core.PartitionPairs(partition))
	return err
}

// LoadDecision reads the state d would decide cmd on, straight from the
// log, with the guard of the read: for a command with a query of its own
// (core.Reads) the state its parts compose from one read of their union,
// guarded by exactly that union; for any other command the state of its
// partition (as Load). Append the decision's events with the guard to
// decide outside Handle: the append fails with ErrConcurrentAppend if a
// fact the decision read changed. With opts.Upto it loads the state as it
// was at that position.
//
// To decide as well, use Decide rather than calling the decider on the
// state: Decide dates the command (a core.NewMessage has a zero
// CreatedAt, so a DecideEnvelope rule about time, "released less than 3
// days before this command", would compare with year 1).
//
// cmd is validated, and its partition keys checked, as by Handle;
// nothing is read when it is invalid.
//
// opts may be nil: the defaults.
func LoadDecision[S any](ctx context.Context, store Store, d core.Decider[S], cmd any, opts *ReadOptions) (S, core.Guard, error) {
	o := orDefaults(opts)
	l, err := loadDecision(ctx, store, d, core.NewMessage(cmd), o)
	return l.state, l.guard, err
}

// loaded is what loadDecision read.
type loaded[S any] struct {
	state S
	guard core.Guard
	// plan and read are a query decision's plan and what its union read.
	plan *core.Plan
	read []core.Message
}

func loadDecision[S any](ctx context.Context, store Store, d core.Decider[S], msg core.Message, o ReadOptions) (loaded[S], error) {
	var l loaded[S]
	if err := d.Err(); err != nil {
		return l, err
	}
	reg := store.Registry()
	if err := reg.Validate(msg.Payload); err != nil {
		return l, err
	}
	keys, err := reg.Keys(msg.Payload, nil)
	if err != nil {
		return l, err
	}
	typ, err := reg.TypeOf(msg.Payload)
	if err != nil {
		return l, err
	}
	partition, err := core.PartitionOf(typ.Name, d.Spec().PartitionBy, keys)
	if err != nil {
		return l, err
	}
	plan, queried, err := d.QueryPlan(reg, msg)
	if err != nil {
		return l, err
	}
	if !queried {
		l.state, l.guard, err = Load(ctx, store, d, partition, &o)
		return l, err
	}
	if err := driver.CheckConditions(reg, plan.Union); err != nil {
		return l, err
	}
	res, err := store.Read(ctx, plan.Union, o)
	if err != nil {
		return l, err
	}
	l.plan, l.read, l.guard = &plan, core.MessagesOf(res.Messages), res.Guard
	l.state = d.QueryState(msg, plan, core.IndexWith(reg), l.read)
	return l, nil
}
