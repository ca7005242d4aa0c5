package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
)

// The test in this file runs worker processes: the test binary re-executed
// with SOURCED_PG_WORKER_PREFIX set runs a runtime on that store until
// SIGTERM (see TestMain), as workers on other machines would.

type (
	Job struct {
		JobID string `json:"job_id" sourced:"required"`
		Shard string `json:"shard" sourced:"required"`
	}
	JobDone struct {
		JobID string `json:"job_id"`
		Shard string `json:"shard"`
		By    int    `json:"by"`
	}
)

func jobRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[Job](reg, "jobs.job")
	codec.MustRegister[JobDone](reg, "jobs.done")
	return reg
}

// jobWorker decides each job once per shard partition, recording which
// process did it: deciding a job twice is an error (the guard of its
// shard's history must prevent it), which fails the group.
func jobWorker(pid int, slow time.Duration) core.Decider[map[string]bool] {
	return core.Decider[map[string]bool]{Group: "jobs.worker", PartitionBy: []string{"shard"}, Init: func() map[string]bool { return map[string]bool{} }}.With(
		core.Evolve(func(s map[string]bool, e JobDone) map[string]bool {
			n := make(map[string]bool, len(s)+1)
			for k := range s {
				n[k] = true
			}
			n[e.JobID] = true
			return n
		}),
		core.Decide(func(s map[string]bool, j Job) ([]any, error) {
			if s[j.JobID] {
				return nil, fmt.Errorf("job %s done twice", j.JobID)
			}
			return []any{JobDone{JobID: j.JobID, Shard: j.Shard, By: pid}}, nil
		}),
		core.Sync(func(context.Context, core.Tx, core.Batch[map[string]bool]) error {
			time.Sleep(slow)
			return nil
		}),
	)
}

func TestMain(m *testing.M) {
	if prefix := os.Getenv("SOURCED_PG_WORKER_PREFIX"); prefix != "" {
		os.Exit(runWorker(prefix))
	}
	if part := os.Getenv(envChild); part != "" {
		os.Exit(child(part))
	}
	os.Exit(m.Run())
}

// runWorker is a worker process: a runtime on the store, woken by its
// Listener, supervised until SIGTERM.
func runWorker(prefix string) int {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "worker:", err); return 3 }
	store, err := pgstore.Open(ctx, os.Getenv(pgtest.EnvURL), pgstore.Options{Registry: jobRegistry(), Prefix: prefix, Logger: logger, MaxConns: 6})
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	l, err := store.Listen(ctx)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	cfg, err := shell.DefaultConfig().FromEnv(nil)
	if err != nil {
		return fail(err)
	}
	cfg.Logger = logger
	slow, _ := time.ParseDuration(os.Getenv("SOURCED_WORKER_SLOW"))
	var reactor any = jobWorker(os.Getpid(), slow)
	if os.Getenv("SOURCED_WORKER_IMPURE") != "" {
		r, err := effects.FromDefinition(store.Registry(), jobWorker(os.Getpid(), slow))
		if err != nil {
			return fail(err)
		}
		reactor = impure{r}
	}
	rt, err := shell.NewRuntime(store, cfg, reactor)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	if err := shell.Supervise(ctx, rt); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 4
	}
	return 0
}

// impure is a definition's reactor that says it is not pure, so the
// router claims its batches in transactions of their own and handles them
// outside any transaction: a killed process leaves its claims behind, for
// the stale-claim reaper.
type impure struct{ r effects.Reactor }

func (i impure) HandledTypes() []string { return i.r.HandledTypes() }
func (i impure) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	return i.r.HandleClaim(ctx, c)
}
func (i impure) GroupID() string         { return i.r.(effects.Grouper).GroupID() }
func (i impure) PartitionKeys() []string { return i.r.(effects.Partitioner).PartitionKeys() }
func (i impure) HistoryTypes() []string  { return i.r.(effects.Historian).HistoryTypes() }
func (i impure) Pure() bool              { return false }

