package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testCancel pins what a store does with a context that ends: every call
// whose context ended before it started returns an error matching the
// context's error (context.Canceled or context.DeadlineExceeded) and
// changes nothing; a call whose context ends while it runs either
// completes as if it had not, or returns such an error having written
// nothing; and a cancelled read never leaves the store (a pooled
// connection, a held snapshot) unable to serve the reads that follow.
func (s suite) testCancel(t *testing.T) {
	t.Run("ended before the call: context error, nothing written", func(t *testing.T) {
		for _, end := range []struct {
			name string
			ctx  func(context.Context) (context.Context, context.CancelFunc)
			want error
		}{
			{"canceled", func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return ctx, cancel
			}, context.Canceled},
			{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithDeadline(ctx, time.Unix(0, 0))
			}, context.DeadlineExceeded},
		} {
			t.Run(end.name, func(t *testing.T) {
				f := s.cancelFixture(t)
				for _, c := range f.calls() {
					before := f.state()
					ctx, cancel := end.ctx(f.ctx)
					err := c.call(ctx)
					cancel()
					if err == nil || !errors.Is(err, end.want) {
						t.Fatalf("%s with an ended context: error %v, want one matching %v", c.name, err, end.want)
					}
					if after := f.state(); !reflect.DeepEqual(after, before) {
						t.Fatalf("%s with an ended context changed the store:\nbefore %+v\nafter  %+v", c.name, before, after)
					}
				}
			})
		}
	})

	t.Run("ended during a write: done, or context error and nothing written", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"}) // a first write outside the test
		var wrote []uuid.UUID
		var refused []uuid.UUID
		n := 200
		if testing.Short() {
			n = 60
		}
		d := timeOf(func() {
			e.append(userRegistered{UserID: "probe", Name: "P"}, userJoinedCourse{CourseName: "Algebra", UserID: "probe"})
		})
		for i := range n {
			ms := msgs(userRegistered{UserID: fmt.Sprint("u", i), Name: "U"}, userJoinedCourse{CourseName: "Algebra", UserID: fmt.Sprint("u", i)})
			for j := range ms {
				ms[j].ID = uuid.Must(uuid.NewV7())
			}
			ctx, cancel := randomCancel(e.ctx, d)
			var err error
			if i%2 == 0 {
				_, err = e.store.Append(ctx, ms, driver.AppendOptions{})
			} else {
				err = e.store.Update(ctx, func(tx driver.Tx) error {
					if _, err := tx.Append(ms[:1], driver.AppendOptions{}); err != nil {
						return err
					}
					_, err := tx.Append(ms[1:], driver.AppendOptions{})
					return err
				})
			}
			cancel()
			switch {
			case err == nil:
				wrote = append(wrote, ms[0].ID, ms[1].ID)
			case errors.Is(err, context.Canceled):
				refused = append(refused, ms[0].ID, ms[1].ID)
			default:
				t.Fatalf("append %d with a context cancelled while it runs: error %v, want nil or one matching context.Canceled", i, err)
			}
		}
		have := map[uuid.UUID]bool{}
		for _, m := range e.log() {
			have[m.ID] = true
		}
		for _, id := range wrote {
			if !have[id] {
				t.Fatalf("message %s of a successful append is not in the log", id)
			}
		}
		for _, id := range refused {
			if have[id] {
				t.Fatalf("message %s of an append that returned a context error is in the log", id)
			}
		}
		t.Logf("%d appends done, %d refused by cancellation", len(wrote)/2, len(refused)/2)
	})

	t.Run("cancelled reads leave every read path working", func(t *testing.T) {
		f := s.cancelFixture(t)
		// Enough messages that a read takes a while, so cancellations land
		// inside it.
		var batch []any
		for i := range 100 {
			batch = append(batch, userRegistered{UserID: fmt.Sprint("r", i), Name: "R"})
		}
		f.append(batch...)
		n, plain := 100, 200
		if testing.Short() {
			n, plain = 40, 100
		}
		for _, r := range f.reads() {
			d := timeOf(func() {
				if err := r.call(f.ctx); err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
			})
			for i := range n {
				ctx, cancel := randomCancel(f.ctx, d)
				err := r.call(ctx)
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("%s %d, cancelled while it runs: error %v, want nil or one matching context.Canceled", r.name, i, err)
				}
			}
		}
		// New facts every read must see: a read answering from a snapshot
		// left open by a cancelled read would not.
		f.clock.Advance(time.Second)
		last := f.append(userJoinedCourse{CourseName: "Algebra", UserID: "late"}).Last
		due := f.clock.Now().Add(time.Minute)
		f.append(core.NewMessage(courseClosed{CourseName: "Algebra"}).At(due))
		f.expect = cancelExpect{last: last, due: due}
		for _, r := range f.reads() {
			for i := range plain {
				if err := r.call(f.ctx); err != nil {
					t.Fatalf("%s, plain read %d after cancelled reads: %v", r.name, i+1, err)
				}
			}
		}
	})
}

