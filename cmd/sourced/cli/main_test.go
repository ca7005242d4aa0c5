package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The course domain of the tests, declared once in testdomain.
type (
	CourseCreated = testdomain.CourseCreated
	Reminder      = testdomain.Reminder
)

// emptyStore installs a store of the fixture types in a new file.
func emptyStore(t testing.TB) (string, *sqlitestore.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitestore.Install(context.Background(), path, sqlitestore.Options{Registry: registryForTest(t)})
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

// registryForTest registers the fixture types.
func registryForTest(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")
	codec.MustRegister[Reminder](reg, "courses.reminder")
	return reg
}

// fixture installs a store with a few messages, a consumer group that
// processed some of them, and a scheduled message.
func fixture(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	path, s := emptyStore(t)
	defer s.Close()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "courses.catalog", Label: "Catalog", PartitionBy: []string{"course_id"}, Handled: []string{"courses.created"}}); err != nil {
		t.Fatal(err)
	}
	msgs := core.Messages(
		CourseCreated{CourseID: "c1", CourseName: "Algebra"},
		CourseCreated{CourseID: "c2", CourseName: "History"},
		CourseCreated{CourseID: "c3", CourseName: "Algebra II"},
	)
	msgs = append(msgs, core.NewMessage(Reminder{CourseID: "c1"}).At(time.Now().Add(time.Hour)))
	if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimNext(ctx, "courses.catalog", "w1", 10)
	if err != nil || c == nil {
		t.Fatalf("claim %v %v", c, err)
	}
	if err := s.Ack(ctx, c, c.Last()); err != nil {
		t.Fatal(err)
	}
	return path
}

func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, &out, &errOut, SQLite())
	return out.String(), errOut.String(), code
}

func TestCommands(t *testing.T) {
	db := fixture(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-db", db, "stats"}, []string{"max position  3", "scheduled     1", "courses.catalog", "active", "3"}},
		{[]string{"-db", db, "log", "-limit", "2"}, []string{"POSITION", `{"course_id":"c1","course_name":"Algebra"}`, "more: -from 3"}},
		{[]string{"-db", db, "log", "-type", "courses.created", "-where", "course_name=History"}, []string{"2 ", "History"}},
		{[]string{"-db", db, "log", "-desc", "-limit", "1"}, []string{"3 ", "Algebra II"}},
		{[]string{"-db", db, "offsets", "-group", "courses.catalog"}, []string{"3 offset(s)", "course_id:c1"}},
		{[]string{"-db", db, "schedule"}, []string{"courses.reminder", `{"course_id":"c1"}`}},
		{[]string{"-db", db, "groups", "stop", "courses.catalog", "deploy"}, []string{"courses.catalog: active -> stopped", "reason: deploy"}},
		{[]string{"-db", db, "groups", "reset", "courses.catalog"}, []string{"courses.catalog: stopped -> stopped", "the offsets of its 3 partition(s) (processed up to position 1) are cleared", "sourced groups start courses.catalog"}},
		{[]string{"-db", db, "groups", "start", "courses.catalog"}, []string{"courses.catalog: stopped -> active", "started"}},
		{[]string{"migrate", "-print"}, []string{"CREATE TABLE", "sourced_messages"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args[min(2, len(tc.args)-1):], " "), func(t *testing.T) {
			out, errOut, code := cli(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	db := fixture(t)
	out, errOut, code := cli(t, "-db", db, "-json", "stats")
	if code != 0 {
		t.Fatal(errOut)
	}
	var st struct {
		MaxPosition int64 `json:"max_position"`
		Groups      []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.MaxPosition != 3 || len(st.Groups) != 1 || st.Groups[0].ID != "courses.catalog" {
		t.Fatalf("stats JSON %s (%v)", out, err)
	}
	out, _, _ = cli(t, "-db", db, "-json", "log", "-limit", "1")
	var page struct {
		Next     *int64 `json:"next"`
		Messages []struct {
			Position int64             `json:"position"`
			Type     string            `json:"type"`
			Payload  map[string]string `json:"payload"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Messages) != 1 || page.Messages[0].Payload["course_name"] != "Algebra" || page.Next == nil || *page.Next != 2 {
		t.Fatalf("log JSON %s (%v)", out, err)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	_, errOut, code := cli(t, "-db", missing, "stats")
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: %d %s", code, errOut)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("the tool created the missing file")
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	_, errOut, code = cli(t, "-db", empty, "stats")
	if code != 1 || !strings.Contains(errOut, "not installed") {
		t.Fatalf("uninstalled: %d %s", code, errOut)
	}
	_, errOut, code = cli(t, "-db", empty, "frobnicate")
	if code != 2 || !strings.Contains(errOut, "unknown command") || !strings.Contains(errOut, "Usage:") {
		t.Fatalf("unknown command: %d %s", code, errOut)
	}
	db := fixture(t)
	_, errOut, code = cli(t, "-db", db, "groups", "reset", "courses.catalog")
	if code != 1 || !strings.Contains(errOut, "It accepts: stop") {
		t.Fatalf("reset of an active group: %d %s", code, errOut)
	}
	_, errOut, code = cli(t, "-db", db, "groups", "stop", "nope")
	if code != 1 || !strings.Contains(errOut, "courses.catalog") {
		t.Fatalf("unknown group: %d %s", code, errOut)
	}
}

// stats shows a failed group's recorded failure: where (partition,
// message), what (the error and its own type) and whether there is a
// stack (only a panic has one).
func TestStatsShowsTheFailure(t *testing.T) {
	ctx := context.Background()
	db := fixture(t)
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{RawPayloads: true})
	if err != nil {
		t.Fatal(err)
	}
	f := shell.Failure{
		OffsetID: 1, Partition: "course_id:c2", MessageType: "courses.created", MessageID: "0190f0e4-4c55-7b3e-9a1c-2d2f0d1e5a01", Position: 2,
		ErrorType: "*catalog.ValidationError", Error: "course name too long",
	}
	if err := s.FailGroup(ctx, "courses.catalog", f); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, errOut, code := cli(t, "-db", db, "stats")
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{
		"courses.catalog failed at courses.created 0190f0e4-4c55-7b3e-9a1c-2d2f0d1e5a01 (position 2) in partition course_id:c2",
		"error (*catalog.ValidationError): course name too long",
		"stack: none (a returned error",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = cli(t, "-db", db, "-json", "stats")
	var st struct {
		Groups []struct {
			Failure *shell.Failure `json:"failure"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Groups) != 1 || st.Groups[0].Failure == nil || *st.Groups[0].Failure != f {
		t.Fatalf("stats JSON %s (%v), want the failure %+v", out, err, f)
	}
}
