package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// Driver opens the stores of one kind of database for the commands.
type Driver interface {
	// Name names the database kind in messages ("SQLite", "PostgreSQL").
	Name() string
	// Accepts reports whether db (the -db value) names a database of
	// this driver.
	Accepts(db string) bool
	// Open opens the installed store at db, reading payloads raw (as
	// stored JSON). A store that is missing, not installed or at another
	// schema version gives an error saying what to do.
	Open(ctx context.Context, db, prefix string) (Store, error)
	// Install applies the migrations db lacks (see 'sourced migrate').
	Install(ctx context.Context, db, prefix string) error
	// Migrations returns the schema's versioned scripts for prefix.
	Migrations(prefix string) ([]Migration, error)
	// Applied returns the schema versions db records for prefix, in
	// order (none when the store was never installed there).
	Applied(ctx context.Context, db, prefix string) ([]AppliedMigration, error)
	// SchemaVersion is the schema version this program reads and writes.
	SchemaVersion() int
	// DefaultPrefix is the table prefix used when -prefix is not given.
	DefaultPrefix() string
}

// Store is what the commands need of a store: a shell.Store and the
// operator's extras that sqlitestore and pgstore both provide.
type Store interface {
	shell.Store
	// ScheduleReader lists up to limit scheduled messages, soonest first.
	driver.ScheduleReader
	// CancelScheduled deletes a scheduled message; false when none has
	// the id.
	CancelScheduled(ctx context.Context, id uuid.UUID) (bool, error)
	// Workers lists the workers' heartbeat records.
	Workers(ctx context.Context) ([]Worker, error)
	// Lag counts, per offset id, the pending messages of group's
	// partitions with pending work, at most limit each.
	Lag(ctx context.Context, group string, limit int) (map[int64]int, error)
}

// ReadOnlyReporter is the optional interface of a Store that may have
// been opened read-only: the SQLite driver's does when this process
// cannot write the file or its directory. 'sourced stats' reports it
// (read_only, and a line saying so); a store without it is taken as
// writable.
type ReadOnlyReporter interface {
	ReadOnly() bool
}

// Worker is a worker's heartbeat record.
type Worker struct {
	ID       string    `json:"id"`
	LastSeen time.Time `json:"last_seen"`
}

// Migration is one versioned schema script.
type Migration struct {
	Version int
	SQL     string
}