// timeOf returns how long fn took.
func timeOf(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}

// randomCancel returns a context cancelled after a random delay of up to
// twice d (a call's typical duration), so that cancellations land before,
// inside and after the call.
func randomCancel(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	d = max(2*d, 50*time.Microsecond)
	if rand.N(8) == 0 {
		cancel()
		return ctx, cancel
	}
	t := time.AfterFunc(rand.N(d), cancel)
	return ctx, func() { t.Stop(); cancel() }
}

// cancelFixture is a store holding a little of everything a call can
// change: messages, a scheduled message, consumer groups with offsets, a
// held claim and a worker heartbeat.
type cancelFixture struct {
	*genv
	claim  *driver.ClaimedPartition
	jobID  uuid.UUID
	expect cancelExpect
}

// cancelExpect is what the plain reads after cancelled ones must see (zero:
// no expectation).
type cancelExpect struct {
	last int64
	due  time.Time
}

func (s suite) cancelFixture(t *testing.T) *cancelFixture {
	t.Helper()
	e := s.genv(t, enrolments, devices, jobs)
	e.append(courseCreated{CourseName: "Algebra"}, userRegistered{UserID: "joe", Name: "Joe"}, userJoinedCourse{CourseName: "Algebra", UserID: "joe"},
		deviceRegistered{DeviceID: "d1", Name: "one"}, deviceRegistered{DeviceID: "d2", Name: "two"}, deposit{"acc", 5})
	e.append(core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Hour)))
	if err := e.gs.Heartbeat(e.ctx, []string{"w1"}, e.clock.Now()); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	f := &cancelFixture{genv: e}
	f.claim = e.claim(devices, "w1", 1)
	res := e.read([]core.Condition{cond(typeDeposit)}, driver.ReadOptions{})
	if len(res.Messages) != 1 {
		t.Fatalf("fixture: %d deposits, want 1", len(res.Messages))
	}
	f.jobID = res.Messages[0].ID
	return f
}

// cancelState is what the store holds, to compare before and after a call.
type cancelState struct {
	Log       []string
	Stats     driver.Stats
	Next      time.Time
	Scheduled bool
	Offsets   []driver.Offset
}

func (f *cancelFixture) state() cancelState {
	f.t.Helper()
	var st cancelState
	for _, m := range f.log() {
		st.Log = append(st.Log, fmt.Sprintf("%d %s %s %+v", m.Position, m.ID, m.Type, m.Payload))
	}
	st.Stats = f.stats()
	st.Stats.WALBytes = 0 // moves with every commit and checkpoint
	var err error
	if st.Next, st.Scheduled, err = f.store.NextScheduled(f.ctx); err != nil {
		f.t.Fatalf("next scheduled: %v", err)
	}
	page, err := f.gs.ReadOffsets(f.ctx, driver.OffsetQuery{Limit: 1000})
	if err != nil {
		f.t.Fatalf("read offsets: %v", err)
	}
	st.Offsets = page.Offsets
	return st
}

// namedCall is one store call, returning its error.
type namedCall struct {
	name string
	call func(ctx context.Context) error
}

// first returns the error of the first element of an iteration.
func first[T any](seq func(func(T, error) bool)) error {
	for _, err := range seq {
		return err
	}
	return nil
}

// calls are every call of driver.Store that takes a context, each with
// arguments that would change the store (or read it) had the context not
// ended.
func (f *cancelFixture) calls() []namedCall {
	st := f.store
	later := f.clock.Now().Add(24 * time.Hour)
	failure := driver.Failure{Error: "boom", RetryCount: 1}
	return append(f.reads(), []namedCall{
		{"Update", func(ctx context.Context) error {
			return st.Update(ctx, func(tx driver.Tx) error {
				_, err := tx.Append(msgs(courseCreated{CourseName: "History"}), driver.AppendOptions{})
				return err
			})
		}},
		{"Append", func(ctx context.Context) error {
			_, err := st.Append(ctx, msgs(courseCreated{CourseName: "History"}), driver.AppendOptions{})
			return err
		}},
		{"PromoteScheduled", func(ctx context.Context) error { _, err := st.PromoteScheduled(ctx, later); return err }},
		{"Optimize", st.Optimize},
		{"RegisterGroup", func(ctx context.Context) error { return st.RegisterGroup(ctx, groupSpec(bindings)) }},
		{"ClaimNext", func(ctx context.Context) error { _, err := st.ClaimNext(ctx, enrolments, "w2", 10); return err }},
		{"ClaimUpdate", func(ctx context.Context) error {
			_, err := st.ClaimUpdate(ctx, enrolments, "w2", 10, func(driver.Tx, *driver.ClaimedPartition) error { return nil })
			return err
		}},
		{"Release", func(ctx context.Context) error { return st.Release(ctx, f.claim) }},
		{"Ack", func(ctx context.Context) error { return st.Ack(ctx, f.claim, f.claim.Last()) }},
		{"StopGroup", func(ctx context.Context) error { return st.StopGroup(ctx, enrolments, "maintenance") }},
		{"ResetGroup", func(ctx context.Context) error { return st.ResetGroup(ctx, devices) }},
		{"RetryGroup", func(ctx context.Context) error { return st.RetryGroup(ctx, enrolments, later, failure) }},
		{"FailGroup", func(ctx context.Context) error { return st.FailGroup(ctx, enrolments, failure) }},
		{"Heartbeat", func(ctx context.Context) error { return st.Heartbeat(ctx, []string{"w1", "w3"}, later) }},
		{"ReleaseStaleClaims", func(ctx context.Context) error {
			_, err := st.ReleaseStaleClaims(ctx, later, time.Minute)
			return err
		}},
		{"ReleaseDrainedOffsets", func(ctx context.Context) error { _, err := st.ReleaseDrainedOffsets(ctx); return err }},
		{"PruneOrphanKeyPairs", func(ctx context.Context) error { _, err := st.PruneOrphanKeyPairs(ctx); return err }},
	}...)
}

