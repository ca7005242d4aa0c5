package topology

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// DefaultObserveLast is how many of the newest messages Observe reads when
// ObserveOptions.Last is 0.
const DefaultObserveLast = 10_000

// DefaultObservePage is the page size of Observe's reads when
// ObserveOptions.PageSize is 0.
const DefaultObservePage = 500

// LogReader is what Observe reads: a page of the whole log at a time
// (every shell.Store is one).
type LogReader interface {
	ReadAll(ctx context.Context, opts shell.ReadAllOptions) (shell.Page, error)
}

// ObserveOptions bound what Observe reads.
type ObserveOptions struct {
	// Last is how many of the log's newest messages to read (0:
	// DefaultObserveLast). Older messages are not read: the cost of an
	// observation is Last messages, however long the log.
	Last int
	// PageSize is how many messages each read fetches (0:
	// DefaultObservePage). Observe holds one page, and an id and a type per
	// message of the window, at a time.
	PageSize int
}

// Caused is an observed cause → effect pair: messages of type Effect whose
// causation id is the id of a message of type Cause.
type Caused struct {
	Cause  string `json:"cause"`
	Effect string `json:"effect"`
	// Group is the consumer group that handled the cause, when the log
	// says so: the command's core.DecidedByKey metadata (a command decided
	// by Handle), or the effect's "producer" metadata (a reaction's
	// dispatch); "" otherwise.
	Group string `json:"group,omitempty"`
	// Count is how many effects of the window the pair accounts for.
	Count int `json:"count"`
}

// Observation is what a window of the log shows about the message flow:
// which message types caused which, read from causation ids.
type Observation struct {
	// From and To are the positions of the oldest and newest messages
	// read (0 and 0 for an empty log).
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Messages is how many messages the window holds.
	Messages int `json:"messages"`
	// Complete is true when the window holds the whole log (nothing older
	// was left unread).
	Complete bool `json:"complete"`
	// Unresolved is how many messages of the window were caused by a
	// message older than the window: their cause's type is unknown, and
	// they are in no pair.
	Unresolved int `json:"unresolved"`
	// Caused holds the observed pairs, by cause, effect and group.
	Caused []Caused `json:"caused"`
	// Seen counts the messages of the window by type.
	Seen map[string]int `json:"seen"`
}

// Observe reads the newest opts.Last messages of the log (in descending
// pages of opts.PageSize, never more) and returns which message types
// caused which: for every message whose causation id is another message
// of the window, the pair (cause type, effect type). A message that caused
// itself (a command sent from outside, a message appended directly)
// starts a chain and is no effect. Graph.WithObservation sets the pairs
// beside the declared edges.
func Observe(ctx context.Context, log LogReader, opts ObserveOptions) (Observation, error) {
	last := cmp.Or(opts.Last, DefaultObserveLast)
	size := min(cmp.Or(opts.PageSize, DefaultObservePage), last)
	if last < 0 || size < 0 {
		return Observation{}, fmt.Errorf("topology: observe with Last %d and PageSize %d: give positive bounds (0 for the defaults)", opts.Last, opts.PageSize)
	}
	type effect struct {
		typ, group string
	}
	type key struct{ cause, effect, group string }
	obs := Observation{Seen: map[string]int{}, Complete: true}
	// Pages come newest first: an effect is read before its cause, so the
	// effects wait, by cause id, for their cause to be read.
	waiting := map[uuid.UUID][]effect{}
	counts := map[key]int{}
	var order []key
	ro := shell.ReadAllOptions{Order: shell.Descending, Limit: size}
	for obs.Messages < last {
		ro.Limit = min(size, last-obs.Messages)
		page, err := log.ReadAll(ctx, ro)
		if err != nil {
			return Observation{}, fmt.Errorf("topology: observe the log: %w", err)
		}
		for _, m := range page.Messages {
			if obs.To == 0 {
				obs.To = m.Position
			}
			obs.From = m.Position
			obs.Messages++
			obs.Seen[m.Type]++
			decidedBy, _ := m.Metadata[core.DecidedByKey].(string)
			for _, e := range waiting[m.ID] {
				k := key{m.Type, e.typ, cmp.Or(e.group, decidedBy)}
				if counts[k] == 0 {
					order = append(order, k)
				}
				counts[k]++
			}
			delete(waiting, m.ID)
			if m.CausationID != uuid.Nil && m.CausationID != m.ID {
				producer, _ := m.Metadata["producer"].(string)
				waiting[m.CausationID] = append(waiting[m.CausationID], effect{m.Type, producer})
			}
		}
		next, more := page.Next(ro)
		if !more {
			break
		}
		ro = next
		if obs.Messages >= last {
			obs.Complete = false
		}
	}
	for _, es := range waiting {
		obs.Unresolved += len(es)
	}
	for _, k := range order {
		obs.Caused = append(obs.Caused, Caused{Cause: k.cause, Effect: k.effect, Group: k.group, Count: counts[k]})
	}
	slices.SortStableFunc(obs.Caused, func(a, b Caused) int {
		return cmp.Or(cmp.Compare(a.Cause, b.Cause), cmp.Compare(a.Effect, b.Effect), cmp.Compare(a.Group, b.Group))
	})
	return obs, nil
}

