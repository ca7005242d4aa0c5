package sqlitestore_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

var xConds = []core.Condition{{Type: "course.created", Attrs: map[string]string{"course_name": "X"}}}

func msgsOf(payloads ...any) []core.Message {
	out := make([]core.Message, len(payloads))
	for i, p := range payloads {
		out[i] = core.NewMessage(p)
	}
	return out
}

var enrolments = driver.GroupSpec{ID: "test.enrolments", PartitionBy: []string{"course_name", "user_id"}, Handled: []string{"user.joined_course", "course.created"}}

func register(t *testing.T, s *sqlitestore.Store, spec driver.GroupSpec) {
	t.Helper()
	if err := s.RegisterGroup(t.Context(), spec); err != nil {
		t.Fatalf("register %s: %v", spec.ID, err)
	}
}

func claim(t *testing.T, s *sqlitestore.Store, group string) *driver.ClaimedPartition {
	t.Helper()
	c, err := s.ClaimNext(t.Context(), group, "w1", 10)
	if err != nil {
		t.Fatalf("claim %s: %v", group, err)
	}
	return c
}

// rawInt runs a query on its own connection, as another program would.
func rawInt(t *testing.T, path, query string, args ...any) int64 {
	t.Helper()
	conn, err := sqlite.OpenConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var v int64
	err = sqlitex.Execute(conn, query, &sqlitex.ExecOptions{Args: args, ResultFunc: func(stmt *sqlite.Stmt) error { v = stmt.ColumnInt64(0); return nil }})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// Two stores on one file stand for two processes: a group registered by
// one is indexed and given offsets by the other's appends, and each sees
// the other's commits at once despite its idle-claim cache.
func TestGroupsAcrossProcesses(t *testing.T) {
	path := dbPath(t)
	a := install(t, path, sqlitestore.Options{})
	b := install(t, path, sqlitestore.Options{})
	appendOK(t, b, userJoined{"Algebra", "joe"}) // b has seen the configuration (none)
	register(t, a, enrolments)
	if c := claim(t, a, enrolments.ID); c == nil || c.Last() != 1 {
		t.Fatalf("late registration: claimed %v, want the message appended before", c)
	} else if err := a.Ack(t.Context(), c, c.Last()); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, a, enrolments.ID); c != nil {
		t.Fatalf("claimed %v from a drained group", c.Partition)
	}
	// b's writer notices the new group and creates the offset eagerly.
	appendOK(t, b, userJoined{"History", "jake"})
	c := claim(t, a, enrolments.ID)
	if c == nil || !maps.Equal(c.Partition, map[string]string{"course_name": "History", "user_id": "jake"}) {
		t.Fatalf("claimed %v, want History/jake appended by the other store", c)
	}
	// A release by the other store wakes a group latched meanwhile.
	if got := claim(t, a, enrolments.ID); got != nil {
		t.Fatalf("claimed %v while the only partition is held", got.Partition)
	}
	if err := b.Release(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, a, enrolments.ID); got == nil || got.Last() != 2 {
		t.Fatalf("after the other store's release: %v", got)
	}
}

