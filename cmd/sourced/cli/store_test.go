package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/shell/sqlitestore"
)

func sqlExec(t *testing.T, path, script string) {
	t.Helper()
	conn, err := sqlite.OpenConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sqlitex.ExecuteScript(conn, script, nil); err != nil {
		t.Fatal(err)
	}
}

func TestStatsShowsTheWALSize(t *testing.T) {
	db := fixture(t)
	out, errOut, code := cli(t, "-db", db, "stats")
	if code != 0 || !strings.Contains(out, "wal size") {
		t.Fatalf("stats: exit %d, %s\n%s", code, errOut, out)
	}
	out, _, _ = cli(t, "-db", db, "-json", "stats")
	var st struct {
		WALBytes *int64 `json:"wal_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.WALBytes == nil {
		t.Fatalf("stats JSON has no wal_bytes: %s (%v)", out, err)
	}
}

func TestStatsOfAReadOnlyCopy(t *testing.T) {
	db := fixture(t)
	dir := filepath.Dir(db)
	if os.Geteuid() == 0 {
		ro := t.TempDir()
		if out, err := exec.Command("mount", "--bind", "-o", "ro", dir, ro).CombinedOutput(); err != nil {
			t.Skipf("cannot make a read-only mount as root: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", ro).Run() })
		exec.Command("mount", "-o", "remount,bind,ro", ro).Run()
		db = filepath.Join(ro, filepath.Base(db))
	} else {
		os.Chmod(db, 0o444)
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	out, errOut, code := cli(t, "-db", db, "stats")
	if code != 0 || !strings.Contains(out, "max position  3") || !strings.Contains(out, "read-only") {
		t.Fatalf("stats of a read-only copy: exit %d, %s\n%s", code, errOut, out)
	}
	_, errOut, code = cli(t, "-db", db, "migrate")
	if code != 1 || !strings.Contains(errOut, "read-only") || strings.Contains(errOut, "attempt to write") {
		t.Fatalf("migrate of a read-only copy: exit %d, %s", code, errOut)
	}
}

func TestMigratePrintMarksEachVersion(t *testing.T) {
	out, errOut, code := cli(t, "-prefix", "app", "migrate", "-print")
	if code != 0 {
		t.Fatal(errOut)
	}
	sections := strings.Split(out, "\n-- sourced migration ")
	if len(sections) != sqlitestore.SchemaVersion+1 {
		t.Fatalf("migrate -print: %d sections, want versions 1 to %d:\n%s", len(sections)-1, sqlitestore.SchemaVersion, out)
	}
	for v := 1; v <= sqlitestore.SchemaVersion; v++ {
		if !strings.HasPrefix(sections[v], fmt.Sprintf("%d (prefix app)", v)) {
			t.Fatalf("migrate -print does not mark version %d:\n%s", v, out)
		}
	}
	// Applied one by one, as a migration tool would, they install the
	// store: stats works on the file.
	db := filepath.Join(t.TempDir(), "app.db")
	for _, sec := range sections[1:] {
		sqlExec(t, db, sec[strings.Index(sec, "\n")+1:])
	}
	if _, errOut, code := cli(t, "-db", db, "-prefix", "app", "stats"); code != 0 {
		t.Fatalf("stats after applying the printed migrations: %s", errOut)
	}
}

func TestOutdatedSchemaSaysToMigrate(t *testing.T) {
	db := fixture(t)
	sqlExec(t, db, `DELETE FROM sourced_schema_migrations WHERE version >= 2`)
	_, errOut, code := cli(t, "-db", db, "stats")
	if code != 1 || !strings.Contains(errOut, "migrate") || !strings.Contains(errOut, "version 1") {
		t.Fatalf("stats of an outdated schema: exit %d, %s", code, errOut)
	}
	if _, errOut, code := cli(t, "-db", db, "migrate"); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	if _, errOut, code := cli(t, "-db", db, "stats"); code != 0 {
		t.Fatalf("stats after migrate: %s", errOut)
	}
}
