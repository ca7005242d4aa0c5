package pgstore_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest/proctest"
)

// The test in this file runs worker processes (proctest): the test binary
// re-executed with a table prefix runs a runtime on that store until
// SIGTERM (see TestMain), as workers on other machines would.

// The jobs domain of proctest, under the names the other tests of this
// package use.
type Job = proctest.Job

var (
	jobRegistry = proctest.JobRegistry
	jobWorker   = proctest.JobWorker
)

func TestMain(m *testing.M) {
	if prefix, ok := proctest.Child(); ok {
		os.Exit(runWorker(prefix))
	}
	if part := os.Getenv(envChild); part != "" {
		os.Exit(child(part))
	}
	os.Exit(m.Run())
}

// runWorker is a worker process: a runtime of proctest.JobReactor on the
// store, woken by its Listener, supervised until SIGTERM.
func runWorker(prefix string) int {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	store, err := pgstore.Open(ctx, os.Getenv(pgtest.EnvURL), pgstore.Options{Registry: jobRegistry(), Prefix: prefix, Logger: logger, MaxConns: 6})
	if err != nil {
		return proctest.Fail(err)
	}
	defer store.Close()
	l, err := store.Listen(ctx)
	if err != nil {
		return proctest.Fail(err)
	}
	defer l.Close()
	reactor, err := proctest.JobReactor(store.Registry())
	if err != nil {
		return proctest.Fail(err)
	}
	return proctest.Serve(store, logger, reactor)
}

// TestThreeWorkerProcesses runs three worker processes against one server
// while this process appends jobs: every job is decided exactly once (the
// decision fails the group if a job's shard history already holds it, so
// a guard that let two deciders through would show), one worker (impure
// and slow, so it holds claims between transactions) is killed with
// SIGKILL and its claims are recovered by the others' stale-claim reaper,
// and the others are woken by notifications: their catch-up poll is far
// slower than the drain.
func TestThreeWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	pgtest.URL(t)
	prefix := pgtest.Prefix()
	reg := jobRegistry()
	store := open(t, pgstore.Options{Registry: reg, Prefix: prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// Register the group so that appends create its offsets at once.
	r, err := shell.NewRouter(store, shell.RouterOptions{}, jobWorker(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	common := []string{shell.EnvCatchUpInterval + "=30s", shell.EnvHeartbeatInterval + "=100ms", shell.EnvClaimTTL + "=1s", shell.EnvBatchSize + "=5", shell.EnvWorkers + "=2"}
	victim := proctest.Start(t, prefix, append(common, proctest.EnvSlow+"=30ms", proctest.EnvImpure+"=1")...)
	a := proctest.Start(t, prefix, common...)
	b := proctest.Start(t, prefix, common...)

	// Woken by notifications: the first job is done long before a catch-up
	// poll (30 s) could have found it.
	start := time.Now()
	proctest.AppendJobs(t, store, 0, 1, 1, 50)
	proctest.WaitDone(t, store, 1, 10*time.Second)
	t.Logf("first job done %v after its append", time.Since(start))

	proctest.AppendJobs(t, store, 1, 599, 30, 50)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, perProcess := proctest.Done(t, store)
		if perProcess[victim.Pid()] >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the victim did no work: %v", perProcess)
		}
		time.Sleep(5 * time.Millisecond)
	}
	victim.Kill()
	claimed := 0
	for o, err := range store.Offsets(t.Context(), driver.OffsetQuery{Group: "jobs.worker"}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed && strings.Contains(o.ClaimedBy, "-"+strconv.Itoa(victim.Pid())+"-worker-") {
			claimed++
		}
	}
	t.Logf("%d claims of the victim left for the reaper", claimed)
	proctest.AppendJobs(t, store, 600, 400, 30, 50)
	perProcess := proctest.WaitDone(t, store, 1000, 90*time.Second)
	t.Logf("jobs per process: %v (victim %d)", perProcess, victim.Pid())
	if perProcess[a.Pid()] == 0 || perProcess[b.Pid()] == 0 {
		t.Logf("a surviving process did no work: %v", perProcess)
	}
	a.Stop(t, 15*time.Second)
	b.Stop(t, 15*time.Second)
	for o, err := range store.Offsets(t.Context(), driver.OffsetQuery{Group: "jobs.worker"}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed {
			t.Fatalf("a claim survived: %+v", o)
		}
	}
}
