package pgcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/cmd/sourced/cli"
	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/pgstore/pgcli"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

type CourseCreated struct {
	CourseID   string `json:"course_id"`
	CourseName string `json:"course_name"`
}

type Reminder struct {
	CourseID string `json:"course_id"`
}

func run(t *testing.T, code int, args []string, wants ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	got := cli.Run(context.Background(), args, &out, &errOut, cli.SQLite(), pgcli.Driver())
	if got != code {
		t.Fatalf("sourced %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out.String(), errOut.String())
	}
	where := out.String()
	if code != 0 {
		where = errOut.String()
	}
	for _, w := range wants {
		if !strings.Contains(where, w) {
			t.Errorf("sourced %s: output lacks %q:\n%s", strings.Join(args, " "), w, where)
		}
	}
	return where
}

// The CLI's commands on a PostgreSQL store: migrations first (status,
// apply), then the operator commands on a store with a group, a lag, a
// worker, a claim and a scheduled message.
func TestCommandsOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	prefix := pgtest.Prefix()
	db := []string{"-db", url, "-prefix", prefix}
	args := func(a ...string) []string { return append(append([]string{}, db...), a...) }
	t.Cleanup(func() {
		s, err := pgstore.Open(context.Background(), url, pgstore.Options{Prefix: prefix, RawPayloads: true})
		if err == nil {
			s.Uninstall(context.Background())
			s.Close()
		}
	})

	run(t, 1, args("stats"), "no Sourced store with prefix", "migrate")
	v := pgstore.SchemaVersion
	run(t, 0, args("migrate", "status"), fmt.Sprintf("version   0 (this program's: %d)", v), fmt.Sprintf("%d pending", v), "1        pending")
	run(t, 0, args("migrate"), "applied version 1", fmt.Sprintf("applied version %d", v), fmt.Sprintf("is at version %d", v))
	run(t, 0, args("migrate", "status"), "up to date", "1        applied")
	run(t, 0, args("migrate"), "nothing to apply")

	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")
	codec.MustRegister[Reminder](reg, "courses.reminder")
	s, err := pgstore.Open(ctx, url, pgstore.Options{Prefix: prefix, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "courses.catalog", PartitionBy: []string{"course_id"}, Handled: []string{"courses.created"}}); err != nil {
		t.Fatal(err)
	}
	msgs := core.Messages(CourseCreated{"c1", "Algebra"}, CourseCreated{"c2", "History"}, CourseCreated{"c3", "Algebra II"})
	msgs = append(msgs, core.NewMessage(Reminder{"c1"}).At(time.Now().Add(time.Hour)))
	res, err := s.Append(ctx, msgs, shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimNext(ctx, "courses.catalog", "w1", 10)
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	if err := s.Ack(ctx, c, c.Last()); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, []string{"host-a:1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimNext(ctx, "courses.catalog", "host-a:1", 10); err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}

	out := run(t, 0, args("stats"), "max position  3", "scheduled     1")
	if strings.Contains(out, "wal size") || !regexp.MustCompile(`courses.catalog\s+active\s+3\s+2\s+2\s`).MatchString(out) {
		t.Errorf("stats on PostgreSQL: want no WAL, 3 partitions, 2 behind, lag 2:\n%s", out)
	}
	run(t, 0, args("offsets", "-group", "courses.catalog"), "3 offset(s)", "course_id:c1", "LAG")
	run(t, 0, args("log", "-where", "course_name=History"), "History")
	run(t, 0, args("log", "-type", "courses.created", "-where", "course_name=History", "-json"), `"course_name": "History"`)
	run(t, 0, args("trace", "2"), "History")
	run(t, 0, args("workers"), "host-a:1", "courses.catalog")
	run(t, 0, args("schedule"), "courses.reminder")
	run(t, 0, args("partitions", "parked"), "0 parked partition(s)")
	run(t, 1, args("partitions", "retry", "courses.catalog", "course_id:c2"), "is not parked")
	run(t, 0, args("schedule", "cancel", res.Messages[3].ID.String()), "cancelled")
	run(t, 0, args("stats"), "scheduled     0")
	run(t, 0, args("groups", "stop", "courses.catalog", "deploy"), "active -> stopped")
	run(t, 0, args("groups", "reset", "courses.catalog"), "stopped -> stopped", "3 partition(s)")
	run(t, 0, args("groups", "start", "courses.catalog"), "stopped -> active")
	run(t, 1, args("groups", "retry", "courses.catalog"), "not retrying or failed")
	if err := s.RetryGroup(ctx, "courses.catalog", time.Now().Add(time.Hour), shell.Failure{RetryCount: 1, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	run(t, 0, args("groups", "retry", "courses.catalog"), "retrying -> retrying", "retrying now")
	var st struct {
		MaxPosition int64 `json:"max_position"`
	}
	if err := json.Unmarshal([]byte(run(t, 0, args("stats", "-json"))), &st); err != nil || st.MaxPosition != 3 {
		t.Fatalf("stats -json: %v %+v", err, st)
	}
	run(t, 0, []string{"version"}, fmt.Sprintf("schema versions: SQLite %d, PostgreSQL %d", sqlitestore.SchemaVersion, v))
	run(t, 0, []string{"migrate", "print", "-store", "postgres", "-format", "golang-migrate"}, "000001_sourced_sourced_v1.up.sql", "timestamptz", "CREATE TABLE IF NOT EXISTS sourced_messages")

	// The golang-migrate file, run as that tool runs it (the whole file,
	// one simple-protocol exec), installs the store.
	other := pgtest.Prefix()
	t.Cleanup(func() {
		if s, err := pgstore.Open(context.Background(), url, pgstore.Options{Prefix: other, RawPayloads: true}); err == nil {
			s.Uninstall(context.Background())
			s.Close()
		}
	})
	file := run(t, 0, []string{"-prefix", other, "migrate", "print", "-store", "postgres", "-format", "golang-migrate"})
	if _, err := s.Pool().Exec(ctx, file, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("apply the golang-migrate file: %v", err)
	}
	run(t, 0, []string{"-db", url, "-prefix", other, "migrate", "status"}, "up to date")
	run(t, 0, []string{"-db", url, "-prefix", other, "stats"}, "max position  0")

	out = run(t, 1, []string{"-db", "postgres://nobody:hunter2@127.0.0.1:1/none", "stats"})
	if strings.Contains(out, "hunter2") || strings.Contains(out, "sourced: sourced:") {
		t.Errorf("a connection error prints the password or a doubled prefix: %s", out)
	}
}

// A password given in the URL's query (?password=) is printed by neither
// migrate status nor the serve banner (the test server trusts local
// connections, so the password is accepted and ignored).
func TestNoPasswordPrinted(t *testing.T) {
	base := pgtest.URL(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	url := base + sep + "password=s3cretpw"
	prefix := pgtest.Prefix()
	db := []string{"-db", url, "-prefix", prefix}
	for _, args := range [][]string{{"migrate", "status"}, {"migrate"}, {"migrate", "status"}} {
		var out, errOut bytes.Buffer
		cli.Run(context.Background(), append(db, args...), &out, &errOut, cli.SQLite(), pgcli.Driver())
		if all := out.String() + errOut.String(); strings.Contains(all, "s3cretpw") || !strings.Contains(all, "xxxxx") {
			t.Errorf("sourced %s printed the password or no redacted URL:\n%s", strings.Join(args, " "), all)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuf
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, append(db, "serve", "-addr", "127.0.0.1:0"), &out, &errOut, cli.SQLite(), pgcli.Driver())
	}()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "serving") && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	cancel()
	<-done
	if banner := out.String() + errOut.String(); strings.Contains(banner, "s3cretpw") || !strings.Contains(banner, "serving") {
		t.Errorf("serve printed the password or no banner:\n%s", banner)
	}
}

// syncBuf is a bytes.Buffer safe for a writer and a reader at once.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
