package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Factory opens a fresh, installed, empty store for one test. The store
// must encode and decode with reg, read the time from now (to stamp
// messages and to decide what is scheduled), and announce committed appends
// to notifier. The factory registers the store's cleanup with t (t.Cleanup)
// and fails t if the store cannot be opened.
type Factory func(t *testing.T, reg *codec.Registry, now func() time.Time, notifier driver.Notifier) driver.Store

// Run runs the conformance suite against the stores open makes. Every
// subtest opens its own store. With -short, the concurrency and model-based
// parts do less work.
func Run(t *testing.T, open Factory) {
	s := suite{open: open}
	t.Run("Append", s.testAppend)
	t.Run("BadInput", s.testBadInput)
	t.Run("Refusals", s.testRefusals)
	t.Run("TestHelpers", s.testHelpers)
	t.Run("ClockSteps", s.testClockSteps)
	t.Run("ValueTypes", s.testValueTypes)
	t.Run("Guard", s.testGuard)
	t.Run("DecideAcross", s.testDecideAcross)
	t.Run("HandleQueue", s.testHandleQueue)
	t.Run("HandlePartition", s.testHandlePartition)
	t.Run("WriteSkew", s.testWriteSkew)
	t.Run("Read", s.testRead)
	t.Run("ReadPartition", s.testReadPartition)
	t.Run("ReadIDPartition", s.testReadIDPartition)
	t.Run("ReadAll", s.testReadAll)
	t.Run("ReadCorrelation", s.testReadCorrelation)
	t.Run("Schedule", s.testSchedule)
	t.Run("Update", s.testUpdate)
	t.Run("Concurrency", s.testConcurrency)
	t.Run("Model", s.testModel)
	t.Run("Cancel", s.testCancel)
	t.Run("Snapshots", s.testSnapshots)
	t.Run("Groups", func(t *testing.T) { RunGroups(t, open) })
}

type suite struct{ open Factory }

// tb is what the suite's helpers need of a test; *testing.T and *rapid.T
// both have it.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// env is one test's store with its registry, clock and notification log.
type env struct {
	t     tb
	ctx   context.Context
	store driver.Store
	reg   *codec.Registry
	clock *clock
	notes *recorder
}

func (s suite) env(t *testing.T) *env {
	t.Helper()
	reg, err := NewRegistry()
	if err != nil {
		t.Fatalf("fixture registry: %v", err)
	}
	c := newClock()
	rec := newRecorder()
	st := s.open(t, reg, c.Now, rec)
	if st == nil {
		t.Fatal("factory returned a nil store")
	}
	return &env{t: t, ctx: t.Context(), store: st, reg: reg, clock: c, notes: rec}
}

// epoch is the suite clock's start: a millisecond-aligned instant, so that
// stores keeping microseconds or nanoseconds agree.
var epoch = time.Date(2025, 3, 14, 9, 26, 53, 589_000_000, time.UTC)

// clock is the fake clock handed to the store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: epoch} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// recorder is the notifier handed to the store: it records every
// notification.
type recorder struct {
	driver.InlineNotifier
	mu  sync.Mutex
	got [][]string
}

func newRecorder() *recorder {
	r := &recorder{}
	r.Subscribe(func(types []string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, slices.Sorted(slices.Values(types)))
	})
	return r
}

// take returns the notifications recorded since the last take.
func (r *recorder) take() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// expectNotes checks the notifications since the last take: one per
// commit, each the sorted distinct types.
func (e *env) expectNotes(want ...[]string) {
	e.t.Helper()
	got := e.notes.take()
	if !reflect.DeepEqual(normNotes(got), normNotes(want)) {
		e.t.Fatalf("notifications: got %v, want %v", got, want)
	}
}

func normNotes(ns [][]string) [][]string {
	out := make([][]string, len(ns))
	for i, n := range ns {
		out[i] = slices.Sorted(slices.Values(n))
	}
	return out
}

