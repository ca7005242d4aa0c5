package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Fixture payloads of these tests.
type (
	courseCreated struct {
		CourseName string `json:"course_name"`
	}
	userJoined struct {
		CourseName string `json:"course_name"`
		UserID     string `json:"user_id"`
	}
	tick struct {
		Counter string `json:"counter"`
		Seq     int    `json:"seq"`
		Writer  string `json:"writer"`
		Ref     string `json:"ref"`
	}
)

func registry(t testing.TB) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry()
	err := errors.Join(
		codec.Register[courseCreated](reg, "course.created"),
		codec.Register[userJoined](reg, "user.joined_course"),
		codec.Register[tick](reg, "test.tick"),
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "store.db") }

func install(t testing.TB, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = registry(t)
	}
	s, err := sqlitestore.Install(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendOK(t testing.TB, s driver.Store, payloads ...any) driver.AppendResult {
	t.Helper()
	msgs := make([]core.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = core.NewMessage(p)
	}
	res, err := s.Append(context.Background(), msgs, driver.AppendOptions{})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func TestOpenNotInstalled(t *testing.T) {
	ctx := t.Context()
	path := dbPath(t)
	_, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: registry(t)})
	if !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("open of an empty file: %v, want ErrNotInstalled", err)
	}
	// Installed under one prefix is not installed under another.
	install(t, path, sqlitestore.Options{Prefix: "billing"})
	_, err = sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: registry(t)})
	if !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("open of another prefix: %v, want ErrNotInstalled", err)
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: registry(t), Prefix: "billing"})
	if err != nil {
		t.Fatalf("open installed: %v", err)
	}
	s.Close()
}

func TestOpenBadOptions(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		opts sqlitestore.Options
		want string
	}{
		{"no registry", sqlitestore.Options{}, "Registry is required"},
		{"prefix with a dash", sqlitestore.Options{Registry: registry(t), Prefix: "bad-prefix"}, "must match"},
		{"prefix starting with a digit", sqlitestore.Options{Registry: registry(t), Prefix: "1x"}, "must match"},
		{"page size", sqlitestore.Options{Registry: registry(t), PageSize: 3000}, "page size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlitestore.Install(ctx, dbPath(t), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("install: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	appendOK(t, s, courseCreated{"Algebra"})
	if err := s.Install(t.Context()); err != nil {
		t.Fatalf("second install: %v", err)
	}
	// Concurrent installs of a new prefix in the same file.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s2, err := sqlitestore.Install(t.Context(), path, sqlitestore.Options{Registry: registry(t), Prefix: "other"})
			if err == nil {
				err = s2.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(t.Context())
	if err != nil || st.MaxPosition != 1 {
		t.Fatalf("stats after re-install: %+v, %v", st, err)
	}
}

func TestSchemaExport(t *testing.T) {
	schema := sqlitestore.Schema("billing")
	for _, want := range []string{"billing_messages", "billing_key_pairs", "billing_message_key_pairs", "billing_scheduled_messages", "idx_billing_"} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks %q", want)
		}
	}
	if strings.Contains(schema, "sourced_") || strings.Contains(schema, "{p}") {
		t.Errorf("schema for prefix billing names another prefix:\n%s", schema)
	}
	if d := sqlitestore.Schema(""); !strings.Contains(d, "sourced_messages") {
		t.Errorf("default schema lacks sourced_messages")
	}
	if _, err := sqlitestore.Migrations("no way"); err == nil {
		t.Error("Migrations accepted an invalid prefix")
	}

	// An app applying the exported schema with its own tool can then Open,
	// and Install over it is a no-op.
	path := dbPath(t)
	conn, err := sqlite.OpenConn(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitex.ExecuteScript(conn, schema, nil); err != nil {
		t.Fatalf("apply exported schema: %v", err)
	}
	conn.Close()
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{Registry: registry(t), Prefix: "billing"})
	if err != nil {
		t.Fatalf("open over exported schema: %v", err)
	}
	defer s.Close()
	if err := s.Install(t.Context()); err != nil {
		t.Fatalf("install over exported schema: %v", err)
	}
	appendOK(t, s, courseCreated{"Algebra"})
}

