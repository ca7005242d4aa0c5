package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/examples/courses/domain"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
)

// The example runs end to end on PostgreSQL (the test server of
// SOURCED_TEST_POSTGRES_URL, a fresh prefix) and its read model is right;
// -fresh starts it over.
func TestExample(t *testing.T) {
	ctx := context.Background()
	url, prefix := pgtest.URL(t), pgtest.Prefix()
	reg, _ := domain.Registry()
	t.Cleanup(func() {
		s, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix})
		if err != nil {
			return
		}
		s.Pool().Exec(ctx, "DROP TABLE IF EXISTS "+s.Prefix()+"_course_rosters")
		s.Uninstall(ctx)
		s.Close()
	})
	for _, fresh := range []bool{false, true} {
		var out bytes.Buffer
		if err := run(ctx, url, prefix, fresh, &out); err != nil {
			t.Fatalf("run (fresh %v): %v\n%s", fresh, err, out.String())
		}
		store, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		got, err := rosters{store: store, table: store.Prefix() + "_course_rosters"}.Rosters(ctx)
		store.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("rosters %+v", got)
		}
		if r := got[0]; r.CourseID != "c1" || r.Name != "Algebra" || !slices.Equal(r.Students, []string{"ada", "grace"}) {
			t.Fatalf("roster c1 %+v", r)
		}
		if r := got[1]; r.CourseID != "c2" || r.Name != "History" || !slices.Equal(r.Students, []string{"edsger", "alan"}) {
			t.Fatalf("roster c2 %+v", r)
		}
		for _, want := range []string{
			"store: PostgreSQL, tables " + prefix + "_*",
			`rejected: course "Algebra" already exists`,
			"courses.reminder_sent      2",
			"students.notified          4",
			"is already enrolled in c1",
			"student_id: is required",
			"rejected: course c1 is full",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output (fresh %v) lacks %q:\n%s", fresh, want, out.String())
			}
		}
	}
}
