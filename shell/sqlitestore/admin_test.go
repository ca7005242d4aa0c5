package sqlitestore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// positions reads the positions of the messages matching one condition.
func positions(t *testing.T, s driver.Store, typ string, kv ...string) []int64 {
	t.Helper()
	c := core.Condition{Type: typ, Attrs: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Attrs[kv[i]] = kv[i+1]
	}
	res, err := s.Read(t.Context(), []core.Condition{c}, driver.ReadOptions{})
	if err != nil {
		t.Fatalf("read %v: %v", c, err)
	}
	var out []int64
	for _, m := range res.Messages {
		out = append(out, m.Position)
	}
	return out
}

func expectPositions(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: positions %v, want %v", what, got, want)
	}
}

func stats(t *testing.T, s driver.Store) driver.Stats {
	t.Helper()
	st, err := s.Stats(t.Context())
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	return st
}

func groupIDs(st driver.Stats) []string {
	var ids []string
	for _, g := range st.Groups {
		ids = append(ids, g.ID)
	}
	return ids
}

// courseGroup is a group partitioned by course, so that appends create
// its offsets eagerly.
func courseGroup(id string) driver.GroupSpec {
	return driver.GroupSpec{ID: id, PartitionBy: []string{"course_name"}, Handled: []string{"course.created", "user.joined_course"}}
}

// schemaObjects lists the names of the file's schema objects (tables,
// indexes, triggers) and sqlite_sequence entries that match a GLOB pattern.
func schemaObjects(t *testing.T, path, glob string) []string {
	t.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var names []string
	collect := func(stmt *sqlite.Stmt) error { names = append(names, stmt.ColumnText(0)); return nil }
	for _, q := range []string{
		`SELECT type || ' ' || name FROM sqlite_schema WHERE name GLOB ?`,
		`SELECT 'sequence ' || name FROM sqlite_sequence WHERE name GLOB ?`,
	} {
		if err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{Args: []any{glob}, ResultFunc: collect}); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	slices.Sort(names)
	return names
}

