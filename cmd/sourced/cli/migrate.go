package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// migrate applies, shows and prints the schema's versioned migrations.
func (g *globals) migrate(ctx context.Context, args []string) error {
	fs := g.flags("migrate")
	printFlag := fs.Bool("print", false, "")
	format := fs.String("format", "sql", "")
	dir := fs.String("dir", "", "")
	first := fs.Int("first", 1, "")
	storeName := fs.String("store", "", "")
	pos, err := g.parse(fs, args, 0, 1, "want up, status, validate, list or print")
	if err != nil {
		return g.helpOr(err)
	}
	op := "up"
	if len(pos) == 1 {
		op = pos[0]
	}
	if *printFlag {
		if len(pos) == 1 && op != "print" {
			return g.usagef("-print and %s: choose one", op)
		}
		op = "print"
	}
	if op != "print" && (*dir != "" || *format != "sql" || *first != 1) {
		return g.usagef("-format, -dir and -first are flags of 'migrate print'")
	}
	g.storeName = *storeName
	switch op {
	case "up":
		return g.migrateUp(ctx)
	case "status":
		return g.migrateStatus(ctx)
	case "validate":
		return g.migrateValidate(ctx)
	case "list":
		return g.migrateList()
	case "print":
		return g.migratePrint(*format, *dir, *first)
	}
	return g.usagef("unknown operation %q (up, status, validate, list, print)", op)
}

// schemaDriver is the driver of the commands that print the schema and
// need no database: the one -store names (sqlite, postgres), else the
// one of -db, else the first.
func (g *globals) schemaDriver() (Driver, error) {
	if g.storeName != "" {
		var names []string
		for _, d := range g.drivers {
			if strings.EqualFold(d.Name(), g.storeName) || strings.HasPrefix(strings.ToLower(d.Name()), strings.ToLower(g.storeName)) {
				return d, nil
			}
			names = append(names, strings.ToLower(d.Name()))
		}
		if strings.HasPrefix(strings.ToLower(g.storeName), "postgres") {
			return nil, fmt.Errorf("this sourced binary knows SQLite only (it is built without pgx). Install the one that knows both: %s", pgInstall)
		}
		return nil, g.usagef("-store %q: want one of %s", g.storeName, strings.Join(names, ", "))
	}
	if g.db != "" {
		return g.driver()
	}
	if len(g.drivers) == 0 {
		return nil, errors.New("this program has no store driver")
	}
	return g.drivers[0], nil
}

// objectPattern finds what a migration script creates, alterPattern what
// it changes, funcPattern the functions it defines, dropPattern what it
// drops and updatePattern the tables whose rows it rewrites (outside
// the bodies of functions and triggers, which bodyPattern finds).
var (
	objectPattern = regexp.MustCompile(`(?i)CREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX|TRIGGER)\s+IF\s+NOT\s+EXISTS\s+(\w+)`)
	dropPattern   = regexp.MustCompile(`(?i)DROP\s+(TABLE|INDEX|FUNCTION)\s+(?:IF\s+EXISTS\s+)?(\w+)`)
	updatePattern = regexp.MustCompile(`(?i)\bUPDATE\s+(\w+)\s+(?:AS\s+\w+\s+|\w+\s+)?SET\b`)
	bodyPattern   = regexp.MustCompile(`(?is)\$\$.*?\$\$|CREATE\s+TRIGGER\b.*?\bEND\b`)
	funcPattern   = regexp.MustCompile(`(?i)CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)`)
	alterPattern  = regexp.MustCompile(`(?i)ALTER\s+(TABLE|INDEX)\s+(?:IF\s+EXISTS\s+)?(\w+)(?:\s+ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?(\w+))?`)
)

