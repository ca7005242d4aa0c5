package sqlitestore_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// rawExec runs a script on a connection of its own, as an operator or
// another tool would.
func rawExec(t testing.TB, path, script string) {
	t.Helper()
	conn, err := sqlite.OpenConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sqlitex.ExecuteScript(conn, script, nil); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}

func openStore(path string, opts sqlitestore.Options, t testing.TB) (*sqlitestore.Store, error) {
	if opts.Registry == nil {
		opts.Registry = registry(t)
	}
	s, err := sqlitestore.Open(t.Context(), path, opts)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestOpenRefusesANewerSchema(t *testing.T) {
	path := dbPath(t)
	install(t, path, sqlitestore.Options{}).Close()
	rawExec(t, path, `INSERT INTO sourced_schema_migrations (version, applied_at) VALUES (99, 'later');
DROP INDEX idx_sourced_messages_type;`)
	_, err := openStore(path, sqlitestore.Options{}, t)
	if !errors.Is(err, driver.ErrSchemaNewer) || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a newer schema: %v, want ErrSchemaNewer naming the file and version 99", err)
	}
	_, err = sqlitestore.Install(t.Context(), path, sqlitestore.Options{Registry: registry(t)})
	if !errors.Is(err, driver.ErrSchemaNewer) {
		t.Fatalf("install over a newer schema: %v, want ErrSchemaNewer", err)
	}
	// Nothing written: the index the newer program dropped stays dropped.
	if n := rawInt(t, path, `SELECT count(*) FROM sqlite_schema WHERE name = 'idx_sourced_messages_type'`); n != 0 {
		t.Fatal("install over a newer schema wrote to it (re-created an index)")
	}
}

func TestOpenRefusesAnOutdatedSchema(t *testing.T) {
	path := dbPath(t)
	install(t, path, sqlitestore.Options{}).Close()
	rawExec(t, path, `DELETE FROM sourced_schema_migrations WHERE version >= 2`)
	_, err := openStore(path, sqlitestore.Options{}, t)
	if !errors.Is(err, driver.ErrSchemaOutdated) {
		t.Fatalf("open of an outdated schema: %v, want ErrSchemaOutdated", err)
	}
	for _, want := range []string{"version 1", "Install", "sourced -db " + path, "migrate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	install(t, path, sqlitestore.Options{}).Close()
	if _, err := openStore(path, sqlitestore.Options{}, t); err != nil {
		t.Fatalf("open after install: %v", err)
	}
}

func TestInstallRestoresDroppedIndexesAndTriggers(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	first := appendOK(t, s, courseCreated{"Algebra"}).Messages[0]
	s.Close()
	rawExec(t, path, `DROP INDEX idx_sourced_messages_id; DROP INDEX idx_sourced_offsets_pending; DROP TRIGGER trg_sourced_dirty_on_message;`)
	_, err := openStore(path, sqlitestore.Options{}, t)
	if !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("open with dropped objects: %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{"index idx_sourced_messages_id", "index idx_sourced_offsets_pending", "trigger trg_sourced_dirty_on_message", "Install"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	s = install(t, path, sqlitestore.Options{})
	for _, name := range []string{"idx_sourced_messages_id", "idx_sourced_offsets_pending", "trg_sourced_dirty_on_message"} {
		if n := rawInt(t, path, `SELECT count(*) FROM sqlite_schema WHERE name = '`+name+`'`); n != 1 {
			t.Errorf("install did not restore %s", name)
		}
	}
	dup := core.NewMessage(courseCreated{"History"})
	dup.ID = first.ID
	if _, err := s.Append(t.Context(), []core.Message{dup}, driver.AppendOptions{}); !errors.Is(err, driver.ErrDuplicateID) {
		t.Fatalf("append of a duplicate id after install: %v, want ErrDuplicateID", err)
	}
}

func TestInstallCannotRestoreAUniqueIndexOverDuplicates(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	first := appendOK(t, s, courseCreated{"Algebra"}).Messages[0]
	s.Close()
	rawExec(t, path, `DROP INDEX idx_sourced_messages_id;
INSERT INTO sourced_messages (message_id, message_type, payload, created_at) VALUES ('`+first.ID.String()+`', 'course.created', '{}', '2026-01-01T00:00:00.000000Z');`)
	_, err := sqlitestore.Install(t.Context(), path, sqlitestore.Options{Registry: registry(t)})
	if err == nil || !strings.Contains(err.Error(), "duplicates") {
		t.Fatalf("install over duplicate ids: %v, want an error saying to remove the duplicates", err)
	}
}

func TestMigrationsAreVersioned(t *testing.T) {
	ms, err := sqlitestore.Migrations("app")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != sqlitestore.SchemaVersion {
		t.Fatalf("%d migrations, want SchemaVersion = %d", len(ms), sqlitestore.SchemaVersion)
	}
	path := dbPath(t)
	// A migration tool applies them one by one: each records its version.
	for i, m := range ms {
		if m.Version != i+1 || !strings.Contains(m.SQL, "app_schema_migrations") || strings.Contains(m.SQL, "{p}") {
			t.Fatalf("migration %d: version %d, SQL:\n%s", i+1, m.Version, m.SQL)
		}
		rawExec(t, path, m.SQL) // ExecuteScript runs it in one savepoint
		_, err := openStore(path, sqlitestore.Options{Prefix: "app"}, t)
		if i+1 < len(ms) && !errors.Is(err, driver.ErrSchemaOutdated) {
			t.Fatalf("open after migration %d of %d: %v, want ErrSchemaOutdated", i+1, len(ms), err)
		}
		if i+1 == len(ms) && err != nil {
			t.Fatalf("open after every migration: %v", err)
		}
	}
	// Applied twice (idempotent) changes nothing.
	rawExec(t, path, ms[0].SQL)
	if _, err := openStore(path, sqlitestore.Options{Prefix: "app"}, t); err != nil {
		t.Fatalf("open after re-applying migration 1: %v", err)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database at all\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func() error{
		"Open": func() error { _, err := openStore(path, sqlitestore.Options{}, t); return err },
		"Install": func() error {
			_, err := sqlitestore.Install(t.Context(), path, sqlitestore.Options{Registry: registry(t)})
			return err
		},
	} {
		err := open()
		if !errors.Is(err, sqlitestore.ErrNotDatabase) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a Sourced store") {
			t.Errorf("%s of a text file: %v, want ErrNotDatabase naming the file", name, err)
		}
	}
}

// readOnlyCopy returns the path of the store at path in a directory this
// process cannot write: a read-only bind mount when running as root (for
// whom file modes do not stop writes), else a directory without write
// permission.
func readOnlyCopy(t *testing.T, path string) string {
	t.Helper()
	src := filepath.Dir(path)
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(src, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(src, 0o755) })
		return path
	}
	ro := t.TempDir()
	if out, err := exec.Command("mount", "--bind", "-o", "ro", src, ro).CombinedOutput(); err != nil {
		t.Skipf("cannot make a read-only mount as root: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", ro).Run() })
	exec.Command("mount", "-o", "remount,bind,ro", ro).Run()
	probe := filepath.Join(ro, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err == nil {
		t.Skip("the bind mount is writable")
	}
	return filepath.Join(ro, filepath.Base(path))
}

