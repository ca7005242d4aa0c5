package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// want runs the tool and checks the exit code and that stdout (code 0)
// or stderr (else) holds every string of wants.
func want(t *testing.T, code int, args []string, wants ...string) (string, string) {
	t.Helper()
	out, errOut, got := cli(t, args...)
	if got != code {
		t.Fatalf("sourced %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
	}
	where := out
	if code != 0 {
		where = errOut
	}
	for _, w := range wants {
		if !strings.Contains(where, w) {
			t.Errorf("sourced %s: output lacks %q:\n%s", strings.Join(args, " "), w, where)
		}
	}
	return out, errOut
}

// Global flags go before or after the command, and between its
// arguments.
func TestFlagsAfterTheCommand(t *testing.T) {
	db := fixture(t)
	before, _ := want(t, 0, []string{"-db", db, "-json", "log", "-limit", "2"})
	after, _ := want(t, 0, []string{"log", "-limit", "2", "-json", "-db", db})
	if before != after || !strings.HasPrefix(after, "{") {
		t.Fatalf("log -json after the command differs:\n%s\n---\n%s", before, after)
	}
	want(t, 0, []string{"trace", "1", "-db", db}, "POSITION", "Algebra")
	want(t, 0, []string{"groups", "stop", "-db", db, "courses.catalog", "a", "deploy"}, "reason: a deploy")
}

// A runtime error prints one line with one "sourced:" prefix and no usage;
// bad usage exits 2 with the command's synopsis, never the whole usage.
func TestErrorOutput(t *testing.T) {
	db := fixture(t)
	for _, args := range [][]string{
		{"-db", filepath.Join(t.TempDir(), "missing.db"), "stats"},
		{"-db", db, "groups", "stop", "nope"},
		{"-db", db, "offsets", "-group", "nope"},
	} {
		_, errOut := want(t, 1, args)
		if strings.Contains(errOut, "sourced: sourced:") || strings.Contains(errOut, "Commands:") || strings.Contains(errOut, "usage:") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("sourced %s: want one line, one prefix, no usage:\n%s", strings.Join(args, " "), errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-db", db, "stats", "extra"}, `unexpected argument "extra": stats takes no arguments`},
		{[]string{"-db", db, "log", "courses.created"}, "log takes no arguments"},
		{[]string{"-db", db, "version", "2"}, "version takes no arguments"},
		{[]string{"-db", db, "groups", "start", "courses.catalog", "now"}, "only stop takes a reason"},
		{[]string{"-db", db, "groups", "pause", "courses.catalog"}, `unknown operation "pause"`},
		{[]string{"-db", db, "stats", "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-db", db, "log", "-limit", "many"}, `invalid value "many" for flag -limit`},
		{[]string{"-db", db, "log", "-limit", "0"}, "-limit must be at least 1"},
		{[]string{"-db", db, "migrate", "sideways"}, `unknown operation "sideways"`},
		{[]string{"-db", db, "schedule", "cancel", "x"}, `"x" is not a message id`},
		{[]string{"stats"}, "no database"},
	} {
		_, errOut := want(t, 2, tc.args, tc.want, "usage: sourced ")
		if strings.Contains(errOut, "Commands:") || strings.Contains(errOut, "sourced: sourced:") {
			t.Errorf("sourced %s: the whole usage after a usage error:\n%s", strings.Join(tc.args, " "), errOut)
		}
	}
	want(t, 2, []string{"-db", db, "frobnicate"}, `unknown command "frobnicate"`, "Commands:")
	want(t, 2, []string{}, "no command", "Commands:")
	want(t, 0, []string{"log", "-h"}, "usage: sourced log [-limit N]")
	want(t, 0, []string{"help", "trace"}, "usage: sourced trace ID|POSITION")
	want(t, 0, []string{"help"}, "Commands:", "Exit codes")
}

// -where filters on attributes without -type (the tool reads the log and
// matches payloads), and pages by matches.
func TestLogWhereWithoutType(t *testing.T) {
	db := fixture(t)
	out, _ := want(t, 0, []string{"-db", db, "log", "-where", "course_name=History"}, "History")
	if strings.Contains(out, "Algebra") {
		t.Fatalf("-where course_name=History shows other messages:\n%s", out)
	}
	out, _ = want(t, 0, []string{"-db", db, "log", "-where", "course_id=c1", "-limit", "1"}, "Algebra", "more: -from 2")
	if strings.Contains(out, "History") {
		t.Fatalf("-where course_id=c1:\n%s", out)
	}
	want(t, 0, []string{"-db", db, "log", "-where", "course_id=c1", "-from", "2"}, "POSITION")
	want(t, 2, []string{"-db", db, "log", "-where", "course_id"}, "-where takes name=value")
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkSnake fails on a JSON object key that is not snake_case, outside
// the application's own data (payloads, metadata, partitions, results).
func checkSnake(t *testing.T, cmd string, v any, path string) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !snake.MatchString(k) {
				t.Errorf("%s -json: key %q at %s is not snake_case", cmd, k, path)
			}
			switch k {
			case "payload", "metadata", "partition", "input", "output", "context", "result", "schema_versions":
				continue
			}
			checkSnake(t, cmd, x, path+"."+k)
		}
	case []any:
		for _, x := range v {
			checkSnake(t, cmd, x, path+"[]")
		}
	}
}