// changes summarises what a script creates, alters or drops, for people.
func changes(sql string) []string {
	var tables, others []string
	nIndex, nTrigger := 0, 0
	for _, m := range objectPattern.FindAllStringSubmatch(sql, -1) {
		switch strings.ToLower(m[1]) {
		case "table":
			if !strings.HasSuffix(m[2], "_schema_migrations") {
				tables = append(tables, m[2])
			}
		case "index":
			nIndex++
		case "trigger":
			nTrigger++
		}
	}
	// A function a script creates and drops again is its own helper,
	// listed neither as created nor as dropped.
	funcs, drops := funcPattern.FindAllStringSubmatch(sql, -1), dropPattern.FindAllStringSubmatch(sql, -1)
	helpers := map[string]bool{}
	for _, d := range drops {
		if strings.EqualFold(d[1], "function") && slices.ContainsFunc(funcs, func(f []string) bool { return f[1] == d[2] }) {
			helpers[d[2]] = true
		}
	}
	for _, m := range funcs {
		if !helpers[m[1]] {
			tables = append(tables, "function "+m[1])
		}
	}
	for _, m := range alterPattern.FindAllStringSubmatch(sql, -1) {
		switch {
		case m[3] != "":
			tables = append(tables, m[2]+"."+m[3])
		case strings.EqualFold(m[1], "index"):
			tables = append(tables, "index "+m[2]+" altered")
		default:
			tables = append(tables, m[2]+" altered")
		}
	}
	for _, m := range drops {
		if !strings.EqualFold(m[1], "function") || !helpers[m[2]] {
			tables = append(tables, strings.ToLower(m[1])+" "+m[2]+" dropped")
		}
	}
	var rewritten []string
	for _, m := range updatePattern.FindAllStringSubmatch(bodyPattern.ReplaceAllString(sql, ""), -1) {
		if !slices.Contains(rewritten, m[1]) {
			rewritten = append(rewritten, m[1])
			tables = append(tables, m[1]+" rows rewritten")
		}
	}
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	if nIndex > 0 {
		others = append(others, plural(nIndex, "index", "indexes"))
	}
	if nTrigger > 0 {
		others = append(others, plural(nTrigger, "trigger", "triggers"))
	}
	return append(tables, others...)
}

type migrationRow struct {
	Version   int        `json:"version"`
	State     string     `json:"state,omitempty"`
	AppliedAt *time.Time `json:"applied_at,omitempty"`
	Changes   []string   `json:"changes,omitempty"`
}

func (g *globals) migrateList() error {
	d, err := g.schemaDriver()
	if err != nil {
		return err
	}
	ms, err := d.Migrations(g.prefixFor(d))
	if err != nil {
		return err
	}
	out := struct {
		Store      string         `json:"store"`
		Prefix     string         `json:"prefix"`
		Migrations []migrationRow `json:"migrations"`
	}{d.Name(), g.prefixFor(d), []migrationRow{}}
	for _, m := range ms {
		out.Migrations = append(out.Migrations, migrationRow{Version: m.Version, Changes: changes(m.SQL)})
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s schema, prefix %s: %d migrations\n\nVERSION\tCHANGES\n", d.Name(), out.Prefix, len(ms))
		for _, m := range out.Migrations {
			fmt.Fprintf(w, "%d\t%s\n", m.Version, strings.Join(m.Changes, ", "))
		}
	})
}

// status compares what db records with the program's migrations.
func status(ctx context.Context, d Driver, db, prefix string) (version int, rows []migrationRow, pending int, err error) {
	applied, err := d.Applied(ctx, db, prefix)
	if err != nil {
		return 0, nil, 0, err
	}
	ms, err := d.Migrations(prefix)
	if err != nil {
		return 0, nil, 0, err
	}
	at := map[int]time.Time{}
	for _, a := range applied {
		at[a.Version] = a.AppliedAt
		version = max(version, a.Version)
	}
	for _, m := range ms {
		r := migrationRow{Version: m.Version, State: "pending", Changes: changes(m.SQL)}
		if t, ok := at[m.Version]; ok {
			r.State, r.AppliedAt = "applied", &t
			delete(at, m.Version)
		} else {
			pending++
		}
		rows = append(rows, r)
	}
	for _, v := range slices.Sorted(func(yield func(int) bool) {
		for v := range at {
			if !yield(v) {
				return
			}
		}
	}) {
		t := at[v]
		rows = append(rows, migrationRow{Version: v, State: "unknown: applied by a newer program", AppliedAt: &t})
	}
	return version, rows, pending, nil
}

