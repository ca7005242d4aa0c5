package sqlitestore

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

type ev struct {
	Account string `json:"account"`
	Ref     string `json:"ref"`
	User    string `json:"user,omitempty"`
}

// other is a second type, so that type-only reads have a selective index.
type other struct {
	N int `json:"n"`
}

func newTestStore(t *testing.T, opts Options) *Store {
	t.Helper()
	reg := codec.NewRegistry()
	if err := errors.Join(codec.Register[ev](reg, "test.ev"), codec.Register[other](reg, "test.other")); err != nil {
		t.Fatal(err)
	}
	opts.Registry = reg
	s, err := Install(t.Context(), filepath.Join(t.TempDir(), "store.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func pragma(t *testing.T, conn *sqlite.Conn, name string) string {
	t.Helper()
	var v string
	err := sqlitex.ExecuteTransient(conn, "PRAGMA "+name, &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { v = stmt.ColumnText(0); return nil },
	})
	if err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// Every connection of the store, the writer and each reader of the pool,
// has the per-connection settings.
func TestPragmasOnEveryConnection(t *testing.T) {
	const readers = 3
	s := newTestStore(t, Options{PoolSize: readers, BusyTimeout: 1234 * time.Millisecond})
	check := func(role string, conn *sqlite.Conn, queryOnly string) {
		for name, want := range map[string]string{
			"foreign_keys": "1",
			"busy_timeout": "1234",
			"journal_mode": "wal",
			"synchronous":  "1", // NORMAL
			"temp_store":   "2", // MEMORY
			"query_only":   queryOnly,
			"page_size":    strconv.Itoa(DefaultPageSize),
		} {
			if got := pragma(t, conn, name); got != want {
				t.Errorf("%s connection: PRAGMA %s = %s, want %s", role, name, got, want)
			}
		}
	}
	w := <-s.writer
	check("writer", w.conn, "0")
	s.writer <- w
	var conns []*sqlite.Conn
	for range readers {
		conn, err := s.readers.Take(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for i, conn := range conns {
		check("reader "+strconv.Itoa(i), conn, "1")
		s.readers.Put(conn)
	}
}

// The reads are index-driven: no statement scans a whole table.
func TestQueryPlansUseIndexes(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	var msgs []core.Message
	for i := range 500 {
		msgs = append(msgs, core.NewMessage(ev{Account: "a" + strconv.Itoa(i%20), Ref: "r" + strconv.Itoa(i), User: "u" + strconv.Itoa(i%7)}))
		for j := range 20 {
			msgs = append(msgs, core.NewMessage(other{N: i*20 + j}))
		}
	}
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	s.statsFloor = 0 // keep the statistics of this small log
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	n := s.names
	for _, tc := range []struct {
		name  string
		sh    shape
		want  []string // substrings of the plan
		binds func(stmt *sqlite.Stmt)
	}{
		{"partition of one attribute", shape{kind: shapeKeys, attrs: 1, types: 2},
			[]string{"SEARCH l1 USING COVERING INDEX idx_" + n.prefix + "_message_key_pairs_key", "SEARCH m USING INTEGER PRIMARY KEY"}, nil},
		{"condition of two attributes", shape{kind: shapeKeys, attrs: 2, types: 1},
			[]string{"SEARCH l1 USING COVERING INDEX idx_" + n.prefix + "_message_key_pairs_key", "SEARCH l2 USING ", "(key_pair_id=? AND message_position=?)", "SEARCH m USING INTEGER PRIMARY KEY"}, nil},
		{"condition of two attributes, descending", shape{kind: shapeKeys, attrs: 2, types: 4, desc: true},
			[]string{"SEARCH l1 USING COVERING INDEX idx_" + n.prefix + "_message_key_pairs_key"}, nil},
		{"partition of two attributes", shape{kind: shapePartition, attrs: 2, types: 2},
			[]string{"USING COVERING INDEX idx_" + n.prefix + "_message_key_pairs_key", "SEARCH m USING INTEGER PRIMARY KEY", "SEARCH x USING PRIMARY KEY", "SEARCH k USING INTEGER PRIMARY KEY"}, nil},
		{"type-only condition", shape{kind: shapeTypes, types: 1},
			[]string{"SEARCH m USING INDEX idx_" + n.prefix + "_messages_type"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := explain(t, s, s.q.get(tc.sh))
			for _, want := range tc.want {
				if !strings.Contains(plan, want) {
					t.Errorf("plan lacks %q:\n%s", want, plan)
				}
			}
			if strings.Contains(plan, "SCAN m") || strings.Contains(plan, "SCAN "+n.messages) {
				t.Errorf("plan scans the log:\n%s", plan)
			}
		})
	}
	for _, q := range []string{s.q.selectKeyPair, s.q.get(shape{kind: shapeLoggedIDs, types: 8}), s.q.get(shape{kind: shapeScheduledIDs, types: 8}), s.q.selectDue, s.q.nextScheduled, s.q.lastPosition} {
		if plan := explain(t, s, q); strings.Contains(plan, "SCAN") {
			t.Errorf("plan of %s scans:\n%s", q, plan)
		}
	}
}

func explain(t *testing.T, s *Store, query string) string {
	t.Helper()
	var b strings.Builder
	err := s.withReader(t.Context(), func(conn *sqlite.Conn) error {
		// Parameters stay unbound (NULL): the plan does not depend on them.
		stmt, _, err := conn.PrepareTransient("EXPLAIN QUERY PLAN " + query)
		if err != nil {
			return err
		}
		defer stmt.Finalize()
		for {
			has, err := stmt.Step()
			if err != nil || !has {
				return err
			}
			b.WriteString(stmt.ColumnText(3))
			b.WriteByte('\n')
		}
	})
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	return b.String()
}

// Key pair ids inserted by a transaction that rolls back leave the cache;
// committed ones stay.
func TestKeyPairCacheJournal(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	cached := func(name, value string) bool {
		w := <-s.writer
		defer func() { s.writer <- w }()
		_, ok := w.lookup(keyPair{name, value})
		return ok
	}
	s.Update(ctx, func(tx driver.Tx) error {
		tx.Append([]core.Message{core.NewMessage(ev{Account: "ghost", Ref: "g1"})}, driver.AppendOptions{})
		return errors.New("roll back")
	})
	if cached("account", "ghost") || cached("ref", "g1") {
		t.Fatal("ids of a rolled-back transaction are still cached")
	}
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "real", Ref: "r1"})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if !cached("account", "real") {
		t.Fatal("a committed key pair is not cached")
	}
	// A failed append inside a transaction that commits drops its own ids.
	s.Update(ctx, func(tx driver.Tx) error {
		bad := []core.Message{core.NewMessage(ev{Account: "half", Ref: "h1"}), core.NewMessage(struct{ X int }{})}
		if _, err := tx.Append(bad, driver.AppendOptions{}); err == nil {
			t.Error("append of an unregistered payload succeeded")
		}
		return nil
	})
	if cached("account", "half") {
		t.Fatal("ids of a failed append are cached")
	}
}

// A stale cached id (its key pair deleted behind the store's back, as a
// pruning process may) is detected by the foreign key and resolved again.
func TestStaleKeyPairID(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	w := <-s.writer
	w.put(keyPair{"account", "stale"}, 999_999)
	s.writer <- w
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "stale", Ref: "s1"})}, driver.AppendOptions{}); err != nil {
		t.Fatalf("append with a stale cached id: %v", err)
	}
	r, err := s.Read(ctx, []core.Condition{{Type: "test.ev", Attrs: map[string]string{"account": "stale"}}}, driver.ReadOptions{})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("read: %d messages, %v", len(r.Messages), err)
	}
}

