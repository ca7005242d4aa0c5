package topology_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/topology"
)

// courseLog writes a log the fixture's handlers wrote: two courses
// created, a reaction dispatching open_enrolment for the first (as the
// router correlates it, tagged with the producing group), that command
// decided (it produces nothing, though it declares enrolment_opened), and
// an enrolment decided by the decider that declares nothing.
func courseLog(t *testing.T, f fixture) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	store := memstore.New(f.reg)
	t.Cleanup(func() { store.Close() })
	var created []core.Message
	for _, id := range []string{"c1", "c2"} {
		res, err := shell.Handle(ctx, store, f.courses, CreateCourse{CourseID: id, CourseName: "Go " + id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, res.Events...)
	}
	reaction := core.NewMessage(OpenEnrolment{CourseID: "c1"}).Correlate(created[0]).WithMetadata(map[string]any{"producer": f.courses.Group})
	if _, err := store.Append(ctx, []core.Message{reaction}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := shell.Handle(ctx, store, f.courses, OpenEnrolment{CourseID: "c1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := shell.Handle(ctx, store, f.enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	return store
}

func flow(t *testing.T, g topology.Graph, from, effect string) topology.Flow {
	t.Helper()
	for _, f := range g.Flows {
		if f.From == from && f.Effect == effect {
			return f
		}
	}
	t.Fatalf("no flow %s -> %s in %+v", from, effect, g.Flows)
	return topology.Flow{}
}

func TestObservedEdgesBesideDeclaredOnes(t *testing.T) {
	f := newFixture()
	store := courseLog(t, f)
	obs, err := topology.Observe(context.Background(), store, topology.ObserveOptions{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// create x2, created x2, open_enrolment (reaction), open_enrolment
	// (handled), enrol_student, student_enrolled.
	if obs.Messages != 8 || !obs.Complete || obs.From != 1 || obs.To != 8 || obs.Unresolved != 0 {
		t.Fatalf("observation %+v", obs)
	}
	want := []topology.Caused{
		{Cause: "courses.course_created", Effect: "courses.open_enrolment", Group: "courses.course_decider", Count: 1},
		{Cause: "courses.create_course", Effect: "courses.course_created", Group: "courses.course_decider", Count: 2},
		{Cause: "courses.enrol_student", Effect: "courses.student_enrolled", Group: "courses.enrolment_decider", Count: 1},
	}
	if !slices.Equal(obs.Caused, want) {
		t.Fatalf("caused %+v\nwant %+v", obs.Caused, want)
	}

	g := graph(t).WithObservation(obs)
	if c := flow(t, g, "command:courses.course_decider:courses.create_course", "courses.course_created"); c.Status != topology.Confirmed || c.Observed != 2 || !c.Declared || c.CauseSeen != 2 {
		t.Errorf("declared and observed: %+v", c)
	}
	if c := flow(t, g, "automation:courses.course_decider:reaction(courses.course_created)", "courses.open_enrolment"); c.Status != topology.Confirmed || c.Observed != 1 {
		t.Errorf("a reaction's declared dispatch, observed: %+v", c)
	}
	if c := flow(t, g, "command:courses.course_decider:courses.open_enrolment", "courses.enrolment_opened"); c.Status != topology.Unobserved || c.Observed != 0 || c.CauseSeen != 2 {
		t.Errorf("declared, never observed though its command was: %+v", c)
	}
	if c := flow(t, g, "command:courses.lifecycle:courses.close_course", "courses.lifecycle.runtime.closed"); c.Status != topology.Unobserved || c.CauseSeen != 0 {
		t.Errorf("declared, its command never seen: %+v", c)
	}
	if c := flow(t, g, "command:courses.enrolment_decider:courses.enrol_student", "courses.student_enrolled"); c.Status != topology.Undeclared || c.Declared || c.Observed != 1 {
		t.Errorf("observed, never declared: %+v", c)
	}
	// The lifecycle machine also reacts to course_created (declared to
	// produce its draft state): the log says the open_enrolment was the
	// course decider's, so it is not credited to the machine.
	if c := flow(t, g, "automation:courses.lifecycle:reaction(courses.course_created)", "courses.lifecycle.runtime.draft"); c.Status != topology.Unobserved {
		t.Errorf("machine reaction: %+v", c)
	}
	for _, fl := range g.Flagged() {
		if fl.Status == topology.Confirmed {
			t.Errorf("flagged a confirmed flow %+v", fl)
		}
	}

	mm := g.Mermaid()
	for _, s := range []string{
		`command_courses_course_decider_courses_create_course -->|"2 seen"| event_courses_course_created`,
		`command_courses_course_decider_courses_open_enrolment -.->|"unobserved"| event_courses_enrolment_opened`,
		`command_courses_enrolment_decider_courses_enrol_student ==>|"undeclared, 1 seen"| event_courses_student_enrolled`,
		"linkStyle ",
	} {
		if !strings.Contains(mm, s) {
			t.Errorf("Mermaid lacks %q:\n%s", s, mm)
		}
	}
	svg := string(g.SVG())
	for _, s := range []string{`class="em-edge em-undeclared" data-from="command:courses.enrolment_decider:courses.enrol_student" data-to="event:courses.student_enrolled"`, `em-edge em-unobserved`, `em-edge em-confirmed`} {
		if !strings.Contains(svg, s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	js, err := g.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back topology.Graph
	if err := json.Unmarshal(js, &back); err != nil || back.Observed == nil || len(back.Flows) != len(g.Flows) {
		t.Fatalf("JSON round trip: %v %+v", err, back.Observed)
	}
}

// pageCounter records the reads Observe makes.
type pageCounter struct {
	log   topology.LogReader
	reads []shell.ReadAllOptions
	read  int
}

func (p *pageCounter) ReadAll(ctx context.Context, opts shell.ReadAllOptions) (shell.Page, error) {
	p.reads = append(p.reads, opts)
	page, err := p.log.ReadAll(ctx, opts)
	p.read += len(page.Messages)
	return page, err
}

func TestObserveReadsOnlyTheNewestMessagesInPages(t *testing.T) {
	f := newFixture()
	log := &pageCounter{log: courseLog(t, f)}
	obs, err := topology.Observe(context.Background(), log, topology.ObserveOptions{Last: 3, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if log.read != 3 || len(log.reads) != 2 {
		t.Fatalf("read %d messages in %d reads: %+v", log.read, len(log.reads), log.reads)
	}
	for _, r := range log.reads {
		if r.Limit > 2 || r.Order != shell.Descending {
			t.Errorf("read %+v", r)
		}
	}
	// The window is open_enrolment (handled), enrol_student,
	// student_enrolled: the handled open_enrolment caused itself, and
	// student_enrolled's cause is in the window.
	if obs.Messages != 3 || obs.Complete || obs.From != 6 || obs.To != 8 || obs.Unresolved != 0 || len(obs.Caused) != 1 {
		t.Fatalf("observation %+v", obs)
	}
	obs, err = topology.Observe(context.Background(), log, topology.ObserveOptions{Last: 3 + 1, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Now the reaction's open_enrolment is in, its cause (course_created) is not.
	if obs.Unresolved != 1 || obs.Complete {
		t.Fatalf("observation %+v", obs)
	}
	if _, err := topology.Observe(context.Background(), log, topology.ObserveOptions{Last: -1}); err == nil {
		t.Fatal("a negative bound was accepted")
	}
}
