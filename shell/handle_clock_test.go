package shell_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// steppingBack is a clock that moves back by a second at every read, as a
// clock stepped back by NTP between two reads does.
type steppingBack struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingBack) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(-time.Second)
	return c.t
}

// A clock that steps back while Handle runs does not turn its command into
// a scheduled message behind its own event: the command is in the log,
// before its event, and the decider's offset is past it.
func TestHandleWhenTheClockStepsBack(t *testing.T) {
	ctx := context.Background()
	clk := &steppingBack{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	store := memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	rt, err := shell.NewRouter(store, shell.RouterOptions{Now: clk.Now}, enrolments)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Position == 0 {
		t.Fatal("the command was scheduled, not decided")
	}
	page, err := store.ReadAll(ctx, shell.ReadAllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 || page.Messages[0].Type != "courses.enrol" || page.Messages[0].Position != res.Position || page.Messages[1].Type != "courses.enrolled" {
		t.Fatalf("log %+v: want the command at %d, then its event", page.Messages, res.Position)
	}
	if st, _ := store.Stats(ctx); st.Scheduled != 0 {
		t.Fatalf("%d messages scheduled", st.Scheduled)
	}
	if !res.Command.CreatedAt.Equal(page.Messages[0].CreatedAt) {
		t.Fatalf("Handle returned the command dated %v, the log has %v", res.Command.CreatedAt, page.Messages[0].CreatedAt)
	}
}

// HandleOptions.Now dates the command; a date after the store's clock is
// refused (Handle decides now; a command for later is appended dated later
// and decided by a worker), and nothing is written.
func TestHandleRefusesACommandDatedInTheFuture(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	rt, store := newRouter(t, clk, shell.RouterOptions{}, enrolments)
	_ = rt
	later := func() time.Time { return clk.Now().Add(time.Minute) }
	_, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, &shell.HandleOptions{Now: later})
	if !errors.Is(err, shell.ErrFutureCommand) {
		t.Fatalf("Handle dated a minute ahead: %v, want ErrFutureCommand", err)
	}
	st, err := store.Stats(ctx)
	if err != nil || st.MaxPosition != 0 || st.Scheduled != 0 {
		t.Fatalf("stats %+v, %v: want nothing written", st, err)
	}
	earlier := func() time.Time { return clk.Now().Add(-time.Hour) }
	res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, &shell.HandleOptions{Now: earlier})
	if err != nil || res.Position != 1 || !res.Command.CreatedAt.Equal(earlier()) {
		t.Fatalf("Handle dated an hour ago: %+v, %v", res.CommandResult, err)
	}
}
