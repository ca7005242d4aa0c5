package workflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/workflow"
)

// A run's steps follow each other at once, whatever the runtime's
// WakeCooldown: a step's handling appends the run's next work, which the
// same round claims next, and a round that stops at its cap with work
// left is followed at once. Twenty runs of ten steps started one after
// another, two workers, a 1 s cooldown: the runs started after the first
// round wait out one cooldown, the steps none.
func TestRunStepsDoNotWaitOutTheWakeCooldown(t *testing.T) {
	const runs, steps, cooldown = 20, 10, time.Second
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			store := s.open(t)
			wf := workflow.Define("cooldown_steps", func(w *workflow.Workflow, n int) (int, error) {
				sum := 0
				for i := range steps {
					v, err := workflow.Step(w, fmt.Sprintf("step%d", i), func(context.Context) (int, error) { return n + i, nil })
					if err != nil {
						return 0, err
					}
					sum += v
				}
				return sum, nil
			})
			cfg := shell.DefaultConfig()
			cfg.WakeCooldown = cooldown
			runtimeWith(t, store, cfg, wf)
			start := time.Now()
			var started []*workflow.Run[int, int]
			for i := range runs {
				run, err := workflow.Start(ctx, store, wf, i)
				if err != nil {
					t.Fatal(err)
				}
				started = append(started, run)
			}
			wait, cancel := context.WithTimeout(ctx, steps*cooldown)
			defer cancel()
			for i, run := range started {
				if out, err := run.Wait(wait); err != nil || out != steps*i+steps*(steps-1)/2 {
					t.Fatalf("run %d: output %d, %v", i, out, err)
				}
			}
			if took := time.Since(start); took > 3*cooldown {
				t.Errorf("%d runs of %d steps took %v with a %v cooldown: their steps waited out the cooldown", runs, steps, took, cooldown)
			}
		})
	}
}
