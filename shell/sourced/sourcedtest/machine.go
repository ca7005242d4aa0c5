package sourcedtest

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/statechart"
)

// MachineTest is a Given-When-Then test of a statechart machine: given the
// partition's history (events) or a stored configuration (paths and a
// context), when a command or an event, then the decision's messages
// (state events, data events, dispatches, timers, children started and
// stopped, and the machine's reactions to them) and the configuration it
// reaches.
type MachineTest[C any] struct {
	t         testing.TB
	m         statechart.Machine[C]
	cfg       config
	partition core.Partition
	given     []any
	paths     []string
	ctx       C
	atPaths   bool
	msg       any
	hasW      bool
	// after a chained When: the instance the earlier Whens reached and
	// the history they left
	cur  *statechart.Instance[C]
	hist []core.PositionedMessage
}

// Machine starts a test of m in partition (every partition key needs a
// value).
func Machine[C any](t testing.TB, m statechart.Machine[C], partition core.Partition, opts ...Option) *MachineTest[C] {
	return &MachineTest[C]{t: t, m: m, cfg: newConfig(opts), partition: partition}
}

// Given adds history, replayed as a store would return it: state events,
// data events, children's lifecycle messages (payloads or Messages), in
// order. A message outside the partition (core.InPartition) fails the
// test, saying why, unless AllowOutsidePartition leaves it out, as a
// partition read leaves it out.
func (c *MachineTest[C]) Given(events ...any) *MachineTest[C] {
	c.given = append(c.given, events...)
	return c
}

// And is Given, for readability.
func (c *MachineTest[C]) And(events ...any) *MachineTest[C] { return c.Given(events...) }

// GivenPaths starts from a stored configuration and context instead of a
// history (Machine.At: no history memory, entry counts or children).
func (c *MachineTest[C]) GivenPaths(ctx C, paths ...string) *MachineTest[C] {
	c.paths, c.ctx, c.atPaths = paths, ctx, true
	return c
}

// When sets the command or event to decide. A When after another decides
// the earlier one first (it must be accepted) and goes on from the
// configuration it reached, with what it appended in the partition added
// to the history, so that chained Whens accumulate as they would on a
// store: Then and the other assertions are about the last one.
func (c *MachineTest[C]) When(msg any) *MachineTest[C] {
	c.t.Helper()
	if c.hasW {
		r := c.accepted()
		hist := append(slices.Clone(r.history), r.cmd)
		appended := c.cfg.ofPartition(c.t, c.partition, append(slices.Clone(r.d.Messages), r.reactions...))
		for _, m := range appended {
			hist = append(hist, core.PositionedMessage{Message: c.cfg.stamp(m), Position: int64(len(hist) + 1)})
		}
		c.cur, c.hist = &r.after, hist
	}
	c.msg, c.hasW = msg, true
	return c
}

type machineRun[C any] struct {
	before, after statechart.Instance[C]
	d             statechart.Decision
	history       []core.PositionedMessage
	cmd           core.PositionedMessage
	reactions     []core.Message
}

func (c *MachineTest[C]) instance() (statechart.Instance[C], []core.PositionedMessage) {
	c.t.Helper()
	if c.cur != nil {
		return *c.cur, c.hist
	}
	if c.atPaths {
		if len(c.given) > 0 {
			c.t.Fatal("sourcedtest: a machine test starts from Given events or from GivenPaths, not both")
		}
		in, err := c.m.At(c.paths, c.ctx, c.partition)
		if err != nil {
			c.t.Fatalf("sourcedtest: GivenPaths(%v): %v", c.paths, err)
		}
		return in, nil
	}
	given := c.cfg.inPartition(c.t, c.partition, c.given, "the test (Machine's partition)")
	history := c.cfg.history(given)
	in, err := c.m.Load(c.partition, core.MessagesOf(history))
	if err != nil {
		c.t.Fatalf("sourcedtest: the given history does not load: %v", err)
	}
	return in, history
}

func (c *MachineTest[C]) run() (machineRun[C], error) {
	c.t.Helper()
	if !c.hasW {
		c.t.Fatal("sourcedtest: a machine test needs When(command or event)")
	}
	if err := c.m.Err(); err != nil {
		c.t.Fatalf("sourcedtest: the machine is invalid: %v", err)
	}
	c.cfg.check(c.t, c.m, c.given...)
	if err := c.cfg.validate(c.msg); err != nil {
		return machineRun[C]{}, err // what shell.HandleMachine answers
	}
	if len(c.m.PartitionBy) > 0 {
		p, err := c.cfg.partitionOf(c.t, c.m.PartitionBy, c.msg)
		if err != nil {
			return machineRun[C]{}, err // what shell.HandleMachine answers
		}
		if !maps.Equal(p, c.partition) {
			c.t.Fatalf("sourcedtest: When(%s) is in the partition %s, not the test's %s", describe(c.msg), describePartition(p), describePartition(c.partition))
		}
	}
	in, history := c.instance()
	var r machineRun[C]
	r.before, r.history = in, history
	r.cmd = core.PositionedMessage{Message: core.NewMessage(c.msg).Stamp(uuid.New(), c.cfg.now), Position: int64(len(history) + 1)}
	if c.cfg.reg != nil {
		if ct, err := c.cfg.reg.TypeOf(r.cmd.Payload); err == nil {
			r.cmd.Type = ct.Name
		}
	}
	next, d, err := c.m.Decide(in, r.cmd.Message)
	if err != nil {
		return r, err
	}
	r.after, r.d = next, d
	// The machine's reactions run when its group claims what it appended.
	if len(c.m.Reactions) > 0 && len(d.Messages) > 0 && !c.atPaths {
		all := append(slices.Clone(history), r.cmd)
		var batch []core.PositionedMessage
		for i, m := range d.Messages {
			pm := core.PositionedMessage{Message: m.Stamp(uuid.New(), c.cfg.now), Position: r.cmd.Position + int64(i) + 1}
			all = append(all, pm)
			batch = append(batch, pm)
		}
		outs, err := c.m.Step(core.StepInput{Partition: c.partition, History: all, Batch: batch})
		if err != nil {
			var be *core.BatchError
			if errors.As(err, &be) {
				err = be.Err
			}
			return r, err
		}
		for _, o := range outs {
			r.reactions = append(r.reactions, o.Reactions...)
		}
	}
	return r, nil
}

