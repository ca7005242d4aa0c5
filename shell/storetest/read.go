package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// courseLog is a log for reads:
//
//	1 courseCreated(Algebra)          6 userJoinedCourse(History, joe)
//	2 userRegistered(joe)             7 courseClosed(Algebra)
//	3 userJoinedCourse(Algebra, joe)  8 courseCreated(History)
//	4 userJoinedCourse(Algebra, jake) 9 deviceRegistered(d1)
//	5 userRegistered(jake)           10 userJoinedCourse(Algebra, joe)
func courseLog(e *env) {
	e.t.Helper()
	e.append(
		courseCreated{CourseName: "Algebra"},
		userRegistered{UserID: "joe", Name: "Joe"},
		userJoinedCourse{CourseName: "Algebra", UserID: "joe"},
		userJoinedCourse{CourseName: "Algebra", UserID: "jake"},
		userRegistered{UserID: "jake", Name: "Jake"},
		userJoinedCourse{CourseName: "History", UserID: "joe"},
		courseClosed{CourseName: "Algebra"},
		courseCreated{CourseName: "History"},
		deviceRegistered{DeviceID: "d1", Name: "Thermostat"},
		userJoinedCourse{CourseName: "Algebra", UserID: "joe"},
	)
}

func (s suite) testRead(t *testing.T) {
	e := s.env(t)
	courseLog(e)
	joinedAlgebra := cond(typeUserJoinedCourse, "course_name", "Algebra")
	cases := []struct {
		name  string
		conds []core.Condition
		opts  driver.ReadOptions
		want  []int64
		guard int64
	}{
		{"no conditions read nothing", nil, driver.ReadOptions{}, nil, 10},
		{"attributes of one condition are ANDed", []core.Condition{cond(typeUserJoinedCourse, "course_name", "Algebra", "user_id", "joe")}, driver.ReadOptions{}, []int64{3, 10}, 10},
		{"conditions are ORed", []core.Condition{cond(typeUserJoinedCourse, "user_id", "jake"), cond(typeCourseClosed, "course_name", "Algebra"), cond(typeUserRegistered, "user_id", "jake")}, driver.ReadOptions{}, []int64{4, 5, 7}, 10},
		{"overlapping conditions return a message once", []core.Condition{joinedAlgebra, cond(typeUserJoinedCourse, "user_id", "joe")}, driver.ReadOptions{}, []int64{3, 4, 6, 10}, 10},
		{"a condition names one type", []core.Condition{cond(typeCourseCreated, "course_name", "History")}, driver.ReadOptions{}, []int64{8}, 10},
		{"a type-only condition matches the whole type", []core.Condition{cond(typeUserRegistered)}, driver.ReadOptions{}, []int64{2, 5}, 10},
		{"an unknown value matches nothing", []core.Condition{cond(typeCourseCreated, "course_name", "Latin")}, driver.ReadOptions{}, nil, 10},
		{"After skips up to its position", []core.Condition{joinedAlgebra}, driver.ReadOptions{After: 3}, []int64{4, 10}, 10},
		{"After past every match", []core.Condition{joinedAlgebra}, driver.ReadOptions{After: 10}, nil, 10},
		{"Limit cuts short: guard at the last returned", []core.Condition{joinedAlgebra}, driver.ReadOptions{Limit: 2}, []int64{3, 4}, 4},
		{"Limit above the matches: guard at the newest", []core.Condition{joinedAlgebra}, driver.ReadOptions{Limit: 5}, []int64{3, 4, 10}, 10},
		{"After and Limit", []core.Condition{joinedAlgebra}, driver.ReadOptions{After: 3, Limit: 1}, []int64{4}, 4},
		{"Upto bounds: guard at Upto", []core.Condition{joinedAlgebra}, driver.ReadOptions{Upto: 7}, []int64{3, 4}, 7},
		{"Upto with no match before it", []core.Condition{cond(typeCourseClosed)}, driver.ReadOptions{Upto: 5}, nil, 5},
		{"Upto past the newest: guard at the newest", []core.Condition{joinedAlgebra}, driver.ReadOptions{Upto: 50}, []int64{3, 4, 10}, 10},
		{"Upto and Limit cutting short", []core.Condition{joinedAlgebra}, driver.ReadOptions{Upto: 9, Limit: 1}, []int64{3}, 3},
		{"After, Upto and Limit", []core.Condition{joinedAlgebra, cond(typeCourseClosed)}, driver.ReadOptions{After: 3, Upto: 9, Limit: 5}, []int64{4, 7}, 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			res := e.read(c.conds, c.opts)
			e.expectPositions("messages", res.Messages, c.want...)
			if res.Guard.LastPosition != c.guard {
				t.Fatalf("guard position %d, want %d", res.Guard.LastPosition, c.guard)
			}
			if !sameConds(res.Guard.Conditions, c.conds) {
				t.Fatalf("guard conditions %v, want the conditions read %v", res.Guard.Conditions, c.conds)
			}
		})
	}

	t.Run("messages read are the messages appended", func(t *testing.T) {
		e := e.with(t)
		all := e.log()
		res := e.read([]core.Condition{cond(typeUserJoinedCourse, "user_id", "joe")}, driver.ReadOptions{})
		want := []core.PositionedMessage{all[2], all[5], all[9]}
		e.sameMessages("read", res.Messages, want)
	})
}

