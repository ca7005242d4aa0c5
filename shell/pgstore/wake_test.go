package pgstore_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// storedOffset is an offset row as TestAppendWakesTheOffsetsItsMessagesWake
// reads it.
type storedOffset struct {
	group, partition string
	keys             []string
	messageID        *uuid.UUID
	next             int64
}

// An append creates or wakes the offsets its messages wake, standalone or
// in a transaction, with one message or several: every offset once, at
// the position of the first message that wakes it, created in the order
// the messages meet them, with its key pairs (one or two) and, for a
// queue's, its message; an offset that is waiting already keeps its
// earlier position, and a message no group handles wakes nothing.
func TestAppendWakesTheOffsetsItsMessagesWake(t *testing.T) {
	ctx := t.Context()
	reg, _ := storetest.NewRegistry()
	prefix := pgtest.Prefix()
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	for _, spec := range []driver.GroupSpec{
		{ID: "courses", PartitionBy: []string{"course_name"}, Handled: []string{fixtures.TypeCourseCreated, fixtures.TypeUserJoinedCourse}},
		{ID: "members", PartitionBy: []string{"course_name", "user_id"}, Handled: []string{fixtures.TypeUserJoinedCourse}},
		{ID: "jobs", Exclusive: true, Handled: []string{fixtures.TypeCourseClosed}},
	} {
		if err := s.RegisterGroup(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	one, err := s.Append(ctx, core.Messages(fixtures.CourseCreated{CourseName: "c1"}), driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var many driver.AppendResult
	err = s.Update(ctx, func(tx driver.Tx) error {
		many, err = tx.Append(core.Messages(
			fixtures.UserJoinedCourse{CourseName: "c1", UserID: "u1"}, // c1 waits at one's position already
			fixtures.UserJoinedCourse{CourseName: "c2", UserID: "u1"},
			fixtures.CourseClosed{CourseName: "c2"}, // a job
			fixtures.UserJoinedCourse{CourseName: "c2", UserID: "u2"},
			fixtures.DeviceRegistered{DeviceID: "d1"}, // wakes nothing
		), driver.AppendOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	rows, err := s.Pool().Query(ctx, `SELECT g.group_id, o.partition_key, o.keys, o.message_id, o.next_position
FROM `+prefix+`_offsets o JOIN `+prefix+`_consumer_groups g ON g.id = o.consumer_group_id ORDER BY o.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []storedOffset
	for rows.Next() {
		var o storedOffset
		if err := rows.Scan(&o.group, &o.partition, &o.keys, &o.messageID, &o.next); err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	id := many.Messages[2].ID
	c1 := core.Partition{"course_name": "c1"}.Key()
	c2 := core.Partition{"course_name": "c2"}.Key()
	member := func(c, u string) string { return core.Partition{"course_name": c, "user_id": u}.Key() }
	want := []storedOffset{
		{"courses", c1, []string{"course_name\x1fc1"}, nil, one.Last},
		{"members", member("c1", "u1"), []string{"course_name\x1fc1", "user_id\x1fu1"}, nil, many.Positions[0]},
		{"courses", c2, []string{"course_name\x1fc2"}, nil, many.Positions[1]},
		{"members", member("c2", "u1"), []string{"course_name\x1fc2", "user_id\x1fu1"}, nil, many.Positions[1]},
		{"jobs", core.Partition{core.IDKey: id.String()}.Key(), []string{core.IDKey + "\x1f" + id.String()}, &id, many.Positions[2]},
		{"members", member("c2", "u2"), []string{"course_name\x1fc2", "user_id\x1fu2"}, nil, many.Positions[3]},
	}
	if !slices.EqualFunc(got, want, func(a, b storedOffset) bool {
		return a.group == b.group && a.partition == b.partition && slices.Equal(a.keys, b.keys) &&
			(a.messageID == nil) == (b.messageID == nil) && (a.messageID == nil || *a.messageID == *b.messageID) && a.next == b.next
	}) {
		t.Errorf("offsets:\n%+v\nwant\n%+v", got, want)
	}
}