func TestClear(t *testing.T) {
	ctx := t.Context()
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	other := install(t, path, sqlitestore.Options{Prefix: "other"})
	// s2 is another Store on the same tables, as another process would be.
	s2, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: registry(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })

	register(t, other, courseGroup("other.courses"))
	appendOK(t, other, courseCreated{"Algebra"}, courseCreated{"History"})
	otherBefore := stats(t, other)

	register(t, s, courseGroup("courses"))
	// Positions 1 and 2; key pairs course_name=Algebra 1, user_id=joe 2,
	// cached by both writers.
	appendOK(t, s, courseCreated{"Algebra"}, userJoined{"Algebra", "joe"})
	appendOK(t, s2, courseCreated{"Algebra"})
	later := core.NewMessage(courseCreated{"Later"}).At(time.Now().Add(time.Hour))
	if _, err := s.Append(ctx, []core.Message{later}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimNext(ctx, "courses", "w1", 10); err != nil || c == nil {
		t.Fatalf("claim before clear: %v, %v", c, err)
	}
	// The last commit before Clear is the clearing store's own, so that
	// nothing but Clear itself can tell its writer the caches are stale.
	if err := s.Heartbeat(ctx, []string{"w1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st.MaxPosition != 3 || st.Scheduled != 1 || len(st.Groups) != 1 {
		t.Fatalf("stats before clear: %+v", st)
	}

	if err := s.Clear(ctx); err != nil {
		t.Fatalf("clear: %v", err)
	}

	for name, st := range map[string]driver.Store{"the clearing store": s, "another store": s2} {
		if got := stats(t, st); got.MaxPosition != 0 || got.Scheduled != 0 || len(got.Groups) != 0 {
			t.Fatalf("%s: stats after clear %+v, want an empty store", name, got)
		}
		page, err := st.ReadAll(ctx, driver.ReadAllOptions{})
		if err != nil || len(page.Messages) != 0 || page.LastPosition != 0 {
			t.Fatalf("%s: log after clear: %d messages, last %d, %v", name, len(page.Messages), page.LastPosition, err)
		}
		if _, ok, err := st.NextScheduled(ctx); err != nil || ok {
			t.Fatalf("%s: something is still scheduled (%v)", name, err)
		}
		var unknown *driver.UnknownGroupError
		if _, err := st.Group(ctx, "courses"); !errors.As(err, &unknown) {
			t.Fatalf("%s: group after clear: %v, want an UnknownGroupError", name, err)
		}
	}

	// Positions and key pair ids start over: History takes course_name's id
	// 1, which both writers had cached for Algebra. A stale cache would
	// index the later messages under the wrong values (and a stale group
	// configuration would make offsets for the deleted group).
	if res := appendOK(t, s, courseCreated{"History"}); res.Last != 1 {
		t.Fatalf("first append after clear at position %d, want 1", res.Last)
	}
	appendOK(t, s, userJoined{"Algebra", "joe"})
	appendOK(t, s2, courseCreated{"Algebra"})
	expectPositions(t, "course History", positions(t, s, "course.created", "course_name", "History"), 1)
	expectPositions(t, "joined Algebra", positions(t, s, "user.joined_course", "course_name", "Algebra"), 2)
	expectPositions(t, "joined by joe", positions(t, s2, "user.joined_course", "user_id", "joe"), 2)
	expectPositions(t, "course Algebra", positions(t, s, "course.created", "course_name", "Algebra"), 3)

	// The writers forgot the group (an append would otherwise have made
	// offsets for it, failing their foreign key).
	for name, st := range map[string]driver.Store{"the clearing store": s, "another store": s2} {
		var unknown *driver.UnknownGroupError
		if _, err := st.ClaimNext(ctx, "courses", "w1", 10); !errors.As(err, &unknown) {
			t.Fatalf("%s: claim after clear: %v, want an UnknownGroupError", name, err)
		}
	}

	// Groups are registered afresh, and work.
	register(t, s, courseGroup("courses"))
	c, err := s.ClaimNext(ctx, "courses", "w1", 10)
	if err != nil || c == nil {
		t.Fatalf("claim after re-registering: %v, %v", c, err)
	}
	if got := stats(t, s2); !slices.Equal(groupIDs(got), []string{"courses"}) {
		t.Fatalf("groups seen by another store: %v", groupIDs(got))
	}

	// The other prefix is untouched, and its positions go on.
	if got := stats(t, other); got.MaxPosition != otherBefore.MaxPosition || !slices.Equal(groupIDs(got), []string{"other.courses"}) {
		t.Fatalf("other prefix after clear: %+v, before %+v", got, otherBefore)
	}
	expectPositions(t, "other prefix", positions(t, other, "course.created", "course_name", "Algebra"), 1)
	if res := appendOK(t, other, courseCreated{"Biology"}); res.Last != 3 {
		t.Fatalf("other prefix appended at %d, want 3", res.Last)
	}
}

func TestClearCanceled(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	appendOK(t, s, courseCreated{"Algebra"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Clear(ctx); err == nil {
		t.Fatal("clear with a canceled context succeeded")
	}
	if st := stats(t, s); st.MaxPosition != 1 {
		t.Fatalf("a failed clear changed the log: %+v", st)
	}
}

func TestUninstall(t *testing.T) {
	ctx := t.Context()
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	other := install(t, path, sqlitestore.Options{Prefix: "other"})
	register(t, s, courseGroup("courses"))
	appendOK(t, s, courseCreated{"Algebra"}, userJoined{"Algebra", "joe"})
	if err := s.Optimize(ctx); err != nil { // planner statistics to drop too
		t.Fatal(err)
	}
	register(t, other, courseGroup("other.courses"))
	appendOK(t, other, courseCreated{"Algebra"})
	otherObjects := schemaObjects(t, path, "*other_*")
	if len(schemaObjects(t, path, "*sourced_*")) == 0 || len(otherObjects) == 0 {
		t.Fatal("the fixture has no schema objects")
	}

	if err := s.Uninstall(ctx); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if left := schemaObjects(t, path, "*sourced_*"); len(left) > 0 {
		t.Fatalf("left after uninstall: %v", left)
	}
	if _, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: registry(t)}); !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("open after uninstall: %v, want ErrNotInstalled", err)
	}
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(courseCreated{"Algebra"})}, driver.AppendOptions{}); err == nil {
		t.Fatal("append after uninstall succeeded")
	}
	if err := s.Uninstall(ctx); err != nil {
		t.Fatalf("second uninstall: %v", err)
	}

	// The other prefix is untouched.
	if got := schemaObjects(t, path, "*other_*"); !slices.Equal(got, otherObjects) {
		t.Fatalf("other prefix's objects: %v, before %v", got, otherObjects)
	}
	if st := stats(t, other); st.MaxPosition != 1 || !slices.Equal(groupIDs(st), []string{"other.courses"}) {
		t.Fatalf("other prefix after uninstall: %+v", st)
	}
	if res := appendOK(t, other, courseCreated{"History"}); res.Last != 2 {
		t.Fatalf("other prefix appended at %d, want 2", res.Last)
	}

	// Installed again, through the same Store: a new, empty store.
	if err := s.Install(ctx); err != nil {
		t.Fatalf("install after uninstall: %v", err)
	}
	if st := stats(t, s); st.MaxPosition != 0 || len(st.Groups) != 0 {
		t.Fatalf("stats after reinstall: %+v", st)
	}
	register(t, s, courseGroup("courses"))
	if res := appendOK(t, s, courseCreated{"History"}, userJoined{"Algebra", "joe"}); res.Last != 2 {
		t.Fatalf("append after reinstall at %d, want 2", res.Last)
	}
	expectPositions(t, "joined Algebra", positions(t, s, "user.joined_course", "course_name", "Algebra"), 2)
	expectPositions(t, "course Algebra", positions(t, s, "course.created", "course_name", "Algebra"))
	if c, err := s.ClaimNext(ctx, "courses", "w1", 10); err != nil || c == nil {
		t.Fatalf("claim after reinstall: %v, %v", c, err)
	}
	s3, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: registry(t)})
	if err != nil {
		t.Fatalf("open after reinstall: %v", err)
	}
	s3.Close()
}