type worker struct {
	cmd  *exec.Cmd
	done chan error
}

func startWorker(t *testing.T, prefix string, env ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"SOURCED_PG_WORKER_PREFIX=" + prefix}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("worker did not start: %q %v", buf, err)
	}
	w := &worker{cmd: cmd, done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return w
}

func (w *worker) stop(t *testing.T, limit time.Duration) {
	t.Helper()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("worker exited with %v", err)
		}
	case <-time.After(limit):
		t.Fatalf("worker did not stop within %v", limit)
	}
}

func appendJobs(t *testing.T, store shell.Store, from, n, shards int) {
	t.Helper()
	var msgs []core.Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, core.NewMessage(Job{JobID: "j" + strconv.Itoa(i), Shard: "s" + strconv.Itoa(i%shards)}))
		if len(msgs) == 50 {
			if _, err := store.Append(t.Context(), msgs, shell.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	if len(msgs) > 0 {
		if _, err := store.Append(t.Context(), msgs, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// done counts JobDone events per job id and per process.
func done(t *testing.T, store shell.Store) (perJob map[string]int, perProcess map[int]int) {
	t.Helper()
	perJob, perProcess = map[string]int{}, map[int]int{}
	for m, err := range store.All(t.Context(), shell.ReadAllOptions{Conditions: []core.Condition{{Type: "jobs.done"}}, Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		d := m.Payload.(JobDone)
		perJob[d.JobID]++
		perProcess[d.By]++
	}
	return perJob, perProcess
}

func waitDone(t *testing.T, store shell.Store, jobs int, limit time.Duration) map[int]int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		perJob, perProcess := done(t, store)
		for id, n := range perJob {
			if n != 1 {
				t.Fatalf("job %s done %d times", id, n)
			}
		}
		if len(perJob) == jobs {
			return perProcess
		}
		if info, err := store.Group(t.Context(), "jobs.worker"); err == nil && info.Status == shell.StatusFailed {
			t.Fatalf("%d of %d jobs done; the group failed: %s", len(perJob), jobs, info.Failure.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done after %v", len(perJob), jobs, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	victim := startWorker(t, prefix, append(common, "SOURCED_WORKER_SLOW=30ms", "SOURCED_WORKER_IMPURE=1")...)
	a := startWorker(t, prefix, common...)
	b := startWorker(t, prefix, common...)

	// Woken by notifications: the first job is done long before a catch-up
	// poll (30 s) could have found it.
	start := time.Now()
	appendJobs(t, store, 0, 1, 1)
	waitDone(t, store, 1, 10*time.Second)
	t.Logf("first job done %v after its append", time.Since(start))

	appendJobs(t, store, 1, 599, 30)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, perProcess := done(t, store)
		if perProcess[victim.cmd.Process.Pid] >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the victim did no work: %v", perProcess)
		}
		time.Sleep(5 * time.Millisecond)
	}
	victim.cmd.Process.Kill()
	<-victim.done
	claimed := 0
	for o, err := range store.Offsets(t.Context(), shell.OffsetQuery{Group: "jobs.worker"}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed && strings.Contains(o.ClaimedBy, "-"+strconv.Itoa(victim.cmd.Process.Pid)+"-worker-") {
			claimed++
		}
	}
	t.Logf("%d claims of the victim left for the reaper", claimed)
	appendJobs(t, store, 600, 400, 30)
	perProcess := waitDone(t, store, 1000, 90*time.Second)
	t.Logf("jobs per process: %v (victim %d)", perProcess, victim.cmd.Process.Pid)
	if perProcess[a.cmd.Process.Pid] == 0 || perProcess[b.cmd.Process.Pid] == 0 {
		t.Logf("a surviving process did no work: %v", perProcess)
	}
	a.stop(t, 15*time.Second)
	b.stop(t, 15*time.Second)
	for o, err := range store.Offsets(t.Context(), shell.OffsetQuery{Group: "jobs.worker"}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Claimed {
			t.Fatalf("a claim survived: %+v", o)
		}
	}
}
