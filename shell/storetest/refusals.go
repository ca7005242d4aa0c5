package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Input a store refuses, with an error that says what is wrong, rather
// than store it wrongly or answer as if it made sense. Nothing changes.

// note is "note.taken": its body is left out of the index by its tag. It
// is registered only by the tests that need it (see envWith).
type note struct {
	Topic string `json:"topic"`
	Body  string `json:"body" sourced:"noindex"`
	Meta  struct {
		By string `json:"by"`
	} `json:"meta"`
}

// typeNote is the type string of Note.
const typeNote = "note.taken"

// envWith opens a store on the fixture registry plus extra types.
func (s suite) envWith(t *testing.T, register func(reg *codec.Registry) error) *env {
	t.Helper()
	reg, err := NewRegistry()
	if err == nil {
		err = register(reg)
	}
	if err != nil {
		t.Fatalf("fixture registry: %v", err)
	}
	c := newClock()
	rec := newRecorder()
	st := s.open(t, reg, c.Now, rec)
	if st == nil {
		t.Fatal("factory returned a nil store")
	}
	return &env{t: t, ctx: t.Context(), store: st, reg: reg, clock: c, notes: rec}
}

func withNote(reg *codec.Registry) error { return codec.Register[note](reg, typeNote) }

func (s suite) testRefusals(t *testing.T) {
	t.Run("indexed text that is not valid UTF-8", s.testInvalidUTF8)
	t.Run("conditions that can never match", s.testImpossibleConditions)
	t.Run("partitions no type read declares", s.testImpossiblePartitions)
	t.Run("hostile input", s.testHostileInput)
	t.Run("indexed value limits", s.testIndexedValueLimits)
	t.Run("read limits", s.testReadLimits)
	t.Run("ReadAll with an unknown order", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"})
		for _, o := range []driver.Order{-1, 2, 99} {
			if page, err := e.store.ReadAll(e.ctx, driver.ReadAllOptions{Order: o}); err == nil {
				t.Fatalf("ReadAll with order %d returned %s, want an error", o, describe(page.Messages))
			}
		}
	})
	t.Run("ReadAll with cursors it cannot honour", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algebra"}, courseCreated{CourseName: "History"})
		for _, opts := range []driver.ReadAllOptions{
			{After: 1, Order: driver.Descending},
			{Before: 2},
			{From: 1, After: 1},
			{From: 2, Before: 2, Order: driver.Descending},
			{After: -1},
			{Before: -1, Order: driver.Descending},
		} {
			if page, err := e.store.ReadAll(e.ctx, opts); !errors.Is(err, driver.ErrInvalidCursor) {
				t.Fatalf("ReadAll %+v: %v, %s; want an error matching driver.ErrInvalidCursor", opts, err, describe(page.Messages))
			}
		}
	})
}

func (s suite) testInvalidUTF8(t *testing.T) {
	bad := "Alg\xe8bre" // Latin-1, not UTF-8
	cases := []struct {
		name  string
		msg   core.Message
		field string
	}{
		{"a string attribute", core.NewMessage(courseCreated{CourseName: bad}), "course_name"},
		{"a slice element", core.NewMessage(transfer{Accounts: []string{"acc1", bad}, Amount: 1}), "accounts"},
		{"an optional attribute", core.NewMessage(courseReviewed{CourseName: "Algebra", UserID: &bad}), "user_id"},
		// Promotion re-indexes the stored payload: a scheduled message must
		// be refused too, or it would be indexed under U+FFFD once due.
		{"a scheduled message", core.NewMessage(courseCreated{CourseName: bad}).At(epoch.Add(time.Hour)), "course_name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := s.env(t)
			e.append(courseCreated{CourseName: "History"})
			e.expectNotes([]string{typeCourseCreated})
			before := e.snapshot()
			_, err := e.store.Append(e.ctx, []core.Message{core.NewMessage(userRegistered{UserID: "joe", Name: "Joe"}), c.msg}, driver.AppendOptions{})
			var ve *codec.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, codec.ErrInvalid) {
				t.Fatalf("append: %v, want a *codec.ValidationError", err)
			}
			if len(ve.Fields) != 1 || ve.Fields[0].Field != c.field || !strings.Contains(ve.Fields[0].Problem, "UTF-8") {
				t.Fatalf("validation error %v: want one problem with %s saying UTF-8", ve, c.field)
			}
			e.unchanged(before)
		})
	}
	t.Run("valid UTF-8 is indexed as written", func(t *testing.T) {
		e := s.env(t)
		e.append(courseCreated{CourseName: "Algèbre"}, courseCreated{CourseName: "代数"})
		res := e.read([]core.Condition{cond(typeCourseCreated, "course_name", "Algèbre"), cond(typeCourseCreated, "course_name", "代数")}, driver.ReadOptions{})
		e.expectPositions("read", res.Messages, 1, 2)
	})
}