func TestReadOnlyStore(t *testing.T) {
	for _, how := range []string{"Options.ReadOnly", "read-only directory"} {
		t.Run(how, func(t *testing.T) {
			path := dbPath(t)
			s := install(t, path, sqlitestore.Options{})
			appendOK(t, s, courseCreated{"Algebra"}, courseCreated{"History"})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			opts := sqlitestore.Options{ReadOnly: true}
			if how != "Options.ReadOnly" {
				path = readOnlyCopy(t, path)
				opts = sqlitestore.Options{}
			}
			ro, err := openStore(path, opts, t)
			if err != nil {
				t.Fatalf("open read-only: %v", err)
			}
			if !ro.ReadOnly() {
				t.Fatal("store not read-only")
			}
			st, err := ro.Stats(t.Context())
			if err != nil || st.MaxPosition != 2 {
				t.Fatalf("stats of a read-only store: %+v, %v", st, err)
			}
			page, err := ro.ReadAll(t.Context(), driver.ReadAllOptions{})
			if err != nil || len(page.Messages) != 2 {
				t.Fatalf("read of a read-only store: %d messages, %v", len(page.Messages), err)
			}
			_, err = ro.Append(t.Context(), []core.Message{core.NewMessage(courseCreated{"Art"})}, driver.AppendOptions{})
			if !errors.Is(err, sqlitestore.ErrReadOnly) {
				t.Fatalf("append to a read-only store: %v, want ErrReadOnly", err)
			}
			for name, write := range map[string]func() error{
				"Install":  func() error { return ro.Install(t.Context()) },
				"Optimize": func() error { return ro.Optimize(t.Context()) },
				"Clear":    func() error { return ro.Clear(t.Context()) },
				"Register": func() error {
					return ro.RegisterGroup(t.Context(), driver.GroupSpec{ID: "g", PartitionBy: []string{"course_name"}, Handled: []string{"course.created"}})
				},
			} {
				err := write()
				if !errors.Is(err, sqlitestore.ErrReadOnly) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "attempt to write") {
					t.Errorf("%s on a read-only store: %v, want ErrReadOnly naming the file", name, err)
				}
			}
			// sqlitestore.Install on the read-only path says why too.
			_, err = sqlitestore.Install(t.Context(), path, sqlitestore.Options{Registry: registry(t), ReadOnly: opts.ReadOnly})
			if !errors.Is(err, sqlitestore.ErrReadOnly) {
				t.Errorf("Install of a read-only file: %v, want ErrReadOnly", err)
			}
		})
	}
}

func TestOpenRefreshesMissingOrStaleStatistics(t *testing.T) {
	t.Parallel() // its store is its own
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	appendOK(t, s, courseCreated{"Algebra"})
	if err := s.Install(t.Context()); err != nil { // no statistics kept for one message
		t.Fatal(err)
	}
	batch := make([]any, 12_000) // past the 10,000 rows below which none are kept
	for i := range batch {
		batch[i] = userJoined{"Algebra", uuid.NewString()}
	}
	appendOK(t, s, batch...)
	s.Close()
	analyzed := func() int64 {
		return rawInt(t, path, `SELECT coalesce(max(CAST(substr(stat, 1, instr(stat || ' ', ' ') - 1) AS INTEGER)), 0) FROM sqlite_stat1 WHERE tbl = 'sourced_messages'`)
	}
	if n := analyzed(); n > 10 {
		t.Fatalf("fixture: statistics record %d messages, want about 1", n)
	}
	// Much older than the log: refreshed.
	s2, err := openStore(path, sqlitestore.Options{}, t)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if n := analyzed(); n < 10_000 {
		t.Fatalf("after open: statistics record %d messages, want the log's ~12001", n)
	}
	// Missing: refreshed.
	rawExec(t, path, `DELETE FROM sqlite_stat1`)
	s3, err := openStore(path, sqlitestore.Options{}, t)
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
	if n := analyzed(); n < 10_000 {
		t.Fatalf("after open with no statistics: they record %d messages", n)
	}
}
