package shell_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// One clock: a runtime given no Config.Clock takes the clock its store
// keeps (driver.Clocked), so a simulated clock given once, to the store,
// times the runtime's scheduler too: the reminder is promoted when the
// clock reaches it, not before.
func TestRuntimeTakesTheStoresClock(t *testing.T) {
	ctx := context.Background()
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithSharedClock(clk))
	if store.Clock() != shell.Clock(clk) || !store.Now().Equal(clk.Now()) {
		t.Fatalf("the store keeps %v and reads %v, want the shared clock", store.Clock(), store.Now())
	}
	rt := startRuntime(t, store, shell.Config{Workers: 1, ProcessID: "test"}, reminder{}, notifications)
	store.Append(ctx, []core.Message{core.NewMessage(StudentEnrolled{CourseID: "c1", StudentID: "s1"})}, shell.AppendOptions{})
	settle(t, rt)
	if next, ok, _ := store.NextScheduled(ctx); !ok || !next.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("next scheduled %v %v, want an hour after the simulated now", next, ok)
	}
	clk.Advance(59 * time.Minute)
	settle(t, rt)
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatal("promoted a minute early")
	}
	clk.Advance(time.Minute)
	eventually(t, "the reminder is promoted and handled when the store's clock reaches it", func() bool {
		return len(byType(readAll(t, store), "students.notified")) == 1
	})
}

// A Config.Clock that is not the store's is refused: two clocks would
// drift apart. The same clock given to both is accepted.
func TestRuntimeRefusesASecondClock(t *testing.T) {
	clk := shell.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(courseRegistry(), memstore.WithSharedClock(clk))
	for _, other := range []shell.Clock{shell.SystemClock{}, shell.NewSimClock(clk.Now())} {
		if _, err := shell.NewRuntime(store, testConfig(other), reminder{}); !errors.Is(err, shell.ErrClockMismatch) {
			t.Fatalf("a runtime on a %T beside the store's clock: %v, want ErrClockMismatch", other, err)
		}
	}
	if _, err := shell.NewRuntime(store, testConfig(clk), reminder{}); err != nil {
		t.Fatalf("the store's own clock given again: %v", err)
	}
	// A store given a bare now function keeps no clock: the runtime's own
	// is taken as before.
	bare := memstore.New(courseRegistry(), memstore.WithSharedClock(clk), memstore.WithClock(clk.Now))
	if bare.Clock() != nil {
		t.Fatalf("WithClock after WithSharedClock keeps %v, want none", bare.Clock())
	}
	if _, err := shell.NewRuntime(bare, testConfig(shell.SystemClock{}), reminder{}); err != nil {
		t.Fatal(err)
	}
}
