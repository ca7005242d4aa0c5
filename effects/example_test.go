package effects_test

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

// A reactor from another framework runs on Sourced by implementing the
// protocol: here a delete-on-ack job queue.
func ExampleReactor() {
	q := &jobs{}
	info, _ := effects.Describe(q)
	fmt.Println(info.Group, "exclusive:", info.Exclusive, "id-partitioned:", info.IDPartitioned())

	pairs, _ := q.HandleClaim(context.Background(), effects.Claim{Messages: []core.PositionedMessage{positioned(1, RunJob{N: 7})}})
	fmt.Printf("ran %v, signals %+v\n", q.ran, pairs[0].Signals)
	// Output:
	// effects_test.jobs exclusive: true id-partitioned: true
	// ran [7], signals [{Delete:true}]
}

// Step turns a decider's decision on a claimed batch into signals.
func ExampleStep() {
	cmd := positioned(1, EnrolStudent{CourseID: "c1", StudentID: "s1"})
	pairs, err := effects.Step(enrolment, effects.Claim{Messages: []core.PositionedMessage{cmd}})
	if err != nil {
		panic(err)
	}
	for _, s := range pairs[0].Signals {
		switch s := s.(type) {
		case effects.Append:
			fmt.Printf("append %+v (guarded: %v)\n", s.Messages[0].Payload, s.Guard != nil)
		case effects.Ack:
			fmt.Println("ack")
		}
	}
	// Output:
	// append {CourseID:c1 StudentID:s1} (guarded: true)
	// ack
}
