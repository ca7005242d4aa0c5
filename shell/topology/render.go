package topology

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Edge is a message flowing from one node to another: a command node to
// the events it produces, an event to the read models, automations and
// machines that consume it, an automation to the commands it dispatches.
type Edge struct {
	From, To string // node ids
	Message  string // the message type
}

// Edges derives the graph's edges from the nodes' Consumes and Produces,
// in node order. A command node is entered from whatever produces its
// type; a node consuming a type is entered from that type's event node.
func (g Graph) Edges() []Edge {
	byName := map[string][]string{} // message name -> command or event node ids
	for _, n := range g.Nodes {
		if n.Type == Command || n.Type == Event {
			byName[n.Name] = append(byName[n.Name], n.ID)
		}
	}
	var out []Edge
	seen := map[Edge]bool{}
	add := func(e Edge) {
		if e.From != e.To && !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	for _, n := range g.Nodes {
		if n.Type == Machine {
			continue // drawn by its own chart; its handlers are nodes of their own
		}
		for _, p := range n.Produces {
			for _, to := range byName[p] {
				add(Edge{From: n.ID, To: to, Message: p})
			}
		}
		if n.Type == Command || n.Type == Event {
			continue
		}
		for _, c := range n.Consumes {
			for _, from := range byName[c] {
				if from != n.ID && strings.HasPrefix(from, "event:") {
					add(Edge{From: from, To: n.ID, Message: c})
				}
			}
		}
	}
	return out
}

// ObservedEdge is an edge the log shows and no handler declares (a Flow
// of status Undeclared), between nodes of the graph.
type ObservedEdge struct {
	From, To string // node ids
	Message  string // the effect's message type
	Observed int    // how many times the window shows it
}

// UndeclaredEdges returns the Undeclared flows of a graph compared with
// the log as edges: from the flow's node (or, when the log cannot say
// which node handled the cause, from the cause's command or event node)
// to the effect's command or event node.
func (g Graph) UndeclaredEdges() []ObservedEdge {
	byName := map[string][]string{}
	for _, n := range g.Nodes {
		if n.Type == Command || n.Type == Event {
			byName[n.Name] = append(byName[n.Name], n.ID)
		}
	}
	var out []ObservedEdge
	for _, f := range g.Flows {
		if f.Status != Undeclared {
			continue
		}
		froms := []string{f.From}
		if f.From == "" {
			froms = byName[f.Cause]
		}
		for _, from := range froms {
			for _, to := range byName[f.Effect] {
				if from != to {
					out = append(out, ObservedEdge{From: from, To: to, Message: f.Effect, Observed: f.Observed})
				}
			}
		}
	}
	return out
}

// declaredFlow returns the flow of a declared edge from a handler node to
// what it produces (summed over the node's consumed types), if the graph
// was compared with the log.
func (g Graph) declaredFlow(e Edge) (Flow, bool) {
	var out Flow
	found := false
	for _, f := range g.Flows {
		if f.Declared && f.From == e.From && f.Effect == e.Message {
			if !found {
				out, found = f, true
				continue
			}
			out.Observed += f.Observed
			if f.Status == Confirmed {
				out.Status = Confirmed
			}
		}
	}
	return out, found
}

// Format is a rendering of a graph.
type Format string

// The renderings Render writes.
const (
	FormatJSON       Format = "json"
	FormatMermaid    Format = "mermaid"
	FormatEventModel Format = "svg"
)

// ErrUnknownFormat is matched by the error of Render given a format it
// does not know.
var ErrUnknownFormat = fmt.Errorf("topology: unknown format")

// Render writes g to w as JSON, a Mermaid flowchart or the Event Modeling
// SVG.
func Render(w io.Writer, g Graph, format Format) error {
	switch format {
	case FormatJSON, "":
		js, err := g.JSON()
		if err != nil {
			return err
		}
		_, err = w.Write(append(js, '\n'))
		return err
	case FormatMermaid:
		_, err := io.WriteString(w, g.Mermaid())
		return err
	case FormatEventModel:
		_, err := w.Write(g.SVG())
		return err
	}
	return fmt.Errorf("%w %q: use json, mermaid or svg", ErrUnknownFormat, format)
}

var mermaidUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

func mermaidID(id string) string { return mermaidUnsafe.ReplaceAllString(id, "_") }

func mermaidText(s string) string { return strings.ReplaceAll(s, `"`, "#quot;") }

// Mermaid returns the graph as a Mermaid flowchart (left to right):
// commands as rectangles, events as rounded boxes, read models as
// cylinders, automations, workflows and reactors as hexagons, with one
// class per node type, and an arrow per Edge. Machines are left out (draw
// one with statechart.Machine.Mermaid, kept in its node's Mermaid); their
// commands and actions are in the graph as commands and automations.
//
// A graph compared with the log (WithObservation) labels each declared
// edge of a handler with how often the window shows it ("3 seen"), draws a
// declared edge the window never shows dashed and grey ("unobserved"), and
// adds every observed edge no handler declares as a thick red arrow
// ("undeclared, 3 seen"; see UndeclaredEdges).
func (g Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	for _, n := range g.Nodes {
		id, text := mermaidID(n.ID), mermaidText(n.Name)
		switch n.Type {
		case Command:
			fmt.Fprintf(&b, "  %s[\"%s\"]:::command\n", id, text)
		case Event:
			fmt.Fprintf(&b, "  %s(\"%s\"):::event\n", id, text)
		case ReadModel:
			fmt.Fprintf(&b, "  %s[(\"%s\")]:::readmodel\n", id, text)
		case Automation, Workflow, Reactor:
			fmt.Fprintf(&b, "  %s{{\"%s\"}}:::%s\n", id, text, n.Type)
		}
	}
	link := 0
	var unobserved, undeclared []string
	for _, e := range g.Edges() {
		arrow := "-->"
		if f, ok := g.declaredFlow(e); ok {
			switch f.Status {
			case Confirmed:
				arrow = fmt.Sprintf(`-->|"%d seen"|`, f.Observed)
			case Unobserved:
				arrow = `-.->|"unobserved"|`
				unobserved = append(unobserved, fmt.Sprint(link))
			}
		}
		fmt.Fprintf(&b, "  %s %s %s\n", mermaidID(e.From), arrow, mermaidID(e.To))
		link++
	}
	for _, e := range g.UndeclaredEdges() {
		fmt.Fprintf(&b, "  %s ==>|\"undeclared, %d seen\"| %s\n", mermaidID(e.From), e.Observed, mermaidID(e.To))
		undeclared = append(undeclared, fmt.Sprint(link))
		link++
	}
	if len(unobserved) > 0 {
		fmt.Fprintf(&b, "  linkStyle %s stroke:#999999,stroke-dasharray:4\n", strings.Join(unobserved, ","))
	}
	if len(undeclared) > 0 {
		fmt.Fprintf(&b, "  linkStyle %s stroke:#d00000\n", strings.Join(undeclared, ","))
	}
	b.WriteString("  classDef command fill:#8ecae6,stroke:#1d3557\n")
	b.WriteString("  classDef event fill:#ffb703,stroke:#9c6500\n")
	b.WriteString("  classDef readmodel fill:#b7e4a0,stroke:#386641\n")
	b.WriteString("  classDef automation fill:#e0d4f5,stroke:#5a4a78\n")
	b.WriteString("  classDef workflow fill:#e0d4f5,stroke:#5a4a78\n")
	b.WriteString("  classDef reactor fill:#eeeeee,stroke:#555555\n")
	return b.String()
}

// Lane is a swimlane of the Event Modeling view.
type Lane struct {
	Name  string
	Nodes []Placed
}

// Placed is a node at a step of the Event Modeling view's time axis.
type Placed struct {
	Node Node
	// Step is the node's column: 0 for the entry points (commands nothing
	// dispatches, events nothing produces), then one more than the
	// furthest node it is reached from.
	Step int
	// Row stacks the nodes of one lane and one step.
	Row int
}

// EventModel lays the graph out as an Event Modeling board: a lane for
// automations (with workflows and reactors), one for commands and read
// models, and one lane of events per producing group (events nothing
// produces in a lane of their own, "external"), along a time axis that
// follows the flow: command, its events, what consumes them, what that
// dispatches. Cycles (an automation dispatching a command upstream) are
// broken where they close. Machines are left out, as in Mermaid, and so
// are the lifecycle events a workflow appends for its own runs.
func (g Graph) EventModel() []Lane {
	edges := g.Edges()
	in := map[string][]string{}
	for _, e := range edges {
		in[e.To] = append(in[e.To], e.From)
	}
	workflows := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Type == Workflow {
			workflows[n.GroupID] = true
		}
	}
	// Machines are drawn by their charts, a workflow's lifecycle events by
	// its runs: the board keeps the workflow node and what starts it.
	nodes := slices.DeleteFunc(slices.Clone(g.Nodes), func(n Node) bool {
		return n.Type == Machine || n.Type == Event && workflows[n.GroupID]
	})
	step := map[string]int{}
	visiting := map[string]bool{}
	var depth func(id string) int
	depth = func(id string) int {
		if s, ok := step[id]; ok {
			return s
		}
		if visiting[id] {
			return -1 // closes a cycle: ignore this edge
		}
		visiting[id] = true
		s := 0
		for _, from := range in[id] {
			if d := depth(from); d >= 0 {
				s = max(s, d+1)
			}
		}
		visiting[id] = false
		step[id] = s
		return s
	}
	var laneNames []string
	lanes := map[string]*Lane{}
	lane := func(name string) *Lane {
		if l, ok := lanes[name]; ok {
			return l
		}
		laneNames = append(laneNames, name)
		lanes[name] = &Lane{Name: name}
		return lanes[name]
	}
	lane("Automations")
	lane("Commands and read models")
	rows := map[string]int{}
	for _, n := range nodes {
		var l *Lane
		switch n.Type {
		case Automation, Workflow, Reactor:
			l = lane("Automations")
		case Command, ReadModel:
			l = lane("Commands and read models")
		default:
			l = lane("Events: " + cmpOr(n.GroupLabel, "external"))
		}
		s := depth(n.ID)
		key := fmt.Sprintf("%s/%d", l.Name, s)
		l.Nodes = append(l.Nodes, Placed{Node: n, Step: s, Row: rows[key]})
		rows[key]++
	}
	out := make([]Lane, 0, len(laneNames))
	for _, name := range laneNames {
		out = append(out, *lanes[name])
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Layout sizes of the SVG.
const (
	svgLabel  = 170 // lane title column
	svgStepW  = 170
	svgNodeW  = 150
	svgNodeH  = 56
	svgRowGap = 10
	svgPad    = 14
)

var svgColors = map[NodeType][2]string{
	Command:    {"#8ecae6", "#1d3557"},
	Event:      {"#ffb703", "#9c6500"},
	ReadModel:  {"#b7e4a0", "#386641"},
	Automation: {"#e0d4f5", "#5a4a78"},
	Workflow:   {"#e0d4f5", "#5a4a78"},
	Reactor:    {"#eeeeee", "#555555"},
}

// SVG draws the Event Modeling view (EventModel) as a standalone SVG
// document: lanes top to bottom, the time axis left to right, each node a
// box (class "em-node em-<type>", data-id its node id, a <title> with its
// name and group) and each edge an arrow (class "em-edge").
func (g Graph) SVG() []byte {
	lanes := g.EventModel()
	steps := 0
	type box struct{ x, y int }
	pos := map[string]box{}
	laneY := make([]int, len(lanes))
	laneH := make([]int, len(lanes))
	y := svgPad
	for i, l := range lanes {
		rows := 1
		for _, p := range l.Nodes {
			rows = max(rows, p.Row+1)
			steps = max(steps, p.Step+1)
		}
		laneY[i] = y
		laneH[i] = rows*(svgNodeH+svgRowGap) + svgRowGap
		for _, p := range l.Nodes {
			pos[p.Node.ID] = box{svgLabel + svgPad + p.Step*svgStepW, y + svgRowGap + p.Row*(svgNodeH+svgRowGap)}
		}
		y += laneH[i]
	}
	width := svgLabel + 2*svgPad + max(steps, 1)*svgStepW
	height := y + svgPad + 18
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="event-model" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, sans-serif" font-size="11">`, width, height, width, height)
	b.WriteString(`<defs><marker id="em-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>`)
	for i, l := range lanes {
		fill := "#fafafa"
		if i%2 == 1 {
			fill = "#f0f0f0"
		}
		fmt.Fprintf(&b, `<g class="em-lane" data-lane="%s"><rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`,
			html.EscapeString(l.Name), laneY[i], width, laneH[i], fill)
		for j, line := range wrap(l.Name, 22, 3) {
			fmt.Fprintf(&b, `<text x="8" y="%d" font-weight="bold">%s</text>`, laneY[i]+18+j*14, html.EscapeString(line))
		}
		b.WriteString(`</g>`)
	}
	type drawn struct {
		Edge
		status   FlowStatus
		observed int
	}
	var edges []drawn
	for _, e := range g.Edges() {
		d := drawn{Edge: e}
		if f, ok := g.declaredFlow(e); ok {
			d.status, d.observed = f.Status, f.Observed
		}
		edges = append(edges, d)
	}
	for _, e := range g.UndeclaredEdges() {
		edges = append(edges, drawn{Edge: Edge{From: e.From, To: e.To, Message: e.Message}, status: Undeclared, observed: e.Observed})
	}
	for _, e := range edges {
		from, ok1 := pos[e.From]
		to, ok2 := pos[e.To]
		if !ok1 || !ok2 {
			continue
		}
		x1, y1 := from.x+svgNodeW, from.y+svgNodeH/2
		x2, y2 := to.x, to.y+svgNodeH/2
		if to.x <= from.x { // backwards (a cycle) or same step: go around
			x1, x2 = from.x+svgNodeW/2, to.x+svgNodeW/2
			if to.y > from.y {
				y1, y2 = from.y+svgNodeH, to.y
			} else {
				y1, y2 = from.y, to.y+svgNodeH
			}
		}
		mx := (x1 + x2) / 2
		class, stroke, dash, extra := "em-edge", "#555", "none", ""
		switch e.status {
		case Confirmed:
			class += " em-confirmed"
			extra = fmt.Sprintf(`<title>%d seen</title>`, e.observed)
		case Unobserved:
			class, stroke, dash, extra = class+" em-unobserved", "#999", "5,4", `<title>declared, unobserved</title>`
		case Undeclared:
			class, stroke, extra = class+" em-undeclared", "#d00000", fmt.Sprintf(`<title>undeclared, %d seen</title>`, e.observed)
		}
		fmt.Fprintf(&b, `<path class="%s" data-from="%s" data-to="%s" d="M%d,%d C%d,%d %d,%d %d,%d" fill="none" stroke="%s" stroke-dasharray="%s" stroke-width="1.2" marker-end="url(#em-arrow)">%s</path>`,
			class, html.EscapeString(e.From), html.EscapeString(e.To), x1, y1, mx, y1, mx, y2, x2, y2, stroke, dash, extra)
	}
	for _, l := range lanes {
		for _, p := range l.Nodes {
			n := p.Node
			at := pos[n.ID]
			c := svgColors[n.Type]
			fmt.Fprintf(&b, `<g class="em-node em-%s" data-id="%s"><title>%s (%s, %s)</title>`, n.Type, html.EscapeString(n.ID),
				html.EscapeString(n.Name), n.Type, html.EscapeString(cmpOr(n.GroupLabel, "no group")))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="%s"/>`, at.x, at.y, svgNodeW, svgNodeH, c[0], c[1])
			lines := wrap(n.Name, 24, 3)
			for i, line := range lines {
				fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, at.x+svgNodeW/2, at.y+svgNodeH/2-(len(lines)-1)*7+i*14+4, html.EscapeString(line))
			}
			b.WriteString(`</g>`)
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#777">time →</text>`, svgLabel+svgPad, height-8)
	b.WriteString(`</svg>`)
	return b.Bytes()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// wrap breaks a type name into at most lines lines of about width runes,
// at dots and underscores where it can.
func wrap(s string, width, lines int) []string {
	var out []string
	for len([]rune(s)) > width && len(out) < lines-1 {
		r := []rune(s)
		cut := width
		for i := width; i > width/2; i-- {
			if r[i-1] == '.' || r[i-1] == '_' || r[i-1] == ' ' || r[i-1] == '(' {
				cut = i
				break
			}
		}
		out = append(out, string(r[:cut]))
		s = string(r[cut:])
	}
	return append(out, truncate(s, width))
}
