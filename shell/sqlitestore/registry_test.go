package sqlitestore_test

import (
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// A store opened on a file whose consumer group handles a type its
// registry does not know yet learns the type once it is registered: the
// group's messages of that type are claimed (issue 28, item 1: the
// writer's cache of the groups kept the type unknown until the group's
// configuration changed, so appends of it made no offsets and claims
// failed).
func TestTypeRegisteredAfterOpenIsHandled(t *testing.T) {
	ctx := t.Context()
	path := dbPath(t)
	spec := driver.GroupSpec{ID: "test.ticks", PartitionBy: []string{"counter"}, Handled: []string{"test.tick"}}
	joins := driver.GroupSpec{ID: "test.joins", PartitionBy: []string{"user_id"}, Handled: []string{"user.joined_course"}}
	first := install(t, path, sqlitestore.Options{})
	register(t, first, spec)
	register(t, first, joins)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	reg := codec.NewRegistry() // the application's types, not yet test.tick
	codec.MustRegister[courseCreated](reg, "course.created")
	s := install(t, path, sqlitestore.Options{Registry: reg})
	appendOK(t, s, courseCreated{CourseName: "Algebra"}) // the writer loads the groups
	codec.MustRegister[tick](reg, "test.tick")           // as NewRuntime registers a workflow's events
	register(t, s, spec)                                 // unchanged: Runtime.Start
	appendOK(t, s, tick{Counter: "a", Seq: 1})
	c := claim(t, s, spec.ID)
	if c == nil || len(c.Messages) != 1 || c.Messages[0].Type != "test.tick" {
		t.Fatalf("claim = %+v, want the tick", c)
	}
	if err := s.Ack(ctx, c, c.Messages[0].Position); err != nil {
		t.Fatal(err)
	}

	// Registered inside a transaction that began before: its append is
	// seen by the group too.
	err := s.Update(ctx, func(tx driver.Tx) error {
		codec.MustRegister[userJoined](reg, "user.joined_course")
		_, err := tx.Append(msgsOf(userJoined{CourseName: "Algebra", UserID: "joe"}), driver.AppendOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, joins.ID); c == nil || len(c.Messages) != 1 || c.Messages[0].Type != "user.joined_course" {
		t.Fatalf("claim = %+v, want the join", c)
	}
}