func (g *globals) migrateStatus(ctx context.Context) error {
	d, err := g.driver()
	if err != nil {
		return err
	}
	prefix := g.prefixFor(d)
	version, rows, pending, err := status(ctx, d, g.db, prefix)
	if err != nil {
		return err
	}
	out := struct {
		Database       string         `json:"database"`
		Store          string         `json:"store"`
		Prefix         string         `json:"prefix"`
		Version        int            `json:"version"`
		ProgramVersion int            `json:"program_version"`
		Pending        int            `json:"pending"`
		Migrations     []migrationRow `json:"migrations"`
	}{redact(g.db), d.Name(), prefix, version, d.SchemaVersion(), pending, rows}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "database\t%s (%s, prefix %s)\n", out.Database, d.Name(), prefix)
		fmt.Fprintf(w, "version\t%d (this program's: %d)\n", version, d.SchemaVersion())
		switch {
		case version > d.SchemaVersion():
			fmt.Fprintf(w, "state\tnewer than this program: upgrade it\n")
		case pending > 0:
			fmt.Fprintf(w, "state\t%d pending: apply with 'sourced -db %s%s migrate'\n", pending, out.Database, g.prefixFlag(d))
		default:
			fmt.Fprintf(w, "state\tup to date\n")
		}
		fmt.Fprintln(w, "\nVERSION\tSTATE\tAPPLIED AT\tCHANGES")
		for _, r := range rows {
			at := "-"
			if r.AppliedAt != nil {
				at = ts(*r.AppliedAt)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", r.Version, r.State, at, strings.Join(r.Changes, ", "))
		}
	})
}

// migrateValidate succeeds when the database is at this program's schema
// version, and fails (exit 1) saying what to do otherwise: for deploy
// scripts (River's migrate validate).
func (g *globals) migrateValidate(ctx context.Context) error {
	d, err := g.driver()
	if err != nil {
		return err
	}
	prefix := g.prefixFor(d)
	version, _, pending, err := status(ctx, d, g.db, prefix)
	if err != nil {
		return err
	}
	switch {
	case version > d.SchemaVersion():
		return fmt.Errorf("%s is at schema version %d (prefix %s), newer than this program's %d: upgrade the program", redact(g.db), version, prefix, d.SchemaVersion())
	case pending > 0:
		return fmt.Errorf("%s is at schema version %d (prefix %s) with %d migration(s) pending: apply them with 'sourced -db %s%s migrate' (or your migration tool)", redact(g.db), version, prefix, pending, redact(g.db), g.prefixFlag(d))
	}
	return g.emit(map[string]any{"database": redact(g.db), "version": version, "up_to_date": true}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s is at schema version %d (prefix %s): up to date\n", redact(g.db), version, prefix)
	})
}

func (g *globals) migrateUp(ctx context.Context) error {
	d, err := g.driver()
	if err != nil {
		return err
	}
	prefix := g.prefixFor(d)
	var before []migrationRow
	have := 0
	if _, isFile := d.(sqliteDriver); !isFile || fileExists(g.db) {
		if have, before, _, err = status(ctx, d, g.db, prefix); err != nil {
			return err
		}
	}
	g.progressf("migrating %s (%s, prefix %s) from version %d to %d...", redact(g.db), d.Name(), prefix, have, d.SchemaVersion())
	start := time.Now()
	if err := d.Install(ctx, g.db, prefix); err != nil {
		return err
	}
	version, after, _, err := status(ctx, d, g.db, prefix)
	if err != nil {
		return err
	}
	was := map[int]bool{}
	for _, r := range before {
		if r.State == "applied" {
			was[r.Version] = true
		}
	}
	applied := []migrationRow{}
	for _, r := range after {
		if r.State == "applied" && !was[r.Version] {
			applied = append(applied, r)
			g.progressf("  version %d applied", r.Version)
		}
	}
	g.progressf("done in %s", time.Since(start).Round(time.Millisecond))
	out := struct {
		Database string         `json:"database"`
		Store    string         `json:"store"`
		Prefix   string         `json:"prefix"`
		Version  int            `json:"version"`
		Applied  []migrationRow `json:"applied"`
	}{redact(g.db), d.Name(), prefix, version, applied}
	return g.emit(out, func(w *tabwriter.Writer) {
		for _, r := range applied {
			fmt.Fprintf(w, "applied version %d\t%s\n", r.Version, strings.Join(r.Changes, ", "))
		}
		if len(applied) == 0 {
			fmt.Fprintf(w, "%s is at version %d (prefix %s): nothing to apply (missing indexes or triggers of the version, if any, were restored)\n", out.Database, version, prefix)
			return
		}
		fmt.Fprintf(w, "%s is at version %d (prefix %s)\n", out.Database, version, prefix)
	})
}