// AppliedMigration is a schema version a database records as applied.
type AppliedMigration struct {
	Version   int       `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

// pgInstall is how to get the binary that opens PostgreSQL.
const pgInstall = "go install github.com/sourced-go/sourced/shell/pgstore/cmd/sourced@latest"

// Main runs the command line of the process with drivers and exits with
// its code. SIGINT and SIGTERM end a command that runs until stopped (log
// -follow) cleanly.
func Main(drivers ...Driver) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr, drivers...)
	stop()
	os.Exit(code)
}

// Run runs the command line args with drivers (the first that accepts -db
// opens it), writing to stdout and stderr, and returns the exit code: 0
// on success, 1 when the command failed, 2 on bad usage.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, drivers ...Driver) int {
	// Stored data reaches the terminal only with its control characters
	// escaped (see escWriter).
	progress := isTerminal(stderr)
	stdout, stderr = escWriter{stdout}, escWriter{stderr}
	g := &globals{out: stdout, errOut: stderr, drivers: drivers, progress: progress}
	err := g.run(ctx, args)
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "sourced: %s\n", scrub(strip(ue.msg), g.db))
		switch {
		case ue.full:
			fmt.Fprint(stderr, "\n"+usage)
		case ue.cmd != nil:
			fmt.Fprintf(stderr, "usage: sourced %s\n(sourced %s -h for its flags, sourced help for every command)\n", ue.cmd.synopsis, ue.cmd.name)
		}
		return 2
	}
	fmt.Fprintf(stderr, "sourced: %s\n", scrub(strip(err.Error()), g.db))
	return 1
}

// strip removes the "sourced: " the library's own errors start with, so
// that the tool's prefix is not doubled.
func strip(msg string) string {
	for strings.HasPrefix(msg, "sourced: ") {
		msg = strings.TrimPrefix(msg, "sourced: ")
	}
	return msg
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// usageError is bad usage: exit code 2, with the command's synopsis (or
// the full usage when full).
type usageError struct {
	msg  string
	cmd  *command
	full bool
}

func (e *usageError) Error() string { return e.msg }

// command is one of the tool's commands.
type command struct {
	name     string
	synopsis string // the usage line, after "sourced "
	help     string // one line for the command list
	run      func(g *globals, ctx context.Context, args []string) error
}

// commands lists the commands in the order of the usage.
var commands []*command

func init() {
	commands = []*command{
		{"stats", "stats [-lag-limit N]", "the log's position, the schedule, and every consumer group with its lag", (*globals).stats},
		{"log", "log [-limit N] [-from P] [-desc] [-type T]... [-where k=v]... [-follow [-interval D]]", "a page of the log, filtered by type and attribute; -follow prints new messages as they arrive", (*globals).log},
		{"trace", "trace ID|POSITION", "the causal chain of a message: every message sharing its correlation id", (*globals).trace},
		{"offsets", "offsets [-group G] [-limit N] [-from ID] [-lag-limit N]", "consumer-group offsets with each partition's lag, by id", (*globals).offsets},
		{"workers", "workers", "the workers' heartbeats and the claims each holds", (*globals).workers},
		{"groups", "groups stop GROUP [REASON] | reset GROUP | start|retry GROUP [-wait [-interval D]]", "operator commands on a consumer group (retry: a retrying or failed group now; -wait: until its workers catch up, with progress)", (*globals).groups},
		{"partitions", "partitions parked [-group G] | retry|skip|reset GROUP PARTITION", "partitions the parking strategy set aside: list them; handle the failed message again, skip it, or replay the partition", (*globals).partitions},
		{"schedule", "schedule [-limit N] | schedule cancel ID", "messages waiting to be promoted; cancel one before it is", (*globals).schedule},
		{"migrate", "migrate [up] | status | validate | list [-store S] | print [-store S] [-format sql|goose|golang-migrate] [-dir DIR] [-first N]", "apply the schema's pending migrations; show the database's version and the pending ones; fail unless up to date; print them for a migration tool", (*globals).migrate},
		{"workflows", "workflows [-workflow W] [-status S] [-limit N]", "durable workflow runs: counts per workflow, each run's status and current step", (*globals).workflows},
		{"workflow", "workflow [-workflow W] ID", "one workflow run with its steps", (*globals).workflowRun},
		{"serve", "serve [-addr 127.0.0.1:8080] [-read-only] [-refresh D]", "the web dashboard of the store, on a loopback address (it has no authentication), until Ctrl-C", (*globals).serve},
		{"topology", "topology [-format json|mermaid|svg] [-observe N]", "the message-flow graph of the application's reactors (a tool built with cli.WithReactors); -observe N compares its declared edges with what the log's N newest messages caused, and flags the differences", (*globals).topology},
		{"state", "state GROUP PARTITION [-at POSITION]", "time travel: what a reactor of the application (a tool built with cli.WithReactors) holds for a partition just after a position (default: the partition's last; 0: before its first), folded from the log, with the message it handles next, what that produced, and a query's parts with what each read", (*globals).state},
		{"version", "version", "this program's version and the schema versions it reads and writes", (*globals).version},
		{"help", "help [COMMAND]", "this help, or one command's", (*globals).help},
	}
	var b strings.Builder
	b.WriteString("Usage: sourced [-db DB] [-prefix PREFIX] [-json] COMMAND [ARGS]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s\n      %s\n", c.synopsis, c.help)
	}
	b.WriteString(`
Options (before or after the command):
  -db DB         the store: a SQLite file, or a postgres:// URL (default $SOURCED_DB)
  -prefix NAME   the table prefix (default "sourced")
  -json          JSON output for scripts (snake_case names)
  -progress      report progress of long operations on stderr (default: when stderr is a terminal)

Exit codes: 0 success, 1 the command failed, 2 bad usage.
`)
	usage = b.String()
}

var usage string

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// globals are the options every command takes, and the run's outputs.
type globals struct {
	db       string
	prefix   string
	json     bool
	progress bool
	out      io.Writer
	errOut   io.Writer
	drivers  []Driver
	cmd      *command
	// storeName is migrate's -store.
	storeName string
}

func (g *globals) run(ctx context.Context, args []string) error {
	fs := g.flags("sourced")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(g.out, usage)
			return nil
		}
		return &usageError{msg: err.Error(), full: true}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return &usageError{msg: "no command", full: true}
	}
	c := lookup(rest[0])
	if c == nil {
		return &usageError{msg: fmt.Sprintf("unknown command %q", rest[0]), full: true}
	}
	g.cmd = c
	return c.run(g, ctx, rest[1:])
}

// flags returns a flag set for the named command with the global flags
// registered on it, so they may follow the command.
func (g *globals) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if g.db == "" {
		g.db = os.Getenv("SOURCED_DB")
	}
	fs.StringVar(&g.db, "db", g.db, "")
	fs.StringVar(&g.prefix, "prefix", g.prefix, "")
	fs.BoolVar(&g.json, "json", g.json, "")
	fs.BoolVar(&g.progress, "progress", g.progress, "")
	return fs
}

// parse parses a command's flags, which may come before, between or after
// its arguments, and returns the arguments. want is how many arguments
// the command takes (-1: any number); other counts are bad usage, as is
// an unknown flag. -h prints the command's help.
func (g *globals) parse(fs *flag.FlagSet, args []string, min, max int, what string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, g.usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch {
	case len(pos) < min:
		return nil, g.usagef("%s", what)
	case max >= 0 && len(pos) > max:
		extra := pos[max:]
		if max == 0 {
			return nil, g.usagef("unexpected argument %q: %s takes no arguments", strings.Join(extra, " "), g.cmd.name)
		}
		return nil, g.usagef("unexpected argument %q after %s (%s)", strings.Join(extra, " "), strings.Join(pos[:max], " "), what)
	}
	return pos, nil
}

// errHelp is returned by parse for -h: the command prints its help.
var errHelp = errors.New("help")

// usagef is bad usage of the current command.
func (g *globals) usagef(format string, args ...any) error {
	return &usageError{msg: g.cmd.name + ": " + fmt.Sprintf(format, args...), cmd: g.cmd}
}

// help prints the usage, or a command's.
func (g *globals) help(ctx context.Context, args []string) error {
	fs := g.flags("help")
	pos, err := g.parse(fs, args, 0, 1, "want at most one command name")
	if err != nil && err != errHelp {
		return err
	}
	if len(pos) == 1 {
		c := lookup(pos[0])
		if c == nil {
			return g.usagef("unknown command %q", pos[0])
		}
		fmt.Fprintf(g.out, "usage: sourced %s\n  %s\n", c.synopsis, c.help)
		return nil
	}
	fmt.Fprint(g.out, usage)
	return nil
}

// driver returns the driver for -db.
func (g *globals) driver() (Driver, error) {
	if g.db == "" {
		return nil, &usageError{msg: g.cmd.name + ": no database: give -db FILE or -db postgres://... (or set SOURCED_DB)", cmd: g.cmd}
	}
	for _, d := range g.drivers {
		if d.Accepts(g.db) {
			return d, nil
		}
	}
	if isPostgres(g.db) {
		return nil, fmt.Errorf("%s is a PostgreSQL URL, and this sourced binary opens SQLite files only (it is built without pgx). Install the one that opens both: %s", redact(g.db), pgInstall)
	}
	names := make([]string, len(g.drivers))
	for i, d := range g.drivers {
		names[i] = d.Name()
	}
	return nil, fmt.Errorf("no store of this program opens %q (it knows %s)", redact(g.db), strings.Join(names, ", "))
}

// isPostgres reports whether db is a PostgreSQL URL.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// redact hides the passwords of a database name in messages, whatever
// its form: a URL's user information (up to its last "@", so that a
// password holding an unescaped "@" is hidden whole), and every password
// or sslpassword parameter, in a URL's query (?password=) or in a
// key=value connection string (password='it”s'). What it cannot tell
// apart it hides: a host is hidden rather than a password shown.
func redact(db string) string {
	if scheme, rest, ok := strings.Cut(db, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if user, _, ok := strings.Cut(rest[:at], ":"); ok {
				rest = user + ":xxxxx" + rest[at:]
			}
		}
		db = scheme + "://" + rest
	}
	return passwordParam.ReplaceAllString(db, "${1}xxxxx")
}

// passwordParam matches a password parameter and its value: in a URL
// query (up to the next &) or a key=value string (a quoted value up to
// its closing quote, or a bare one up to a space).
var passwordParam = regexp.MustCompile(`(?i)((?:^|[\s?&;])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s]*)`)

// secrets are the passwords db holds, as written and decoded, for
// scrubbing them from messages that did not come through redact (a
// driver's error naming the file or URL it was given).
func secrets(db string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 && !slices.Contains(out, s) {
			out = append(out, s)
		}
		if u, err := url.PathUnescape(s); err == nil && u != s && len(u) >= 3 {
			out = append(out, u)
		}
	}
	if _, rest, ok := strings.Cut(db, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
			}
		}
	}
	for _, m := range passwordParam.FindAllStringSubmatch(db, -1) {
		v := m[2]
		add(v)
		if len(v) >= 2 && v[0] == '\'' {
			add(strings.Trim(v, "'"))
		}
	}
	// Longest first, so that a secret holding another is hidden whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// scrub hides in msg the database name and every password it holds.
func scrub(msg, db string) string {
	if db == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, db, redact(db))
	for _, s := range secrets(db) {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// open opens the store -db names.
func (g *globals) open(ctx context.Context) (Store, error) {
	d, err := g.driver()
	if err != nil {
		return nil, err
	}
	return d.Open(ctx, g.db, g.prefixFor(d))
}

func (g *globals) prefixFor(d Driver) string {
	if g.prefix == "" {
		return d.DefaultPrefix()
	}
	return g.prefix
}

// progressf reports progress of a long operation on stderr, when -progress
// (by default when stderr is a terminal) and not -json.
func (g *globals) progressf(format string, args ...any) {
	if g.progress {
		fmt.Fprintf(g.errOut, format+"\n", args...)
	}
}