func TestPrefixIsolation(t *testing.T) {
	path := dbPath(t)
	a := install(t, path, sqlitestore.Options{Prefix: "a"})
	b := install(t, path, sqlitestore.Options{Prefix: "b"})
	appendOK(t, a, courseCreated{"Algebra"}, courseCreated{"History"})
	res := appendOK(t, b, courseCreated{"Algebra"})
	if res.Last != 1 {
		t.Fatalf("first position of store b: %d, want 1", res.Last)
	}
	conds := []core.Condition{{Type: "course.created", Attrs: map[string]string{"course_name": "Algebra"}}}
	for name, s := range map[string]*sqlitestore.Store{"a": a, "b": b} {
		r, err := s.Read(t.Context(), conds, driver.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) != 1 {
			t.Fatalf("store %s reads %d Algebra messages, want 1", name, len(r.Messages))
		}
	}
	if st, _ := a.Stats(t.Context()); st.MaxPosition != 2 {
		t.Fatalf("store a max position %d, want 2", st.MaxPosition)
	}
}

func TestMemoryStore(t *testing.T) {
	s := install(t, ":memory:", sqlitestore.Options{})
	appendOK(t, s, courseCreated{"Algebra"})
	page, err := s.ReadAll(t.Context(), driver.ReadAllOptions{})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("read all: %d messages, %v", len(page.Messages), err)
	}
	// A second in-memory store is another database.
	s2 := install(t, ":memory:", sqlitestore.Options{})
	if st, _ := s2.Stats(t.Context()); st.MaxPosition != 0 {
		t.Fatalf("second memory store has %d messages", st.MaxPosition)
	}
}

func TestNotifierAfterCommitOnly(t *testing.T) {
	n := new(driver.InlineNotifier)
	var mu sync.Mutex
	var got [][]string
	n.Subscribe(func(types []string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, slices.Clone(types))
	})
	take := func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		g := got
		got = nil
		return g
	}
	s := install(t, dbPath(t), sqlitestore.Options{Notifier: n})
	ctx := t.Context()

	// Committed: one notification after the commit, distinct types.
	err := s.Update(ctx, func(tx driver.Tx) error {
		for _, p := range []any{courseCreated{"A"}, userJoined{"A", "u1"}, courseCreated{"B"}} {
			if _, err := tx.Append([]core.Message{core.NewMessage(p)}, driver.AppendOptions{}); err != nil {
				return err
			}
		}
		if g := take(); len(g) != 0 {
			t.Errorf("notified inside the transaction: %v", g)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := take(); len(g) != 1 || !slices.Equal(g[0], []string{"course.created", "user.joined_course"}) {
		t.Fatalf("after commit: %v, want one notification of both types", g)
	}

	// Rolled back by an error: nothing announced, nothing stored.
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx driver.Tx) error {
		if _, err := tx.Append([]core.Message{core.NewMessage(courseCreated{"C"})}, driver.AppendOptions{}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v, want boom", err)
	}
	// Rolled back by a panic: the panic continues, nothing announced.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic did not propagate")
			}
		}()
		s.Update(ctx, func(tx driver.Tx) error {
			tx.Append([]core.Message{core.NewMessage(courseCreated{"D"})}, driver.AppendOptions{})
			panic("boom")
		})
	}()
	if g := take(); len(g) != 0 {
		t.Fatalf("rolled back transactions notified: %v", g)
	}
	if st, _ := s.Stats(ctx); st.MaxPosition != 3 {
		t.Fatalf("max position %d after rollbacks, want 3", st.MaxPosition)
	}
	// Scheduled messages announce when scheduled (a runtime's scheduler
	// then re-computes when the next one is due) and when promoted.
	future := core.NewMessage(courseCreated{"E"}).At(time.Now().Add(time.Hour))
	if _, err := s.Append(ctx, []core.Message{future}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if g := take(); len(g) != 1 || !slices.Equal(g[0], []string{"course.created"}) {
		t.Fatalf("after scheduling: %v, want one notification of the scheduled type", g)
	}
	if n, err := s.PromoteScheduled(ctx, time.Now().Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("promote: %d, %v", n, err)
	}
	if g := take(); len(g) != 1 || !slices.Equal(g[0], []string{"course.created"}) {
		t.Fatalf("after promotion: %v", g)
	}
}