// msgs wraps payloads (or messages) in messages.
func msgs(payloads ...any) []core.Message {
	out := make([]core.Message, len(payloads))
	for i, p := range payloads {
		out[i] = core.NewMessage(p)
	}
	return out
}

// cond builds a condition from a type and name, value pairs.
func cond(typ string, kv ...string) core.Condition {
	c := core.Condition{Type: typ}
	if len(kv) > 0 {
		c.Attrs = make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			c.Attrs[kv[i]] = kv[i+1]
		}
	}
	return c
}

// part builds a partition from name, value pairs.
func part(kv ...string) map[string]string {
	p := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return p
}

// canonical is codec.Canonical for values the suite knows are scalars.
func (e *env) canonical(v any) string {
	e.t.Helper()
	s, err := codec.Canonical(v)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// append appends payloads (or messages), failing the test on error.
func (e *env) append(payloads ...any) driver.AppendResult {
	e.t.Helper()
	res, err := e.store.Append(e.ctx, msgs(payloads...), driver.AppendOptions{})
	if err != nil {
		e.t.Fatalf("append: %v", err)
	}
	return res
}

// appendGuarded appends payloads with guard g.
func (e *env) appendGuarded(g core.Guard, payloads ...any) (driver.AppendResult, error) {
	return e.store.Append(e.ctx, msgs(payloads...), driver.AppendOptions{Guard: &g})
}

func (e *env) read(conds []core.Condition, opts driver.ReadOptions) driver.ReadResult {
	e.t.Helper()
	res, err := e.store.Read(e.ctx, conds, opts)
	if err != nil {
		e.t.Fatalf("read %v: %v", conds, err)
	}
	return res
}

func (e *env) readPartition(p map[string]string, types []string, opts driver.ReadOptions) driver.ReadResult {
	e.t.Helper()
	res, err := e.store.ReadPartition(e.ctx, p, types, opts)
	if err != nil {
		e.t.Fatalf("read partition %v %v: %v", p, types, err)
	}
	return res
}

func (e *env) readAll(opts driver.ReadAllOptions) driver.Page {
	e.t.Helper()
	page, err := e.store.ReadAll(e.ctx, opts)
	if err != nil {
		e.t.Fatalf("read all %+v: %v", opts, err)
	}
	return page
}

// log returns the whole log, read page by page with ReadAll.
func (e *env) log() []core.PositionedMessage {
	e.t.Helper()
	var out []core.PositionedMessage
	opts := driver.ReadAllOptions{Limit: 100}
	for range 100_000 {
		page := e.readAll(opts)
		out = append(out, page.Messages...)
		next, more := page.Next(opts)
		if !more {
			return out
		}
		opts = next
	}
	e.t.Fatal("ReadAll paging does not end")
	return nil
}

func (e *env) stats() driver.Stats {
	e.t.Helper()
	st, err := e.store.Stats(e.ctx)
	if err != nil {
		e.t.Fatalf("stats: %v", err)
	}
	return st
}

// snapshot is what the store holds, to check that a failed write changed
// nothing.
type snapshot struct {
	log   []core.PositionedMessage
	stats driver.Stats
	next  time.Time
	due   bool // whether anything is scheduled
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	next, ok, err := e.store.NextScheduled(e.ctx)
	if err != nil {
		e.t.Fatalf("next scheduled: %v", err)
	}
	return snapshot{log: e.log(), stats: e.stats(), next: next, due: ok}
}

// unchanged fails the test unless the store holds what it held at before.
func (e *env) unchanged(before snapshot) {
	e.t.Helper()
	after := e.snapshot()
	after.stats.WALBytes, before.stats.WALBytes = 0, 0 // moves with every commit and checkpoint
	if !reflect.DeepEqual(after.stats, before.stats) {
		e.t.Fatalf("stats changed: before %+v, after %+v", before.stats, after.stats)
	}
	if after.due != before.due || !after.next.Equal(before.next) {
		e.t.Fatalf("next scheduled changed: before %v %v, after %v %v", before.next, before.due, after.next, after.due)
	}
	e.sameMessages("log", after.log, before.log)
	e.expectNotes()
}

// sameMessages fails the test unless got and want hold the same messages
// (position, envelope and payload) in the same order.
func (e *env) sameMessages(what string, got, want []core.PositionedMessage) {
	e.t.Helper()
	if err := diffMessages(got, want); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func diffMessages(got, want []core.PositionedMessage) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d messages %s, want %d %s", len(got), describe(got), len(want), describe(want))
	}
	for i := range got {
		if err := diffMessage(got[i], want[i]); err != nil {
			return fmt.Errorf("message %d of %d: %w\n got: %s\nwant: %s", i+1, len(got), err, describe(got), describe(want))
		}
	}
	return nil
}

