package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testImpossiblePartitions holds ReadPartition to refusing a partition
// whose attributes no type read declares: under conditional AND a message
// is matched only on the partition attributes it carries, so a misspelt
// attribute would silently widen the read (or, alone, empty it) and drop
// out of the guard (see driver.CheckReadPartition).
func (s suite) testImpossiblePartitions(t *testing.T) {
	e := s.envWith(t, withNote)
	courseLog(e)
	e.append(note{Topic: "t1", Body: "b"})
	e.notes.take()
	handled := []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse, typeCourseClosed}
	id := e.log()[2].ID.String()
	cases := []struct {
		name      string
		partition core.Partition
		types     []string
		attr      string // the attribute the error names
		says      []string
	}{
		{"a misspelt attribute beside a good one (would widen the read)", part("course_name", "Algebra", "usr_id", "joe"), handled, "usr_id", []string{"usr_id", typeUserJoinedCourse, "spelling"}},
		{"a misspelt attribute alone (would empty the read)", part("course", "Algebra"), handled, "course", []string{"course", typeCourseCreated}},
		{"a misspelt attribute no type read declares", part("usr_id", "joe"), []string{typeUserJoinedCourse}, "usr_id", []string{"usr_id", typeUserJoinedCourse}},
		{"attributes none of the types read declares (would empty the read)", part("user_id", "joe", "device_id", "d1"), []string{typeCourseCreated, typeCourseClosed}, "device_id", []string{"device_id, user_id", typeCourseCreated, typeCourseClosed, "empty"}},
		{"an attribute tagged noindex", part("topic", "t1", "body", "b"), []string{typeNote}, "body", []string{"body", "noindex"}},
		{"an attribute that is not a scalar", part("meta", "x"), []string{typeNote}, "meta", []string{"meta", "not indexed"}},
		{"a reserved attribute", part("__key", "x"), handled, "__key", []string{"reserved"}},
		{"the id key beside another attribute", part(core.IDKey, id, "course_name", "Algebra"), handled, core.IDKey, []string{core.IDKey, "alone"}},
		{"the id key with a value that is no message id", part(core.IDKey, "not-a-uuid"), handled, core.IDKey, []string{"not-a-uuid", "id"}},
		{"a value that is not UTF-8", part("course_name", "Alg\xe8bre"), handled, "course_name", []string{"UTF-8"}},
		{"no attribute at all", map[string]string{}, handled, "", []string{"no attributes"}},
	}
	check := func(t *testing.T, what string, p map[string]string, attr string, says []string, err error) {
		t.Helper()
		var ipe *driver.InvalidPartitionError
		if !errors.Is(err, driver.ErrInvalidPartition) || !errors.As(err, &ipe) {
			t.Fatalf("%s: %v, want a *driver.InvalidPartitionError", what, err)
		}
		if ipe.Attribute != attr || core.Partition(ipe.Partition).String() != core.Partition(p).String() {
			t.Fatalf("%s: %v (partition %v, attribute %q): want partition %v, attribute %q", what, err, ipe.Partition, ipe.Attribute, p, attr)
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %v: want it to say %q", what, err, s)
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			before := e.snapshot()
			_, err := e.store.ReadPartition(e.ctx, c.partition, c.types, driver.ReadOptions{})
			check(t, "read partition", c.partition, c.attr, c.says, err)
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				_, err := tx.ReadPartition(c.partition, c.types, driver.ReadOptions{})
				return err
			})
			check(t, "read partition in a transaction", c.partition, c.attr, c.says, err)
			e.unchanged(before)
		})
	}
	t.Run("a refused read or append leaves its transaction usable", func(t *testing.T) {
		// The refusal is the caller's to handle: a transaction that reads
		// a misspelt partition, is told so, and goes on commits what it
		// did and does next, as a transaction with no such read would.
		e := e.with(t)
		n := len(e.log())
		err := e.store.Update(e.ctx, func(tx driver.Tx) error {
			// After an append (a store that sends statements as they come
			// has begun), then before another.
			if _, err := tx.Append(core.Messages(courseCreated{CourseName: "Topology"}), driver.AppendOptions{}); err != nil {
				return err
			}
			if _, err := tx.ReadPartition(part("course", "Algebra"), handled, driver.ReadOptions{}); !errors.Is(err, driver.ErrInvalidPartition) {
				t.Errorf("read of a misspelt partition: %v, want ErrInvalidPartition", err)
			}
			if _, err := tx.Read([]core.Condition{{Type: typeCourseCreated, Attrs: map[string]string{"course_nme": "Algebra"}}}, driver.ReadOptions{}); err == nil {
				t.Error("read of a misspelt condition: no error")
			}
			if _, err := tx.Append(core.Messages(unregistered{"x"}), driver.AppendOptions{}); err == nil {
				t.Error("append of an unregistered payload: no error")
			}
			_, err := tx.Append(core.Messages(courseCreated{CourseName: "Geometry"}), driver.AppendOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update after a refused read: %v, want its append committed", err)
		}
		if got := len(e.log()); got != n+2 {
			t.Fatalf("the log holds %d messages, want %d: the appends before and after the refused reads", got, n+2)
		}
	})

	t.Run("attributes some of the types declare are valid", func(t *testing.T) {
		e := e.with(t)
		for _, c := range []struct {
			partition core.Partition
			types     []string
		}{
			{part("course_name", "Algebra", "user_id", "joe"), handled},
			{part("course_name", "Latin"), handled}, // no message with the value yet
			{part("user_id", "joe"), []string{typeCourseCreated, typeUserRegistered}},
			{part("course_name", "Algebra", "user_id", "joe"), []string{typeCourseCreated, typeCourseClosed}}, // user_id is another type's
			{part("topic", "t1", "course_name", "Algebra"), append(slices.Clone(handled), typeNote)},
			{part(core.IDKey, uuid.NewString()), handled}, // no such message yet
			{part("course", "Algebra"), nil},              // no types: nothing to read
		} {
			if _, err := e.store.ReadPartition(e.ctx, c.partition, c.types, driver.ReadOptions{}); err != nil {
				t.Fatalf("read partition %v of %v: %v", c.partition, c.types, err)
			}
		}
	})
}
