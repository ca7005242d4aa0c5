package cli

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// TestGroupsResetRunsTheAppsOnReset: `sourced groups stop/reset/start`
// change the group in the store; the application's runtime (here in this
// process, on the same file) runs the reactor's OnStop, OnReset and
// OnStart once each, and the replay waits for them. The tool says hooks
// are pending. Before, no hook ran and the replay appended to a read
// model its OnReset had not cleared.
func TestGroupsResetRunsTheAppsOnReset(t *testing.T) {
	ctx := context.Background()
	db := fixture(t)

	// The tool says when hooks wait (no runtime yet: they stay pending).
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: registryForTest(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "courses.catalog", Label: "Catalog", PartitionBy: []string{"course_id"}, Handled: []string{"courses.created"}, Hooks: true}); err != nil {
		t.Fatal(err)
	}
	want(t, 0, []string{"-db", db, "groups", "stop", "courses.catalog", "rebuild"}, "1 lifecycle hook(s) pending")

	var mu sync.Mutex
	var log []string
	names := map[string]int{} // the read model: courses seen, appended to
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	p := core.Projector[int]{Group: "courses.catalog", Label: "Catalog", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ CourseCreated) int { return n + 1 }),
		core.Sync(func(_ context.Context, _ core.SyncTx, b core.Batch[int]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range b.Messages {
				names[m.Payload.(CourseCreated).CourseID]++
			}
			log = append(log, "sync")
			return nil
		}),
	)
	p.Hooks = core.Hooks{
		OnStop:  func(_ context.Context, reason string) error { record("stop:" + reason); return nil },
		OnStart: func(context.Context) error { record("start"); return nil },
		OnReset: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			clear(names)
			log = append(log, "reset")
			return nil
		},
	}
	cfg := shell.DefaultConfig()
	cfg.ProcessID, cfg.Workers, cfg.CatchUpInterval = "app", 1, 10*time.Millisecond
	rt, err := shell.NewRuntime(s, cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	settled := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := rt.WaitIdle(wctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	want(t, 0, []string{"-db", db, "groups", "start", "courses.catalog"})
	settled() // c2 and c3 (the fixture processed c1)
	want(t, 0, []string{"-db", db, "groups", "stop", "courses.catalog", "rebuild"})
	want(t, 0, []string{"-db", db, "groups", "reset", "courses.catalog"})
	want(t, 0, []string{"-db", db, "groups", "start", "courses.catalog"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := len(names) == 3
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group never replayed: %v %v", log, names)
		}
		time.Sleep(5 * time.Millisecond)
	}
	settled()
	mu.Lock()
	defer mu.Unlock()
	count := func(s string) int {
		n := 0
		for _, l := range log {
			if l == s {
				n++
			}
		}
		return n
	}
	if count("stop:rebuild") != 2 || count("start") != 2 || count("reset") != 1 {
		t.Fatalf("hooks %v: want OnStop and OnStart twice, OnReset once", log)
	}
	last := slices.Index(log, "reset")
	if slices.Contains(log[last:slices.Index(log[last:], "start")+last], "sync") {
		t.Fatalf("log %v: a batch ran between OnReset and OnStart", log)
	}
	for id, n := range names {
		if n != 1 {
			t.Fatalf("read model %v: course %s counted %d times, want once (the replay landed on a table OnReset had not cleared)", names, id, n)
		}
	}
}
