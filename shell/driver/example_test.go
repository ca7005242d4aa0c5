package driver_test

import (
	"fmt"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// A store wakes, for each message it appends, the partitions of every
// consumer group the message belongs to: here a group partitioned by
// course and student, and an enrolment naming two students.
func ExamplePartitionWalk() {
	partitionBy := []string{"course_id", "student_id"}
	keys := []codec.KeyPair{ // as codec indexes the payload: sorted
		{Name: "course_id", Value: "c1"},
		{Name: "student_id", Value: "s1"},
		{Name: "student_id", Value: "s2"},
	}
	var w driver.PartitionWalk
	for w.Init(partitionBy, keys); w.Next(); {
		key := core.AppendPartitionKey(nil, partitionBy, w.Values())
		p, _ := core.ParsePartitionKey(string(key))
		fmt.Println(p)
	}
	// Output:
	// course_id:c1|student_id:s1
	// course_id:c1|student_id:s2
}

// A store refuses a claim without a worker to hold it, before it touches
// anything, with the error every store gives.
func ExampleCheckClaim() {
	fmt.Println(driver.CheckClaim("", 10))
	fmt.Println(driver.CheckClaim("w1", 10))
	// Output:
	// sourced: claim with no worker id: give the id of the worker that will hold the claim
	// <nil>
}
