package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The stores a run uses list their schedule: a message acknowledged but
// scheduled is not lost.
var (
	_ driver.ScheduleReader = (*memstore.Store)(nil)
	_ driver.ScheduleReader = (*sqlitestore.Store)(nil)
)

// View is what the invariants look at after a step: the whole log read
// back from the store, the consumer groups, and what the simulator knows
// was acknowledged.
type View struct {
	// Log is the whole log, in position order.
	Log []core.PositionedMessage
	// ByID indexes Log by message id.
	ByID map[uuid.UUID]core.PositionedMessage
	// Acked are the messages whose append (or Handle) was acknowledged.
	Acked map[uuid.UUID]core.Message
	// Status is each group's status.
	Status map[string]driver.Status
	// Groups are the groups' figures.
	Groups []driver.GroupInfo
	// Offsets are every partition's offset.
	Offsets []driver.Offset
	// Scheduled indexes the messages waiting in the schedule by id.
	Scheduled map[uuid.UUID]core.Message
	// MaxPosition is the store's newest position.
	MaxPosition int64
	// Store is the store under simulation, without faults, for a domain
	// check that loads state (shell.Load, shell.LoadMachine).
	Store driver.Store

	ackedIDs []uuid.UUID // Acked's ids in the order they were acked
}

// AckedOfType returns the ids of the acknowledged messages of type typ,
// in the order they were acknowledged.
func (v *View) AckedOfType(typ string) []uuid.UUID {
	var out []uuid.UUID
	for _, id := range v.ackedIDs {
		if v.Acked[id].Type == typ {
			out = append(out, id)
		}
	}
	return out
}

// ExactlyOnce checks that every message of type cmd in the log caused at
// most one message of the outcome types (exactly one when final), after
// it: a command decided once, an event reacted to once.
func (v *View) ExactlyOnce(cmd string, outcomes []string, final bool) error {
	count := map[uuid.UUID]int{}
	for _, m := range v.Log {
		if !slices.Contains(outcomes, m.Type) {
			continue
		}
		cause, ok := v.ByID[m.CausationID]
		if !ok || cause.Type != cmd {
			continue
		}
		if m.Position < cause.Position {
			return fmt.Errorf("%s at position %d is before its cause, %s at position %d", m.Type, m.Position, cause.Type, cause.Position)
		}
		count[cause.ID]++
		if count[cause.ID] > 1 {
			return fmt.Errorf("%s at position %d decided twice: another %v at position %d", cause.Type, cause.Position, outcomes, m.Position)
		}
	}
	if final {
		for _, m := range v.Log {
			if m.Type == cmd && count[m.ID] == 0 {
				return fmt.Errorf("%s at position %d (%v) never decided: no %v caused by it", m.Type, m.Position, m.Payload, outcomes)
			}
		}
	}
	return nil
}

// view reads the store's state.
func (w *World) view() (*View, error) {
	ctx := context.Background()
	v := &View{Store: w.inner, ByID: map[uuid.UUID]core.PositionedMessage{}, Acked: w.acked, Status: map[string]driver.Status{}, ackedIDs: w.ackedOrder}
	for m, err := range w.inner.All(ctx, driver.ReadAllOptions{Limit: 500}) {
		if err != nil {
			return nil, err
		}
		v.Log = append(v.Log, m)
	}
	v.Scheduled = map[uuid.UUID]core.Message{}
	if rs, ok := w.inner.(driver.ScheduleReader); ok {
		ms, err := rs.ReadScheduled(ctx, 0)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			v.Scheduled[m.ID] = m
		}
	}
	st, err := w.inner.Stats(ctx)
	if err != nil {
		return nil, err
	}
	v.MaxPosition, v.Groups = st.MaxPosition, st.Groups
	for _, g := range st.Groups {
		v.Status[g.ID] = g.Status
	}
	for o, err := range w.inner.Offsets(ctx, driver.OffsetQuery{Limit: 500}) {
		if err != nil {
			return nil, err
		}
		v.Offsets = append(v.Offsets, o)
	}
	return v, nil
}

