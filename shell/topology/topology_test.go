package topology_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/topology"
)

func graph(t *testing.T) topology.Graph {
	t.Helper()
	f := newFixture()
	if err := f.lifecycle.Err(); err != nil {
		t.Fatal(err)
	}
	g, err := topology.Of(f.reg, f.all()...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func node(t *testing.T, g topology.Graph, id string) topology.Node {
	t.Helper()
	n, ok := g.Node(id)
	if !ok {
		var ids []string
		for _, n := range g.Nodes {
			ids = append(ids, n.ID)
		}
		t.Fatalf("no node %q in %v", id, ids)
	}
	return n
}

func TestCommandNodesProduceDeclaredEvents(t *testing.T) {
	g := graph(t)
	c := node(t, g, "command:courses.course_decider:courses.create_course")
	if c.Type != topology.Command || c.GroupID != "courses.course_decider" || c.GroupLabel != "CourseDecider" {
		t.Errorf("command node %+v", c)
	}
	if !c.Complete || !slices.Equal(c.Produces, []string{"courses.course_created"}) {
		t.Errorf("create_course produces %v (complete %v)", c.Produces, c.Complete)
	}
	e := node(t, g, "event:courses.course_created")
	if e.Type != topology.Event || e.GroupID != "courses.course_decider" {
		t.Errorf("event node %+v", e)
	}
	undeclared := node(t, g, "command:courses.enrolment_decider:courses.enrol_student")
	if undeclared.Complete || len(undeclared.Produces) != 0 {
		t.Errorf("a command without Emits: %+v", undeclared)
	}
	// Nothing in the graph produces student_enrolled: an external event.
	if e := node(t, g, "event:courses.student_enrolled"); e.GroupID != "" {
		t.Errorf("student_enrolled owned by %q", e.GroupID)
	}
}

func TestAutomationsReadModelsMachinesWorkflows(t *testing.T) {
	g := graph(t)
	a := node(t, g, "automation:courses.course_decider:reaction(courses.course_created)")
	if !slices.Equal(a.Consumes, []string{"courses.course_created"}) || !slices.Equal(a.Produces, []string{"courses.open_enrolment"}) || !a.Complete {
		t.Errorf("reaction node %+v", a)
	}
	rm := node(t, g, "readmodel:courses.catalog")
	if rm.Name != "Catalog" || !slices.Equal(rm.Consumes, []string{"courses.course_created", "courses.student_enrolled"}) {
		t.Errorf("read model %+v", rm)
	}
	m := node(t, g, "machine:courses.lifecycle")
	if !strings.HasPrefix(m.Mermaid, "stateDiagram-v2") || !json.Valid(m.Chart) {
		t.Errorf("machine node without chart: %+v", m)
	}
	if !slices.Contains(m.Produces, "courses.lifecycle.runtime.open") || !slices.Contains(m.Produces, "courses.close_course") {
		t.Errorf("machine produces %v", m.Produces)
	}
	cmd := node(t, g, "command:courses.lifecycle:courses.close_course")
	if cmd.State != "open" || !slices.Equal(cmd.Produces, []string{"courses.lifecycle.runtime.closed"}) {
		t.Errorf("machine command %+v", cmd)
	}
	timer := node(t, g, "automation:courses.lifecycle:after(open after 720h0m0s)")
	if !slices.Equal(timer.Produces, []string{"courses.close_course"}) || !timer.Complete {
		t.Errorf("timer %+v", timer)
	}
	wf := node(t, g, "workflow:greeting")
	if len(wf.Consumes) == 0 || len(wf.Produces) == 0 {
		t.Errorf("workflow %+v", wf)
	}
	if e := node(t, g, "event:"+wf.Produces[0]); e.GroupID != "greeting" {
		t.Errorf("workflow event %+v", e)
	}
}

func TestEdgesFollowTheFlow(t *testing.T) {
	g := graph(t)
	want := []topology.Edge{
		{From: "command:courses.course_decider:courses.create_course", To: "event:courses.course_created", Message: "courses.course_created"},
		{From: "event:courses.course_created", To: "automation:courses.course_decider:reaction(courses.course_created)", Message: "courses.course_created"},
		{From: "automation:courses.course_decider:reaction(courses.course_created)", To: "command:courses.course_decider:courses.open_enrolment", Message: "courses.open_enrolment"},
		{From: "event:courses.course_created", To: "readmodel:courses.catalog", Message: "courses.course_created"},
	}
	edges := g.Edges()
	for _, w := range want {
		if !slices.Contains(edges, w) {
			t.Errorf("missing edge %+v", w)
		}
	}
}

func TestOfRefusesWhatIsNotAReactor(t *testing.T) {
	f := newFixture()
	g, err := topology.Of(f.reg, f.courses, "not a reactor")
	if !errors.Is(err, topology.ErrNotReactor) || len(g.Nodes) != 0 {
		t.Fatalf("err = %v, nodes %d", err, len(g.Nodes))
	}
}

func TestMermaidFlowchart(t *testing.T) {
	out := graph(t).Mermaid()
	for _, want := range []string{
		"flowchart LR",
		`command_courses_course_decider_courses_create_course["courses.create_course"]:::command`,
		`event_courses_course_created("courses.course_created"):::event`,
		`readmodel_courses_catalog[("Catalog")]:::readmodel`,
		"command_courses_course_decider_courses_create_course --> event_courses_course_created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, out)
		}
	}
}

func TestEventModelLanesAndTimeAxis(t *testing.T) {
	g := graph(t)
	lanes := g.EventModel()
	step := map[string]int{}
	lane := map[string]string{}
	for _, l := range lanes {
		for _, p := range l.Nodes {
			step[p.Node.ID], lane[p.Node.ID] = p.Step, l.Name
		}
	}
	create, created := "command:courses.course_decider:courses.create_course", "event:courses.course_created"
	reaction := "automation:courses.course_decider:reaction(courses.course_created)"
	open := "command:courses.course_decider:courses.open_enrolment"
	if !(step[create] < step[created] && step[created] < step[reaction] && step[reaction] < step[open]) {
		t.Errorf("time axis out of order: %d %d %d %d", step[create], step[created], step[reaction], step[open])
	}
	if lane[create] != "Commands and read models" || lane[reaction] != "Automations" || lane[created] != "Events: CourseDecider" {
		t.Errorf("lanes: %q %q %q", lane[create], lane[reaction], lane[created])
	}
	if _, ok := lane["machine:courses.lifecycle"]; ok {
		t.Error("the machine node is on the board")
	}
}

func TestSVGIsWellFormedWithANodePerBoardNode(t *testing.T) {
	g := graph(t)
	svg := g.SVG()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	nodes, edges := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG not well formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && strings.HasPrefix(a.Value, "em-node") {
					nodes++
				}
				if a.Name.Local == "class" && a.Value == "em-edge" {
					edges++
				}
			}
		}
	}
	want := 0
	for _, l := range g.EventModel() {
		want += len(l.Nodes)
	}
	if nodes != want || nodes == 0 {
		t.Errorf("%d em-node groups, want %d", nodes, want)
	}
	if edges < 4 {
		t.Errorf("%d edges drawn", edges)
	}
}

func TestRenderFormats(t *testing.T) {
	g := graph(t)
	var b bytes.Buffer
	if err := topology.Render(&b, g, topology.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var back topology.Graph
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Nodes) != len(g.Nodes) {
		t.Fatalf("JSON round trip: %v, %d nodes", err, len(back.Nodes))
	}
	b.Reset()
	if err := topology.Render(&b, g, "dot"); !errors.Is(err, topology.ErrUnknownFormat) || b.Len() != 0 {
		t.Fatalf("unknown format: %v, wrote %d bytes", err, b.Len())
	}
}

// A shell.Module holding definitions, a workflow and a bundle (a machine
// and its children) gives the graph of its members.
func TestOfExpandsModules(t *testing.T) {
	f := newFixture()
	g, err := topology.Of(f.reg, shell.Module{f.courses, shell.Module{f.greeting, f.lifecycle}}, f.catalog)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"command:courses.course_decider:courses.create_course", "workflow:greeting", "machine:courses.lifecycle", "readmodel:courses.catalog"} {
		node(t, g, id)
	}
}
