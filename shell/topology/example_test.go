package topology_test

import (
	"fmt"

	"github.com/sourced-go/sourced/shell/topology"
)

// The message-flow graph of a course decider (its outputs declared with
// Emits), an undeclared enrolment decider, a catalog projector, a
// course-lifecycle machine and a workflow.
func ExampleOf() {
	f := newFixture()
	g, err := topology.Of(f.reg, f.courses, f.enrolments, f.catalog, f.lifecycle)
	if err != nil {
		panic(err)
	}
	for _, n := range g.Nodes {
		fmt.Printf("%s: %s %v\n", n.Type, n.Name, n.Produces)
	}
	// Output:
	// command: courses.create_course [courses.course_created]
	// event: courses.course_created []
	// command: courses.open_enrolment [courses.enrolment_opened]
	// event: courses.enrolment_opened []
	// automation: reaction(courses.course_created) [courses.open_enrolment]
	// command: courses.enrol_student []
	// readmodel: Catalog []
	// machine: courses.lifecycle [courses.lifecycle.runtime.draft courses.lifecycle.runtime.open courses.lifecycle.runtime.closed courses.close_course]
	// event: courses.lifecycle.runtime.draft []
	// event: courses.lifecycle.runtime.open []
	// event: courses.lifecycle.runtime.closed []
	// automation: reaction(courses.course_created) [courses.lifecycle.runtime.draft]
	// automation: reaction(courses.enrolment_opened) [courses.lifecycle.runtime.open]
	// command: courses.close_course [courses.lifecycle.runtime.closed]
	// automation: after(open after 720h0m0s) [courses.close_course]
	// event: courses.student_enrolled []
}