// The latch triggers fire for raw SQL too: inserting a message and
// releasing a claim make a clean group dirty.
func TestLatchTriggers(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	register(t, s, enrolments)
	appendOK(t, s, userJoined{"Algebra", "joe"})
	latch := func() int64 {
		return rawInt(t, path, `SELECT scan_version FROM sourced_consumer_groups WHERE group_id = ?1`, enrolments.ID)
	}
	c := claim(t, s, enrolments.ID)
	if got := claim(t, s, enrolments.ID); got != nil {
		t.Fatal("claimed twice")
	}
	clean := latch()
	if clean >= 0 {
		t.Fatalf("latch %d after an empty scan, want clean (< 0)", clean)
	}
	conn, err := sqlite.OpenConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sqlitex.Execute(conn, `UPDATE sourced_offsets SET claimed = 0, claimed_by = NULL WHERE id = ?1`, &sqlitex.ExecOptions{Args: []any{c.OffsetID}}); err != nil {
		t.Fatal(err)
	}
	dirty := latch()
	if dirty <= -clean-1 {
		t.Fatalf("latch %d after a raw release, want dirty and above %d", dirty, -clean-1)
	}
	if got := claim(t, s, enrolments.ID); got == nil || got.Last() != 1 {
		t.Fatalf("after a raw release: %v", got)
	}
	if got := claim(t, s, enrolments.ID); got != nil {
		t.Fatal("claimed twice")
	}
	err = sqlitex.Execute(conn, `INSERT INTO sourced_messages (message_id, message_type, payload, created_at)
		VALUES ('00000000-0000-7000-8000-000000000001', 'course.created', '{"course_name":"X"}', '2025-01-01T00:00:00.000000Z')`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := latch(); v < 0 {
		t.Fatalf("latch %d after a raw insert, want dirty", v)
	}
}

// Changed reports commits by anyone since the last call.
func TestChanged(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	other := install(t, path, sqlitestore.Options{})
	changed := func() bool {
		t.Helper()
		ok, err := s.Changed(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	changed()
	if changed() {
		t.Fatal("changed with no commit")
	}
	appendOK(t, other, courseCreated{"A"})
	if !changed() {
		t.Fatal("another store's append: not changed")
	}
	if changed() {
		t.Fatal("changed twice")
	}
	appendOK(t, s, courseCreated{"B"})
	if !changed() {
		t.Fatal("own append: not changed")
	}
}

// Partition values holding the separators of the readable form (|, :,
// quotes, backslashes, control characters) make distinct partitions that
// come back intact (joined with separators, two partitions could collide).
func TestPartitionKeysAreUnambiguous(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	register(t, s, enrolments)
	values := [][2]string{
		{"A|user_id:joe", "x"},
		{"A", "joe|user_id:x"},
		{"A", "joe"},
		{`q"uo\te`, "tab\there"},
		{"bell\x07byte", "é ✓"},             // a NUL is refused (codec.CheckIndexedValue)
		{"replacement\ufffdchar", "\u2028"}, // invalid UTF-8 is refused (codec.Validate)
	}
	for _, v := range values {
		appendOK(t, s, userJoined{v[0], v[1]})
	}
	var got [][2]string
	for range values {
		c := claim(t, s, enrolments.ID)
		if c == nil {
			t.Fatalf("claimed %d partitions, want %d", len(got), len(values))
		}
		got = append(got, [2]string{c.Partition["course_name"], c.Partition["user_id"]})
		if err := s.Ack(t.Context(), c, c.Last()); err != nil {
			t.Fatal(err)
		}
	}
	if c := claim(t, s, enrolments.ID); c != nil {
		t.Fatalf("claimed %v again", c.Partition)
	}
	cmp := func(a, b [2]string) int {
		if a[0] != b[0] {
			return compare(a[0], b[0])
		}
		return compare(a[1], b[1])
	}
	slices.SortFunc(got, cmp)
	slices.SortFunc(values, cmp)
	if !slices.Equal(got, values) {
		t.Fatalf("partitions %q, want %q", got, values)
	}
	for o, err := range s.Offsets(t.Context(), driver.OffsetQuery{Group: enrolments.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(values, [2]string{o.Partition["course_name"], o.Partition["user_id"]}) {
			t.Fatalf("offset partition %q", o.Partition)
		}
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A group registered by this code version is picked up by a store opened
// afterwards on the same file, and its queue types are indexed by id as
// well as by payload.
func TestQueueAcrossProcesses(t *testing.T) {
	path := dbPath(t)
	a := install(t, path, sqlitestore.Options{})
	register(t, a, driver.GroupSpec{ID: "test.jobs", Exclusive: true, Handled: []string{"test.tick"}})
	b := install(t, path, sqlitestore.Options{})
	res := appendOK(t, b, tick{Counter: "c", Seq: 1}, tick{Counter: "c", Seq: 2})
	// Indexed by payload (for reads and guards) and by id (for the queue).
	if n := rawInt(t, path, `SELECT count(*) FROM sourced_key_pairs WHERE name = 'counter'`); n != 1 {
		t.Fatalf("%d payload key pairs of a queue type, want 1", n)
	}
	if n := rawInt(t, path, `SELECT count(*) FROM sourced_key_pairs WHERE name = '__id'`); n != 2 {
		t.Fatalf("%d id key pairs of a queue type, want 2", n)
	}
	for i := range 2 {
		c := claim(t, a, "test.jobs")
		if c == nil || c.Partition["__id"] != res.Messages[i].ID.String() {
			t.Fatalf("claim %d: %v", i, c)
		}
		err := a.Update(context.Background(), func(tx driver.Tx) error {
			if err := tx.Delete(c.Last()); err != nil {
				return err
			}
			return tx.Ack(c, c.Last())
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.ReleaseDrainedOffsets(t.Context()); err != nil || n != 2 {
		t.Fatalf("release drained offsets: %d, %v", n, err)
	}
	// Every key pair is an orphan now: the ids and the payloads'.
	pairs := rawInt(t, path, `SELECT count(*) FROM sourced_key_pairs`)
	if n, err := a.PruneOrphanKeyPairs(t.Context()); err != nil || int64(n) != pairs || pairs < 3 {
		t.Fatalf("prune orphan key pairs: %d, %v; want all %d", n, err, pairs)
	}
	// b cached the pruned ids: it must not link a new message to them.
	res = appendOK(t, b, tick{Counter: "c", Seq: 3})
	if c := claim(t, a, "test.jobs"); c == nil || c.Partition["__id"] != res.Messages[0].ID.String() {
		t.Fatalf("claim after a prune: %v", c)
	}
}

// A key pair pruned by one store and indexed again by another gets a new
// id: the other store's cached id is dropped, so reads in its
// transactions find the new message.
func TestPrunedKeyPairsAcrossProcesses(t *testing.T) {
	path := dbPath(t)
	a := install(t, path, sqlitestore.Options{})
	b := install(t, path, sqlitestore.Options{})
	res := appendOK(t, b, courseCreated{"X"})
	if err := a.Update(t.Context(), func(tx driver.Tx) error { return tx.Delete(res.Last) }); err != nil {
		t.Fatal(err)
	}
	if n, err := a.PruneOrphanKeyPairs(t.Context()); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want course_name=X", n, err)
	}
	err := b.Update(t.Context(), func(tx driver.Tx) error {
		if _, err := tx.Append(msgsOf(courseCreated{"X"}), driver.AppendOptions{}); err != nil {
			return err
		}
		r, err := tx.Read(xConds, driver.ReadOptions{})
		if err == nil && len(r.Messages) != 1 {
			t.Errorf("read in the transaction: %d messages, want the new one", len(r.Messages))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
