package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testReadCorrelation(t *testing.T) {
	e := s.env(t)
	// 1 A courseCreated(Algebra)         root of the chain
	// 2 U courseCreated(History)         unrelated
	// 3 B userJoinedCourse(Algebra, joe) correlated from A
	// 4 V userRegistered(joe)            correlated from U: another chain
	// 5 C courseClosed(Algebra)          correlated from B
	a := e.appendOne(core.NewMessage(courseCreated{CourseName: "Algebra"}))
	u := e.appendOne(core.NewMessage(courseCreated{CourseName: "History"}))
	b := e.appendOne(core.NewMessage(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}).Correlate(a))
	v := e.appendOne(core.NewMessage(userRegistered{UserID: "joe", Name: "Joe"}).Correlate(u))
	c := e.appendOne(core.NewMessage(courseClosed{CourseName: "Algebra"}).Correlate(b))
	if b.CorrelationID != a.ID || c.CorrelationID != a.ID || c.CausationID != b.ID {
		t.Fatalf("stamping lost the chain: a %s, b correlation %s, c correlation %s causation %s (want b %s)", a.ID, b.CorrelationID, c.CorrelationID, c.CausationID, b.ID)
	}
	all := e.log()
	e.expectPositions("log", all, 1, 2, 3, 4, 5)

	t.Run("any message of a chain reads the whole chain in position order", func(t *testing.T) {
		e := e.with(t)
		want := []core.PositionedMessage{all[0], all[2], all[4]}
		for _, m := range []core.Message{a, b, c} {
			e.sameMessages("chain of "+m.Type, e.readCorrelation(m.ID), want)
		}
	})

	t.Run("another chain reads only its own messages", func(t *testing.T) {
		e := e.with(t)
		e.sameMessages("chain of the unrelated message", e.readCorrelation(u.ID), []core.PositionedMessage{all[1], all[3]})
		e.sameMessages("chain read from its second message", e.readCorrelation(v.ID), []core.PositionedMessage{all[1], all[3]})
	})

	t.Run("an unknown id reads nothing", func(t *testing.T) {
		e := e.with(t)
		e.expectPositions("unknown id", e.readCorrelation(uuid.New()))
		e.expectPositions("nil id", e.readCorrelation(uuid.Nil))
	})

	t.Run("a scheduled message is not in the log until promoted", func(t *testing.T) {
		e := e.with(t)
		res := e.append(core.NewMessage(courseClosed{CourseName: "History"}).Correlate(u).At(e.clock.Now().Add(time.Minute)))
		if res.Positions[0] != 0 {
			t.Fatalf("a future message got position %d, want it scheduled", res.Positions[0])
		}
		sched := res.Messages[0]
		e.expectPositions("scheduled id", e.readCorrelation(sched.ID))
		e.expectPositions("chain of its source before promotion", e.readCorrelation(u.ID), 2, 4)
		e.clock.Advance(time.Minute)
		if n, err := e.store.PromoteScheduled(e.ctx, e.clock.Now()); err != nil || n != 1 {
			t.Fatalf("promote: %d, %v; want 1", n, err)
		}
		e.expectPositions("chain after promotion", e.readCorrelation(sched.ID), 2, 4, 6)
		e.expectPositions("first chain unchanged", e.readCorrelation(b.ID), 1, 3, 5)
	})

	t.Run("a canceled context fails", func(t *testing.T) {
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		msgs, err := e.store.ReadCorrelation(ctx, a.ID)
		if err == nil {
			t.Fatalf("read with a canceled context returned %d messages and no error", len(msgs))
		}
	})
}

// appendOne appends one message alone and returns it as stored.
func (e *env) appendOne(m core.Message) core.Message {
	e.t.Helper()
	res, err := e.store.Append(e.ctx, []core.Message{m}, driver.AppendOptions{})
	if err != nil {
		e.t.Fatalf("append %s: %v", m.Type, err)
	}
	return res.Messages[0]
}

func (e *env) readCorrelation(id uuid.UUID) []core.PositionedMessage {
	e.t.Helper()
	msgs, err := e.store.ReadCorrelation(e.ctx, id)
	if err != nil {
		e.t.Fatalf("read correlation of %s: %v", id, err)
	}
	return msgs
}
