package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// tenSteps is a workflow of 10 no-op steps.
var tenSteps = workflow.Define("bench_ten_steps", func(w *workflow.Workflow, n int) (int, error) {
	sum := 0
	for i := range 10 {
		v, err := workflow.Step(w, fmt.Sprintf("step%d", i), func(context.Context) (int, error) { return n + i, nil })
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
})

// BenchmarkWorkflow runs b.N runs of a 10-step workflow of no-op steps to
// completion with the runtime (default config: 2 workers) on a file
// database: started all at once, timed until the runtime is idle. Every
// step is a handling of its run (claim, history read, replay, one commit
// with its StepComplete and the next StepStarted). It reports runs and
// steps per second, and the write transactions committed per step
// (commits/step: the runs' starts, the steps' commits and claims).
func BenchmarkWorkflow(b *testing.B) {
	ctx := context.Background()
	s, err := sqlitestore.Install(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{Registry: codec.NewRegistry(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	cfg := shell.DefaultConfig()
	cfg.Logger = quiet()
	rt, err := shell.NewRuntime(s, cfg, tenSteps)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Stop(ctx) })
	commits := storeCommits(s)
	b.ResetTimer()
	start := time.Now()
	runs := make([]*workflow.Run[int, int], b.N)
	for i := range b.N {
		if runs[i], err = workflow.Start(ctx, s, tenSteps, i); err != nil {
			b.Fatal(err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for _, r := range runs {
		if _, err := r.Wait(wait); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(10*b.N)/elapsed.Seconds(), "steps/s")
	if commits >= 0 {
		b.ReportMetric(float64(storeCommits(s)-commits)/float64(10*b.N), "commits/step")
	}
}
