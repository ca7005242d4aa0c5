package shell_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/storetest/proctest"
)

// The tests in this file run worker processes (proctest): the test binary
// re-executed with the path of a SQLite file runs a runtime on it until
// SIGTERM (see TestMain).

func TestMain(m *testing.M) {
	if db, ok := proctest.Child(); ok {
		os.Exit(runWorker(db))
	}
	os.Exit(m.Run())
}

// runWorker is the worker process: a runtime of proctest.JobReactor on the
// SQLite file db, configured from the environment, supervised until
// SIGTERM.
func runWorker(db string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := sqlitestore.Open(context.Background(), db, sqlitestore.Options{Registry: proctest.JobRegistry(), Logger: logger})
	if err != nil {
		return proctest.Fail(err)
	}
	defer store.Close()
	reactor, err := proctest.JobReactor(store.Registry())
	if err != nil {
		return proctest.Fail(err)
	}
	return proctest.Serve(store, logger, reactor)
}

func jobStore(t *testing.T) (string, *sqlitestore.Store) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "jobs.db")
	store, err := sqlitestore.Install(context.Background(), db, sqlitestore.Options{Registry: proctest.JobRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// Register the group so that appends create its offsets at once.
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, proctest.JobWorker(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, store
}

// Two processes with workers on one file process every message exactly
// once; appends by a third process reach them through the catch-up poll.
func TestTwoWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store := jobStore(t)
	env := []string{shell.EnvCatchUpInterval + "=50ms", shell.EnvWorkers + "=2"}
	a := proctest.Start(t, db, env...)
	b := proctest.Start(t, db, env...)
	proctest.AppendJobs(t, store, 0, 1000, 50, 100)
	time.Sleep(100 * time.Millisecond)
	proctest.AppendJobs(t, store, 1000, 1000, 50, 100)
	perProcess := proctest.WaitDone(t, store, 2000, 60*time.Second)
	if len(perProcess) != 2 {
		t.Logf("only one process did work: %v", perProcess)
	}
	a.Stop(t, 10*time.Second)
	b.Stop(t, 10*time.Second)
}

// A worker process killed mid-batch loses its claims to the stale-claim
// reaper of another process, which finishes everything: nothing lost,
// nothing done twice.
func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store := jobStore(t)
	proctest.AppendJobs(t, store, 0, 300, 10, 100)
	env := []string{shell.EnvCatchUpInterval + "=50ms", shell.EnvHeartbeatInterval + "=100ms", shell.EnvClaimTTL + "=1s", shell.EnvBatchSize + "=5", proctest.EnvSlow + "=30ms", proctest.EnvImpure + "=1"}
	a := proctest.Start(t, db, env...)
	proctest.WaitProgress(t, store, 20, 20*time.Second, "the first worker made no progress")
	a.Kill() // SIGKILL, mid-batch: its sync work sleeps in every batch
	claimed := 0
	for o, err := range store.Offsets(context.Background(), shell.OffsetQuery{Group: proctest.JobGroup}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed {
			claimed++
		}
	}
	if claimed == 0 {
		t.Log("the killed worker held no claim (it was between batches)")
	}
	b := proctest.Start(t, db, env...)
	proctest.WaitDone(t, store, 300, 60*time.Second)
	b.Stop(t, 10*time.Second)
}

// SIGTERM during a busy drain: the process exits within the stop timeout
// and every batch it finished is acknowledged.
func TestSIGTERMDuringDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store := jobStore(t)
	proctest.AppendJobs(t, store, 0, 500, 20, 100)
	a := proctest.Start(t, db, shell.EnvBatchSize+"=5", shell.EnvStopTimeout+"=5s", proctest.EnvSlow+"=20ms")
	proctest.WaitProgress(t, store, 30, 20*time.Second, "the worker made no progress")
	a.Stop(t, 5*time.Second)
	// Every job done is acknowledged: its shard's offset is at or past it.
	acked := map[string]int64{}
	for o, err := range store.Offsets(context.Background(), shell.OffsetQuery{Group: proctest.JobGroup}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed {
			t.Fatalf("a claim survived a graceful stop: %+v", o)
		}
		acked[o.Partition["shard"]] = o.LastPosition
	}
	for m, err := range store.All(context.Background(), shell.ReadAllOptions{Conditions: []core.Condition{{Type: "jobs.done"}}, Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		job := m.Payload.(proctest.JobDone)
		cause, err := store.Read(context.Background(), []core.Condition{{Type: "jobs.job", Attrs: map[string]string{"job_id": job.JobID}}}, shell.ReadOptions{})
		if err != nil || len(cause.Messages) != 1 {
			t.Fatalf("job %s: %v", job.JobID, err)
		}
		if pos := cause.Messages[0].Position; acked[job.Shard] < pos {
			t.Fatalf("job %s (position %d) is done but its shard is acknowledged up to %d", job.JobID, pos, acked[job.Shard])
		}
	}
	// A new worker finishes the rest.
	b := proctest.Start(t, db)
	proctest.WaitDone(t, store, 500, 60*time.Second)
	b.Stop(t, 10*time.Second)
}