func TestFailedAppendInsideUpdateLeavesNoTrace(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx := t.Context()
	dup := appendOK(t, s, courseCreated{"A"}).Messages[0].ID
	err := s.Update(ctx, func(tx driver.Tx) error {
		if _, err := tx.Append([]core.Message{core.NewMessage(userJoined{"A", "u1"})}, driver.AppendOptions{}); err != nil {
			return err
		}
		// Fails on its second message: its first must not stay behind.
		bad := []core.Message{core.NewMessage(userJoined{"A", "u2"}), {ID: dup, Payload: courseCreated{"A"}}}
		if _, err := tx.Append(bad, driver.AppendOptions{}); !errors.Is(err, driver.ErrDuplicateID) {
			t.Errorf("append of a duplicate id: %v, want ErrDuplicateID", err)
		}
		_, err := tx.Append([]core.Message{core.NewMessage(userJoined{"A", "u3"})}, driver.AppendOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Read(ctx, []core.Condition{{Type: "user.joined_course"}}, driver.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range r.Messages {
		users = append(users, m.Payload.(userJoined).UserID)
	}
	if !slices.Equal(users, []string{"u1", "u3"}) {
		t.Fatalf("users %v, want [u1 u3]", users)
	}
	// The index of the rolled-back message is gone too: u2 matches nothing.
	r, _ = s.Read(ctx, []core.Condition{{Type: "user.joined_course", Attrs: map[string]string{"user_id": "u2"}}}, driver.ReadOptions{})
	if len(r.Messages) != 0 {
		t.Fatalf("u2 is still indexed: %v", r.Messages)
	}
}

// A key pair created by a transaction that rolls back must not be served
// from the writer's cache later: the next append with that value creates it
// again and is found by it.
func TestKeyPairCacheSurvivesRollback(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx := t.Context()
	for range 3 {
		s.Update(ctx, func(tx driver.Tx) error {
			tx.Append([]core.Message{core.NewMessage(courseCreated{"Ghost"})}, driver.AppendOptions{})
			return errors.New("roll back")
		})
	}
	appendOK(t, s, courseCreated{"Ghost"})
	r, err := s.Read(ctx, []core.Condition{{Type: "course.created", Attrs: map[string]string{"course_name": "Ghost"}}}, driver.ReadOptions{})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("read Ghost: %d messages, %v", len(r.Messages), err)
	}
}

func TestTxContextConn(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx := t.Context()
	exec := func(conn *sqlite.Conn, sql string) error { return sqlitex.ExecuteTransient(conn, sql, nil) }
	err := s.Update(ctx, func(tx driver.Tx) error {
		conn := tx.Context().(*sqlitestore.TxContext).Conn()
		return exec(conn, "CREATE TABLE read_model (name TEXT)")
	})
	if err != nil {
		t.Fatal(err)
	}
	// Sync work writes in the transaction: it rolls back with it.
	for _, fail := range []bool{false, true} {
		err := s.Update(ctx, func(tx driver.Tx) error {
			if _, err := tx.Append([]core.Message{core.NewMessage(courseCreated{"A"})}, driver.AppendOptions{}); err != nil {
				return err
			}
			if err := exec(tx.Context().(*sqlitestore.TxContext).Conn(), "INSERT INTO read_model VALUES ('A')"); err != nil {
				return err
			}
			if fail {
				return errors.New("fail")
			}
			return nil
		})
		if (err != nil) != fail {
			t.Fatalf("update (fail=%v): %v", fail, err)
		}
	}
	var rows int
	err = s.Update(ctx, func(tx driver.Tx) error {
		return sqlitex.ExecuteTransient(tx.Context().(*sqlitestore.TxContext).Conn(), "SELECT count(*) FROM read_model", &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { rows = stmt.ColumnInt(0); return nil },
		})
	})
	if err != nil || rows != 1 {
		t.Fatalf("read model rows %d (%v), want 1", rows, err)
	}
}

func TestTxUsedAfterUpdate(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	var kept driver.Tx
	s.Update(t.Context(), func(tx driver.Tx) error { kept = tx; return nil })
	if _, err := kept.LastPosition(); err == nil {
		t.Fatal("a transaction used after its Update returned did not fail")
	}
}

func TestUnknownTypeInLog(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	appendOK(t, s, courseCreated{"A"})
	s.Close()
	// Reopened by a program that no longer registers the type.
	s2, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{Registry: codec.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, err = s2.ReadAll(t.Context(), driver.ReadAllOptions{})
	if !errors.Is(err, codec.ErrUnknownType) {
		t.Fatalf("read of an unregistered type: %v, want ErrUnknownType", err)
	}
}

func TestCancelledContext(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(courseCreated{"A"})}, driver.AppendOptions{}); err == nil {
		t.Fatal("append with a cancelled context succeeded")
	}
	if _, err := s.ReadAll(ctx, driver.ReadAllOptions{}); err == nil {
		t.Fatal("read with a cancelled context succeeded")
	}
	// The store still works.
	appendOK(t, s, courseCreated{"A"})
}

func TestOptimizeAndStats(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx := t.Context()
	appendOK(t, s, courseCreated{"A"}, courseCreated{"B"})
	future := core.NewMessage(courseCreated{"C"}).At(time.Now().Add(time.Hour))
	future.ID = uuid.Must(uuid.NewV7())
	if _, err := s.Append(ctx, []core.Message{future}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.MaxPosition != 2 || st.Scheduled != 1 || len(st.Groups) != 0 {
		t.Fatalf("stats %+v (%v), want 2 messages and 1 scheduled", st, err)
	}
}

// Two promoters (two stores, so two writer connections, as in two
// processes) racing on one schedule promote every message exactly once.
func TestConcurrentPromoters(t *testing.T) {
	path := dbPath(t)
	a := install(t, path, sqlitestore.Options{})
	b := install(t, path, sqlitestore.Options{})
	ctx := t.Context()
	base := time.Now()
	const n = 300
	var msgs []core.Message
	for i := range n {
		msgs = append(msgs, core.NewMessage(userJoined{"A", "u" + strconv.Itoa(i)}).At(base.Add(time.Hour+time.Duration(i)*time.Second)))
	}
	if _, err := a.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	promoted := make([]int, 2)
	errs := make([]error, 2)
	for i, s := range []*sqlitestore.Store{a, b} {
		wg.Go(func() {
			for step := range 10 {
				k, err := s.PromoteScheduled(ctx, base.Add(time.Hour+time.Duration((step+1)*n/10)*time.Second))
				if err != nil {
					errs[i] = err
					return
				}
				promoted[i] += k
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if promoted[0]+promoted[1] != n {
		t.Fatalf("promoted %v, want %d in all", promoted, n)
	}
	r, err := b.Read(ctx, []core.Condition{{Type: "user.joined_course"}}, driver.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != n {
		t.Fatalf("%d messages in the log, want %d", len(r.Messages), n)
	}
	for i, m := range r.Messages {
		if got := m.Payload.(userJoined).UserID; got != "u"+strconv.Itoa(i) {
			t.Fatalf("message %d is %s: promotion out of schedule order", i, got)
		}
	}
	if st, _ := a.Stats(ctx); st.Scheduled != 0 {
		t.Fatalf("%d messages left scheduled", st.Scheduled)
	}
}

// TestBusyIsErrBusy holds the write lock from another connection (as
// another process would) for longer than the busy timeout: the append
// fails with driver.ErrBusy, writes nothing, and succeeds once the lock is
// gone.
func TestBusyIsErrBusy(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{BusyTimeout: 30 * time.Millisecond})
	other, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := sqlitex.ExecuteTransient(other, "BEGIN IMMEDIATE", nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(t.Context(), []core.Message{core.NewMessage(courseCreated{"A"})}, driver.AppendOptions{})
	if !errors.Is(err, driver.ErrBusy) {
		t.Fatalf("append under another writer's lock: got %v, want driver.ErrBusy", err)
	}
	if err := sqlitex.ExecuteTransient(other, "ROLLBACK", nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.ReadAll(t.Context(), driver.ReadAllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 0 {
		t.Fatalf("a busy append wrote %d messages", len(res.Messages))
	}
	appendOK(t, s, courseCreated{"A"})
}

// TestWriterIsNotStarved: a store whose goroutines commit back to back
// (four appenders sharing one writer) hands the file's write lock over
// between transactions, and another store on the same file (as another
// process would) gets it well within its busy timeout. SQLite's own busy
// handler sleeps up to 100 ms between tries and missed those short gaps
// for whole timeouts under the race detector.
func TestWriterIsNotStarved(t *testing.T) {
	path := dbPath(t)
	hog := install(t, path, sqlitestore.Options{})
	other := install(t, path, sqlitestore.Options{BusyTimeout: time.Second})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				hog.Append(t.Context(), []core.Message{core.NewMessage(courseCreated{"A"})}, driver.AppendOptions{})
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 10 {
		time.Sleep(20 * time.Millisecond)
		if _, err := other.Append(t.Context(), []core.Message{core.NewMessage(courseCreated{"B"})}, driver.AppendOptions{}); err != nil {
			t.Fatalf("append %d while another store commits back to back: %v", i, err)
		}
	}
}
