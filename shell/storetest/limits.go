package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testIndexedValueLimits holds every store to one set of limits on the
// values a message is indexed under (codec.MaxIndexedValueBytes, no NUL,
// valid UTF-8): a payload over them is refused by validation, as
// codec.ErrInvalid naming the attribute, before anything is written (and
// inside Update, without losing what the transaction appended before); a
// condition or a partition naming such a value is refused as
// codec.ErrInvalid too; a value at the limit is stored and found, and a
// long text or a NUL in an attribute that is not indexed is stored as it
// is. (PostgreSQL refuses an index entry over about 2.7 KB and a NUL in
// text; SQLite takes both: without the shared limits the stores would
// disagree.)
func (s suite) testIndexedValueLimits(t *testing.T) {
	long := varied(codec.MaxIndexedValueBytes + 1)
	atLimit := varied(codec.MaxIndexedValueBytes)
	cases := []struct {
		name  string
		msg   core.Message
		field string
		says  string
	}{
		{"a string over the limit", core.NewMessage(courseCreated{CourseName: long}), "course_name", "MaxIndexedValueBytes"},
		{"a string holding a NUL", core.NewMessage(courseCreated{CourseName: "Alg\x00ebra"}), "course_name", "NUL"},
		{"a list element over the limit", core.NewMessage(transfer{Accounts: []string{"a1", long}, Amount: 1}), "accounts", "MaxIndexedValueBytes"},
		{"a list element holding a NUL", core.NewMessage(transfer{Accounts: []string{"a1", "a\x00"}, Amount: 1}), "accounts", "NUL"},
		{"an optional attribute over the limit", core.NewMessage(courseReviewed{CourseName: "Algebra", UserID: &long}), "user_id", "MaxIndexedValueBytes"},
		{"a scheduled string over the limit", core.NewMessage(courseCreated{CourseName: long}).At(epoch.Add(time.Hour)), "course_name", "MaxIndexedValueBytes"},
		{"a scheduled string holding a NUL", core.NewMessage(courseCreated{CourseName: "\x00"}).At(epoch.Add(time.Hour)), "course_name", "NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := s.env(t)
			e.append(courseCreated{CourseName: "History"})
			e.expectNotes([]string{typeCourseCreated})
			before := e.snapshot()
			check := func(how string, err error) {
				t.Helper()
				var ve *codec.ValidationError
				if !errors.Is(err, codec.ErrInvalid) || !errors.As(err, &ve) {
					t.Fatalf("%s: %v, want a *codec.ValidationError", how, err)
				}
				if len(ve.Fields) != 1 || ve.Fields[0].Field != c.field || !strings.Contains(ve.Fields[0].Problem, c.says) {
					t.Fatalf("%s: %v: want one problem, with %s, saying %q", how, err, c.field, c.says)
				}
				if len(err.Error()) > 1000 {
					t.Fatalf("%s: the refusal is %d bytes long: it repeats its input", how, len(err.Error()))
				}
			}
			_, err := e.store.Append(e.ctx, []core.Message{core.NewMessage(userRegistered{UserID: "joe", Name: "Joe"}), c.msg}, driver.AppendOptions{})
			check("append", err)
			e.unchanged(before)
			// Inside Update the refusal fails that append alone: what the
			// transaction appended before it commits.
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				if _, err := tx.Append(msgs(userRegistered{UserID: "ann", Name: "Ann"}), driver.AppendOptions{}); err != nil {
					return err
				}
				_, err := tx.Append([]core.Message{c.msg}, driver.AppendOptions{})
				check("append in a transaction", err)
				_, err = tx.Append(msgs(userRegistered{UserID: "bob", Name: "Bob"}), driver.AppendOptions{})
				return err
			})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			got := e.log()
			if len(got) != 3 || got[1].Type != typeUserRegistered || got[2].Type != typeUserRegistered {
				t.Fatalf("log after the update: %s, want the first message and both registrations", describe(got))
			}
		})
	}

	t.Run("values at the limit are stored and found", func(t *testing.T) {
		e := s.envWith(t, withNote)
		e.append(courseCreated{CourseName: atLimit}, transfer{Accounts: []string{atLimit, "a2"}, Amount: 1},
			// An attribute that is not indexed takes long text and NUL.
			note{Topic: "t1", Body: varied(10*codec.MaxIndexedValueBytes) + "\x00end"})
		res := e.read([]core.Condition{cond(typeCourseCreated, "course_name", atLimit), cond(typeTransfer, "accounts", atLimit)}, driver.ReadOptions{})
		e.expectPositions("read by the longest values", res.Messages, 1, 2)
		res = e.readPartition(part("course_name", atLimit), []string{typeCourseCreated}, driver.ReadOptions{})
		e.expectPositions("read the partition of the longest value", res.Messages, 1)
		got := e.log()
		if n, ok := got[2].Payload.(note); !ok || !strings.HasSuffix(n.Body, "\x00end") || len(n.Body) != 10*codec.MaxIndexedValueBytes+4 {
			t.Fatalf("the note read back is %T, not the one appended", got[2].Payload)
		}
	})

	t.Run("reads naming a value no message is indexed under", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"})
		e.expectNotes([]string{typeCourseCreated})
		for _, bad := range []string{long, "Alg\x00ebra"} {
			conds := []core.Condition{cond(typeCourseCreated, "course_name", "Algebra"), cond(typeCourseCreated, "course_name", bad)}
			checkCond := func(how string, err error) {
				t.Helper()
				var ice *driver.InvalidConditionError
				if !errors.Is(err, codec.ErrInvalid) || !errors.Is(err, driver.ErrInvalidCondition) || !errors.As(err, &ice) || ice.Attribute != "course_name" {
					t.Fatalf("%s (%d bytes): %v, want a *driver.InvalidConditionError on course_name wrapping codec.ErrInvalid", how, len(bad), err)
				}
				if len(err.Error()) > 1000 {
					t.Fatalf("%s: the refusal is %d bytes long: it repeats its input", how, len(err.Error()))
				}
			}
			_, err := e.store.Read(e.ctx, conds, driver.ReadOptions{})
			checkCond("read", err)
			_, err = e.store.ReadAll(e.ctx, driver.ReadAllOptions{Conditions: conds})
			checkCond("read all", err)
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				_, err := tx.Read(conds, driver.ReadOptions{})
				return err
			})
			checkCond("read in a transaction", err)
			before := e.snapshot()
			_, err = e.store.Append(e.ctx, msgs(courseClosed{CourseName: "Algebra"}), driver.AppendOptions{Guard: &core.Guard{Conditions: conds}})
			checkCond("guarded append", err)
			e.unchanged(before)

			checkPart := func(how string, err error) {
				t.Helper()
				var ipe *driver.InvalidPartitionError
				if !errors.Is(err, codec.ErrInvalid) || !errors.Is(err, driver.ErrInvalidPartition) || !errors.As(err, &ipe) || ipe.Attribute != "course_name" {
					t.Fatalf("%s (%d bytes): %v, want a *driver.InvalidPartitionError on course_name wrapping codec.ErrInvalid", how, len(bad), err)
				}
			}
			_, err = e.store.ReadPartition(e.ctx, part("course_name", bad), []string{typeCourseCreated}, driver.ReadOptions{})
			checkPart("read partition", err)
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				_, err := tx.ReadPartition(part("course_name", bad), []string{typeCourseCreated}, driver.ReadOptions{})
				return err
			})
			checkPart("read partition in a transaction", err)
		}
	})
}

