package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/topology"
	"github.com/sourced-go/sourced/shell/workflow"
)

// defaultObserveLast is the window of Options.ObserveLast 0.
const defaultObserveLast = 1000

// observedGraph is the graph with the newest messages of the log set
// beside its declared edges (Options.ObserveLast), or the graph alone.
func (d *Dashboard) observedGraph(ctx context.Context) (topology.Graph, error) {
	if d.opts.ObserveLast < 0 || len(d.opts.Reactors) == 0 {
		return d.graph, nil
	}
	last := d.opts.ObserveLast
	if last == 0 {
		last = defaultObserveLast
	}
	obs, err := topology.Observe(ctx, d.store, topology.ObserveOptions{Last: last})
	if err != nil {
		return topology.Graph{}, err
	}
	return d.graph.WithObservation(obs), nil
}

func (d *Dashboard) topologyPage(w http.ResponseWriter, r *http.Request) {
	g, err := d.observedGraph(r.Context())
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	counts := map[string]int{}
	for _, n := range d.graph.Nodes {
		counts[string(n.Type)]++
	}
	var incomplete []topology.Node
	for _, n := range d.graph.Nodes {
		if !n.Complete && n.Type != topology.Event {
			incomplete = append(incomplete, n)
		}
	}
	d.render(w, r, "topology", "topology", "Topology", struct {
		Reactors   bool
		SVG        template.HTML
		Mermaid    string
		Counts     map[string]int
		Incomplete []topology.Node
		Observed   *topology.Observation
		Flows      []topology.Flow
	}{len(d.opts.Reactors) > 0, template.HTML(g.SVG()), g.Mermaid(), counts, incomplete, g.Observed, g.Flows})
}

func (d *Dashboard) topologySVG(w http.ResponseWriter, r *http.Request) {
	g, err := d.observedGraph(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(g.SVG())
}

func (d *Dashboard) topologyJSON(w http.ResponseWriter, r *http.Request) {
	g, err := d.observedGraph(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	js, err := g.JSON()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(js)
}

// workflowNames are the workflows among the reactors, else the store's
// groups that have runs.
func (d *Dashboard) workflowNames(ctx context.Context) ([]string, error) {
	var out []string
	for _, n := range d.graph.Filter(topology.Workflow) {
		out = append(out, n.GroupID)
	}
	if len(out) > 0 || len(d.opts.Reactors) > 0 {
		return out, nil
	}
	st, err := d.store.Stats(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range st.Groups {
		res, err := lenient{Store: d.store}.ReadAll(ctx, shell.ReadAllOptions{Conditions: []core.Condition{{Type: durable.TypesOf(g.ID).WorkflowStarted}}, Limit: 1})
		if err != nil {
			var cond *shell.InvalidConditionError
			if errors.As(err, &cond) {
				continue // the type is not registered: no runs
			}
			return nil, err
		}
		if len(res.Messages) > 0 {
			out = append(out, g.ID)
		}
	}
	return out, nil
}

// maxRuns is how many runs of each workflow the workflows page reads:
// the newest.
const maxRuns = 100

type workflowList struct {
	Name string
	// Counts are of the runs read: the newest maxRuns.
	Counts workflow.Counts
	Runs   []*durable.Run
	// More says the workflow has older runs than those read.
	More bool
	// Undecodable are the workflow's messages the store cannot decode
	// (their runs are listed without them, or not at all when one is the
	// run's start).
	Undecodable []logRow
}

// recentRuns reads the newest maxRuns runs of workflow name: one read of
// their starts, newest first, then one of each run's messages (as
// workflow.RunOf), so that the cost does not grow with the log.
func (d *Dashboard) recentRuns(ctx context.Context, name string) (workflowList, error) {
	var bad []core.PositionedMessage
	store := lenient{Store: d.store, bad: &bad}
	l := workflowList{Name: name, Counts: workflow.Counts{Workflow: name}}
	starts, err := store.ReadAll(ctx, shell.ReadAllOptions{Conditions: []core.Condition{{Type: durable.TypesOf(name).WorkflowStarted}}, Order: shell.Descending, Limit: maxRuns + 1})
	var cond *shell.InvalidConditionError
	if errors.As(err, &cond) {
		return l, nil // the type is not registered: no runs
	}
	if err != nil {
		return l, err
	}
	msgs := starts.Messages
	if len(msgs) > maxRuns {
		msgs, l.More = msgs[:maxRuns], true
	}
	for _, m := range msgs {
		ev, ok := durable.Event(m.Message)
		started, isStart := ev.(durable.WorkflowStarted)
		if !ok || !isStart {
			continue // undecodable: collected in bad
		}
		run, err := workflow.RunOf(ctx, store, name, started.WorkflowID)
		if errors.Is(err, workflow.ErrNotFound) {
			continue
		}
		if err != nil {
			return l, err
		}
		l.Runs = append(l.Runs, run)
	}
	l.Counts = workflow.Count(name, l.Runs)
	seen := map[int64]bool{}
	for _, m := range bad {
		if !seen[m.Position] {
			seen[m.Position] = true
			l.Undecodable = append(l.Undecodable, rowOf(m))
		}
	}
	return l, nil
}

func (d *Dashboard) workflowsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	names, err := d.workflowNames(ctx)
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	status := r.URL.Query().Get("status")
	var lists []workflowList
	for _, name := range names {
		l, err := d.recentRuns(ctx, name)
		if err != nil {
			d.fail(w, r, statusOf(err), err)
			return
		}
		if status != "" {
			runs := l.Runs
			l.Runs = nil
			for _, run := range runs {
				if string(run.Status) == status {
					l.Runs = append(l.Runs, run)
				}
			}
		}
		lists = append(lists, l)
	}
	d.render(w, r, "workflows", "workflows", "Workflows", struct {
		Workflows []workflowList
		Status    string
		Statuses  []durable.Status
		MaxRuns   int
	}{lists, status, []durable.Status{durable.Running, durable.Complete, durable.Failed, durable.Cancelled}, maxRuns})
}

func (d *Dashboard) workflowRunPage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("name"), r.PathValue("id")
	var bad []core.PositionedMessage
	run, err := workflow.RunOf(r.Context(), lenient{Store: d.store, bad: &bad}, name, id)
	if errors.Is(err, workflow.ErrNotFound) && len(bad) > 0 {
		err = fmt.Errorf("%w; the run's messages include %d the store cannot decode, its start maybe: %s", err, len(bad), rowOf(bad[0]).Undecodable)
	}
	if errors.Is(err, workflow.ErrNotFound) {
		d.fail(w, r, http.StatusNotFound, err)
		return
	}
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	var undecodable []logRow
	for _, m := range bad {
		undecodable = append(undecodable, rowOf(m))
	}
	d.render(w, r, "workflow", "workflows", "Run "+id, struct {
		Name        string
		Run         *durable.Run
		Ops         []durable.Op
		Undecodable []logRow
	}{name, run, slices.Clone(run.Ops), undecodable})
}