// prefixFlag is " -prefix P" when the prefix is not the driver's default,
// for the commands the tool suggests.
func (g *globals) prefixFlag(d Driver) string {
	if p := g.prefixFor(d); p != d.DefaultPrefix() {
		return " -prefix " + p
	}
	return ""
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// migratePrint prints the migrations for a migration tool: plain SQL (one
// section per version), or goose or golang-migrate files (to dir, or to
// stdout, each headed by its file name).
func (g *globals) migratePrint(format, dir string, first int) error {
	if first < 1 {
		return g.usagef("-first must be at least 1 (the version number of the first file)")
	}
	d, err := g.schemaDriver()
	if err != nil {
		return err
	}
	prefix := g.prefixFor(d)
	ms, err := d.Migrations(prefix)
	if err != nil {
		return err
	}
	note := ""
	if d.Name() == "SQLite" {
		note = " Set PRAGMA journal_mode = WAL once, outside a transaction."
	}
	type file struct{ name, text string }
	var files []file
	switch format {
	case "sql":
		if dir != "" {
			return g.usagef("-dir writes goose or golang-migrate files: add -format goose or -format golang-migrate")
		}
		// One section per version, for migration tools that take the
		// steps one by one (each records its version when applied).
		fmt.Fprintf(g.out, "-- Sourced %s schema for prefix %s, versions 1 to %d.%s\n", d.Name(), prefix, d.SchemaVersion(), note)
		for _, m := range ms {
			if _, err := fmt.Fprintf(g.out, "\n-- sourced migration %d (prefix %s)\n%s\n", m.Version, prefix, m.SQL); err != nil {
				return err
			}
		}
		return nil
	case "goose":
		for i, m := range ms {
			files = append(files, file{
				fmt.Sprintf("%05d_sourced_%s_v%d.sql", first+i, prefix, m.Version),
				fmt.Sprintf("-- Sourced %s schema version %d (prefix %s), for goose.%s\n-- The script records its version in %s_schema_migrations, so sourced sees it applied.\n\n-- +goose Up\n-- +goose StatementBegin\n%s\n-- +goose StatementEnd\n\n-- +goose Down\n-- Irreversible: Sourced never rolls a schema back (its scripts only add).\n", d.Name(), m.Version, prefix, note, prefix, strings.TrimSpace(m.SQL)),
			})
		}
	case "golang-migrate":
		for i, m := range ms {
			files = append(files, file{
				fmt.Sprintf("%06d_sourced_%s_v%d.up.sql", first+i, prefix, m.Version),
				fmt.Sprintf("-- Sourced %s schema version %d (prefix %s), for golang-migrate.%s\n-- The script records its version in %s_schema_migrations, so sourced sees it applied.\n-- There is no down file: Sourced never rolls a schema back (its scripts only add).\n\n%s\n", d.Name(), m.Version, prefix, note, prefix, strings.TrimSpace(m.SQL)),
			})
		}
	default:
		return g.usagef("-format %q: want sql, goose or golang-migrate", format)
	}
	if dir == "" {
		for i, f := range files {
			if i > 0 {
				fmt.Fprintln(g.out)
			}
			if _, err := fmt.Fprintf(g.out, "-- file: %s\n%s", f.name, f.text); err != nil {
				return err
			}
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	written := []string{}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("migrate print: %w (the file exists: remove it, or number the files after yours with -first)", err)
		}
		_, err = fh.WriteString(f.text)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		written = append(written, path)
	}
	return g.emit(map[string][]string{"written": written}, func(w *tabwriter.Writer) {
		for _, p := range written {
			fmt.Fprintf(w, "wrote %s\n", p)
		}
	})
}

// version prints the program's version and the schema versions of its
// stores.
func (g *globals) version(ctx context.Context, args []string) error {
	fs := g.flags("version")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	v := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		if v == "" {
			v = "(devel)"
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
	}
	schemas := map[string]int{}
	var names []string
	for _, d := range g.drivers {
		schemas[d.Name()] = d.SchemaVersion()
		names = append(names, fmt.Sprintf("%s %d", d.Name(), d.SchemaVersion()))
	}
	out := struct {
		Version string         `json:"version"`
		Go      string         `json:"go"`
		Schemas map[string]int `json:"schema_versions"`
	}{v, runtime.Version(), schemas}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "sourced %s (%s)\nschema versions: %s\n", v, runtime.Version(), strings.Join(names, ", "))
	})
}
