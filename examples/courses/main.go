// Command courses runs the course and enrolment example of the manual: two
// deciders (course names are unique, courses have a capacity) decide
// commands, and their events and reactions are printed.
//
// This first version decides in memory with the pure core; it grows into
// the full example on a SQLite file as the shell lands.
package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Commands and events are plain structs; their JSON names are the
// attributes the log indexes.
type (
	CreateCourse struct {
		CourseID   string `json:"course_id" sourced:"required"`
		CourseName string `json:"course_name" sourced:"required"`
	}
	CourseCreated struct {
		CourseID   string `json:"course_id"`
		CourseName string `json:"course_name"`
	}
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	NotifyStudent struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
)

func registry() (*codec.Registry, error) {
	reg := codec.NewRegistry()
	return reg, errors.Join(
		codec.Register[CreateCourse](reg, "courses.create"),
		codec.Register[CourseCreated](reg, "courses.created"),
		codec.Register[EnrolStudent](reg, "courses.enrol_student"),
		codec.Register[StudentEnrolled](reg, "courses.student_enrolled"),
		codec.Register[NotifyStudent](reg, "students.notify"),
	)
}

// CourseNames keeps course names unique: its boundary is the name.
var CourseNames = core.Decider[bool]{Group: "courses.course_names", PartitionBy: []string{"course_name"}}.With(
	core.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	core.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("course %q already exists", c.CourseName)
		}
		return []any{CourseCreated(c)}, nil
	}),
)

// Capacity is how many students a course takes.
const Capacity = 2

// Enrolments enforces the capacity of a course and notifies the students.
var Enrolments = core.Decider[[]string]{Group: "courses.enrolments", PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	core.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		switch {
		case slices.Contains(s, c.StudentID):
			return nil, fmt.Errorf("%s is already enrolled in %s", c.StudentID, c.CourseID)
		case len(s) >= Capacity:
			return nil, fmt.Errorf("course %s is full", c.CourseID)
		}
		return []any{StudentEnrolled(c)}, nil
	}),
	core.React(func(_ []string, e StudentEnrolled) []any {
		return []any{NotifyStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
	}),
)

// log is the example's in-memory log: the events decided so far.
type log struct {
	reg    *codec.Registry
	events []core.Message
}

// partition returns the logged events of the decider's partition for cmd.
func (l *log) partition(keys []string, cmd any) []core.Message {
	cmdKeys, _ := l.reg.Keys(cmd, nil)
	part := map[string]string{}
	for _, k := range cmdKeys {
		if slices.Contains(keys, k.Name) {
			part[k.Name] = k.Value
		}
	}
	var out []core.Message
	for _, e := range l.events {
		ek, _ := l.reg.Keys(e.Payload, nil)
		if core.InPartition(part, ek) {
			out = append(out, e)
		}
	}
	return out
}

func handle[S any](l *log, d core.Decider[S], cmd any) {
	if err := l.reg.Validate(cmd); err != nil {
		fmt.Printf("  %T rejected: %v\n", cmd, err)
		return
	}
	msg := core.NewMessage(cmd).Stamp(uuid.Must(uuid.NewV7()), time.Now())
	out, err := d.Run(l.partition(d.PartitionBy, cmd), msg)
	if err != nil {
		fmt.Printf("  %+v rejected: %v\n", cmd, err)
		return
	}
	for _, e := range out.Events {
		fmt.Printf("  %+v -> %+v\n", cmd, e.Payload)
		l.events = append(l.events, e.Stamp(uuid.Must(uuid.NewV7()), time.Now()))
	}
	for _, r := range out.Reactions {
		fmt.Printf("    reaction: %+v\n", r.Payload)
	}
}

func main() {
	reg, err := registry()
	if err == nil {
		err = errors.Join(CourseNames.Check(reg), Enrolments.Check(reg))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	l := &log{reg: reg}
	fmt.Println("courses:")
	handle(l, CourseNames, CreateCourse{CourseID: "c1", CourseName: "Algebra"})
	handle(l, CourseNames, CreateCourse{CourseID: "c2", CourseName: "Algebra"})
	handle(l, CourseNames, CreateCourse{CourseID: "c3"})
	fmt.Println("enrolments:")
	for _, s := range []string{"s1", "s2", "s2", "s3"} {
		handle(l, Enrolments, EnrolStudent{CourseID: "c1", StudentID: s})
	}
	fmt.Printf("%d events decided\n", len(l.events))
}
