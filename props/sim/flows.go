package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/workflow"
)

// ---- flows: a durable workflow with retries and a sleep ----

// flows runs the workflow "sim_order": a "charge" step that fails its
// first n%3 attempts (retried 3 times with back-off, through scheduled
// messages), a 15 s sleep, then a "ship" step.
type flows struct {
	def     *workflow.Definition[int, string]
	attempt map[string]int // run/step -> attempts (the outside world)
	started []string       // run ids whose Start returned
}

const gFlows = "sim_order"

func newFlows(clock *Clock) *flows {
	f := &flows{attempt: map[string]int{}}
	f.def = workflow.Define(gFlows, func(w *workflow.Workflow, n int) (string, error) {
		if _, err := workflow.Step(w, "charge", func(context.Context) (int, error) {
			k := w.ID() + "/charge"
			if f.attempt[k]++; f.attempt[k] <= n%3 {
				return 0, errors.New("card declined, try again")
			}
			return n, nil
		}, workflow.Retries(3), workflow.Backoff(time.Second, 4*time.Second)); err != nil {
			return "", err
		}
		workflow.Sleep(w, 15*time.Second)
		if _, err := workflow.Step(w, "ship", func(context.Context) (int, error) {
			f.attempt[w.ID()+"/ship"]++
			return 1, nil
		}); err != nil {
			return "", err
		}
		return "done", nil
	}, workflow.Clock(clock.Now))
	return f
}

func (*flows) Name() string                         { return "flows" }
func (f *flows) Register(reg *codec.Registry) error { return f.def.Register(reg) }
func (f *flows) Reactors() []any                    { return []any{f.def} }
func (*flows) Ops() int                             { return 1 }
func (*flows) Failing() []string                    { return nil }

// Do starts run "order-n" (idempotently: a second start of it is the
// first run).
func (f *flows) Do(ctx context.Context, c *Client, _ int, n int64) error {
	id := "order-" + strconv.FormatInt(n%50, 10)
	if _, err := workflow.Start(ctx, c.Store, f.def, int(n%50), workflow.WithID(id)); err != nil {
		return err
	}
	f.started = append(f.started, id)
	return nil
}

// Check: every started run loads and never fails (its step's failures
// are absorbed by the retries); once drained, every run is complete, its
// ship step having run.
func (f *flows) Check(v *View, final bool) error {
	for _, id := range f.started {
		info, err := workflow.Load(context.Background(), v.Store, f.def, id)
		if err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
		if info.Status == workflow.Failed || info.Status == workflow.Cancelled {
			return fmt.Errorf("run %s is %v: %v", id, info.Status, info.Err())
		}
		if final && (info.Status != workflow.Complete || info.Output != "done") {
			return fmt.Errorf("run %s is %v (output %q) after the drain, not complete", id, info.Status, info.Output)
		}
		if final && f.attempt[id+"/ship"] == 0 {
			return fmt.Errorf("run %s complete without its ship step having run", id)
		}
	}
	return nil
}