func (c *MachineTest[C]) accepted() machineRun[C] {
	c.t.Helper()
	r, err := c.run()
	if err != nil {
		c.t.Fatalf("sourcedtest: When(%s) was rejected: %v", describe(c.msg), err)
	}
	return r
}

// Then asserts the message is accepted and the decision appends exactly the
// expected messages, in append order (data events, children started, exit
// dispatches, state events, entry dispatches, timers, ...), then the
// machine's reactions to them. No arguments means no messages at all (an
// ignored event, a stale timer).
func (c *MachineTest[C]) Then(expected ...any) *MachineTest[C] {
	c.t.Helper()
	c.cfg.check(c.t, nil, expected...)
	r := c.accepted()
	c.cfg.assertMessages(c.t, expected, append(slices.Clone(r.d.Messages), r.reactions...))
	return c
}

// ThenStates asserts the decision's state events, one per move.
func (c *MachineTest[C]) ThenStates(expected ...any) *MachineTest[C] {
	c.t.Helper()
	c.cfg.assertMessages(c.t, expected, c.accepted().d.States)
	return c
}

// ThenEvents asserts the decision's data events.
func (c *MachineTest[C]) ThenEvents(expected ...any) *MachineTest[C] {
	c.t.Helper()
	c.cfg.assertMessages(c.t, expected, c.accepted().d.Events)
	return c
}

// ThenDispatched asserts the commands entry and exit actions dispatched.
func (c *MachineTest[C]) ThenDispatched(expected ...any) *MachineTest[C] {
	c.t.Helper()
	c.cfg.assertMessages(c.t, expected, c.accepted().d.Dispatched)
	return c
}

// ThenTimers asserts the commands After scheduled. A payload matches a
// timer's payload whatever its due time; a core.Delayed (core.After,
// core.At) also matches its due time. Timer metadata is the decision's,
// see ThenDecision.
func (c *MachineTest[C]) ThenTimers(expected ...any) *MachineTest[C] {
	c.t.Helper()
	timers := slices.Clone(c.accepted().d.Timers)
	for i := range timers {
		if i < len(expected) {
			if _, dated := expected[i].(core.Delayed); !dated {
				timers[i].CreatedAt = time.Time{}
			}
		}
	}
	c.cfg.assertMessages(c.t, expected, timers)
	return c
}

// ThenPaths asserts the configuration after the decision, as paths
// (outermost first).
func (c *MachineTest[C]) ThenPaths(paths ...string) *MachineTest[C] {
	c.t.Helper()
	got := c.accepted().after.Paths()
	if !slices.Equal(got, paths) && !(len(got) == 0 && len(paths) == 0) {
		c.t.Fatalf("sourcedtest: the machine is at %v, want %v", got, paths)
	}
	return c
}

// ThenDecision hands the instance after the decision and the decision to
// fn, for custom assertions.
func (c *MachineTest[C]) ThenDecision(fn func(t testing.TB, in statechart.Instance[C], d statechart.Decision)) *MachineTest[C] {
	c.t.Helper()
	r := c.accepted()
	fn(c.t, r.after, r.d)
	return c
}

// ThenSync is Then that also runs the machine's Sync and AfterSync work for
// the decision (with the transaction of WithSyncTx) and fails on their errors.
func (c *MachineTest[C]) ThenSync(expected ...any) *MachineTest[C] {
	c.t.Helper()
	r := c.accepted()
	pairs, err := effects.Step(c.m, effects.Claim{Partition: c.partition, Messages: []core.PositionedMessage{r.cmd}, History: r.history})
	if err != nil {
		c.t.Fatalf("sourcedtest: %v", err)
	}
	runWork(c.t, pairs, c.cfg.tx)
	c.cfg.assertMessages(c.t, expected, append(slices.Clone(r.d.Messages), r.reactions...))
	return c
}

// ThenError asserts the message is rejected: want is the exact error text,
// an error matched with errors.Is (statechart.ErrCommandNotHandled for a
// command no active state accepts), or a pointer to an error type matched
// with errors.As.
func (c *MachineTest[C]) ThenError(want any) {
	c.t.Helper()
	r, err := c.run()
	if err == nil {
		c.t.Fatalf("sourcedtest: When(%s) was accepted with %s; want an error", describe(c.msg), c.cfg.describeAll(r.d.Messages))
	}
	assertError(c.t, err, want)
}
