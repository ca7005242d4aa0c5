package proctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell/driver"
)

// The jobs domain of the crash tests: Job commands, each decided once per
// shard into a JobDone that records which process decided it.
type (
	// Job is "jobs.job": a job to do once, in the partition of its shard.
	Job struct {
		JobID string `json:"job_id" sourced:"required"`
		Shard string `json:"shard" sourced:"required"`
	}
	// JobDone is "jobs.done": the job was done by process By.
	JobDone struct {
		JobID string `json:"job_id"`
		Shard string `json:"shard"`
		By    int    `json:"by"`
	}
)

// JobGroup is the consumer group of JobWorker.
const JobGroup = "jobs.worker"

// The environment variables JobReactor reads, set through Start's env.
const (
	// EnvSlow is a duration each batch of JobWorker sleeps in its sync
	// step, so that a kill lands mid-batch.
	EnvSlow = "SOURCED_WORKER_SLOW"
	// EnvImpure, when set, makes JobReactor's reactor impure (Impure).
	EnvImpure = "SOURCED_WORKER_IMPURE"
)

// JobRegistry returns a registry of Job and JobDone.
func JobRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[Job](reg, "jobs.job")
	codec.MustRegister[JobDone](reg, "jobs.done")
	return reg
}

// JobWorker decides each job once per shard partition, recording pid as the
// process that did it: deciding a job twice is an error (the guard of its
// shard's history must prevent it), which fails the group. Each batch
// sleeps slow in its sync step.
func JobWorker(pid int, slow time.Duration) core.Decider[map[string]bool] {
	return core.Decider[map[string]bool]{Group: JobGroup, PartitionBy: []string{"shard"}, Init: func() map[string]bool { return map[string]bool{} }}.With(
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
		core.Sync(func(context.Context, core.SyncTx, core.Batch[map[string]bool]) error {
			time.Sleep(slow)
			return nil
		}),
	)
}

// JobReactor is a worker process's JobWorker, configured by the environment
// (EnvSlow, EnvImpure) and recording this process's id.
func JobReactor(reg *codec.Registry) (any, error) {
	slow, _ := time.ParseDuration(os.Getenv(EnvSlow))
	d := JobWorker(os.Getpid(), slow)
	if os.Getenv(EnvImpure) == "" {
		return d, nil
	}
	r, err := effects.FromDefinition(reg, d)
	if err != nil {
		return nil, err
	}
	return Impure{r}, nil
}

// Impure is a definition's reactor that says it is not pure, so the router
// claims its batches in transactions of their own and handles them outside
// any transaction: a killed process leaves its claims behind, for the
// stale-claim reaper.
type Impure struct{ R effects.Reactor }

// HandledTypes is the reactor's.
func (i Impure) HandledTypes() []string { return i.R.HandledTypes() }

// HandleClaim is the reactor's.
func (i Impure) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	return i.R.HandleClaim(ctx, c)
}

// GroupID is the reactor's.
func (i Impure) GroupID() string { return i.R.(effects.Grouper).GroupID() }

// PartitionKeys is the reactor's.
func (i Impure) PartitionKeys() []string { return i.R.(effects.Partitioner).PartitionKeys() }

// HistoryTypes is the reactor's.
func (i Impure) HistoryTypes() []string { return i.R.(effects.Historian).HistoryTypes() }

// Pure reports false.
func (i Impure) Pure() bool { return false }

// AppendJobs appends Jobs j<from> .. j<from+n-1> spread over shards
// shards (s0, s1, ...), batch to an append, trying an append again while
// worker processes hold the write lock for longer than the busy timeout
// (driver.ErrBusy: nothing was written).
func AppendJobs(t testing.TB, store driver.Store, from, n, shards, batch int) {
	t.Helper()
	var msgs []core.Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, core.NewMessage(Job{JobID: "j" + strconv.Itoa(i), Shard: "s" + strconv.Itoa(i%shards)}))
		if len(msgs) == batch {
			appendRetrying(t, store, msgs)
			msgs = msgs[:0]
		}
	}
	if len(msgs) > 0 {
		appendRetrying(t, store, msgs)
	}
}

func appendRetrying(t testing.TB, store driver.Store, msgs []core.Message) {
	t.Helper()
	for {
		_, err := store.Append(t.Context(), msgs, driver.AppendOptions{})
		if errors.Is(err, driver.ErrBusy) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// Done counts the JobDone events per job id and per process.
func Done(t testing.TB, store driver.Store) (perJob map[string]int, perProcess map[int]int) {
	t.Helper()
	perJob, perProcess = map[string]int{}, map[int]int{}
	for m, err := range store.All(t.Context(), driver.ReadAllOptions{Conditions: []core.Condition{{Type: "jobs.done"}}, Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		d := m.Payload.(JobDone)
		perJob[d.JobID]++
		perProcess[d.By]++
	}
	return perJob, perProcess
}

// WaitProgress waits until at least n jobs are done, failing t with what
// after limit.
func WaitProgress(t testing.TB, store driver.Store, n int, limit time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		perJob, _ := Done(t, store)
		if len(perJob) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitDone waits until jobs jobs are done and returns how many each
// process did. It fails t as soon as a job is done twice or the group
// fails, and when limit passes first.
func WaitDone(t testing.TB, store driver.Store, jobs int, limit time.Duration) map[int]int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		perJob, perProcess := Done(t, store)
		for id, n := range perJob {
			if n != 1 {
				t.Fatalf("job %s done %d times", id, n)
			}
		}
		if len(perJob) == jobs {
			return perProcess
		}
		if info, err := store.Group(t.Context(), JobGroup); err == nil && info.Status == driver.StatusFailed {
			t.Fatalf("%d of %d jobs done; the group failed: %s", len(perJob), jobs, info.Failure.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done after %v", len(perJob), jobs, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
