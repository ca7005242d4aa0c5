package readme

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/cmd/sourced/cli"
	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// migrateStatus returns the version line and the migration rows (version,
// state, changes: the applied time left out) of a 'migrate status'
// transcript.
func migrateStatus(transcript string) (version string, rows []string) {
	for _, line := range strings.Split(transcript, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "version":
			version = strings.Join(f, " ")
		case len(f) >= 5 && f[1] == "applied" && f[0] != "VERSION":
			rows = append(rows, f[0]+" "+f[1]+" "+strings.Join(f[4:], " "))
		}
	}
	return version, rows
}

// The README's 'migrate status' transcript is what the tool prints for a
// SQLite store of this version (apart from the file's name and the times).
func TestREADMEMigrateStatusIsCurrent(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "$ sourced -db courses.db migrate status\n"
	_, after, ok := strings.Cut(string(md), cmd)
	if !ok {
		t.Fatalf("README.md has no %q transcript", strings.TrimSpace(cmd))
	}
	transcript, _, _ := strings.Cut(after, "```")
	path := filepath.Join(t.TempDir(), "courses.db")
	s, err := sqlitestore.Install(context.Background(), path, sqlitestore.Options{Registry: codec.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), []string{"-db", path, "migrate", "status"}, &out, &errOut, cli.SQLite()); code != 0 {
		t.Fatalf("migrate status: exit %d: %s", code, errOut.String())
	}
	wantVersion, wantRows := migrateStatus(out.String())
	gotVersion, gotRows := migrateStatus(transcript)
	if gotVersion != wantVersion || strings.Join(gotRows, "\n") != strings.Join(wantRows, "\n") {
		t.Errorf("README.md's migrate status transcript is stale (sqlitestore.SchemaVersion %d):\n%s\n%s\nthe tool prints:\n%s\n%s\nrun it on the courses example's database and copy its output",
			sqlitestore.SchemaVersion, gotVersion, strings.Join(gotRows, "\n"), wantVersion, strings.Join(wantRows, "\n"))
	}
}
