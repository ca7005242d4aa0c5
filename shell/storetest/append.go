package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testAppend(t *testing.T) {
	t.Run("positions are consecutive from 1", func(t *testing.T) {
		e := s.env(t)
		r1 := e.append(courseCreated{CourseName: "Algebra"}, courseCreated{CourseName: "History"}, userRegistered{UserID: "joe", Name: "Joe"})
		if !slices.Equal(r1.Positions, []int64{1, 2, 3}) || r1.Last != 3 {
			t.Fatalf("first append: positions %v last %d, want [1 2 3] last 3", r1.Positions, r1.Last)
		}
		r2 := e.append(courseClosed{CourseName: "Algebra"}, userJoinedCourse{CourseName: "History", UserID: "joe"})
		if !slices.Equal(r2.Positions, []int64{4, 5}) || r2.Last != 5 {
			t.Fatalf("second append: positions %v last %d, want [4 5] last 5", r2.Positions, r2.Last)
		}
		if st := e.stats(); st.MaxPosition != 5 || st.Scheduled != 0 {
			t.Fatalf("stats %+v, want max position 5, none scheduled", st)
		}
		e.expectPositions("log", e.log(), 1, 2, 3, 4, 5)
	})

	t.Run("stamps id, time, type, causation and correlation", func(t *testing.T) {
		e := s.env(t)
		now := e.clock.Advance(1500 * time.Millisecond)
		res := e.append(courseCreated{CourseName: "Algebra"}, userRegistered{UserID: "joe", Name: "Joe"})
		if len(res.Messages) != 2 {
			t.Fatalf("append returned %d messages, want 2", len(res.Messages))
		}
		wantTypes := []string{typeCourseCreated, typeUserRegistered}
		for i, m := range res.Messages {
			if m.ID == uuid.Nil || m.ID.Version() != 7 {
				t.Fatalf("message %d: id %s, want a UUID v7", i, m.ID)
			}
			if m.CausationID != m.ID || m.CorrelationID != m.ID {
				t.Fatalf("message %d: causation %s correlation %s, want both the own id %s", i, m.CausationID, m.CorrelationID, m.ID)
			}
			if !m.CreatedAt.Equal(now) {
				t.Fatalf("message %d: created at %v, want the store clock's %v", i, m.CreatedAt, now)
			}
			if m.Type != wantTypes[i] {
				t.Fatalf("message %d: type %q, want %q", i, m.Type, wantTypes[i])
			}
		}
		if res.Messages[0].ID == res.Messages[1].ID {
			t.Fatal("two messages got the same id")
		}
		want := []core.PositionedMessage{{Message: res.Messages[0], Position: 1}, {Message: res.Messages[1], Position: 2}}
		e.sameMessages("log", e.log(), want)
	})

	t.Run("keeps a given envelope and metadata", func(t *testing.T) {
		e := s.env(t)
		cause := core.NewMessage(courseCreated{CourseName: "Algebra"}).Stamp(uuid.Must(uuid.NewV7()), epoch.Add(-time.Hour))
		m := core.NewMessage(userJoinedCourse{CourseName: "Algebra", UserID: "joe"}).Correlate(cause).At(epoch.Add(-time.Minute))
		m.ID = uuid.Must(uuid.NewV7())
		m.Metadata = map[string]any{
			"tenant": "acme",
			"n":      1.5,
			"ok":     true,
			"nested": map[string]any{"list": []any{1.0, "x", nil}},
		}
		res := e.append(m)
		got := res.Messages[0]
		if got.ID != m.ID || got.CausationID != cause.ID || got.CorrelationID != cause.ID || !got.CreatedAt.Equal(m.CreatedAt) {
			t.Fatalf("append changed the given envelope: got %+v, want %+v", got, m)
		}
		m.Type = typeUserJoinedCourse
		e.sameMessages("log", e.log(), []core.PositionedMessage{{Message: m, Position: 1}})
	})

	t.Run("no metadata reads back empty", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"})
		if md := e.log()[0].Metadata; len(md) != 0 {
			t.Fatalf("metadata %v, want none", md)
		}
	})

	t.Run("payloads round trip", func(t *testing.T) {
		e := s.env(t)
		at := time.Date(2024, 2, 29, 23, 59, 58, 123456000, time.UTC)
		payloads := []any{
			deviceRegistered{DeviceID: "d1", Name: "Thermostat"},
			assetRegistered{AssetID: "a1", Label: "Boiler"},
			deviceBound{"d1", "a1"},
			courseCreated{CourseName: "Algebra"},
			userRegistered{UserID: "joe", Name: "Joe"},
			userJoinedCourse{CourseName: "Algebra", UserID: "joe"},
			courseClosed{CourseName: "Algebra"},
			transfer{Accounts: []string{"acc1", "acc2"}, Amount: 42},
			reading{SensorID: "s1", Count: -7, Active: true, At: at},
			signup{Email: "joe@example.com"},
			deposit{Account: "acc1", Amount: 10},
		}
		e.append(payloads...)
		for i, m := range e.log() {
			if !equalPayload(m.Payload, payloads[i]) {
				t.Fatalf("position %d: payload %#v, want %#v", m.Position, m.Payload, payloads[i])
			}
		}
	})

	t.Run("key pairs are indexed", func(t *testing.T) {
		e := s.env(t)
		at := time.Date(2024, 2, 29, 23, 59, 58, 123456000, time.UTC)
		e.append(
			deviceBound{"d1", "a1"},
			reading{SensorID: "s1", Count: 42, Active: true, At: at},
			deviceBound{"d2", "a1"},
		)
		cases := []struct {
			name string
			cond core.Condition
			want []int64
		}{
			{"by one string attribute", cond(typeDeviceBound, "asset_id", "a1"), []int64{1, 3}},
			{"by two attributes", cond(typeDeviceBound, "asset_id", "a1", "device_id", "d2"), []int64{3}},
			{"by an int", cond(typeReading, "count", e.canonical(42)), []int64{2}},
			{"by a bool", cond(typeReading, "active", e.canonical(true)), []int64{2}},
			{"by a time in another zone", cond(typeReading, "at", e.canonical(at.In(time.FixedZone("X", -7*3600)))), []int64{2}},
			{"by a wrong int", cond(typeReading, "count", e.canonical(41)), nil},
			{"by a bool of the wrong value", cond(typeReading, "active", e.canonical(false)), nil},
			{"by a value of another attribute", cond(typeDeviceBound, "device_id", "a1"), nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := e.with(t)
				got := e.read([]core.Condition{c.cond}, driver.ReadOptions{})
				e.expectPositions(c.cond.String(), got.Messages, c.want...)
			})
		}
	})

	t.Run("a slice attribute indexes every element", func(t *testing.T) {
		e := s.env(t)
		e.append(
			transfer{Accounts: []string{"acc1", "acc2"}, Amount: 5},
			transfer{Accounts: []string{"acc2", "acc3"}, Amount: 6},
			transfer{Accounts: []string{"acc4"}, Amount: 7},
		)
		for acc, want := range map[string][]int64{"acc1": {1}, "acc2": {1, 2}, "acc3": {2}, "acc4": {3}, "acc5": nil} {
			got := e.read([]core.Condition{cond(typeTransfer, "accounts", acc)}, driver.ReadOptions{})
			e.expectPositions("read accounts="+acc, got.Messages, want...)
			got = e.readPartition(part("accounts", acc), []string{typeTransfer}, driver.ReadOptions{})
			e.expectPositions("partition accounts="+acc, got.Messages, want...)
		}
	})

	t.Run("an empty append writes and announces nothing", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"})
		e.notes.take()
		before := e.snapshot()
		for _, in := range [][]core.Message{nil, {}} {
			res, err := e.store.Append(e.ctx, in, driver.AppendOptions{})
			if err != nil {
				t.Fatalf("empty append: %v", err)
			}
			if res.Last != 0 || len(res.Positions) != 0 {
				t.Fatalf("empty append returned %+v, want last 0 and no positions", res)
			}
		}
		e.unchanged(before)
	})

	t.Run("an append announces its distinct types once", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"}, userRegistered{UserID: "joe", Name: "Joe"}, courseCreated{CourseName: "History"})
		e.expectNotes([]string{typeCourseCreated, typeUserRegistered})
		e.append(courseClosed{CourseName: "Algebra"})
		e.expectNotes([]string{typeCourseClosed})
	})
}

