package shell_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
)

// poisoned notifies students, and fails every time on the students in bad.
type poisoned struct {
	bad      map[string]bool
	notified []string
	strategy shell.ErrorStrategy
}

func (p *poisoned) HandledTypes() []string             { return []string{"students.notify"} }
func (p *poisoned) PartitionKeys() []string            { return []string{"student_id"} }
func (p *poisoned) ErrorStrategy() shell.ErrorStrategy { return p.strategy }
func (p *poisoned) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for i, m := range c.Messages {
		n := m.Payload.(NotifyStudent)
		if p.bad[n.StudentID+"/"+n.CourseID] {
			return pairs, &core.BatchError{Message: m, Index: i, Err: fmt.Errorf("poison %s", n.CourseID)}
		}
		p.notified = append(p.notified, n.StudentID+"/"+n.CourseID)
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{}}})
	}
	return pairs, nil
}

func notify(t *testing.T, store shell.Store, pairs ...string) {
	t.Helper()
	var msgs []core.Message
	for i := 0; i < len(pairs); i += 2 {
		msgs = append(msgs, core.NewMessage(NotifyStudent{StudentID: pairs[i], CourseID: pairs[i+1]}))
	}
	if _, err := store.Append(context.Background(), msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestParkingStrategy: with ErrorStrategy.Park, a partition whose retries
// ran out is parked with its failure while the group stays active and its
// other partitions flow; an operator retries it, skips the poisoned
// message, or resets it. Without Park (the default) the group fails and
// every partition stops.
func TestParkingStrategy(t *testing.T) {
	ctx := context.Background()
	const group = "shell_test.poisoned"
	s1 := map[string]string{"student_id": "s1"}

	t.Run("the default fails the group: every partition stops", func(t *testing.T) {
		p := &poisoned{bad: map[string]bool{"s1/c2": true}}
		rt, store := newRouter(t, newClock(), shell.RouterOptions{}, p)
		notify(t, store, "s1", "c1", "s1", "c2", "s1", "c3", "s2", "c1")
		err := rt.Drain(ctx, nil)
		var gf *shell.GroupFailedError
		if !errors.As(err, &gf) || gf.Parked {
			t.Fatalf("drain: %v, want a *GroupFailedError, not parked", err)
		}
		if info, _ := store.Group(ctx, group); info.Status != shell.StatusFailed {
			t.Fatalf("group %s, want failed", info.Status)
		}
		if slices.Contains(p.notified, "s2/c1") {
			t.Fatalf("notified %v: s2 was processed after the group failed", p.notified)
		}
	})

	t.Run("parking sets the partition aside and the others flow", func(t *testing.T) {
		clk := newClock()
		p := &poisoned{bad: map[string]bool{"s1/c2": true}, strategy: shell.ErrorStrategy{Retries: 1, After: time.Second, Park: true}}
		rt, store := newRouter(t, clk, shell.RouterOptions{}, p)
		notify(t, store, "s1", "c1", "s1", "c2", "s1", "c3")
		err := rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := store.Group(ctx, group); info.Status != shell.StatusRetrying {
			t.Fatalf("after the first failure: %s, want retrying (the retries come first)", info.Status)
		}
		clk.Advance(time.Second)
		err = rt.Drain(ctx, nil)
		var gf *shell.GroupFailedError
		if !errors.As(err, &gf) || !gf.Parked || gf.Position != 2 {
			t.Fatalf("drain: %v, want a *GroupFailedError that parked the partition at position 2", err)
		}
		info, _ := store.Group(ctx, group)
		if info.Status != shell.StatusActive || info.Failure.RetryCount != 0 {
			t.Fatalf("group %+v, want active", info)
		}
		notify(t, store, "s2", "c1", "s1", "c4")
		if err := rt.Drain(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if want := []string{"s1/c1", "s2/c1"}; !slices.Equal(p.notified, want) {
			t.Fatalf("notified %v, want %v (s1 parked at c2, s2 flowing)", p.notified, want)
		}
		parked, err := store.ParkedPartitions(ctx, group)
		if err != nil || len(parked) != 1 {
			t.Fatalf("parked %+v, %v", parked, err)
		}
		f := parked[0].Failure
		if f.MessageType != "students.notify" || f.Position != 2 || f.Error == "" || parked[0].Attempts() != 2 || parked[0].LastPosition != 1 {
			t.Fatalf("parked failure %+v (attempts %d), want the message at 2, its error, 2 attempts", f, parked[0].Attempts())
		}

		// Retry: the message fails again, and the partition is parked again.
		if _, err := store.RetryPartition(ctx, group, s1); err != nil {
			t.Fatal(err)
		}
		rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
		clk.Advance(time.Second)
		rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
		if parked, _ := store.ParkedPartitions(ctx, group); len(parked) != 1 {
			t.Fatalf("after a retry that fails again: parked %+v, want s1", parked)
		}
		// Skip: the partition goes on after the poisoned message.
		if _, err := store.SkipFailedMessage(ctx, group, s1); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if want := []string{"s1/c1", "s2/c1", "s1/c3", "s1/c4"}; !slices.Equal(p.notified, want) {
			t.Fatalf("notified %v, want %v", p.notified, want)
		}
	})

	t.Run("reset replays the partition", func(t *testing.T) {
		p := &poisoned{bad: map[string]bool{"s1/c2": true}, strategy: shell.ErrorStrategy{Park: true}}
		rt, store := newRouter(t, newClock(), shell.RouterOptions{}, p)
		notify(t, store, "s1", "c1", "s1", "c2")
		rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
		delete(p.bad, "s1/c2")
		if _, err := store.ResetPartition(ctx, group, s1); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if want := []string{"s1/c1", "s1/c1", "s1/c2"}; !slices.Equal(p.notified, want) {
			t.Fatalf("notified %v, want %v (c1 again, then c2)", p.notified, want)
		}
	})
}