// FlowStatus says how a declared edge and the log compare.
type FlowStatus string

// The statuses of a Flow.
const (
	// Confirmed: declared, and observed in the window.
	Confirmed FlowStatus = "confirmed"
	// Unobserved: declared, never observed in the window (Flow.CauseSeen
	// says whether the window held the cause at all).
	Unobserved FlowStatus = "unobserved"
	// Undeclared: observed in the window, declared by no node that
	// consumes the cause.
	Undeclared FlowStatus = "undeclared"
)

// Flow is a cause → effect edge of a handler, declared by the graph, observed
// in the log, or both.
type Flow struct {
	// From is the node that consumes Cause and produces (or, observed,
	// produced) Effect: a command or automation node (any node consuming
	// Cause for an observed edge). "" when the graph has no node consuming
	// Cause, or more than one and the log does not say which group
	// handled it.
	From   string `json:"from"`
	Cause  string `json:"cause"`
	Effect string `json:"effect"`
	// Declared is true when From's Produces lists Effect.
	Declared bool `json:"declared"`
	// Observed is how many Effect messages of the window Cause messages
	// caused (in From's group, when the log says which group).
	Observed int `json:"observed"`
	// CauseSeen is how many Cause messages the window holds: an
	// unobserved flow whose cause was seen was not taken; one whose cause
	// was not seen was not exercised.
	CauseSeen int        `json:"cause_seen"`
	Status    FlowStatus `json:"status"`
}

// WithObservation returns g with o set beside its declared edges: its
// Observed field, and a Flow for every declared edge of a command or
// automation node (its consumed type → each type it produces) and every
// observed pair. A declared edge the window never shows is Unobserved; an
// observed pair that no node consuming the cause declares is Undeclared
// (an effect type the graph does not have gets an event node, with no
// group). Nodes that declare nothing (Complete false) are expected to give
// Undeclared flows: declare their Emits to make them Confirmed.
func (g Graph) WithObservation(o Observation) Graph {
	g.Nodes = slices.Clone(g.Nodes)
	g.Observed = &o
	g.Flows = nil
	consumers := map[string][]int{} // message type -> indexes of nodes consuming it
	for i, n := range g.Nodes {
		switch n.Type {
		case Event, Machine, ReadModel:
			continue
		}
		for _, c := range n.Consumes {
			consumers[c] = append(consumers[c], i)
		}
	}
	declared := map[[3]string]int{} // from, cause, effect -> index in g.Flows
	for _, n := range g.Nodes {
		if n.Type != Command && n.Type != Automation {
			continue
		}
		for _, c := range n.Consumes {
			for _, p := range n.Produces {
				k := [3]string{n.ID, c, p}
				if _, ok := declared[k]; !ok {
					declared[k] = len(g.Flows)
					g.Flows = append(g.Flows, Flow{From: n.ID, Cause: c, Effect: p, Declared: true, CauseSeen: o.Seen[c], Status: Unobserved})
				}
			}
		}
	}
	undeclared := map[[3]string]int{}
	for _, p := range o.Caused {
		cands := consumers[p.Cause]
		if p.Group != "" {
			var in []int
			for _, i := range cands {
				if g.Nodes[i].GroupID == p.Group {
					in = append(in, i)
				}
			}
			if len(in) > 0 {
				cands = in
			}
		}
		credited := false
		for _, i := range cands {
			n := g.Nodes[i]
			if !slices.Contains(n.Produces, p.Effect) {
				continue
			}
			credited = true
			k := [3]string{n.ID, p.Cause, p.Effect}
			j, ok := declared[k]
			if !ok { // a workflow or reactor node: declared, not listed above
				j = len(g.Flows)
				declared[k] = j
				g.Flows = append(g.Flows, Flow{From: n.ID, Cause: p.Cause, Effect: p.Effect, Declared: true, CauseSeen: o.Seen[p.Cause]})
			}
			g.Flows[j].Observed += p.Count
			g.Flows[j].Status = Confirmed
		}
		if credited {
			continue
		}
		from := ""
		if len(cands) == 1 {
			from = g.Nodes[cands[0]].ID
		}
		k := [3]string{from, p.Cause, p.Effect}
		j, ok := undeclared[k]
		if !ok {
			j = len(g.Flows)
			undeclared[k] = j
			g.Flows = append(g.Flows, Flow{From: from, Cause: p.Cause, Effect: p.Effect, CauseSeen: o.Seen[p.Cause], Status: Undeclared})
		}
		g.Flows[j].Observed += p.Count
	}
	// An undeclared effect the graph has no node for gets an event node.
	have := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Type == Command || n.Type == Event {
			have[n.Name] = true
		}
	}
	for _, f := range g.Flows {
		if f.Status == Undeclared && !have[f.Effect] {
			have[f.Effect] = true
			g.Nodes = append(g.Nodes, Node{Type: Event, ID: "event:" + f.Effect, Name: f.Effect, Complete: true})
		}
	}
	return g
}

// Flagged returns the flows that disagree with the declarations: the
// Unobserved and the Undeclared ones, in Flows order.
func (g Graph) Flagged() []Flow {
	var out []Flow
	for _, f := range g.Flows {
		if f.Status != Confirmed {
			out = append(out, f)
		}
	}
	return out
}
