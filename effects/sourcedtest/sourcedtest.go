package sourcedtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
	reg *codec.Registry
	tx  core.Tx
	now time.Time
}

// WithRegistry checks the definition against reg before the test and
// validates the given and expected payloads.
func WithRegistry(reg *codec.Registry) Option { return func(c *config) { c.reg = reg } }

// WithTx is the transaction handed to sync work by ThenSync (nil by
// default): pass what your sync work expects, e.g. a test database.
func WithTx(tx core.Tx) Option { return func(c *config) { c.tx = tx } }

// WithTime is the creation time of the given messages and the command
// (default 2026-01-01T00:00:00Z), for reactions scheduled relative to it.
func WithTime(t time.Time) Option { return func(c *config) { c.now = t } }

func newConfig(opts []Option) config {
	c := config{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// check runs the definition check and validates payloads when a registry
// was given.
func (c config) check(t testing.TB, def interface{ Check(*codec.Registry) error }, payloads ...any) {
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
		if m, ok := p.(core.Message); ok {
			p = m.Payload
		}
		if err := c.reg.Validate(p); err != nil {
			t.Fatalf("sourcedtest: %v", err)
		}
	}
}

// history positions and stamps the given messages.
func (c config) history(given []any) []core.PositionedMessage {
	out := make([]core.PositionedMessage, len(given))
	for i, g := range given {
		out[i] = core.PositionedMessage{Message: core.NewMessage(g).Stamp(uuid.New(), c.now), Position: int64(i + 1)}
	}
	return out
}

// DeciderTest is a Given-When-Then test of a decider.
type DeciderTest[S any] struct {
	t     testing.TB
	d     core.Decider[S]
	cfg   config
	given []any
	cmd   any
	hasW  bool
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

// When sets the command to decide.
func (c *DeciderTest[S]) When(cmd any) *DeciderTest[S] {
	c.cmd, c.hasW = cmd, true
	return c
}

// run decides the command: the pairs of the command, the events, and the
// reactions the decider has to them.
func (c *DeciderTest[S]) run() (pairs []effects.Pair, got []core.Message, err error) {
	c.t.Helper()
	if !c.hasW {
		c.t.Fatal("sourcedtest: a decider test needs When(command)")
	}
	c.cfg.check(c.t, c.d, append(append([]any{}, c.given...), c.cmd)...)
	history := c.cfg.history(c.given)
	cmd := core.PositionedMessage{Message: core.NewMessage(c.cmd).Stamp(uuid.New(), c.cfg.now), Position: int64(len(history) + 1)}
	pairs, err = effects.Step(c.d, effects.Claim{Messages: []core.PositionedMessage{cmd}, History: history})
	if err != nil {
		var be *core.BatchError
		if errors.As(err, &be) {
			err = be.Err
		}
		return pairs, nil, err
	}
	events := effects.Messages(pairs)
	got = append(got, events...)
	// Reactions run when the decider's group claims its events: do that.
	state := c.d.Evolve(c.d.Fold(c.given...), events...)
	for i, e := range events {
		e = e.Stamp(uuid.New(), c.cfg.now)
		events[i] = e
		rs, err := c.d.React(state, e)
		if err != nil {
			return pairs, got, err
		}
		got = append(got, rs...)
	}
	return pairs, got, nil
}

// Then asserts the command is accepted and produces exactly the expected
// messages: its events, then the reactions to them, in order. No
// arguments means no messages at all.
func (c *DeciderTest[S]) Then(expected ...any) {
	c.t.Helper()
	c.cfg.check(c.t, nil, expected...)
	_, got, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	assertMessages(c.t, expected, got)
}

// ThenSync is Then that also runs the sync and after-sync work of the
// decision (with the transaction of WithTx) and fails on their errors.
func (c *DeciderTest[S]) ThenSync(expected ...any) {
	c.t.Helper()
	pairs, got, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	runWork(c.t, pairs, c.cfg.tx)
	assertMessages(c.t, expected, got)
}

// ThenError asserts the command is rejected: want is the exact error text
// (a string), an error the rejection matches with errors.Is, or a pointer
// to an error type it matches with errors.As.
func (c *DeciderTest[S]) ThenError(want any) {
	c.t.Helper()
	_, got, err := c.run()
	if err == nil {
		c.t.Fatalf("sourcedtest: When(%s) was accepted with %s; want an error", describe(c.cmd), describeAll(got))
	}
	assertError(c.t, err, want)
}

// ThenPairs hands the raw signal pairs of the command to fn for custom
// assertions.
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
	_, got, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.cmd), err)
	}
	fn(c.t, c.d.Evolve(c.d.Fold(c.given...), got...))
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

func (c *ProjectorTest[S]) run() ([]effects.Pair, S) {
	c.t.Helper()
	c.cfg.check(c.t, c.p, c.given...)
	h := c.cfg.history(c.given)
	p := c.p
	p.Load = nil // project from the given events alone
	pairs, err := effects.Step(p, effects.Claim{Messages: h, History: h})
	if err != nil {
		c.t.Fatalf("sourcedtest: projecting failed: %v", err)
	}
	return pairs, p.Evolve(p.Initial(), core.Messages(c.given...)...)
}

// Then hands the projected state to fn.
func (c *ProjectorTest[S]) Then(fn func(t testing.TB, s S)) {
	c.t.Helper()
	_, s := c.run()
	fn(c.t, s)
}

// ThenSync runs the projector's sync and after-sync work on the batch of
// given events (with the transaction of WithTx), then hands the state to
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
	assertMessages(c.t, expected, effects.Messages(pairs))
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

func runWork(t testing.TB, pairs []effects.Pair, tx core.Tx) {
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

func assertMessages(t testing.TB, expected []any, got []core.Message) {
	t.Helper()
	ok := len(expected) == len(got)
	for i := 0; ok && i < len(got); i++ {
		ok = Match(expected[i], got[i])
	}
	if !ok {
		want := make([]core.Message, len(expected))
		for i, e := range expected {
			want[i] = core.NewMessage(e)
		}
		t.Fatalf("sourcedtest: messages differ\n  want: %s\n  got:  %s", describeAll(want), describeAll(got))
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

func describeAll(ms []core.Message) string {
	if len(ms) == 0 {
		return "(no messages)"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = describe(m)
	}
	return strings.Join(parts, ", ")
}