// varied returns n bytes of text that does not compress (PostgreSQL
// compresses a long index entry before it measures it: a repeated letter
// would pass where real text fails).
func varied(n int) string {
	var b strings.Builder
	x := uint32(2463534242)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		fmt.Fprintf(&b, "%08x", x)
	}
	return b.String()[:n]
}

// testReadLimits holds every store to the same read limits: a negative
// Limit is refused (it used to read everything), and so is a ReadAll page
// over driver.MaxPageSize, with an error matching driver.ErrInvalidLimit.
func (s suite) testReadLimits(t *testing.T) {
	e := s.env(t)
	e.append(courseCreated{CourseName: "Algebra"}, courseCreated{CourseName: "History"})
	e.notes.take()
	refused := func(how string, err error) {
		t.Helper()
		if !errors.Is(err, driver.ErrInvalidLimit) {
			t.Fatalf("%s: %v, want driver.ErrInvalidLimit", how, err)
		}
	}
	conds := []core.Condition{cond(typeCourseCreated)}
	_, err := e.store.Read(e.ctx, conds, driver.ReadOptions{Limit: -1})
	refused("read with limit -1", err)
	_, err = e.store.ReadPartition(e.ctx, part("course_name", "Algebra"), []string{typeCourseCreated}, driver.ReadOptions{Limit: -1})
	refused("read partition with limit -1", err)
	refused("in a transaction", e.store.Update(e.ctx, func(tx driver.Tx) error {
		_, err := tx.Read(conds, driver.ReadOptions{Limit: -1})
		return err
	}))
	refused("read partition in a transaction", e.store.Update(e.ctx, func(tx driver.Tx) error {
		_, err := tx.ReadPartition(part("course_name", "Algebra"), []string{typeCourseCreated}, driver.ReadOptions{Limit: -1})
		return err
	}))
	for _, limit := range []int{-1, driver.MaxPageSize + 1} {
		for _, order := range []driver.Order{driver.Ascending, driver.Descending} {
			_, err = e.store.ReadAll(e.ctx, driver.ReadAllOptions{Limit: limit, Order: order})
			refused(fmt.Sprintf("read all with limit %d", limit), err)
		}
		for _, err := range e.store.All(e.ctx, driver.ReadAllOptions{Limit: limit}) {
			refused(fmt.Sprintf("all with limit %d", limit), err)
			break
		}
	}
	if page := e.readAll(driver.ReadAllOptions{Limit: driver.MaxPageSize}); len(page.Messages) != 2 {
		t.Fatalf("read all with the largest page: %s", describe(page.Messages))
	}
	if res := e.read(conds, driver.ReadOptions{}); len(res.Messages) != 2 {
		t.Fatalf("read with no limit: %s", describe(res.Messages))
	}
}
