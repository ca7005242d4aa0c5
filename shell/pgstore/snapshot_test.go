package pgstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// TestHandleFromASnapshot runs shell.Handle on PostgreSQL with a decider
// that takes snapshots: decisions save them, a cold decision (no cache)
// starts from the latest one inside its transaction, a snapshot that does
// not decode or lies beyond the log is rebuilt, and every decision is the
// one a full fold gives (a job done twice is refused).
func TestHandleFromASnapshot(t *testing.T) {
	ctx := context.Background()
	store := open(t, pgstore.Options{Registry: jobRegistry()})
	d := jobWorker(1, 0)
	d.Snapshots = core.Snapshots[map[string]bool]{Codec: core.JSONSnapshots[map[string]bool]("jobs/v1"), Every: 3}
	part := core.Partition(map[string]string{"shard": "s1"}).Key()
	for i := range 10 {
		if _, err := shell.Handle(ctx, store, d, Job{JobID: "j" + strconv.Itoa(i), Shard: "s1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	snap, found, err := store.LoadSnapshot(ctx, "jobs.worker", part, "jobs/v1")
	if err != nil || !found || snap.Position == 0 {
		t.Fatalf("no snapshot after 10 decisions with Every 3: %+v, %v, %v", snap, found, err)
	}
	check := func(when string) {
		t.Helper()
		if _, err := shell.Handle(ctx, store, d, Job{JobID: "j3", Shard: "s1"}, nil); err == nil {
			t.Fatalf("%s: a job done before was decided again", when)
		}
		res, err := shell.Handle(ctx, store, d, Job{JobID: "new-" + when, Shard: "s1"}, nil)
		if err != nil || !res.State["j0"] || !res.State["j9"] || !res.State["new-"+when] {
			t.Fatalf("%s: %v, %v; want every job done", when, res.State, err)
		}
		state, _, err := shell.Load(ctx, store, d, map[string]string{"shard": "s1"}, nil)
		if err != nil || len(state) != len(res.State) {
			t.Fatalf("%s: Load gives %d jobs, %v; Handle %d", when, len(state), err, len(res.State))
		}
	}
	check("from the snapshot")
	last, err := store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveSnapshot(ctx, driver.Snapshot{Group: "jobs.worker", Partition: part, Version: "jobs/v1", Position: last.MaxPosition, State: []byte("{oops")}); err != nil {
		t.Fatal(err)
	}
	check("corrupt")
	if err := store.SaveSnapshot(ctx, driver.Snapshot{Group: "jobs.worker", Partition: part, Version: "jobs/v1", Position: last.MaxPosition + 1000, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	check("beyond")
	if snap, _, _ := store.LoadSnapshot(ctx, "jobs.worker", part, "jobs/v1"); snap.Position > last.MaxPosition+100 {
		t.Fatalf("the snapshot beyond the log is still there: %+v", snap)
	}
}