func (s suite) testReadPartition(t *testing.T) {
	handled := []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse, typeCourseClosed}
	algebraJoe := part("course_name", "Algebra", "user_id", "joe")

	t.Run("conditional AND", func(t *testing.T) {
		e := s.env(t)
		// The table under Conditional AND in the package doc, one message each.
		rows := []struct {
			payload any
			in      bool
		}{
			{courseCreated{CourseName: "Algebra"}, true},
			{userRegistered{UserID: "joe", Name: "Joe"}, true},
			{userJoinedCourse{CourseName: "Algebra", UserID: "joe"}, true},
			{userJoinedCourse{CourseName: "Algebra", UserID: "jake"}, false},
			{userJoinedCourse{CourseName: "History", UserID: "joe"}, false},
			{courseClosed{CourseName: "Algebra"}, true},
			// Matching is on indexed keys: an absent attribute is ignored.
			{courseReviewed{CourseName: "Algebra"}, true},
			{courseReviewed{CourseName: "Algebra", UserID: new("joe")}, true},
			{courseReviewed{CourseName: "Algebra", UserID: new("jake")}, false},
			{courseReviewed{CourseName: "History"}, false},
			{courseCreated{CourseName: "History"}, false},
			{userRegistered{UserID: "jake", Name: "Jake"}, false},
			{deviceRegistered{DeviceID: "d1", Name: "Thermostat"}, false},
		}
		var want []int64
		for i, r := range rows {
			e.append(r.payload)
			if r.in {
				want = append(want, int64(i+1))
			}
		}
		res := e.readPartition(algebraJoe, append(slices.Clone(handled), typeCourseReviewed), driver.ReadOptions{})
		e.expectPositions("partition course_name=Algebra,user_id=joe", res.Messages, want...)
	})

	t.Run("only the given types", func(t *testing.T) {
		e := s.env(t)
		courseLog(e)
		res := e.readPartition(algebraJoe, []string{typeUserJoinedCourse, typeCourseClosed}, driver.ReadOptions{})
		e.expectPositions("messages", res.Messages, 3, 7, 10)
		res = e.readPartition(algebraJoe, nil, driver.ReadOptions{})
		e.expectPositions("no types", res.Messages)
	})

	t.Run("guard conditions cover every type, present or not", func(t *testing.T) {
		e := s.env(t)
		courseLog(e)
		types := append(slices.Clone(handled), typeDeviceRegistered)
		res := e.readPartition(algebraJoe, types, driver.ReadOptions{})
		want := []core.Condition{
			cond(typeCourseCreated, "course_name", "Algebra"),
			cond(typeUserRegistered, "user_id", "joe"),
			cond(typeUserJoinedCourse, "course_name", "Algebra", "user_id", "joe"),
			cond(typeCourseClosed, "course_name", "Algebra"),
		}
		if !sameConds(res.Guard.Conditions, want) {
			t.Fatalf("guard conditions %v, want %v", res.Guard.Conditions, want)
		}
		if res.Guard.LastPosition != 10 {
			t.Fatalf("guard position %d, want 10", res.Guard.LastPosition)
		}
	})

	t.Run("a partition with no messages yet still guards", func(t *testing.T) {
		e := s.env(t)
		e.append(userRegistered{UserID: "jake", Name: "Jake"})
		res := e.readPartition(algebraJoe, handled, driver.ReadOptions{})
		if len(res.Messages) != 0 || len(res.Guard.Conditions) != 4 || res.Guard.LastPosition != 1 {
			t.Fatalf("read of a new partition: %d messages, guard %v; want none and a guard with 4 conditions at 1", len(res.Messages), res.Guard)
		}
		e.append(userJoinedCourse{CourseName: "Algebra", UserID: "jake"}, userJoinedCourse{CourseName: "History", UserID: "joe"})
		if _, err := e.appendGuarded(res.Guard, courseCreated{CourseName: "Algebra"}); err != nil {
			t.Fatalf("messages outside the partition conflicted: %v", err)
		}
		e.conflict(e.mustFail(e.appendGuarded(res.Guard, courseCreated{CourseName: "Algebra"})), 4)
	})

	t.Run("a message of a type not yet seen conflicts", func(t *testing.T) {
		e := s.env(t)
		courseLog(e)
		res := e.readPartition(part("course_name", "History"), handled, driver.ReadOptions{})
		e.expectPositions("History", res.Messages, 6, 8)
		e.append(courseClosed{CourseName: "History"})
		e.conflict(e.mustFail(e.appendGuarded(res.Guard, userJoinedCourse{CourseName: "History", UserID: "jake"})), 11)
	})

	t.Run("After, Upto and Limit", func(t *testing.T) {
		e := s.env(t)
		courseLog(e)
		cases := []struct {
			name  string
			opts  driver.ReadOptions
			want  []int64
			guard int64
		}{
			{"all", driver.ReadOptions{}, []int64{1, 2, 3, 7, 10}, 10},
			{"After", driver.ReadOptions{After: 3}, []int64{7, 10}, 10},
			{"Limit cutting short", driver.ReadOptions{Limit: 2}, []int64{1, 2}, 2},
			{"Limit not reached", driver.ReadOptions{Limit: 9}, []int64{1, 2, 3, 7, 10}, 10},
			{"Upto", driver.ReadOptions{Upto: 8}, []int64{1, 2, 3, 7}, 8},
			{"After and Upto", driver.ReadOptions{After: 1, Upto: 3}, []int64{2, 3}, 3},
			{"After, Upto and Limit", driver.ReadOptions{After: 1, Upto: 9, Limit: 2}, []int64{2, 3}, 3},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := e.with(t)
				res := e.readPartition(algebraJoe, handled, c.opts)
				e.expectPositions("messages", res.Messages, c.want...)
				if res.Guard.LastPosition != c.guard {
					t.Fatalf("guard position %d, want %d", res.Guard.LastPosition, c.guard)
				}
			})
		}
	})

	t.Run("ReadPartitions reads each as ReadPartition, where a transaction has it", func(t *testing.T) {
		e := s.genv(t, devices)
		courseLog(e.env) // 9 registers d1: a claim for the transaction below
		reads := []driver.PartitionRead{
			{Partition: algebraJoe, Types: handled},
			{Partition: algebraJoe, Types: handled, Opts: driver.ReadOptions{After: 3}},
			{Partition: part("course_name", "History"), Types: handled},
			{Partition: algebraJoe, Types: []string{typeUserJoinedCourse}, Opts: driver.ReadOptions{Limit: 1}},
			{Partition: algebraJoe, Types: handled, Opts: driver.ReadOptions{After: 1, Upto: 9, Limit: 2}},
			{Partition: part("course_name", "Geometry"), Types: handled},
		}
		// A read of no types reads nothing (and may be sent otherwise).
		mixed := []driver.PartitionRead{reads[2], {Partition: algebraJoe, Types: nil}}
		var want, wantMixed []driver.ReadResult
		for _, r := range reads {
			want = append(want, e.readPartition(r.Partition, r.Types, r.Opts))
		}
		for _, r := range mixed {
			wantMixed = append(wantMixed, e.readPartition(r.Partition, r.Types, r.Opts))
		}
		var got, gotMixed []driver.ReadResult
		var first error
		had := false
		_, err := e.gs.ClaimUpdate(e.ctx, devices, "w1", 10, func(tx driver.Tx, _ *driver.ClaimedPartition) error {
			pr, ok := tx.(driver.PartitionsReader)
			if !ok {
				return nil
			}
			had = true
			if got, first = pr.ReadPartitions(reads); first != nil {
				return first
			}
			if gotMixed, first = pr.ReadPartitions(mixed); first != nil {
				return first
			}
			// A read ReadPartition refuses (a typo) is refused so among
			// others (and fn returns the refusal).
			_, err := pr.ReadPartitions([]driver.PartitionRead{reads[0], {Partition: part("course_nme", "Algebra"), Types: handled}, reads[1]})
			return err
		})
		if !had {
			t.Skip("this store's transaction is no driver.PartitionsReader: it is read one partition at a time")
		}
		if first != nil {
			t.Fatal(first)
		}
		var invalid *driver.InvalidPartitionError
		if !errors.As(err, &invalid) {
			t.Fatalf("ReadPartitions with a misspelt attribute among its reads: %v, want an *InvalidPartitionError", err)
		}
		for _, c := range []struct {
			reads     []driver.PartitionRead
			got, want []driver.ReadResult
		}{{reads, got, want}, {mixed, gotMixed, wantMixed}} {
			if len(c.got) != len(c.reads) {
				t.Fatalf("ReadPartitions returned %d results for %d reads", len(c.got), len(c.reads))
			}
			for i, r := range c.reads {
				e.sameMessages(fmt.Sprintf("read %d (%+v)", i, r), c.got[i].Messages, c.want[i].Messages)
				if c.got[i].Guard.LastPosition != c.want[i].Guard.LastPosition || !sameConds(c.got[i].Guard.Conditions, c.want[i].Guard.Conditions) {
					t.Fatalf("read %d (%+v): guard %+v, want ReadPartition's %+v", i, r, c.got[i].Guard, c.want[i].Guard)
				}
			}
		}
	})

	t.Run("messages excluded by AND do not conflict", func(t *testing.T) {
		e := s.env(t)
		courseLog(e)
		res := e.readPartition(algebraJoe, handled, driver.ReadOptions{})
		e.append(userJoinedCourse{CourseName: "Algebra", UserID: "jake"}, userJoinedCourse{CourseName: "History", UserID: "joe"}, courseCreated{CourseName: "History"})
		if _, err := e.appendGuarded(res.Guard, userJoinedCourse{CourseName: "Algebra", UserID: "joe"}); err != nil {
			t.Fatalf("guarded append: %v", err)
		}
	})
}

