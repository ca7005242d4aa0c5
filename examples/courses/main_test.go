package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/examples/courses/domain"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The example runs end to end and its read model is right.
func TestExample(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "courses.db")
	var out bytes.Buffer
	if err := run(ctx, path, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	reg, _ := domain.Registry()
	store, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got, err := rosters{store}.Rosters(ctx)
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
		`rejected: course "Algebra" already exists`,
		"courses.reminder_sent      2",
		"students.notified          4",
		"is already enrolled in c1",
		"student_id: is required",
		"rejected: course c1 is full",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