func (s suite) testBadInput(t *testing.T) {
	// seed fills a store with a logged and a scheduled message, so that
	// "nothing written" is checked against a store that holds something.
	seed := func(t *testing.T) (*env, core.Message, core.Message) {
		e := s.env(t)
		logged := e.append(courseCreated{CourseName: "Algebra"}).Messages[0]
		scheduled := e.append(core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Hour))).Messages[0]
		e.notes.take()
		return e, logged, scheduled
	}
	// rejects appends batch and checks the error and that nothing changed.
	// Each caller then appends the batch's valid message again: its id was
	// not kept by the failed append.
	rejects := func(e *env, batch []core.Message, target error) error {
		e.t.Helper()
		before := e.snapshot()
		_, err := e.store.Append(e.ctx, batch, driver.AppendOptions{})
		if !errors.Is(err, target) {
			e.t.Fatalf("append: error %v, want one matching %v", err, target)
		}
		e.unchanged(before)
		return err
	}
	fresh := func(p any) core.Message {
		m := core.NewMessage(p)
		m.ID = uuid.Must(uuid.NewV7())
		return m
	}

	t.Run("an unregistered payload type fails the whole batch", func(t *testing.T) {
		e, _, _ := seed(t)
		ok := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		rejects(e, []core.Message{ok, core.NewMessage(unregistered{"x"})}, codec.ErrUnregistered)
		e.append(ok) // its id was not taken
	})

	t.Run("a payload shared by several types is stored under the type its message carries", func(t *testing.T) {
		e, _, _ := seed(t)
		opened := core.Message{Type: typeTicketOpened, Payload: ticket{"t1"}}
		closed := core.Message{Type: typeTicketClosed, Payload: ticket{"t1"}}
		res := e.append(opened, closed)
		if res.Messages[0].Type != typeTicketOpened || res.Messages[1].Type != typeTicketClosed {
			t.Fatalf("stored types %q, %q, want %q, %q", res.Messages[0].Type, res.Messages[1].Type, typeTicketOpened, typeTicketClosed)
		}
		got := e.read([]core.Condition{{Type: typeTicketClosed, Attrs: map[string]string{"ticket_id": "t1"}}}, driver.ReadOptions{})
		if len(got.Messages) != 1 || got.Messages[0].Type != typeTicketClosed || got.Messages[0].Payload != (ticket{"t1"}) {
			t.Fatalf("read of %s: %+v, want the one closed ticket", typeTicketClosed, got.Messages)
		}
		// Unnamed, the payload names no type; named wrongly, it is refused.
		e, _, _ = seed(t)
		rejects(e, []core.Message{core.NewMessage(ticket{"t2"})}, codec.ErrUnregistered)
		rejects(e, []core.Message{{Type: typeTicketOpened, Payload: userRegistered{UserID: "joe", Name: "Joe"}}}, codec.ErrInvalid)
	})

	t.Run("a missing required attribute fails the whole batch", func(t *testing.T) {
		e, _, _ := seed(t)
		ok := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		err := rejects(e, []core.Message{ok, core.NewMessage(signup{})}, codec.ErrInvalid)
		var ve *codec.ValidationError
		if !errors.As(err, &ve) || ve.Type != typeSignup {
			t.Fatalf("error %v: want a *codec.ValidationError naming %s", err, typeSignup)
		}
		e.append(ok)
	})

	t.Run("a failing Validate method fails the whole batch", func(t *testing.T) {
		e, _, _ := seed(t)
		ok := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		rejects(e, []core.Message{ok, core.NewMessage(deposit{Account: "acc1", Amount: 0})}, codec.ErrInvalid)
		e.append(ok)
	})

	t.Run("a message dated before its creation time fails the whole batch", func(t *testing.T) {
		e, _, _ := seed(t)
		ok := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		stored := e.append(courseCreated{CourseName: "Algebra"}).Messages[0]
		e.notes.take()
		redated := stored.At(stored.CreatedAt.Add(-time.Hour))
		redated.ID = uuid.Nil
		err := rejects(e, []core.Message{ok, redated}, core.ErrPastMessageDate)
		var pe *core.PastMessageDateError
		if !errors.As(err, &pe) || !pe.CreatedAt.Equal(stored.CreatedAt) || !pe.At.Equal(stored.CreatedAt.Add(-time.Hour)) {
			t.Fatalf("error %v: want a *core.PastMessageDateError with both times", err)
		}
		e.append(ok)
	})

	t.Run("an invalid future-dated message schedules nothing", func(t *testing.T) {
		e, _, _ := seed(t)
		later := fresh(userRegistered{UserID: "joe", Name: "Joe"}).At(epoch.Add(2 * time.Hour))
		rejects(e, []core.Message{later, core.NewMessage(signup{}).At(epoch.Add(time.Hour))}, codec.ErrInvalid)
		e.append(later)
	})

	t.Run("an id already in the log fails the whole batch", func(t *testing.T) {
		e, logged, _ := seed(t)
		ok := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		dup := core.NewMessage(courseCreated{CourseName: "History"})
		dup.ID = logged.ID
		rejects(e, []core.Message{ok, dup}, driver.ErrDuplicateID)
		e.append(ok)
	})

	t.Run("an id already in the schedule fails the whole batch", func(t *testing.T) {
		e, _, scheduled := seed(t)
		ok := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		now := core.NewMessage(courseCreated{CourseName: "History"})
		now.ID = scheduled.ID
		rejects(e, []core.Message{ok, now}, driver.ErrDuplicateID)
		rejects(e, []core.Message{now.At(epoch.Add(3 * time.Hour))}, driver.ErrDuplicateID)
		e.append(ok)
	})

	t.Run("an id twice in one batch fails the whole batch", func(t *testing.T) {
		e, _, _ := seed(t)
		a := fresh(userRegistered{UserID: "joe", Name: "Joe"})
		b := core.NewMessage(userRegistered{UserID: "jake", Name: "Jake"})
		b.ID = a.ID
		rejects(e, []core.Message{a, b}, driver.ErrDuplicateID)
		e.append(a)
	})

	t.Run("a promoted message keeps its id reserved", func(t *testing.T) {
		e, _, scheduled := seed(t)
		if n, err := e.store.PromoteScheduled(e.ctx, epoch.Add(2*time.Hour)); err != nil || n != 1 {
			t.Fatalf("promote: %d, %v; want 1", n, err)
		}
		e.notes.take()
		again := core.NewMessage(courseClosed{CourseName: "History"})
		again.ID = scheduled.ID
		rejects(e, []core.Message{again}, driver.ErrDuplicateID)
	})
}