// Statements are prepared once per shape: the shapes of lists of 1 to 9
// types are the powers of two up to 16.
func TestShapesArePadded(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 5: 8, 9: 16, 16: 16} {
		if got := padded(n); got != want {
			t.Errorf("padded(%d) = %d, want %d", n, got, want)
		}
	}
}

// The writer checkpoints only past the backstop: the checkpoints of a
// steady stream of commits run in the background, on a reader (see
// checkpointer.go), so that no commit waits for one.
func TestCheckpointsOffTheWriter(t *testing.T) {
	s := newTestStore(t, Options{})
	w := <-s.writer
	got := pragma(t, w.conn, "wal_autocheckpoint")
	s.writer <- w
	if got != strconv.Itoa(autoCheckpointBackstop) {
		t.Fatalf("writer's wal_autocheckpoint = %s, want %d", got, autoCheckpointBackstop)
	}
	for i := 0; i < 3*checkpointEvery || s.commits.Load()%checkpointEvery != 0; i++ {
		if _, err := s.Append(t.Context(), []core.Message{core.NewMessage(ev{Account: "a", Ref: strconv.Itoa(i)})}, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.ckpt.runs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no background checkpoint after %d commits", 3*checkpointEvery)
		}
		time.Sleep(time.Millisecond)
	}
	// Every frame was committed before the checkpoints ran; once the last
	// one ran (it may be running), nothing is left for the writer.
	s.ckpt.close()
	s.ckpt = nil // Close must not stop it twice
	conn, err := s.readers.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.readers.Put(conn)
	var log, done int64
	err = sqlitex.ExecuteTransient(conn, "PRAGMA wal_checkpoint(PASSIVE)", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { log, done = stmt.ColumnInt64(1), stmt.ColumnInt64(2); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if log == 0 || done != log {
		t.Fatalf("WAL frames %d, checkpointed %d: want a WAL in use, all of it checkpointed", log, done)
	}

	mem, err := Install(t.Context(), ":memory:", Options{Registry: s.reg})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if mem.ckpt != nil {
		t.Error("an in-memory store runs a checkpointer")
	}
}