// check checks every invariant on the state after a step (final: after
// the drain, when liveness is due too).
func (w *World) check(final bool) error {
	v, err := w.view()
	if err != nil {
		return &Violation{"readable", fmt.Errorf("reading the store's state: %w", err)}
	}
	// Positions increase, ids are unique.
	var last int64
	for _, m := range v.Log {
		if m.Position <= last {
			return &Violation{"log order", fmt.Errorf("position %d after %d", m.Position, last)}
		}
		last = m.Position
		if prev, dup := v.ByID[m.ID]; dup {
			return &Violation{"no duplicates", fmt.Errorf("message %s at positions %d and %d", m.ID, prev.Position, m.Position)}
		}
		v.ByID[m.ID] = m
	}
	// The highest position given: the log's, or higher when the newest
	// messages were deleted on ack (the queue saw them).
	w.high = max(w.high, v.MaxPosition)
	for _, d := range w.domains {
		if hs, ok := d.(HighestSeer); ok {
			w.high = max(w.high, hs.HighestSeen())
		}
	}
	if last > v.MaxPosition {
		return &Violation{"log order", fmt.Errorf("message at position %d beyond the store's highest position %d", last, v.MaxPosition)}
	}
	// Nothing acknowledged is lost.
	for _, id := range w.ackedOrder {
		m := w.acked[id]
		_, in := v.ByID[id]
		_, scheduled := v.Scheduled[id]
		if !in && !scheduled && !w.deletes[m.Type] {
			return &Violation{"no acked append lost", fmt.Errorf("%s %s (%v) was acknowledged but is not in the log", m.Type, id, m.Payload)}
		}
	}
	// Causes come before their effects.
	for _, m := range v.Log {
		if m.CausationID == m.ID || m.CausationID == uuid.Nil {
			continue
		}
		if c, ok := v.ByID[m.CausationID]; ok && c.Position > m.Position {
			return &Violation{"causes first", fmt.Errorf("%s at position %d is caused by %s at the later position %d", m.Type, m.Position, c.Type, c.Position)}
		}
	}
	// Offsets never move back nor past the log; claims of dead workers go.
	for _, o := range v.Offsets {
		key := fmt.Sprintf("%s|%d", o.Group, o.ID)
		if prev := w.offsets[key]; o.LastPosition < prev {
			return &Violation{"offsets monotonic", fmt.Errorf("offset %d of %s (partition %s) moved back from %d to %d", o.ID, o.Group, core.Partition(o.Partition).String(), prev, o.LastPosition)}
		}
		if o.LastPosition > w.high {
			return &Violation{"offsets within the log", fmt.Errorf("offset %d of %s at %d, past the highest position given, %d", o.ID, o.Group, o.LastPosition, w.high)}
		}
		w.offsets[key] = o.LastPosition
		if !o.Claimed {
			continue
		}
		if final {
			return &Violation{"claims released", fmt.Errorf("after the drain, %s still holds a claim on %s of %s (claimed at %v)", o.ClaimedBy, core.Partition(o.Partition).String(), o.Group, o.ClaimedAt)}
		}
		for _, r := range w.reaps {
			bound := r.now.Add(-r.ttl - reapMargin)
			hb, seen := w.heartbeats[o.ClaimedBy]
			if o.ClaimedAt.Before(bound) && (!seen || hb.Before(bound)) {
				return &Violation{"stale claims reaped", fmt.Errorf("the reaper ran at %v (ttl %v), yet %s (last heartbeat %v, live %v) still holds the claim on %s of %s it made at %v",
					r.now.Sub(Epoch), r.ttl, o.ClaimedBy, hbText(hb, seen), w.liveWorker[o.ClaimedBy], core.Partition(o.Partition).String(), o.Group, o.ClaimedAt.Sub(Epoch))}
			}
		}
	}
	// Group statuses follow the status chart; only failing domains fail.
	mayFail := map[string]bool{}
	for _, d := range w.domains {
		for _, g := range d.Failing() {
			mayFail[g] = true
		}
	}
	for _, g := range v.Groups {
		prev, seen := w.status[g.ID]
		if seen && prev != g.Status && !reachable(g.ID, prev, g.Status) {
			return &Violation{"group status chart", fmt.Errorf("group %s went from %s to %s, which no command of the status chart does", g.ID, prev, g.Status)}
		}
		w.status[g.ID] = g.Status
		if g.Status != driver.StatusActive && !mayFail[g.ID] {
			return &Violation{"groups stay active", fmt.Errorf("group %s is %s (failure: %s %q at position %d), but its reactor never fails", g.ID, g.Status, g.Failure.ErrorType, g.Failure.Error, g.Failure.Position)}
		}
	}
	for _, d := range w.domains {
		if err := d.Check(v, final); err != nil {
			return &Violation{d.Name(), err}
		}
	}
	return nil
}

// reapMargin keeps the claim check clear of the reaper's own boundary.
const reapMargin = time.Second

func hbText(t time.Time, ok bool) string {
	if !ok {
		return "never"
	}
	return t.Sub(Epoch).String()
}

// reachable tells whether one command of the status chart moves a group
// from one status to the other.
func reachable(group string, from, to driver.Status) bool {
	for _, c := range []driver.GroupCommand{driver.CmdStart, driver.CmdStop, driver.CmdReset, driver.CmdRetry, driver.CmdRecover, driver.CmdFail} {
		if next, err := driver.Transition(group, from, c); err == nil && next == to {
			return true
		}
	}
	return false
}