func (s suite) testImpossibleConditions(t *testing.T) {
	e := s.envWith(t, withNote)
	e.append(courseCreated{CourseName: "Algebra"}, note{Topic: "t1", Body: "b"})
	e.expectNotes([]string{typeCourseCreated, typeNote})
	cases := []struct {
		name string
		cond core.Condition
		attr string // the attribute the error names
		says string // what the error says
	}{
		{"an empty type", cond("", "course_name", "Algebra"), "", "empty"},
		{"an unregistered type", cond("course.craeted", "course_name", "Algebra"), "", "course.craeted"},
		{"an unregistered type alone", cond("course.craeted"), "", "course.craeted"},
		{"an attribute the type does not declare", cond(typeCourseCreated, "user_id", "joe"), "user_id", "user_id"},
		{"a misspelt attribute", cond(typeCourseCreated, "course", "Algebra"), "course", "course"},
		{"an attribute tagged noindex", cond(typeNote, "body", "b"), "body", "noindex"},
		{"an attribute that is not a scalar", cond(typeNote, "meta", "x"), "meta", "not indexed"},
		{"the reserved id key", cond(typeCourseCreated, core.IDKey, "x"), core.IDKey, "reserved"},
		{"a value that is not UTF-8", cond(typeCourseCreated, "course_name", "Alg\xe8bre"), "course_name", "UTF-8"},
	}
	check := func(t *testing.T, what string, c core.Condition, attr, says string, err error) {
		t.Helper()
		var ice *driver.InvalidConditionError
		if !errors.Is(err, driver.ErrInvalidCondition) || !errors.As(err, &ice) {
			t.Fatalf("%s: %v, want a *driver.InvalidConditionError", what, err)
		}
		if ice.Condition.Type != c.Type || ice.Attribute != attr || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: %v (type %q, attribute %q): want type %q, attribute %q, saying %q", what, err, ice.Condition.Type, ice.Attribute, c.Type, attr, says)
		}
	}
	valid := cond(typeCourseCreated, "course_name", "Algebra")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			conds := []core.Condition{valid, c.cond}
			_, err := e.store.Read(e.ctx, conds, driver.ReadOptions{})
			check(t, "read", c.cond, c.attr, c.says, err)
			_, err = e.store.ReadAll(e.ctx, driver.ReadAllOptions{Conditions: conds})
			check(t, "read all", c.cond, c.attr, c.says, err)
			_, err = e.store.ReadAll(e.ctx, driver.ReadAllOptions{Conditions: conds, Order: driver.Descending})
			check(t, "read all descending", c.cond, c.attr, c.says, err)
			for _, err := range e.store.All(e.ctx, driver.ReadAllOptions{Conditions: conds}) {
				check(t, "all", c.cond, c.attr, c.says, err)
				break
			}
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				_, err := tx.Read(conds, driver.ReadOptions{})
				return err
			})
			check(t, "read in a transaction", c.cond, c.attr, c.says, err)

			// A guard that could never conflict would guard nothing.
			before := e.snapshot()
			g := core.Guard{Conditions: conds, LastPosition: 0}
			_, err = e.store.Append(e.ctx, msgs(courseClosed{CourseName: "Algebra"}, core.NewMessage(courseClosed{CourseName: "Algebra"}).At(epoch.Add(time.Hour))), driver.AppendOptions{Guard: &g})
			check(t, "guarded append", c.cond, c.attr, c.says, err)
			e.unchanged(before)
		})
	}
	t.Run("conditions that may match later are valid", func(t *testing.T) {
		e := e.with(t)
		for _, c := range []core.Condition{
			cond(typeCourseClosed),                          // no message of the type yet
			cond(typeCourseCreated, "course_name", "Latin"), // no message with the value yet
			cond(typeNote, "topic", "t1"),
		} {
			if _, err := e.store.Read(e.ctx, []core.Condition{c}, driver.ReadOptions{}); err != nil {
				t.Fatalf("read %v: %v", c, err)
			}
		}
		res := e.read([]core.Condition{cond(typeNote, "topic", "t1")}, driver.ReadOptions{})
		e.expectPositions("note by topic", res.Messages, 2)
	})
}
