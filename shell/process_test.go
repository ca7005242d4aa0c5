package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The tests in this file run worker processes: the test binary re-executed
// with SOURCED_WORKER_DB set runs a runtime on that SQLite file until
// SIGTERM (see TestMain).

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
// process did it; SOURCED_WORKER_SLOW makes each batch slow.
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
	if db := os.Getenv("SOURCED_WORKER_DB"); db != "" {
		os.Exit(runWorker(db))
	}
	os.Exit(m.Run())
}

// runWorker is the worker process: a runtime configured from the
// environment, supervised until SIGTERM.
func runWorker(db string) int {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: jobRegistry(), Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	defer store.Close()
	cfg, err := shell.DefaultConfig().FromEnv(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	cfg.Logger = logger
	slow, _ := time.ParseDuration(os.Getenv("SOURCED_WORKER_SLOW"))
	var reactor any = jobWorker(os.Getpid(), slow)
	if os.Getenv("SOURCED_WORKER_IMPURE") != "" {
		r, err := effects.FromDefinition(store.Registry(), jobWorker(os.Getpid(), slow))
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 3
		}
		reactor = impure{r}
	}
	rt, err := shell.NewRuntime(store, cfg, reactor)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	// Catch SIGTERM before telling the test we are ready: Supervise
	// installs its own handler only once it runs.
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
// outside any transaction (the stale-claim reaper's case).
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

func startWorker(t *testing.T, db string, env ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"SOURCED_WORKER_DB=" + db}, env...)...)
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

// stop sends SIGTERM and waits for a clean exit within limit.
func (w *worker) stop(t *testing.T, limit time.Duration) {
	t.Helper()
	start := time.Now()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("worker exited with %v", err)
		}
		if d := time.Since(start); d > limit {
			t.Fatalf("worker took %v to stop, limit %v", d, limit)
		}
	case <-time.After(limit + 5*time.Second):
		t.Fatalf("worker did not stop within %v", limit)
	}
}

func jobStore(t *testing.T) (string, *sqlitestore.Store) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "jobs.db")
	store, err := sqlitestore.Install(context.Background(), db, sqlitestore.Options{Registry: jobRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// Register the group so that appends create its offsets at once.
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, jobWorker(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, store
}

func appendJobs(t *testing.T, store shell.Store, from, n, shards int) {
	t.Helper()
	var msgs []core.Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, core.NewMessage(Job{JobID: "j" + strconv.Itoa(i), Shard: "s" + strconv.Itoa(i%shards)}))
		if len(msgs) == 100 {
			appendRetrying(t, store, msgs)
			msgs = msgs[:0]
		}
	}
	if len(msgs) > 0 {
		appendRetrying(t, store, msgs)
	}
}

// appendRetrying appends msgs, trying again while worker processes hold
// the write lock for longer than the busy timeout (shell.ErrBusy: nothing
// was written).
func appendRetrying(t *testing.T, store shell.Store, msgs []core.Message) {
	t.Helper()
	for {
		_, err := store.Append(context.Background(), msgs, shell.AppendOptions{})
		if errors.Is(err, shell.ErrBusy) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// done counts JobDone events per job id and per process.
func done(t *testing.T, store shell.Store) (perJob map[string]int, perProcess map[int]int) {
	t.Helper()
	perJob, perProcess = map[string]int{}, map[int]int{}
	for m, err := range store.All(context.Background(), shell.ReadAllOptions{Conditions: []core.Condition{{Type: "jobs.done"}}, Limit: 1000}) {
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
		if info, err := store.Group(context.Background(), "jobs.worker"); err == nil && info.Status == shell.StatusFailed {
			t.Fatalf("%d of %d jobs done; the group failed: %s", len(perJob), jobs, info.Failure.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done after %v", len(perJob), jobs, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two processes with workers on one file process every message exactly
// once; appends by a third process reach them through the catch-up poll.
func TestTwoWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store := jobStore(t)
	env := []string{shell.EnvCatchUpInterval + "=50ms", shell.EnvWorkers + "=2"}
	a := startWorker(t, db, env...)
	b := startWorker(t, db, env...)
	appendJobs(t, store, 0, 1000, 50)
	time.Sleep(100 * time.Millisecond)
	appendJobs(t, store, 1000, 1000, 50)
	perProcess := waitDone(t, store, 2000, 60*time.Second)
	if len(perProcess) != 2 {
		t.Logf("only one process did work: %v", perProcess)
	}
	a.stop(t, 10*time.Second)
	b.stop(t, 10*time.Second)
}

// A worker process killed mid-batch loses its claims to the stale-claim
// reaper of another process, which finishes everything: nothing lost,
// nothing done twice.
func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store := jobStore(t)
	appendJobs(t, store, 0, 300, 10)
	env := []string{shell.EnvCatchUpInterval + "=50ms", shell.EnvHeartbeatInterval + "=100ms", shell.EnvClaimTTL + "=1s", shell.EnvBatchSize + "=5", "SOURCED_WORKER_SLOW=30ms", "SOURCED_WORKER_IMPURE=1"}
	a := startWorker(t, db, env...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		perJob, _ := done(t, store)
		if len(perJob) >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first worker made no progress")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.cmd.Process.Kill() // SIGKILL, mid-batch: its sync work sleeps in every batch
	<-a.done
	claimed := 0
	for o, err := range store.Offsets(context.Background(), shell.OffsetQuery{Group: "jobs.worker"}) {
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
	b := startWorker(t, db, env...)
	waitDone(t, store, 300, 60*time.Second)
	b.stop(t, 10*time.Second)
}

// SIGTERM during a busy drain: the process exits within the stop timeout
// and every batch it finished is acknowledged.
func TestSIGTERMDuringDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store := jobStore(t)
	appendJobs(t, store, 0, 500, 20)
	a := startWorker(t, db, shell.EnvBatchSize+"=5", shell.EnvStopTimeout+"=5s", "SOURCED_WORKER_SLOW=20ms")
	deadline := time.Now().Add(20 * time.Second)
	for {
		perJob, _ := done(t, store)
		if len(perJob) >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker made no progress")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.stop(t, 5*time.Second)
	// Every job done is acknowledged: its shard's offset is at or past it.
	acked := map[string]int64{}
	for o, err := range store.Offsets(context.Background(), shell.OffsetQuery{Group: "jobs.worker"}) {
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
		job := m.Payload.(JobDone)
		cause, err := store.Read(context.Background(), []core.Condition{{Type: "jobs.job", Attrs: map[string]string{"job_id": job.JobID}}}, shell.ReadOptions{})
		if err != nil || len(cause.Messages) != 1 {
			t.Fatalf("job %s: %v", job.JobID, err)
		}
		if pos := cause.Messages[0].Position; acked[job.Shard] < pos {
			t.Fatalf("job %s (position %d) is done but its shard is acknowledged up to %d", job.JobID, pos, acked[job.Shard])
		}
	}
	// A new worker finishes the rest.
	b := startWorker(t, db)
	waitDone(t, store, 500, 60*time.Second)
	b.stop(t, 10*time.Second)
}