func (s suite) testReadAll(t *testing.T) {
	// pages follows Page.Next from opts and returns the positions of every
	// page, failing if paging does not end.
	pages := func(e *env, opts driver.ReadAllOptions) [][]int64 {
		e.t.Helper()
		var out [][]int64
		for range 1000 {
			page := e.readAll(opts)
			if last := e.stats().MaxPosition; page.LastPosition != last {
				e.t.Fatalf("page last position %d, want the newest position %d", page.LastPosition, last)
			}
			out = append(out, positionsOf(page.Messages))
			next, more := page.Next(opts)
			if !more {
				return out
			}
			opts = next
		}
		e.t.Fatalf("paging %+v does not end: pages so far %v", opts, out)
		return nil
	}
	e := s.env(t)
	courseLog(e)
	joe := []core.Condition{cond(typeUserJoinedCourse, "user_id", "joe"), cond(typeUserRegistered, "user_id", "joe")}
	cases := []struct {
		name string
		opts driver.ReadAllOptions
		want [][]int64
	}{
		{"ascending", driver.ReadAllOptions{Limit: 4}, [][]int64{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}}},
		{"ascending, pages fitting exactly", driver.ReadAllOptions{Limit: 5}, [][]int64{{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}}},
		{"descending", driver.ReadAllOptions{Limit: 4, Order: driver.Descending}, [][]int64{{10, 9, 8, 7}, {6, 5, 4, 3}, {2, 1}}},
		{"descending, pages fitting exactly", driver.ReadAllOptions{Limit: 5, Order: driver.Descending}, [][]int64{{10, 9, 8, 7, 6}, {5, 4, 3, 2, 1}}},
		{"ascending from an inclusive cursor", driver.ReadAllOptions{From: 4, Limit: 3}, [][]int64{{4, 5, 6}, {7, 8, 9}, {10}}},
		{"descending from an inclusive cursor", driver.ReadAllOptions{From: 4, Limit: 3, Order: driver.Descending}, [][]int64{{4, 3, 2}, {1}}},
		{"ascending with conditions", driver.ReadAllOptions{Conditions: joe, Limit: 2}, [][]int64{{2, 3}, {6, 10}}},
		{"descending with conditions", driver.ReadAllOptions{Conditions: joe, Limit: 2, Order: driver.Descending}, [][]int64{{10, 6}, {3, 2}, {}}},
		{"descending with conditions from a cursor", driver.ReadAllOptions{Conditions: joe, From: 9, Limit: 3, Order: driver.Descending}, [][]int64{{6, 3, 2}, {}}},
		{"ascending with conditions from a cursor", driver.ReadAllOptions{Conditions: joe, From: 6, Limit: 3}, [][]int64{{6, 10}}},
		{"default page size", driver.ReadAllOptions{}, [][]int64{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}},
		{"cursor past the newest", driver.ReadAllOptions{From: 11}, [][]int64{{}}},
		// The manual's cursor: the last position of the previous page,
		// excluded.
		{"ascending after an exclusive cursor", driver.ReadAllOptions{After: 4, Limit: 3}, [][]int64{{5, 6, 7}, {8, 9, 10}}},
		{"descending before an exclusive cursor", driver.ReadAllOptions{Before: 5, Limit: 3, Order: driver.Descending}, [][]int64{{4, 3, 2}, {1}}},
		{"ascending with conditions after a cursor", driver.ReadAllOptions{Conditions: joe, After: 3, Limit: 2}, [][]int64{{6, 10}}},
		{"descending with conditions before a cursor", driver.ReadAllOptions{Conditions: joe, Before: 10, Limit: 2, Order: driver.Descending}, [][]int64{{6, 3}, {2}}},
		{"after the newest", driver.ReadAllOptions{After: 10}, [][]int64{{}}},
		{"before the first", driver.ReadAllOptions{Before: 1, Order: driver.Descending}, [][]int64{{}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			got := pages(e, c.opts)
			if !equalPages(got, c.want) {
				t.Fatalf("pages %v, want %v", got, c.want)
			}
		})
	}

	t.Run("an empty log has one empty page", func(t *testing.T) {
		e := s.env(t)
		for _, o := range []driver.Order{driver.Ascending, driver.Descending} {
			if got := pages(e, driver.ReadAllOptions{Order: o}); !equalPages(got, [][]int64{{}}) {
				t.Fatalf("order %v: pages %v, want one empty page", o, got)
			}
		}
	})

	t.Run("the default page size is DefaultPageSize", func(t *testing.T) {
		e := s.env(t)
		batch := make([]any, driver.DefaultPageSize+3)
		for i := range batch {
			batch[i] = courseCreated{CourseName: "Algebra"}
		}
		e.append(batch...)
		if got := len(e.readAll(driver.ReadAllOptions{}).Messages); got != driver.DefaultPageSize {
			t.Fatalf("page of %d messages, want %d", got, driver.DefaultPageSize)
		}
	})

	t.Run("All iterates every page", func(t *testing.T) {
		e := e.with(t)
		all := e.log()
		for _, c := range []struct {
			name string
			opts driver.ReadAllOptions
			want []core.PositionedMessage
		}{
			{"ascending", driver.ReadAllOptions{Limit: 3}, all},
			{"descending", driver.ReadAllOptions{Limit: 3, Order: driver.Descending}, reversed(all)},
			{"with conditions", driver.ReadAllOptions{Limit: 1, Conditions: joe}, []core.PositionedMessage{all[1], all[2], all[5], all[9]}},
			{"descending with conditions", driver.ReadAllOptions{Limit: 3, Conditions: joe, Order: driver.Descending}, []core.PositionedMessage{all[9], all[5], all[2], all[1]}},
			{"from a cursor", driver.ReadAllOptions{Limit: 4, From: 8}, all[7:]},
			{"after a cursor", driver.ReadAllOptions{Limit: 4, After: 7}, all[7:]},
			{"before a cursor", driver.ReadAllOptions{Limit: 2, Before: 4, Order: driver.Descending}, reversed(all[:3])},
		} {
			var got []core.PositionedMessage
			for m, err := range e.store.All(e.ctx, c.opts) {
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				got = append(got, m)
				if len(got) > len(all) {
					t.Fatalf("%s: All does not end", c.name)
				}
			}
			e.sameMessages("All "+c.name, got, c.want)
		}
	})

	t.Run("breaking out of All stops it", func(t *testing.T) {
		e := e.with(t)
		var got []int64
		for m, err := range e.store.All(e.ctx, driver.ReadAllOptions{Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Position)
			if len(got) == 3 {
				break
			}
		}
		if !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("got %v, want [1 2 3]", got)
		}
	})
}

func equalPages(a, b [][]int64) bool {
	return slices.EqualFunc(a, b, func(x, y []int64) bool { return slices.Equal(x, y) })
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
