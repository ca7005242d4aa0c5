package core_test

import (
	"errors"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

func pm(pos int64, typ string, payload any) core.PositionedMessage {
	return core.PositionedMessage{Message: core.Message{Type: typ, Payload: payload}, Position: pos}
}

func TestGuardConflicting(t *testing.T) {
	keys := core.KeysFrom(registry())
	later := []core.PositionedMessage{
		pm(4, "courses.created", CourseCreated{CourseID: "c1", CourseName: "Algebra"}),
		pm(5, "courses.created", CourseCreated{CourseID: "c2", CourseName: "History"}),
		pm(6, "courses.renamed", CourseRenamed{CourseID: "c1", Name: "Algebra II"}),
		pm(7, "courses.created", CourseCreated{CourseID: "c3", CourseName: "Algebra"}),
	}
	cases := []struct {
		name  string
		guard core.Guard
		want  []int64
	}{
		{"a type and attribute it read", core.Guard{Conditions: []core.Condition{{Type: "courses.created", Attrs: map[string]string{"course_name": "Algebra"}}}, LastPosition: 3}, []int64{4, 7}},
		{"only after its position", core.Guard{Conditions: []core.Condition{{Type: "courses.created", Attrs: map[string]string{"course_name": "Algebra"}}}, LastPosition: 4}, []int64{7}},
		{"other attribute values", core.Guard{Conditions: []core.Condition{{Type: "courses.created", Attrs: map[string]string{"course_name": "Physics"}}}, LastPosition: 0}, nil},
		{"other types", core.Guard{Conditions: []core.Condition{{Type: "students.notify", Attrs: map[string]string{"student_id": "s1"}}}, LastPosition: 0}, nil},
		{"type only", core.Guard{Conditions: []core.Condition{{Type: "courses.renamed"}}, LastPosition: 0}, []int64{6}},
		{"no conditions", core.Guard{LastPosition: 0}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []int64
			for _, m := range tc.guard.Conflicting(later, keys) {
				got = append(got, m.Position)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("conflicts at %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("conflicts at %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestGuardAdvanceNeverLowers(t *testing.T) {
	g := core.Guard{LastPosition: 10}
	if g.Advance(12).LastPosition != 12 || g.Advance(3).LastPosition != 10 {
		t.Fatal("Advance must raise only")
	}
}

func TestConflictErrorIsConcurrentAppend(t *testing.T) {
	var err error = &core.ConflictError{Guard: core.Guard{LastPosition: 3}, Conflicts: []core.PositionedMessage{pm(4, "courses.created", nil)}}
	if !errors.Is(err, core.ErrConcurrentAppend) {
		t.Fatal("ConflictError must match ErrConcurrentAppend")
	}
	var ce *core.ConflictError
	if !errors.As(err, &ce) || ce.Conflicts[0].Position != 4 {
		t.Fatal("ConflictError must carry its conflicts")
	}
	if msg := err.Error(); msg != "sourced: concurrent append: 1 conflicting message(s) after position 3; courses.created at 4" {
		t.Fatalf("message: %q", msg)
	}
	_ = codec.KeyPair{}
}
