package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/workflow"
)

// The durable-workflow commands: a workflow is found by its consumer group
// (the workflow's name, which prefixes its lifecycle events), so the tool
// needs none of the application's types.

// workflowNames returns the ids of the store's consumer groups that have
// workflow runs (or only name, when given).
func workflowNames(ctx context.Context, s shell.Store, name string) ([]string, error) {
	if name != "" {
		return []string{name}, nil
	}
	st, err := s.Stats(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range st.Groups {
		res, err := s.ReadAll(ctx, shell.ReadAllOptions{Conditions: durableStarted(g.ID), Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(res.Messages) > 0 {
			out = append(out, g.ID)
		}
	}
	return out, nil
}

func durableStarted(name string) []core.Condition {
	return []core.Condition{{Type: durable.TypesOf(name).WorkflowStarted}}
}

type runRow struct {
	Workflow  string         `json:"workflow"`
	ID        string         `json:"id"`
	Status    durable.Status `json:"status"`
	Current   string         `json:"current,omitempty"`
	Steps     int            `json:"steps"`
	StartedAt time.Time      `json:"started_at"`
	EndedAt   time.Time      `json:"ended_at,omitzero"`
	Error     string         `json:"error,omitempty"`
}

// countsRow is workflow.Counts with the tool's JSON names.
type countsRow struct {
	Workflow  string `json:"workflow"`
	Running   int    `json:"running"`
	Complete  int    `json:"complete"`
	Failed    int    `json:"failed"`
	Cancelled int    `json:"cancelled"`
	Total     int    `json:"total"`
}

func current(r *durable.Run) string {
	op := r.Current()
	if op == nil {
		return ""
	}
	return fmt.Sprintf("%s %s (%s)", op.Kind, op.Name, op.Status)
}

func runError(r *durable.Run) string {
	switch {
	case r.Failure != nil:
		return r.Failure.Message
	case r.Status == durable.Cancelled:
		return "cancelled: " + r.CancelReason
	}
	return ""
}

// workflows lists runs with their status and current step, and counts them.
func (g *globals) workflows(ctx context.Context, args []string) error {
	fs := g.flags("workflows")
	name := fs.String("workflow", "", "")
	status := fs.String("status", "", "")
	limit := fs.Int("limit", 50, "")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	switch durable.Status(*status) {
	case "", durable.Running, durable.Complete, durable.Failed, durable.Cancelled:
	default:
		return g.usagef("-status %q: want running, complete, failed or cancelled", *status)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	names, err := workflowNames(ctx, s, *name)
	if err != nil {
		return err
	}
	out := struct {
		Workflows []countsRow `json:"workflows"`
		Runs      []runRow    `json:"runs"`
	}{Workflows: []countsRow{}, Runs: []runRow{}}
	for _, n := range names {
		runs, err := workflow.Runs(ctx, s, n)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if (*status == "" || string(r.Status) == *status) && len(out.Runs) < *limit {
				out.Runs = append(out.Runs, runRow{Workflow: n, ID: r.ID, Status: r.Status, Current: current(r), Steps: len(r.Ops), StartedAt: r.StartedAt, EndedAt: r.EndedAt, Error: firstLine(runError(r))})
			}
		}
		c := workflow.Count(n, runs)
		out.Workflows = append(out.Workflows, countsRow(c))
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "WORKFLOW\tRUNNING\tCOMPLETE\tFAILED\tCANCELLED\tTOTAL")
		for _, c := range out.Workflows {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\n", c.Workflow, c.Running, c.Complete, c.Failed, c.Cancelled, c.Total)
		}
		fmt.Fprintln(w, "\nWORKFLOW\tID\tSTATUS\tCURRENT\tSTEPS\tSTARTED\tENDED\tERROR")
		for _, r := range out.Runs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Workflow, r.ID, r.Status, r.Current, r.Steps, ts(r.StartedAt), ts(r.EndedAt), r.Error)
		}
	})
}

