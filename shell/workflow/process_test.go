package workflow_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/storetest/proctest"
	"github.com/sourced-go/sourced/shell/workflow"
)

// The tests in this file run worker processes: the test binary re-executed
// (proctest) with the path of a SQLite file runs a runtime driving the
// pipeline workflow on it until SIGTERM (see TestMain). Each step
// execution appends "<run> <step key> <generation>" to the file
// SOURCED_WORKFLOW_LOG, so the test sees what ran where.

const pipelineSteps = 6

// pipeline is a workflow of pipelineSteps slow steps that log each
// execution to logFile (when set).
func pipeline(logFile, gen string, slow time.Duration) *workflow.Definition[int, int] {
	return workflow.Define("pipeline", func(w *workflow.Workflow, n int) (int, error) {
		sum := 0
		for i := range pipelineSteps {
			v, err := workflow.Step(w, fmt.Sprintf("stage%d", i), func(context.Context) (int, error) {
				if logFile != "" {
					f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
					if err != nil {
						return 0, err
					}
					defer f.Close()
					if _, err := fmt.Fprintf(f, "%s stage%d#1 %s\n", w.ID(), i, gen); err != nil {
						return 0, err
					}
				}
				time.Sleep(slow) // logged, then slow: a kill lands after the side effect
				return n + i, nil
			})
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
}

func TestMain(m *testing.M) {
	if db, ok := proctest.Child(); ok {
		os.Exit(runWorker(db))
	}
	os.Exit(m.Run())
}

// runWorker is the worker process: a runtime driving the pipeline on the
// SQLite file db, supervised until SIGTERM.
func runWorker(db string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := sqlitestore.Open(context.Background(), db, sqlitestore.Options{Registry: codec.NewRegistry(), Logger: logger})
	if err != nil {
		return proctest.Fail(err)
	}
	defer store.Close()
	return proctest.Serve(store, logger, pipeline(os.Getenv("SOURCED_WORKFLOW_LOG"), os.Getenv("SOURCED_WORKFLOW_GEN"), 20*time.Millisecond))
}

// pipelineStore installs a SQLite file and starts runs of the pipeline.
func pipelineStore(t *testing.T, runs int) (string, *sqlitestore.Store, []string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "workflows.db")
	store, err := sqlitestore.Install(context.Background(), db, sqlitestore.Options{Registry: codec.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	wf := pipeline("", "", 0)
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range runs {
		run, err := workflow.Start(context.Background(), store, wf, i*10)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	return db, store, ids
}

// count counts the lifecycle events of one suffix per "run key".
func count(t *testing.T, store shell.Store, suffix string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for m, err := range store.All(context.Background(), shell.ReadAllOptions{Conditions: []core.Condition{{Type: "pipeline." + suffix}}, Limit: 500}) {
		if errors.Is(err, shell.ErrBusy) {
			time.Sleep(10 * time.Millisecond)
			return count(t, store, suffix)
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := m.Payload.(type) {
		case durable.StepComplete:
			out[e.WorkflowID+" "+e.Key]++
		case durable.WorkflowComplete:
			out[e.WorkflowID]++
		}
	}
	return out
}

func waitComplete(t *testing.T, store shell.Store, ids []string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		done := count(t, store, durable.SuffixWorkflowComplete)
		if len(done) == len(ids) {
			for id, n := range done {
				if n != 1 {
					t.Fatalf("run %s completed %d times", id, n)
				}
			}
			for key, n := range count(t, store, durable.SuffixStepComplete) {
				if n != 1 {
					t.Fatalf("step %s completed %d times", key, n)
				}
			}
			if n := len(count(t, store, durable.SuffixStepComplete)); n != len(ids)*pipelineSteps {
				t.Fatalf("%d steps completed, want %d", n, len(ids)*pipelineSteps)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs complete after 90s", len(done), len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// executions reads the step log: "run key" -> generations that ran it.
func executions(t *testing.T, file string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) == 3 {
			out[parts[0]+" "+parts[1]] = append(out[parts[0]+" "+parts[1]], parts[2])
		}
	}
	return out
}

// A worker killed (SIGKILL) in the middle of runs, then another started:
// no step whose StepComplete had committed runs again, and every run
// completes, once.
func TestWorkflowKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store, ids := pipelineStore(t, 6)
	logFile := filepath.Join(t.TempDir(), "steps.log")
	env := []string{shell.EnvCatchUpInterval + "=50ms", shell.EnvHeartbeatInterval + "=100ms", shell.EnvClaimTTL + "=1s", "SOURCED_WORKFLOW_LOG=" + logFile}
	a := proctest.Start(t, db, append(env, "SOURCED_WORKFLOW_GEN=1")...)
	deadline := time.Now().Add(30 * time.Second)
	for len(count(t, store, durable.SuffixStepComplete)) < 10 {
		if time.Now().After(deadline) {
			t.Fatal("the first worker made no progress")
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.Kill() // SIGKILL: its steps sleep, so some are mid-run
	committed := count(t, store, durable.SuffixStepComplete)
	if len(committed) == len(ids)*pipelineSteps {
		t.Fatal("the first worker finished everything before it was killed")
	}
	b := proctest.Start(t, db, append(env, "SOURCED_WORKFLOW_GEN=2")...)
	waitComplete(t, store, ids)
	b.Stop(t, 20*time.Second)
	reran := 0
	for key, gens := range executions(t, logFile) {
		if committed[key] > 0 && len(gens) > 1 {
			t.Fatalf("step %s completed before the kill and ran again: %v", key, gens)
		}
		if len(gens) > 1 {
			reran++
		}
	}
	t.Logf("%d steps committed before the kill; %d in flight ran again", len(committed), reran)
}

// Two worker processes on one file: each run completes exactly once, each
// step runs exactly once.
func TestWorkflowTwoWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	db, store, ids := pipelineStore(t, 12)
	logFile := filepath.Join(t.TempDir(), "steps.log")
	env := []string{shell.EnvCatchUpInterval + "=50ms", shell.EnvWorkers + "=2", "SOURCED_WORKFLOW_LOG=" + logFile}
	a := proctest.Start(t, db, append(env, "SOURCED_WORKFLOW_GEN=a")...)
	b := proctest.Start(t, db, append(env, "SOURCED_WORKFLOW_GEN=b")...)
	waitComplete(t, store, ids)
	a.Stop(t, 20*time.Second)
	b.Stop(t, 20*time.Second)
	by := map[string]int{}
	for key, gens := range executions(t, logFile) {
		if len(gens) != 1 {
			t.Fatalf("step %s ran %d times: %v", key, len(gens), gens)
		}
		by[gens[0]]++
	}
	t.Logf("steps run per process: %v", by)
}
