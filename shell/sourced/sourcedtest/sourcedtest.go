package sourcedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

// Option configures a test.
type Option func(*config)

type config struct {
	reg       *codec.Registry
	tx        core.SyncTx
	now       time.Time
	outside   bool
	partition core.Partition
}

// WithRegistry checks the definition against reg before the test and
// validates the given and expected payloads.
func WithRegistry(reg *codec.Registry) Option { return func(c *config) { c.reg = reg } }

// WithSyncTx is the transaction handed to sync work by ThenSync (nil by
// default): pass what your sync work expects, e.g. a test database.
func WithSyncTx(tx core.SyncTx) Option { return func(c *config) { c.tx = tx } }

// WithTime is the creation time of the given messages and the command
// (default 2026-01-01T00:00:00Z), for reactions scheduled relative to it.
func WithTime(t time.Time) Option { return func(c *config) { c.now = t } }

// AllowOutsidePartition lets a test give events that lie outside the
// partition under test: they are dropped from the history, as a store
// would never read them there, instead of failing the test. Use it for a
// test that gives a shared fixture of many partitions on purpose.
func AllowOutsidePartition() Option { return func(c *config) { c.outside = true } }

// WithPartition sets the partition a projector test projects (by default
// the partition of the first given event that carries every partition
// key, as on a store, where such an event creates the partition).
func WithPartition(partition core.Partition) Option {
	return func(c *config) { c.partition = partition }
}