type opRow struct {
	Seq      int              `json:"seq"`
	Kind     durable.Kind     `json:"kind"`
	Name     string           `json:"name"`
	Key      string           `json:"key"`
	Status   durable.OpStatus `json:"status"`
	Attempts int              `json:"attempts,omitempty"`
	Result   json.RawMessage  `json:"result,omitempty"`
	Error    string           `json:"error,omitempty"`
	Started  time.Time        `json:"started_at"`
	Ended    time.Time        `json:"ended_at,omitzero"`
}

// workflowRun shows one run with its steps.
func (g *globals) workflowRun(ctx context.Context, args []string) error {
	fs := g.flags("workflow")
	name := fs.String("workflow", "", "")
	pos, err := g.parse(fs, args, 1, 1, "want one run id (the ID column of 'workflows')")
	if err != nil {
		return g.helpOr(err)
	}
	id := pos[0]
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	names, err := workflowNames(ctx, s, *name)
	if err != nil {
		return err
	}
	var (
		run *durable.Run
		wf  string
	)
	for _, n := range names {
		r, err := workflow.RunOf(ctx, s, n, id)
		if errors.Is(err, workflow.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		run, wf = r, n
		break
	}
	if run == nil {
		return fmt.Errorf("workflow: no run %q in the workflows %v", id, names)
	}
	out := struct {
		Workflow   string          `json:"workflow"`
		ID         string          `json:"id"`
		Status     durable.Status  `json:"status"`
		Input      json.RawMessage `json:"input,omitempty"`
		Output     json.RawMessage `json:"output,omitempty"`
		Context    json.RawMessage `json:"context,omitempty"`
		Error      string          `json:"error,omitempty"`
		FailedStep string          `json:"failed_step,omitempty"`
		StartedAt  time.Time       `json:"started_at"`
		EndedAt    time.Time       `json:"ended_at,omitzero"`
		Steps      []opRow         `json:"steps"`
	}{Workflow: wf, ID: run.ID, Status: run.Status, Input: run.Input, Output: run.Output, Context: run.Context, Error: runError(run), FailedStep: run.FailedStep, StartedAt: run.StartedAt, EndedAt: run.EndedAt, Steps: []opRow{}}
	for _, op := range run.Ops {
		row := opRow{Seq: op.Seq, Kind: op.Kind, Name: op.Name, Key: op.Key, Status: op.Status, Attempts: op.Attempts, Result: op.Result, Started: op.StartedAt, Ended: op.EndedAt}
		if op.Failure != nil {
			row.Error = op.Failure.Message
		}
		if op.Kind != durable.KindStep {
			row.Result = op.Payload
			if op.TimedOut {
				row.Result = json.RawMessage(`"timed out"`)
			}
		}
		out.Steps = append(out.Steps, row)
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "workflow\t%s\nid\t%s\nstatus\t%s\ninput\t%s\n", wf, run.ID, run.Status, run.Input)
		if len(run.Output) > 0 {
			fmt.Fprintf(w, "output\t%s\n", run.Output)
		}
		if len(run.Context) > 0 {
			fmt.Fprintf(w, "context\t%s\n", run.Context)
		}
		if e := runError(run); e != "" {
			fmt.Fprintf(w, "error\t%s\n", firstLine(e))
		}
		fmt.Fprintf(w, "started\t%s\nended\t%s\n\n", ts(run.StartedAt), ts(run.EndedAt))
		fmt.Fprintln(w, "SEQ\tKIND\tNAME\tSTATUS\tATTEMPTS\tRESULT\tERROR\tSTARTED\tENDED")
		for _, r := range out.Steps {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", strconv.Itoa(r.Seq), r.Kind, r.Name, r.Status, r.Attempts, r.Result, firstLine(r.Error), ts(r.Started), ts(r.Ended))
		}
	})
}
