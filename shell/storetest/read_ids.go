package storetest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testReadIDPartition holds ReadPartition to the contract of
// id-partitioning (ReadIDPartition in the package doc): the partition
// {core.IDKey: id} holds exactly the message with that id, if its type is
// among those read, whatever it was indexed under when appended (a message
// of a queue's type, one appended before the queue was registered, one of
// any other type).
func (s suite) testReadIDPartition(t *testing.T) {
	handled := []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse, typeCourseClosed}
	check := func(e *env, what string, p map[string]string, types []string, opts driver.ReadOptions, guard int64, want ...int64) {
		e.t.Helper()
		res := e.readPartition(p, types, opts)
		e.expectPositions(what, res.Messages, want...)
		if res.Guard.LastPosition != guard {
			e.t.Fatalf("%s: guard position %d, want %d", what, res.Guard.LastPosition, guard)
		}
	}
	byID := func(m core.PositionedMessage) map[string]string { return part(core.IDKey, m.ID.String()) }

	t.Run("a message of any type", func(t *testing.T) {
		e := s.env(t)
		courseLog(e)
		log := e.log()
		check(e, "the third message", byID(log[2]), handled, driver.ReadOptions{}, 10, 3)
		check(e, "the third message, its type alone", byID(log[2]), []string{typeUserJoinedCourse}, driver.ReadOptions{}, 10, 3)
		check(e, "the third message, other types", byID(log[2]), []string{typeCourseCreated, typeCourseClosed}, driver.ReadOptions{}, 10)
		check(e, "the ninth message", byID(log[8]), []string{typeDeviceRegistered}, driver.ReadOptions{}, 10, 9)
		check(e, "after it", byID(log[2]), handled, driver.ReadOptions{After: 3}, 10)
		check(e, "up to before it", byID(log[2]), handled, driver.ReadOptions{Upto: 2}, 2)
		check(e, "up to it, limit 1", byID(log[2]), handled, driver.ReadOptions{Upto: 3, Limit: 1}, 3, 3)
		check(e, "an id not in the log", part(core.IDKey, uuid.NewString()), handled, driver.ReadOptions{}, 10)
		e.sameMessages("the message read", e.readPartition(byID(log[5]), handled, driver.ReadOptions{}).Messages, log[5:6])
	})

	t.Run("a message of a queue's type", func(t *testing.T) {
		e := s.env(t)
		e.append(deposit{"acc1", 1}) // before the queue is registered
		ge := &genv{env: e, gs: e.store}
		ge.register(groupSpec(jobs))
		e.append(deposit{"acc1", 2}, deposit{"acc1", 3})
		log := e.log()
		for i, m := range log {
			check(e, "a job", byID(m), []string{typeDeposit}, driver.ReadOptions{}, 3, int64(i+1))
		}
		check(e, "a job, other types", byID(log[1]), handled, driver.ReadOptions{}, 3)
	})
}