func newConfig(opts []Option) config {
	c := config{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// check runs the definition check and validates payloads when a registry
// was given.
func (c config) check(t testing.TB, def effects.Checker, payloads ...any) {
	t.Helper()
	if c.reg == nil {
		return
	}
	if def != nil {
		if err := def.Check(c.reg); err != nil {
			t.Fatalf("sourcedtest: the definition is invalid: %v", err)
		}
	}
	for _, p := range payloads {
		switch m := p.(type) {
		case core.Message:
			p = m.Payload
		case core.Delayed:
			p = m.Message.Payload
		}
		if err := c.reg.Validate(p); err != nil {
			t.Fatalf("sourcedtest: %v", err)
		}
	}
}

// validate validates the payload of When's command (or a machine's
// message) when a registry was given: an invalid one is the rejection
// (a *codec.ValidationError) that shell.Handle returns, for ThenError to
// assert, where an invalid Given event fails the test.
func (c config) validate(cmd any) error {
	if c.reg == nil {
		return nil
	}
	switch m := cmd.(type) {
	case core.Message:
		cmd = m.Payload
	case core.Delayed:
		cmd = m.Message.Payload
	}
	return c.reg.Validate(cmd)
}

// ofPartition returns the messages of ms in partition (all of them when
// it is empty): what a decision appended that its partition's next read
// returns.
func (c config) ofPartition(t testing.TB, partition core.Partition, ms []core.Message) []core.Message {
	t.Helper()
	var out []core.Message
	for _, m := range ms {
		if keys, _ := c.keys(t, m.Payload); len(partition) == 0 || core.InPartition(partition, keys) {
			out = append(out, m)
		}
	}
	return out
}

// history positions and stamps the given messages.
func (c config) history(given []any) []core.PositionedMessage {
	out := make([]core.PositionedMessage, len(given))
	for i, g := range given {
		out[i] = core.PositionedMessage{Message: c.stamp(core.NewMessage(g)), Position: int64(i + 1)}
	}
	return out
}

// stamp gives m an id and, unless it has one, the test's time.
func (c config) stamp(m core.Message) core.Message { return m.Stamp(uuid.New(), c.now) }

// The partition rule of the store, applied to Given-When-Then tests so that
// a test sees exactly what a store would show the definition: a command
// decides in the partition of its key values (core.PartitionOf), and the
// history is the given events in that partition (core.InPartition). The
// machine helper uses the same two methods.

// keys returns a payload's key pairs and its type string: the registry's
// own (what a store indexes) with WithRegistry, else read from the
// payload's JSON attributes.
func (c config) keys(t testing.TB, payload any) ([]codec.KeyPair, string) {
	t.Helper()
	if c.reg != nil {
		typ, err := c.reg.TypeOf(payload)
		if err != nil {
			t.Fatalf("sourcedtest: %v", err)
		}
		keys, err := c.reg.Keys(payload, nil)
		if err != nil {
			t.Fatalf("sourcedtest: %v", err)
		}
		return keys, typ.Name
	}
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatalf("sourcedtest: %T cannot be encoded: %v", payload, err)
	}
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(data, &attrs); err != nil {
		t.Fatalf("sourcedtest: %T is not a struct payload: %v", payload, err)
	}
	var keys []codec.KeyPair
	for name, raw := range attrs {
		var many []json.RawMessage
		if json.Unmarshal(raw, &many) != nil {
			many = []json.RawMessage{raw}
		}
		for _, v := range many {
			var str string
			switch {
			case string(v) == "null":
				continue
			case json.Unmarshal(v, &str) == nil:
			default:
				str = string(v)
			}
			keys = append(keys, codec.KeyPair{Name: name, Value: str})
		}
	}
	return keys, fmt.Sprintf("%T", payload)
}

// partitionOf returns the partition a command (or a machine's event)
// decides in, by core.PartitionOf: a key missing or empty is the
// *codec.ValidationError that shell.Handle would return.
func (c config) partitionOf(t testing.TB, by []string, cmd any) (map[string]string, error) {
	t.Helper()
	keys, typ := c.keys(t, core.NewMessage(cmd).Payload)
	return core.PartitionOf(typ, by, keys)
}

// inPartition returns the given messages that a store would read in
// partition (core.InPartition). A given message outside it fails the test,
// saying why, unless AllowOutsidePartition dropped it; what is the test's
// subject ("When(...)") for the message.
func (c config) inPartition(t testing.TB, partition core.Partition, given []any, what string) []any {
	t.Helper()
	if len(partition) == 0 {
		return given
	}
	var out []any
	for _, g := range given {
		keys, _ := c.keys(t, core.NewMessage(g).Payload)
		if core.InPartition(partition, keys) {
			out = append(out, g)
			continue
		}
		if !c.outside {
			t.Fatalf("sourcedtest: Given(%s) is not in the partition %s of %s: %s, so a store would never show it to the definition and the outcome could not depend on it. "+
				"If the decision needs it, the consistency boundary (PartitionBy) is too narrow; else give only events of that partition, or pass sourcedtest.AllowOutsidePartition() to drop such events",
				describe(g), describePartition(partition), what, whyOutside(partition, keys))
		}
	}
	return out
}

// whyOutside says why a message indexed under keys is not in partition.
func whyOutside(partition core.Partition, keys []codec.KeyPair) string {
	var why []string
	carried := false
	for _, k := range slices.Sorted(maps.Keys(partition)) {
		var values []string
		for _, kp := range keys {
			if kp.Name == k {
				values = append(values, kp.Value)
			}
		}
		if len(values) == 0 {
			continue
		}
		carried = true
		if !slices.Contains(values, partition[k]) {
			why = append(why, fmt.Sprintf("its %s is %q, not %q", k, strings.Join(values, `", "`), partition[k]))
		}
	}
	if !carried {
		return fmt.Sprintf("it carries none of the partition keys %v", slices.Sorted(maps.Keys(partition)))
	}
	return strings.Join(why, " and ")
}

func describePartition(p map[string]string) string {
	parts := make([]string, 0, len(p))
	for _, k := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, k+"="+p[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// DeciderTest is a Given-When-Then test of a decider.
type DeciderTest[S any] struct {
	t     testing.TB
	d     core.Decider[S]
	cfg   config
	given []any
	cmd   any
	hasW  bool
	// of the last run: the given events in the command's partition and
	// the decision's events
	inGiven []any
	events  []core.Message
	plan    *core.Plan
	guard   core.Guard
}

// Decider starts a test of d.
func Decider[S any](t testing.TB, d core.Decider[S], opts ...Option) *DeciderTest[S] {
	return &DeciderTest[S]{t: t, d: d, cfg: newConfig(opts)}
}

// Given adds history: events (payloads or Messages) in order.
func (c *DeciderTest[S]) Given(events ...any) *DeciderTest[S] {
	c.given = append(c.given, events...)
	return c
}

// And is Given, for readability.
func (c *DeciderTest[S]) And(events ...any) *DeciderTest[S] { return c.Given(events...) }

// When sets the command to decide. A When after another decides the
// earlier command first (it must be accepted) and adds the events it
// appended in its partition to the history, so that chained Whens
// accumulate as they would on a store: Then and the other assertions are
// about the last one.
func (c *DeciderTest[S]) When(cmd any) *DeciderTest[S] {
	c.t.Helper()
	if c.hasW {
		if _, _, err := c.run(); err != nil {
			c.t.Fatalf("sourcedtest: the earlier When(%s) was rejected: %v", describe(c.cmd), err)
		}
		partition, _ := c.partition()
		for _, e := range c.cfg.ofPartition(c.t, partition, c.events) {
			c.given = append(c.given, e)
		}
	}
	c.cmd, c.hasW = cmd, true
	return c
}

// partition is the partition of When's command (none for a decider
// without PartitionBy).
func (c *DeciderTest[S]) partition() (map[string]string, error) {
	if len(c.d.PartitionBy) == 0 {
		return nil, nil
	}
	return c.cfg.partitionOf(c.t, c.d.PartitionBy, c.cmd)
}

// run decides the command as a store would: in the partition of the
// command's key values, on the given events of that partition. It returns
// the pairs of the command and of the decider's reactions to its events
// (run as when the decider's group claims the events), and every message
// they append: the events, then the reactions.
func (c *DeciderTest[S]) run() (pairs []effects.Pair, got []core.Message, err error) {
	c.t.Helper()
	if !c.hasW {
		c.t.Fatal("sourcedtest: a decider test needs When(command)")
	}
	c.cfg.check(c.t, c.d, c.given...)
	if err := c.cfg.validate(c.cmd); err != nil {
		return nil, nil, err // what shell.Handle answers
	}
	partition, err := c.partition()
	if err != nil {
		return nil, nil, err // what shell.Handle answers
	}
	if _, queried := c.d.Query(core.NewMessage(c.cmd)); queried {
		return c.runQuery(partition)
	}
	given := c.cfg.inPartition(c.t, partition, c.given, "When("+describe(c.cmd)+")")
	c.inGiven = given
	history := c.cfg.history(given)
	if c.cfg.reg != nil {
		types, err := c.cfg.reg.Names(c.d.EvolvedTypes()...)
		if err != nil {
			c.t.Fatalf("sourcedtest: %v", err)
		}
		regTypes := make([]*codec.Type, len(types))
		for i, n := range types {
			regTypes[i], _ = c.cfg.reg.ByName(n)
		}
		c.guard = core.Guard{Conditions: core.ConditionsFor(partition, regTypes...), LastPosition: int64(len(history))}
	}
	pos := int64(len(history))
	next := func(m core.Message) core.PositionedMessage {
		pos++
		return core.PositionedMessage{Message: c.cfg.stamp(m), Position: pos}
	}
	cmd := next(core.NewMessage(c.cmd))
	pairs, err = effects.Step(c.d, effects.Claim{Partition: partition, Messages: []core.PositionedMessage{cmd}, History: history})
	if err != nil {
		var be *core.BatchError
		if errors.As(err, &be) {
			err = be.Err
		}
		return pairs, nil, err
	}
	got = effects.Messages(pairs)
	c.events = got
	// Reactions run when the decider's group claims its events: do that,
	// with the events in the history as a store would read them.
	var events []core.PositionedMessage
	for _, e := range got {
		events = append(events, next(e))
	}
	if len(events) > 0 {
		reactions, err := effects.Step(c.d, effects.Claim{Partition: partition, Messages: events, History: append(history, events...)})
		if err != nil {
			var be *core.BatchError
			if errors.As(err, &be) {
				err = be.Err
			}
			return pairs, got, err
		}
		for _, r := range reactions {
			if hasAppend(r) {
				pairs = append(pairs, r)
			}
		}
		got = append(got, effects.Messages(reactions)...)
	}
	return pairs, got, nil
}

// runQuery decides a command with a query of its own (core.Reads) as a
// store would: the history is the given events that match the union of
// its query (the one read), each part folds the events its own filters
// match, and the guard is that union after the last given event. Given
// events outside the union are never read, so they are dropped (that is
// the point of a query), not refused.
func (c *DeciderTest[S]) runQuery(partition core.Partition) ([]effects.Pair, []core.Message, error) {
	c.t.Helper()
	if c.cfg.reg == nil {
		c.t.Fatalf("sourcedtest: %s has a query (core.Reads): pass WithRegistry, which resolves its filters to the store's conditions", describe(c.cmd))
	}
	cmdMsg := core.NewMessage(c.cmd)
	plan, _, err := c.d.QueryPlan(c.cfg.reg, cmdMsg)
	if err != nil {
		return nil, nil, err
	}
	index := core.IndexWith(c.cfg.reg)
	all := c.cfg.history(c.given)
	var read []core.PositionedMessage
	c.inGiven = nil
	for i, m := range all {
		typ, keys := index(m.Message)
		if core.MatchAny(plan.Union, typ, keys) {
			read = append(read, m)
			c.inGiven = append(c.inGiven, c.given[i])
		}
	}
	c.plan = &plan
	c.guard = core.Guard{Conditions: plan.Union, LastPosition: int64(len(all))}
	cmd := core.PositionedMessage{Message: c.cfg.stamp(cmdMsg), Position: int64(len(all) + 1)}
	q := &core.QueryRead{Plan: plan, Messages: read, Guard: c.guard}
	pairs, err := effects.Step(c.d, effects.Claim{Partition: partition, Messages: []core.PositionedMessage{cmd}, Queries: []*core.QueryRead{q}, Index: index})
	if err != nil {
		var be *core.BatchError
		if errors.As(err, &be) {
			err = be.Err
		}
		return pairs, nil, err
	}
	got := effects.Messages(pairs)
	c.events = got
	// Reactions run when the decider's group claims its events, on the
	// partition's history (the given events in it) and the events.
	if len(got) == 0 {
		return pairs, got, nil
	}
	outside := c.cfg
	outside.outside = true
	history := c.cfg.history(outside.inPartition(c.t, partition, c.given, "When("+describe(c.cmd)+")"))
	pos := int64(len(all) + 1)
	var events []core.PositionedMessage
	for _, e := range got {
		pos++
		events = append(events, core.PositionedMessage{Message: c.cfg.stamp(e), Position: pos})
	}
	reactions, err := effects.Step(c.d, effects.Claim{Partition: partition, Messages: events, History: append(history, events...)})
	if err != nil {
		var be *core.BatchError
		if errors.As(err, &be) {
			err = be.Err
		}
		return pairs, got, err
	}
	for _, r := range reactions {
		if hasAppend(r) {
			pairs = append(pairs, r)
		}
	}
	return pairs, append(got, effects.Messages(reactions)...), nil
}

// ThenRead asserts which boundaries the decision read: the conditions of
// its guard, in any order (for a command with a query, the union of its
// parts' conditions; else its partition's history conditions, which need
// WithRegistry). The command may be accepted or rejected.
func (c *DeciderTest[S]) ThenRead(want ...core.Condition) {
	c.t.Helper()
	c.guard = core.Guard{}
	_, _, _ = c.run()
	got := condStrings(c.guard.Conditions)
	exp := condStrings(want)
	if !slices.Equal(got, exp) {
		c.t.Fatalf("sourcedtest: When(%s) read %v, want %v", describe(c.cmd), got, exp)
	}
}

func condStrings(cs []core.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func hasAppend(p effects.Pair) bool {
	for _, s := range p.Signals {
		if _, ok := s.(effects.Append); ok {
			return true
		}
	}
	return false
}

// Then asserts the command is accepted and produces exactly the expected
// messages: its events, then the reactions to them, in order. No
// arguments means no messages at all. A delayed reaction is expected as
// core.After(delay, payload) (the delay after the command, whose events
// it reacts to) or core.At(time, payload): it matches on the payload and
// its due time. A plain payload matches a message delivered at once.
func (c *DeciderTest[S]) Then(expected ...any) {
	c.t.Helper()
	c.cfg.check(c.t, nil, expected...)
	_, got, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	c.cfg.assertMessages(c.t, expected, got)
}

// ThenScheduled asserts the command is accepted and schedules exactly the
// expected delayed messages (by payload and due time), in order; the
// messages it appends at once are not compared.
func (c *DeciderTest[S]) ThenScheduled(expected ...core.Delayed) {
	c.t.Helper()
	want := make([]any, len(expected))
	for i, e := range expected {
		want[i] = e
	}
	c.cfg.check(c.t, nil, want...)
	_, got, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	var scheduled []core.Message
	for _, m := range got {
		if !c.cfg.due(m).IsZero() {
			scheduled = append(scheduled, m)
		}
	}
	c.cfg.assertMessages(c.t, want, scheduled)
}

// ThenSync is Then that also runs the sync and after-sync work of the
// decision (with the transaction of WithSyncTx) and fails on their errors.
func (c *DeciderTest[S]) ThenSync(expected ...any) {
	c.t.Helper()
	c.cfg.check(c.t, nil, expected...)
	pairs, got, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	runWork(c.t, pairs, c.cfg.tx)
	c.cfg.assertMessages(c.t, expected, got)
}

// ThenError asserts the command is rejected: want is the exact error text
// (a string), an error the rejection matches with errors.Is, or a pointer
// to an error type it matches with errors.As. A command whose partition
// key is missing or empty is rejected with a *codec.ValidationError, as
// shell.Handle rejects it.
func (c *DeciderTest[S]) ThenError(want any) {
	c.t.Helper()
	_, got, err := c.run()
	if err == nil {
		c.t.Fatalf("sourcedtest: When(%s) was accepted with %s; want an error", describe(c.cmd), c.cfg.describeAll(got))
	}
	assertError(c.t, err, want)
}

// ThenPairs hands the raw signal pairs to fn for custom assertions: the
// command's, then one per event the decider reacts to (its dispatched
// messages), in order.
func (c *DeciderTest[S]) ThenPairs(fn func(t testing.TB, pairs []effects.Pair)) {
	c.t.Helper()
	pairs, _, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	fn(c.t, pairs)
}

// ThenState hands the state after the command's events to fn.
func (c *DeciderTest[S]) ThenState(fn func(t testing.TB, s S)) {
	c.t.Helper()
	if _, _, err := c.run(); err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	if c.plan != nil {
		events := append(core.Messages(c.inGiven...), c.events...)
		fn(c.t, c.d.QueryState(core.NewMessage(c.cmd), *c.plan, core.IndexWith(c.cfg.reg), events))
		return
	}
	fn(c.t, c.d.Evolve(c.d.Fold(c.inGiven...), c.events...))
}

// ProjectorTest is a Given-Then test of a projector.
type ProjectorTest[S any] struct {
	t     testing.TB
	p     core.Projector[S]
	cfg   config
	given []any
}

// Projector starts a test of p: Given events, Then the projected state.
// A state-stored projector starts from its Init state (Load is not called).
func Projector[S any](t testing.TB, p core.Projector[S], opts ...Option) *ProjectorTest[S] {
	return &ProjectorTest[S]{t: t, p: p, cfg: newConfig(opts)}
}

// Given adds events in order.
func (c *ProjectorTest[S]) Given(events ...any) *ProjectorTest[S] {
	c.given = append(c.given, events...)
	return c
}

// And is Given, for readability.
func (c *ProjectorTest[S]) And(events ...any) *ProjectorTest[S] { return c.Given(events...) }

// run projects the given events of the partition under test (WithPartition,
// or the partition of the first given event carrying every key) as one
// claimed batch; given events outside that partition fail the test.
func (c *ProjectorTest[S]) run() ([]effects.Pair, S) {
	c.t.Helper()
	c.cfg.check(c.t, c.p, c.given...)
	given, partition := c.given, c.cfg.partition
	if by := c.p.PartitionBy; len(by) > 0 {
		what := "the test (WithPartition)"
		if partition == nil {
			for _, g := range c.given {
				if p, err := c.cfg.partitionOf(c.t, by, g); err == nil {
					partition, what = p, "the first given event carrying every key, Given("+describe(g)+")"
					break
				}
			}
		}
		if partition == nil {
			c.t.Fatalf("sourcedtest: no given event carries every partition key %v, so a store would create no partition for the projector: give one, or set the partition with sourcedtest.WithPartition", by)
		}
		given = c.cfg.inPartition(c.t, partition, c.given, what)
	}
	h := c.cfg.history(given)
	p := c.p
	p.Load = nil // project from the given events alone
	pairs, err := effects.Step(p, effects.Claim{Partition: partition, Messages: h, History: h})
	if err != nil {
		c.t.Fatalf("sourcedtest: projecting failed: %v", err)
	}
	return pairs, p.Evolve(p.Initial(), core.MessagesOf(h)...)
}

// Then hands the projected state to fn.
func (c *ProjectorTest[S]) Then(fn func(t testing.TB, s S)) {
	c.t.Helper()
	_, s := c.run()
	fn(c.t, s)
}

// ThenSync runs the projector's sync and after-sync work on the batch of
// given events (with the transaction of WithSyncTx), then hands the state to
// fn.
func (c *ProjectorTest[S]) ThenSync(fn func(t testing.TB, s S)) {
	c.t.Helper()
	pairs, s := c.run()
	runWork(c.t, pairs, c.cfg.tx)
	fn(c.t, s)
}

// ThenMessages asserts the reactions the projector dispatches for the
// given events, in order.
func (c *ProjectorTest[S]) ThenMessages(expected ...any) {
	c.t.Helper()
	pairs, _ := c.run()
	c.cfg.assertMessages(c.t, expected, effects.Messages(pairs))
}

// ProjectionTest is a Given-Then test of a bare projection.
type ProjectionTest[S any] struct {
	t     testing.TB
	p     core.Projection[S]
	cfg   config
	given []any
}

// Projection starts a test of p.
func Projection[S any](t testing.TB, p core.Projection[S], opts ...Option) *ProjectionTest[S] {
	return &ProjectionTest[S]{t: t, p: p, cfg: newConfig(opts)}
}

// Given adds events in order.
func (c *ProjectionTest[S]) Given(events ...any) *ProjectionTest[S] {
	c.given = append(c.given, events...)
	return c
}

// And is Given, for readability.
func (c *ProjectionTest[S]) And(events ...any) *ProjectionTest[S] { return c.Given(events...) }

// Then hands the state evolved from the given events to fn.
func (c *ProjectionTest[S]) Then(fn func(t testing.TB, s S)) {
	c.t.Helper()
	if err := c.p.Err(); err != nil {
		c.t.Fatalf("sourcedtest: the projection is invalid: %v", err)
	}
	c.cfg.check(c.t, nil, c.given...)
	fn(c.t, c.p.Evolve(c.p.Initial(), c.cfg.messages(c.given)...))
}

func (c config) messages(given []any) []core.Message {
	h := c.history(given)
	out := make([]core.Message, len(h))
	for i, m := range h {
		out[i] = m.Message
	}
	return out
}

func runWork(t testing.TB, pairs []effects.Pair, tx core.SyncTx) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pairs {
		for _, s := range p.Signals {
			if w, ok := s.(effects.Sync); ok {
				if err := w.Work(ctx, tx); err != nil {
					t.Fatalf("sourcedtest: sync work failed: %v", err)
				}
			}
		}
	}
	for _, p := range pairs {
		for _, s := range p.Signals {
			if w, ok := s.(effects.AfterSync); ok {
				if err := w.Work(ctx); err != nil {
					t.Fatalf("sourcedtest: after-sync work failed: %v", err)
				}
			}
		}
	}
}

// Match reports whether got is the expected message by Go type and payload
// (an expected value may be a payload or a core.Message).
func Match(expected any, got core.Message) bool {
	want := core.NewMessage(expected).Payload
	return core.PayloadType(want) == core.PayloadType(got.Payload) && reflect.DeepEqual(deref(want), deref(got.Payload))
}

func deref(p any) any {
	v := reflect.ValueOf(p)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return p
}

// due is when a message is delivered: the zero time for at once, else its
// future creation time (a delayed message is dated when it is due; a date
// not after the test's time is delivered at once, as on a store).
func (c config) due(m core.Message) time.Time {
	if m.CreatedAt.After(c.now) {
		return m.CreatedAt
	}
	return time.Time{}
}

// expectedMessage turns an expected value (payload, core.Message, or
// core.Delayed from core.After or core.At) into the message it stands for,
// dated as the decision would date it: After relative to the test's time.
func (c config) expectedMessage(e any) core.Message {
	d, ok := e.(core.Delayed)
	if !ok {
		return core.NewMessage(e)
	}
	m := d.Message
	switch {
	case !d.At.IsZero():
		m.CreatedAt = d.At
	case d.Delay != 0:
		m.CreatedAt = c.now.Add(d.Delay)
	}
	return m
}

func (c config) assertMessages(t testing.TB, expected []any, got []core.Message) {
	t.Helper()
	want := make([]core.Message, len(expected))
	for i, e := range expected {
		want[i] = c.expectedMessage(e)
	}
	ok := len(want) == len(got)
	for i := 0; ok && i < len(got); i++ {
		ok = Match(want[i].Payload, got[i]) && c.due(want[i]).Equal(c.due(got[i]))
	}
	if !ok {
		t.Fatalf("sourcedtest: messages differ\n  want: %s\n  got:  %s", c.describeAll(want), c.describeAll(got))
	}
}

func assertError(t testing.TB, err error, want any) {
	t.Helper()
	switch w := want.(type) {
	case string:
		if err.Error() != w {
			t.Fatalf("sourcedtest: error %q, want %q", err.Error(), w)
		}
	case error:
		if !errors.Is(err, w) {
			t.Fatalf("sourcedtest: error %v does not match %v", err, w)
		}
	default:
		if w == nil || reflect.TypeOf(w).Kind() != reflect.Pointer || !errors.As(err, w) {
			t.Fatalf("sourcedtest: error %v (%T) is not a %T", err, err, w)
		}
	}
}

func describe(p any) string {
	m := core.NewMessage(p)
	return fmt.Sprintf("%T%+v", m.Payload, m.Payload)
}

func (c config) describeAll(ms []core.Message) string {
	if len(ms) == 0 {
		return "(no messages)"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = describe(m)
		if due := c.due(m); !due.IsZero() {
			parts[i] += fmt.Sprintf(" (due %s, %v after the command)", due.Format(time.RFC3339Nano), due.Sub(c.now))
		}
	}
	return strings.Join(parts, ", ")
}