// reads are the read paths of driver.Store. Each checks what it reads
// against f.expect when that is set.
func (f *cancelFixture) reads() []namedCall {
	st := f.store
	x := &f.expect
	atLeast := func(what string, got int64) error {
		if x.last != 0 && got < x.last {
			return fmt.Errorf("%s: last position %d, want at least %d (a stale snapshot?)", what, got, x.last)
		}
		return nil
	}
	return []namedCall{
		{"Read", func(ctx context.Context) error {
			res, err := st.Read(ctx, []core.Condition{cond(typeUserRegistered, "user_id", "joe"), cond(typeUserJoinedCourse, "course_name", "Algebra")}, driver.ReadOptions{})
			if err != nil {
				return err
			}
			return atLeast("Read", res.Guard.LastPosition)
		}},
		{"ReadPartition", func(ctx context.Context) error {
			res, err := st.ReadPartition(ctx, part("course_name", "Algebra", "user_id", "late"), []string{typeCourseCreated, typeUserJoinedCourse}, driver.ReadOptions{})
			if err != nil {
				return err
			}
			if x.last != 0 && (len(res.Messages) == 0 || res.Messages[len(res.Messages)-1].Position != x.last) {
				return fmt.Errorf("ReadPartition: messages %s, want the last at %d", describe(res.Messages), x.last)
			}
			return nil
		}},
		{"ReadPartition (Load: up to a position)", func(ctx context.Context) error {
			res, err := st.ReadPartition(ctx, part("course_name", "Algebra"), []string{typeCourseCreated, typeUserJoinedCourse}, driver.ReadOptions{Upto: 3})
			if err != nil {
				return err
			}
			if len(res.Messages) == 0 || res.Messages[len(res.Messages)-1].Position > 3 {
				return fmt.Errorf("ReadPartition up to 3: messages %s", describe(res.Messages))
			}
			return nil
		}},
		{"ReadAll", func(ctx context.Context) error {
			page, err := st.ReadAll(ctx, driver.ReadAllOptions{Order: driver.Descending, Limit: 50})
			if err != nil {
				return err
			}
			return atLeast("ReadAll", page.LastPosition)
		}},
		{"All", func(ctx context.Context) error {
			return first(st.All(ctx, driver.ReadAllOptions{Limit: 20}))
		}},
		{"ReadCorrelation", func(ctx context.Context) error {
			got, err := st.ReadCorrelation(ctx, f.jobID)
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("ReadCorrelation: %d messages, want 1", len(got))
			}
			return err
		}},
		{"NextScheduled", func(ctx context.Context) error {
			at, ok, err := st.NextScheduled(ctx)
			if err != nil {
				return err
			}
			if !ok || !x.due.IsZero() && !at.Equal(x.due) {
				return fmt.Errorf("NextScheduled: %v %v, want %v (a stale snapshot?)", at, ok, x.due)
			}
			return nil
		}},
		{"Stats", func(ctx context.Context) error {
			s, err := st.Stats(ctx)
			if err != nil {
				return err
			}
			return atLeast("Stats", s.MaxPosition)
		}},
		{"Group", func(ctx context.Context) error {
			_, err := st.Group(ctx, enrolments)
			return err
		}},
		{"ReadOffsets", func(ctx context.Context) error {
			page, err := st.ReadOffsets(ctx, driver.OffsetQuery{Limit: 100})
			if err == nil && !slices.ContainsFunc(page.Offsets, func(o driver.Offset) bool { return o.Group == devices }) {
				err = fmt.Errorf("ReadOffsets: no offset of %s in %+v", devices, page.Offsets)
			}
			return err
		}},
		{"Offsets", func(ctx context.Context) error {
			return first(st.Offsets(ctx, driver.OffsetQuery{}))
		}},
	}
}