// Every command's -json output names its fields in snake_case.
func TestJSONIsSnakeCase(t *testing.T) {
	db := fixture(t)
	wf := workflowFixture(t)
	for _, args := range [][]string{
		{"-db", db, "stats"}, {"-db", db, "log"}, {"-db", db, "trace", "1"}, {"-db", db, "offsets"},
		{"-db", db, "workers"}, {"-db", db, "schedule"}, {"-db", db, "partitions", "parked"}, {"-db", db, "migrate", "status"}, {"-db", db, "migrate"}, {"-db", db, "migrate", "validate"},
		{"migrate", "list"}, {"version"}, {"-db", db, "groups", "stop", "courses.catalog"},
		{"-db", wf, "workflows"}, {"-db", wf, "workflow", "run-ada"},
	} {
		out, _ := want(t, 0, append(args, "-json"))
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v -json: %v\n%s", args, err, out)
		}
		checkSnake(t, strings.Join(args, " "), v, "$")
	}
}

// stats and offsets show how many messages each group and partition has
// not processed yet.
func TestLag(t *testing.T) {
	db := fixture(t) // c1 processed; c2 and c3 one message each to go
	out, _ := want(t, 0, []string{"-db", db, "stats"}, "BEHIND  LAG")
	if !regexp.MustCompile(`courses.catalog\s+active\s+3\s+2\s+2\s`).MatchString(out) {
		t.Fatalf("stats: want 3 partitions, 2 behind, lag 2:\n%s", out)
	}
	out, _ = want(t, 0, []string{"-db", db, "-json", "stats"})
	var st struct {
		Groups []struct {
			Lag    int `json:"lag"`
			Behind int `json:"partitions_behind"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Groups) != 1 || st.Groups[0].Lag != 2 || st.Groups[0].Behind != 2 {
		t.Fatalf("stats JSON lag: %s (%v)", out, err)
	}
	want(t, 0, []string{"-db", db, "stats", "-lag-limit", "1"}, "  2+  ")
	out, _ = want(t, 0, []string{"-db", db, "-json", "offsets"})
	var page struct {
		Offsets []struct {
			PartitionKey string `json:"partition_key"`
			Lag          int    `json:"lag"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, o := range page.Offsets {
		got[o.PartitionKey] = o.Lag
	}
	if len(got) != 3 || got["course_id:c1"] != 0 || got["course_id:c2"] != 1 || got["course_id:c3"] != 1 {
		t.Fatalf("offsets lag %v, want c1 0, c2 1, c3 1", got)
	}
	want(t, 0, []string{"-db", db, "offsets"}, "LAST POSITION  LAG")
}

// workers lists heartbeats and the claims each worker holds.
func TestWorkers(t *testing.T) {
	ctx := context.Background()
	db := fixture(t)
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: registryForTest(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, []string{"host-a:1", "host-b:7"}, time.Now().Add(-3*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"host-a:1", "ghost"} {
		if c, err := s.ClaimNext(ctx, "courses.catalog", w, 10); err != nil || c == nil {
			t.Fatalf("claim for %s: %v %v", w, c, err)
		}
	}
	s.Close()
	out, _ := want(t, 0, []string{"-db", db, "workers"}, "WORKER", "host-b:7", "never (no heartbeat)", "courses.catalog  course_id:c")
	if !regexp.MustCompile(`host-a:1\s+\S+ \S+\s+3\.\d+s\s+1\n`).MatchString(out) {
		t.Errorf("workers: host-a:1 seen 3s ago with one claim:\n%s", out)
	}
	out, _ = want(t, 0, []string{"-db", db, "workers", "-json"})
	var ws struct {
		Workers []struct {
			ID       string     `json:"id"`
			LastSeen *time.Time `json:"last_seen"`
			Claims   []struct {
				Group string `json:"group"`
			} `json:"claims"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &ws); err != nil || len(ws.Workers) != 3 {
		t.Fatalf("workers JSON %s (%v)", out, err)
	}
	for _, w := range ws.Workers {
		claims := map[string]int{"ghost": 1, "host-a:1": 1, "host-b:7": 0}[w.ID]
		if len(w.Claims) != claims || (w.ID == "ghost") != (w.LastSeen == nil) {
			t.Errorf("worker %+v", w)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// log -follow prints the newest page, then each new message as it is
// appended, until its context ends (Ctrl-C), and exits 0.
func TestLogFollow(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		db := fixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		var out, errOut syncBuffer
		args := []string{"-db", db, "log", "-follow", "-limit", "2", "-interval", "20ms", "-type", "courses.created"}
		if asJSON {
			args = append(args, "-json")
		}
		code := make(chan int, 1)
		go func() { code <- Run(ctx, args, &out, &errOut, SQLite()) }()
		waitFor := func(s string) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), s) {
				if time.Now().After(deadline) {
					cancel()
					t.Fatalf("log -follow never printed %q:\n%s%s", s, out.String(), errOut.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitFor("Algebra II")
		if strings.Contains(out.String(), `"Algebra"`) {
			t.Errorf("-limit 2 printed the oldest message too:\n%s", out.String())
		}
		s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: registryForTest(t)})
		if err != nil {
			t.Fatal(err)
		}
		msgs := core.Messages(Reminder{CourseID: "c2"}, CourseCreated{CourseID: "c4", CourseName: "Geometry"})
		if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		waitFor("Geometry")
		cancel()
		if c := <-code; c != 0 {
			t.Fatalf("log -follow ended with %d: %s", c, errOut.String())
		}
		if strings.Contains(out.String(), "courses.reminder") {
			t.Errorf("-follow ignored -type:\n%s", out.String())
		}
		if asJSON {
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var last struct {
				Position int64 `json:"position"`
			}
			if len(lines) != 3 || json.Unmarshal([]byte(lines[2]), &last) != nil || last.Position != 5 {
				t.Errorf("-follow -json: want one JSON object a line, the last at position 5:\n%s", out.String())
			}
		}
	}
}

// groups retry makes a retrying group claimable now and a failed one
// active; other statuses have nothing to retry.
func TestGroupsRetry(t *testing.T) {
	ctx := context.Background()
	db := fixture(t)
	want(t, 1, []string{"-db", db, "groups", "retry", "courses.catalog"}, "courses.catalog is active, not retrying or failed")
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: registryForTest(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := shell.Failure{RetryCount: 2, Partition: "course_id:c2", Error: "boom"}
	if err := s.RetryGroup(ctx, "courses.catalog", time.Now().Add(time.Hour), f); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimNext(ctx, "courses.catalog", "w", 10); err != nil || c != nil {
		t.Fatalf("claim of a group retrying in an hour: %v %v", c, err)
	}
	want(t, 0, []string{"-db", db, "groups", "retry", "courses.catalog"}, "courses.catalog: retrying -> retrying", "retrying now instead of at")
	if c, err := s.ClaimNext(ctx, "courses.catalog", "w", 10); err != nil || c == nil {
		t.Fatalf("claim after groups retry: %v %v", c, err)
	} else {
		s.Release(ctx, c)
	}
	if err := s.FailGroup(ctx, "courses.catalog", f); err != nil {
		t.Fatal(err)
	}
	s.Close()
	want(t, 0, []string{"-db", db, "groups", "retry", "courses.catalog"}, "courses.catalog: failed -> active", "partition course_id:c2")
}

// schedule cancel deletes a scheduled message before it is promoted.
func TestScheduleCancel(t *testing.T) {
	db := fixture(t)
	out, _ := want(t, 0, []string{"-db", db, "-json", "schedule"})
	var sched struct {
		Scheduled []struct {
			ID string `json:"id"`
		} `json:"scheduled"`
	}
	if err := json.Unmarshal([]byte(out), &sched); err != nil || len(sched.Scheduled) != 1 {
		t.Fatalf("schedule JSON %s (%v)", out, err)
	}
	id := sched.Scheduled[0].ID
	want(t, 0, []string{"-db", db, "schedule", "cancel", id}, "cancelled scheduled message "+id)
	out, _ = want(t, 0, []string{"-db", db, "schedule"})
	if strings.Contains(out, id) {
		t.Fatalf("cancelled message still scheduled:\n%s", out)
	}
	want(t, 0, []string{"-db", db, "stats"}, "scheduled     0")
	want(t, 1, []string{"-db", db, "schedule", "cancel", id}, "no scheduled message "+id)
	want(t, 2, []string{"-db", db, "schedule", "cancel"}, "want the id of a scheduled message")
}

func TestVersion(t *testing.T) {
	want(t, 0, []string{"version"}, "sourced ", fmt.Sprintf("schema versions: SQLite %d", sqlitestore.SchemaVersion))
}

// migrate status shows the file's version and the pending migrations;
// migrate applies them and says which, with progress on request.
func TestMigrateStatus(t *testing.T) {
	v := sqlitestore.SchemaVersion
	db := fixture(t)
	want(t, 0, []string{"-db", db, "migrate", "status"}, fmt.Sprintf("version   %d (this program's: %d)", v, v), "up to date", "1        applied", "sourced_messages")
	// The file as an older program left it: the last version missing.
	sqlExec(t, db, fmt.Sprintf(`DELETE FROM sourced_schema_migrations WHERE version = %d`, v))
	want(t, 0, []string{"-db", db, "migrate", "status"}, fmt.Sprintf("version   %d (this program's: %d)", v-1, v), "1 pending: apply with 'sourced -db", fmt.Sprintf("%d        pending  -", v))
	want(t, 1, []string{"-db", db, "migrate", "validate"}, "1 migration(s) pending: apply them with 'sourced -db")
	out, _ := want(t, 0, []string{"-db", db, "migrate", "status", "-json"})
	var st struct {
		Version int `json:"version"`
		Pending int `json:"pending"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Version != v-1 || st.Pending != 1 {
		t.Fatalf("status JSON %s (%v)", out, err)
	}
	_, errOut := want(t, 0, []string{"-db", db, "-progress", "migrate"}, fmt.Sprintf("applied version %d", v), fmt.Sprintf("is at version %d", v))
	for _, w := range []string{fmt.Sprintf("from version %d to %d", v-1, v), fmt.Sprintf("version %d applied", v), "done in"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("migrate -progress: stderr lacks %q:\n%s", w, errOut)
		}
	}
	want(t, 0, []string{"-db", db, "migrate"}, "nothing to apply")
	want(t, 0, []string{"-db", db, "migrate", "validate"}, "up to date")
	want(t, 1, []string{"-db", filepath.Join(t.TempDir(), "none.db"), "migrate", "status"}, "no such file")
	fresh := filepath.Join(t.TempDir(), "new.db")
	var all []string
	for i := 1; i <= v; i++ {
		all = append(all, fmt.Sprintf("applied version %d", i))
	}
	want(t, 0, []string{"-db", fresh, "migrate", "up"}, all...)
	want(t, 0, []string{"migrate", "list"}, fmt.Sprintf("SQLite schema, prefix sourced: %d migrations", v), "sourced_consumer_groups")
}

// migrate print writes goose and golang-migrate files that, applied as
// those tools apply them, install the store.
func TestMigratePrintFormats(t *testing.T) {
	v := sqlitestore.SchemaVersion
	dir := t.TempDir()
	var gooseFiles, gmFiles []string
	for i := 1; i <= v; i++ {
		gooseFiles = append(gooseFiles, fmt.Sprintf("%05d_sourced_app_v%d.sql", 6+i, i))
		gmFiles = append(gmFiles, fmt.Sprintf("%06d_sourced_app_v%d.up.sql", i, i))
	}
	want(t, 0, []string{"-prefix", "app", "migrate", "print", "-format", "goose", "-dir", filepath.Join(dir, "goose"), "-first", "7"}, gooseFiles...)
	want(t, 0, []string{"-prefix", "app", "migrate", "print", "-format", "golang-migrate", "-dir", filepath.Join(dir, "gm")}, gmFiles...)
	want(t, 1, []string{"-prefix", "app", "migrate", "print", "-format", "golang-migrate", "-dir", filepath.Join(dir, "gm")}, "file exists")
	want(t, 0, []string{"migrate", "print", "-format", "goose"}, "-- file: 00001_sourced_sourced_v1.sql", "-- +goose Up", "-- +goose StatementBegin", "-- +goose Down")
	want(t, 2, []string{"migrate", "print", "-format", "flyway"}, `-format "flyway": want sql, goose or golang-migrate`)
	want(t, 2, []string{"migrate", "status", "-format", "goose"}, "flags of 'migrate print'")

	// golang-migrate runs each up file as it is; goose the Up section's
	// statement block.
	db := filepath.Join(dir, "gm.db")
	for _, name := range gmFiles {
		b, err := os.ReadFile(filepath.Join(dir, "gm", name))
		if err != nil {
			t.Fatal(err)
		}
		sqlExec(t, db, string(b))
	}
	want(t, 0, []string{"-db", db, "-prefix", "app", "migrate", "status"}, "up to date")
	db = filepath.Join(dir, "goose.db")
	for _, name := range gooseFiles {
		b, err := os.ReadFile(filepath.Join(dir, "goose", name))
		if err != nil {
			t.Fatal(err)
		}
		up := string(b)
		up = up[strings.Index(up, "-- +goose StatementBegin")+len("-- +goose StatementBegin") : strings.Index(up, "-- +goose StatementEnd")]
		sqlExec(t, db, up)
	}
	want(t, 0, []string{"-db", db, "-prefix", "app", "stats"}, "max position  0")
}

// The root binary says how to get the PostgreSQL-enabled one.
func TestPostgresURLWithoutTheDriver(t *testing.T) {
	_, errOut := want(t, 1, []string{"-db", "postgres://app:secret@db.internal/app", "stats"}, "opens SQLite files only", pgInstall)
	if strings.Contains(errOut, "secret") {
		t.Fatalf("the password is printed: %s", errOut)
	}
	want(t, 1, []string{"migrate", "print", "-store", "postgres"}, pgInstall)
}

// groups start -wait reports the lag as the application's workers
// process a replay, and returns once they caught up.
func TestGroupsStartWait(t *testing.T) {
	ctx := context.Background()
	db := fixture(t)
	want(t, 0, []string{"-db", db, "groups", "stop", "courses.catalog"})
	want(t, 0, []string{"-db", db, "groups", "reset", "courses.catalog"})
	want(t, 2, []string{"-db", db, "groups", "reset", "courses.catalog", "-wait"}, "-wait waits for the group's workers")
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"-db", db, "-progress", "groups", "start", "courses.catalog", "-wait", "-interval", "10ms"}, &out, &errOut, SQLite())
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errOut.String(), "3 message(s) to go in 3 partition(s)") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %s%s", out.String(), errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The application's worker replays the log.
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: registryForTest(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		c, err := s.ClaimNext(ctx, "courses.catalog", "app", 10)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		if err := s.Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	select {
	case c := <-code:
		if c != 0 || !strings.Contains(out.String(), "courses.catalog caught up: 3 message(s) processed") || !strings.Contains(errOut.String(), "0 message(s) to go") {
			t.Fatalf("exit %d:\n%s%s", c, out.String(), errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("groups start -wait never returned")
	}
	// A group that stops while waited on ends the wait with an error.
	want(t, 0, []string{"-db", db, "groups", "stop", "courses.catalog"})
	if _, err := s.Append(ctx, core.Messages(CourseCreated{CourseID: "c9", CourseName: "Logic"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() { // once the tool started it
		for {
			if info, err := s.Group(ctx, "courses.catalog"); err != nil || info.Status == shell.StatusActive {
				s.StopGroup(ctx, "courses.catalog", "again")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	want(t, 1, []string{"-db", db, "groups", "start", "courses.catalog", "-wait", "-interval", "10ms"}, "courses.catalog is stopped with 1 message(s) to go")
}

// partitions lists what the parking strategy set aside, and retries,
// skips or resets a parked partition.
func TestPartitions(t *testing.T) {
	ctx := context.Background()
	db := fixture(t)
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Registry: registryForTest(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// park claims the next partition and parks it at its first message,
	// as the router does when the parking strategy gives up.
	park := func() string {
		t.Helper()
		c, err := s.ClaimNext(ctx, "courses.catalog", "w", 10)
		if err != nil || c == nil {
			t.Fatalf("claim: %v %v", c, err)
		}
		m := c.Messages[0]
		f := shell.Failure{RetryCount: 2, OffsetID: c.OffsetID, Partition: core.Partition(c.Partition).String(), MessageType: m.Type, MessageID: m.ID.String(), Position: m.Position, ErrorType: "*errors.errorString", Error: "poison"}
		if _, err := s.ChangeGroup(ctx, "courses.catalog", func(shell.GroupState) (shell.GroupChange, error) {
			return shell.GroupChange{Command: shell.CmdPark, Failure: f}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		return core.Partition(c.Partition).String()
	}
	want(t, 0, []string{"-db", db, "partitions", "parked"}, "0 parked partition(s)")
	p := park()
	want(t, 0, []string{"-db", db, "partitions", "parked"}, "1 parked partition(s)", "courses.catalog  "+p, "3         courses.created", "poison", "partitions retry|skip|reset")
	out, _ := want(t, 0, []string{"-db", db, "stats"}, "PARKED")
	if !regexp.MustCompile(`courses.catalog\s+active\s+3\s+2\s+2\s+1\s`).MatchString(out) {
		t.Errorf("stats: want 1 parked partition:\n%s", out)
	}
	out, _ = want(t, 0, []string{"-db", db, "-json", "partitions", "parked", "-group", "courses.catalog"})
	var listed struct {
		Parked []struct {
			PartitionKey string `json:"partition_key"`
			Attempts     int    `json:"attempts"`
		} `json:"parked"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Parked) != 1 || listed.Parked[0].PartitionKey != p || listed.Parked[0].Attempts != 3 {
		t.Fatalf("parked JSON %s (%v)", out, err)
	}
	want(t, 0, []string{"-db", db, "partitions", "retry", "courses.catalog", p}, "courses.catalog "+p+": unparked: workers handle courses.created")
	want(t, 1, []string{"-db", db, "partitions", "retry", "courses.catalog", p}, "is not parked (parked: none); nothing was changed")

	p = park()
	want(t, 0, []string{"-db", db, "partitions", "skip", "courses.catalog", p}, "unparked past courses.created")
	out, _ = want(t, 0, []string{"-db", db, "-json", "offsets"})
	var offs struct {
		Offsets []struct {
			PartitionKey string `json:"partition_key"`
			LastPosition int64  `json:"last_position"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(out), &offs); err != nil {
		t.Fatal(err)
	}
	for _, o := range offs.Offsets {
		if o.PartitionKey == p && o.LastPosition == 0 {
			t.Fatalf("skip left %s's offset before its failed message: %s", p, out)
		}
	}
	p = park()
	want(t, 0, []string{"-db", db, "partitions", "reset", "courses.catalog", p}, "unparked and reset")
	// The JSON form names a partition whatever its values hold ("|" too).
	parked, err := core.ParsePartition(park())
	if err != nil {
		t.Fatal(err)
	}
	want(t, 0, []string{"-db", db, "partitions", "reset", "courses.catalog", core.Partition(parked).String()}, "unparked and reset")
	want(t, 1, []string{"-db", db, "partitions", "reset", "courses.catalog", `{"course_id":"a|b"}`}, `{"course_id":"a|b"}`, "not parked")
	want(t, 2, []string{"-db", db, "partitions", "retry", "courses.catalog"}, "want GROUP PARTITION")
	want(t, 2, []string{"-db", db, "partitions", "retry", "courses.catalog", "c1"}, "want name:value pairs")
	want(t, 2, []string{"-db", db, "partitions", "drop"}, `unknown operation "drop"`)
	want(t, 1, []string{"-db", db, "partitions", "parked", "-group", "nope"}, `unknown consumer group "nope"`)
}

// log -follow -from prints every message from the cursor on, the first
// page and those after it, then new ones.
func TestLogFollowFrom(t *testing.T) {
	db := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"-db", db, "log", "-follow", "-from", "1", "-limit", "1", "-interval", "10ms"}, &out, &errOut, SQLite())
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Algebra II") {
		if time.Now().After(deadline) {
			t.Fatalf("-follow -from 1 -limit 1 never printed position 3:\n%s%s", out.String(), errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-code
	for _, w := range []string{"Algebra\"", "History", "Algebra II"} {
		if strings.Count(out.String(), w) != 1 {
			t.Errorf("-follow -from: %q printed %d times, want once:\n%s", w, strings.Count(out.String(), w), out.String())
		}
	}
}

// serve runs the dashboard on a loopback address until its context ends,
// and refuses any other address.
func TestServe(t *testing.T) {
	db := fixture(t)
	want(t, 2, []string{"-db", db, "serve", "-addr", "0.0.0.0:8080"}, "loopback address only")
	want(t, 2, []string{"-db", db, "serve", "-addr", "nowhere"}, "want host:port")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"-db", db, "serve", "-addr", "127.0.0.1:0", "-read-only"}, &out, &errOut, SQLite())
	}()
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	deadline := time.Now().Add(10 * time.Second)
	for url.FindString(out.String()) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no address: %s%s", out.String(), errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get(url.FindString(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "courses.catalog") {
		t.Fatalf("GET /: %d\n%s", resp.StatusCode, body)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("serve ended with %d: %s", c, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
	if !strings.Contains(out.String(), "read-only dashboard of") {
		t.Errorf("serve output: %s", out.String())
	}
}
