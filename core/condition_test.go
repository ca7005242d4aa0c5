package core_test

import (
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

func kp(pairs ...string) []codec.KeyPair {
	var out []codec.KeyPair
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, codec.KeyPair{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

func TestConditionMatch(t *testing.T) {
	c := core.Condition{Type: "courses.created", Attrs: map[string]string{"course_id": "c1", "course_name": "Algebra"}}
	cases := []struct {
		name string
		typ  string
		keys []codec.KeyPair
		want bool
	}{
		{"all attributes", "courses.created", kp("course_id", "c1", "course_name", "Algebra"), true},
		{"extra attributes", "courses.created", kp("course_id", "c1", "course_name", "Algebra", "x", "y"), true},
		{"one attribute differs", "courses.created", kp("course_id", "c2", "course_name", "Algebra"), false},
		{"one attribute missing", "courses.created", kp("course_id", "c1"), false},
		{"other type", "courses.renamed", kp("course_id", "c1", "course_name", "Algebra"), false},
		{"multi-valued attribute", "courses.created", kp("course_id", "c0", "course_id", "c1", "course_name", "Algebra"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Match(tc.typ, tc.keys); got != tc.want {
				t.Fatalf("Match = %v, want %v", got, tc.want)
			}
		})
	}
	typeOnly := core.Condition{Type: "courses.created"}
	if !typeOnly.Match("courses.created", nil) || typeOnly.Match("courses.renamed", nil) {
		t.Fatal("a type-only condition matches every message of its type and no other")
	}
	if got := c.String(); got != "courses.created(course_id=c1,course_name=Algebra)" {
		t.Fatalf("String = %q", got)
	}
}

// The conditional-AND table of shell/storetest's package doc, for the partition
// (course_name=Algebra, user_id=joe).
func TestInPartition(t *testing.T) {
	p := map[string]string{"course_name": "Algebra", "user_id": "joe"}
	cases := []struct {
		name string
		keys []codec.KeyPair
		want bool
	}{
		{"CourseCreated(Algebra)", kp("course_name", "Algebra"), true},
		{"UserRegistered(joe)", kp("name", "Joe", "user_id", "joe"), true},
		{"UserJoinedCourse(Algebra, joe)", kp("course_name", "Algebra", "user_id", "joe"), true},
		{"UserJoinedCourse(Algebra, jake)", kp("course_name", "Algebra", "user_id", "jake"), false},
		{"UserJoinedCourse(History, joe)", kp("course_name", "History", "user_id", "joe"), false},
		{"CourseClosed(Algebra)", kp("course_name", "Algebra"), true},
		{"no partition attribute", kp("name", "Joe"), false},
		{"slice attribute holding the value", kp("course_name", "Algebra", "user_id", "ann", "user_id", "joe"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := core.InPartition(p, tc.keys); got != tc.want {
				t.Fatalf("InPartition = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConditionsForUsesDeclaredAttributesOnly(t *testing.T) {
	reg := registry()
	created, _ := reg.ByName("courses.created")
	notify, _ := reg.ByName("students.notify")
	enrolled, _ := reg.ByName("courses.student_enrolled")
	got := core.ConditionsFor(map[string]string{"course_id": "c1", "student_id": "s1"}, created, notify, enrolled)
	want := []string{
		"courses.created(course_id=c1)",
		"students.notify(student_id=s1)",
		"courses.student_enrolled(course_id=c1,student_id=s1)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("condition %d = %s, want %s", i, got[i], want[i])
		}
	}
	if got := core.ConditionsFor(map[string]string{"user_id": "u1"}, created); len(got) != 0 {
		t.Fatalf("a type declaring none of the attributes contributes nothing, got %v", got)
	}
}

type Reviewed struct {
	CourseName string  `json:"course_name"`
	UserID     *string `json:"user_id"`
	Note       string  `json:"note,omitempty"`
}

type Tagged struct {
	Users []string `json:"user_id"`
	Note  string   `json:"note,omitempty"`
}

// A guard built by ConditionsFor must match every message of the partition
// under conditional AND, including those lacking an optional attribute.
func TestConditionsForNeverMissesAPartitionMessage(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[Reviewed](reg, "reviewed")
	codec.MustRegister[Tagged](reg, "tagged")
	rt, _ := reg.ByName("reviewed")
	tt, _ := reg.ByName("tagged")
	p := map[string]string{"course_name": "Algebra", "user_id": "joe", "note": "x"}
	conds := core.ConditionsFor(p, rt, tt)
	want := []string{"reviewed(course_name=Algebra)", "tagged(note=x)", "tagged(user_id=joe)"}
	if len(conds) != len(want) {
		t.Fatalf("conditions %v", conds)
	}
	for i := range want {
		if conds[i].String() != want[i] {
			t.Errorf("condition %d = %s, want %s", i, conds[i], want[i])
		}
	}
	joe := "joe"
	for _, m := range []any{Reviewed{CourseName: "Algebra"}, Reviewed{CourseName: "Algebra", UserID: &joe}, Tagged{Users: []string{"ann", "joe"}}, Tagged{Note: "x"}} {
		keys, _ := reg.Keys(m, nil)
		typ, _ := reg.TypeOf(m)
		if core.InPartition(p, keys) && !core.MatchAny(conds, typ.Name, keys) {
			t.Errorf("%+v is in the partition but the guard misses it", m)
		}
	}
}