func diffMessage(got, want core.PositionedMessage) error {
	switch {
	case got.Position != want.Position:
		return fmt.Errorf("position %d, want %d", got.Position, want.Position)
	case got.ID != want.ID:
		return fmt.Errorf("id %s, want %s", got.ID, want.ID)
	case got.Type != want.Type:
		return fmt.Errorf("type %q, want %q", got.Type, want.Type)
	case !reflect.DeepEqual(got.Payload, want.Payload):
		return fmt.Errorf("payload %#v, want %#v", got.Payload, want.Payload)
	case got.CausationID != want.CausationID:
		return fmt.Errorf("causation id %s, want %s", got.CausationID, want.CausationID)
	case got.CorrelationID != want.CorrelationID:
		return fmt.Errorf("correlation id %s, want %s", got.CorrelationID, want.CorrelationID)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Errorf("created at %v, want %v", got.CreatedAt, want.CreatedAt)
	case !sameMetadata(got.Metadata, want.Metadata):
		return fmt.Errorf("metadata %v, want %v", got.Metadata, want.Metadata)
	}
	return nil
}

func sameMetadata(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// describe renders messages as position:type(keys) for failure messages.
func describe(ms []core.PositionedMessage) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%d:%s%+v", m.Position, m.Type, m.Payload)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func positionsOf(ms []core.PositionedMessage) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Position
	}
	return out
}

func idsOf(ms []core.PositionedMessage) []uuid.UUID {
	out := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// expectPositions fails the test unless ms are at exactly want.
func (e *env) expectPositions(what string, ms []core.PositionedMessage, want ...int64) {
	e.t.Helper()
	if got := positionsOf(ms); !slices.Equal(got, want) {
		e.t.Fatalf("%s: positions %v, want %v; messages %s", what, got, want, describe(ms))
	}
}

// conflict fails the test unless err is a conflict carrying exactly the
// messages at positions want, and returns it.
func (e *env) conflict(err error, want ...int64) *core.ConflictError {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("append succeeded, want a conflict with positions %v", want)
	}
	if !errors.Is(err, core.ErrConcurrentAppend) || !errors.Is(err, driver.ErrConcurrentAppend) {
		e.t.Fatalf("error %v is not ErrConcurrentAppend", err)
	}
	var ce *core.ConflictError
	if !errors.As(err, &ce) {
		e.t.Fatalf("error %v (%T) is not a *core.ConflictError", err, err)
	}
	e.expectPositions("conflicting messages", ce.Conflicts, want...)
	return ce
}

// sortedConds renders conditions in a canonical order, to compare guards
// whose conditions may be built in another order.
func sortedConds(cs []core.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	slices.Sort(out)
	return out
}

func sameConds(a, b []core.Condition) bool {
	return slices.Equal(sortedConds(a), sortedConds(b))
}

// with returns e reporting to t, for subtests sharing one store.
func (e *env) with(t tb) *env {
	c := *e
	c.t = t
	return &c
}

// equalPayload compares a payload read back with the one appended.
func equalPayload(got, want any) bool { return reflect.DeepEqual(got, want) }

// keysOf returns the key pairs the registry extracts from a payload.
func keysOf(reg *codec.Registry, payload any) []codec.KeyPair {
	keys, err := reg.Keys(payload, nil)
	if err != nil {
		panic(err)
	}
	return keys
}
