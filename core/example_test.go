package core_test

import (
	"fmt"

	"github.com/sourced-go/sourced/core"
)

// A decider decides a command on its history, with no store anywhere.
func ExampleDecider_Run() {
	history := core.Messages(CourseCreated{CourseID: "c1", CourseName: "Algebra"})

	_, err := courseDecider.Run(history, core.NewMessage(CreateCourse{CourseID: "c2", CourseName: "Algebra"}))
	fmt.Println("duplicate:", err)

	out, err := courseDecider.Run(nil, core.NewMessage(CreateCourse{CourseID: "c2", CourseName: "Geometry"}))
	if err != nil {
		panic(err)
	}
	fmt.Printf("events: %+v\n", out.Events[0].Payload)
	fmt.Printf("reactions: %+v\n", out.Reactions[0].Payload)
	fmt.Printf("state: %+v\n", out.State)
	// Output:
	// duplicate: course "Algebra" already exists
	// events: {CourseID:c2 CourseName:Geometry}
	// reactions: {CourseID:c2}
	// state: {Name:Geometry NameTaken:true}
}

// A projection evolves a state from events; a fresh state each time.
func ExampleProjection_Fold() {
	r := rosterProjection.Fold(
		CourseCreated{CourseID: "c1", CourseName: "Algebra"},
		StudentEnrolled{CourseID: "c1", StudentID: "s1"},
		StudentEnrolled{CourseID: "c1", StudentID: "s2"},
	)
	fmt.Println(r.CourseID, r.Students)
	// Output: c1 [s1 s2]
}

// Two deciders of one boundary combine into one decider over the pair of
// their states.
func ExampleCombine() {
	names := core.Decider[map[string]bool]{Group: "courses.names", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(s map[string]bool, e StudentEnrolled) map[string]bool {
			n := map[string]bool{e.StudentID: true}
			for k := range s {
				n[k] = true
			}
			return n
		}),
	)
	both := core.Combine(enrolmentDecider, names)
	out, err := both.Run(core.Messages(StudentEnrolled{CourseID: "c1", StudentID: "s1"}),
		core.NewMessage(EnrolStudent{CourseID: "c1", StudentID: "s2"}))
	fmt.Println(err, out.State.First.Students, len(out.State.Second))
	// Output: <nil> [s1 s2] 2
}
