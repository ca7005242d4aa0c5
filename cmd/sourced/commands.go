package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// globals are the options every command takes.
type globals struct {
	db     string
	prefix string
	json   bool
	out    io.Writer
}

func runErr(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sourced", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g := globals{out: stdout}
	fs.StringVar(&g.db, "db", os.Getenv("SOURCED_DB"), "")
	fs.StringVar(&g.prefix, "prefix", sqlitestore.DefaultPrefix, "")
	fs.BoolVar(&g.json, "json", false, "")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("no command")
	}
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "stats":
		return g.stats(ctx, rest)
	case "log":
		return g.log(ctx, rest)
	case "trace":
		return g.trace(ctx, rest)
	case "offsets":
		return g.offsets(ctx, rest)
	case "groups":
		return g.groups(ctx, rest)
	case "schedule":
		return g.schedule(ctx, rest)
	case "migrate":
		return g.migrate(ctx, rest)
	case "workflows":
		return g.workflows(ctx, rest)
	case "workflow":
		return g.workflowRun(ctx, rest)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usagef("unknown command %q", cmd)
}

// open opens an installed store read-raw: payloads stay JSON.
func (g globals) open(ctx context.Context) (*sqlitestore.Store, error) {
	if g.db == "" {
		return nil, usagef("no database: give -db FILE (or set SOURCED_DB)")
	}
	if _, err := os.Stat(g.db); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file (create it with: sourced -db %s migrate)", g.db, g.db)
		}
		return nil, err
	}
	s, err := sqlitestore.Open(ctx, g.db, sqlitestore.Options{Prefix: g.prefix, RawPayloads: true})
	if errors.Is(err, shell.ErrNotInstalled) {
		return nil, fmt.Errorf("%s is not installed (prefix %q): run 'sourced -db %s migrate', or apply the schema from 'sourced migrate -print' with your migrations", g.db, g.prefix, g.db)
	}
	return s, err
}

func (g globals) emit(v any, table func(w *tabwriter.Writer)) error {
	if g.json {
		enc := json.NewEncoder(g.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func (g globals) stats(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usagef("stats takes no arguments")
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	type group struct {
		ID, Label, Status string
		RetryAt           *time.Time `json:",omitempty"`
		Oldest, Newest    int64
		Partitions        int64
		Failure           *shell.Failure `json:",omitempty"`
	}
	out := struct {
		MaxPosition int64
		Scheduled   int64
		WALBytes    int64
		ReadOnly    bool `json:",omitempty"`
		Groups      []group
	}{MaxPosition: st.MaxPosition, Scheduled: st.Scheduled, WALBytes: st.WALBytes, ReadOnly: s.ReadOnly(), Groups: []group{}}
	for _, gi := range st.Groups {
		gr := group{ID: gi.ID, Label: gi.Label, Status: string(gi.Status), Oldest: gi.OldestProcessed, Newest: gi.NewestProcessed, Partitions: gi.Partitions}
		if !gi.RetryAt.IsZero() {
			at := gi.RetryAt
			gr.RetryAt = &at
		}
		if !gi.Failure.IsZero() {
			f := gi.Failure
			gr.Failure = &f
		}
		out.Groups = append(out.Groups, gr)
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "max position\t%d\nscheduled\t%d\nwal size\t%s\n", st.MaxPosition, st.Scheduled, byteSize(st.WALBytes))
		if out.ReadOnly {
			fmt.Fprintf(w, "opened\tread-only (%s is not writable)\n", g.db)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "GROUP\tSTATUS\tPARTITIONS\tOLDEST\tNEWEST\tRETRY AT\tERROR")
		for _, gi := range st.Groups {
			problem := gi.Failure.Error
			if gi.Failure.Reason != "" {
				problem = "stopped: " + gi.Failure.Reason
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", gi.ID, gi.Status, gi.Partitions, gi.OldestProcessed, gi.NewestProcessed, ts(gi.RetryAt), firstLine(problem))
		}
		w.Flush()
		for _, gi := range st.Groups {
			if f := gi.Failure; f.Error != "" {
				fmt.Fprintf(g.out, "\n%s", failureText(gi.ID, f))
			}
		}
	})
}

// failureText describes a group's recorded failure: where (partition,
// message), what (the error and its type, the retries) and, for a panic,
// the stack.
func failureText(group string, f shell.Failure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s failed", group)
	if f.MessageType != "" {
		fmt.Fprintf(&b, " at %s %s (position %d)", f.MessageType, f.MessageID, f.Position)
	}
	if f.Partition != "" {
		fmt.Fprintf(&b, " in partition %s", f.Partition)
	}
	fmt.Fprintf(&b, "\n  error (%s): %s\n", f.ErrorType, f.Error)
	if f.RetryCount > 0 {
		fmt.Fprintf(&b, "  retries: %d\n", f.RetryCount)
	}
	if f.Panicked() {
		fmt.Fprintf(&b, "  panic stack:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(f.Stack), "\n", "\n    "))
	} else {
		b.WriteString("  stack: none (a returned error carries no stack; only a panic records one)\n")
	}
	return b.String()
}

// byteSize renders a size in bytes for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func (g globals) log(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("log", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Int("limit", 20, "")
	from := fs.Int64("from", 0, "")
	desc := fs.Bool("desc", false, "")
	var types, where multi
	fs.Var(&types, "type", "")
	fs.Var(&where, "where", "")
	if err := fs.Parse(args); err != nil {
		return usagef("log: %v", err)
	}
	if *limit < 1 {
		return usagef("log: -limit must be at least 1")
	}
	attrs := map[string]string{}
	for _, w := range where {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return usagef("log: -where takes name=value, got %q", w)
		}
		attrs[k] = v
	}
	if len(attrs) > 0 && len(types) == 0 {
		return usagef("log: -where needs at least one -type (conditions select messages of a type)")
	}
	var conds []core.Condition
	for _, t := range types {
		conds = append(conds, core.Condition{Type: t, Attrs: attrs})
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	opts := shell.ReadAllOptions{From: *from, Conditions: conds, Limit: *limit}
	if *desc {
		opts.Order = shell.Descending
	}
	page, err := s.ReadAll(ctx, opts)
	if err != nil {
		return err
	}
	out := struct {
		LastPosition int64
		Next         *int64 `json:",omitempty"`
		Messages     []entry
	}{LastPosition: page.LastPosition, Messages: entries(page.Messages)}
	if next, ok := page.Next(opts); ok {
		out.Next = &next.From
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		printEntries(w, out.Messages)
		if out.Next != nil {
			fmt.Fprintf(w, "\nmore: -from %d (last position %d)\n", *out.Next, page.LastPosition)
		}
	})
}

// entry is a message as log and trace show it.
type entry struct {
	Position      int64
	ID            string
	Type          string
	CreatedAt     time.Time
	CausationID   string
	CorrelationID string
	Payload       json.RawMessage
	Metadata      map[string]any `json:",omitempty"`
}

// entries converts messages read raw (payloads as stored) to entries.
func entries(msgs []core.PositionedMessage) []entry {
	out := make([]entry, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Payload.(json.RawMessage)
		out = append(out, entry{m.Position, m.ID.String(), m.Type, m.CreatedAt, m.CausationID.String(), m.CorrelationID.String(), raw, m.Metadata})
	}
	return out
}

// printEntries prints the table of messages of log and trace.
func printEntries(w *tabwriter.Writer, es []entry) {
	fmt.Fprintln(w, "POSITION\tCREATED AT\tTYPE\tPAYLOAD")
	for _, e := range es {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", e.Position, ts(e.CreatedAt), e.Type, e.Payload)
	}
}

// trace prints the causal chain of a message: every message of the log
// sharing its correlation id, in position order.
func (g globals) trace(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usagef("trace: want one message id (the ID field of 'log -json')")
	}
	id, err := uuid.Parse(args[0])
	if err != nil {
		return usagef("trace: %q is not a message id: want a UUID such as 01a22fc3-69c7-70b4-93f3-7c2c11288a0a (%v)", args[0], err)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	msgs, err := s.ReadCorrelation(ctx, id)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("trace: no message %s in the log (a scheduled message is traced once promoted)", id)
	}
	out := struct {
		CorrelationID string
		Messages      []entry
	}{CorrelationID: msgs[0].CorrelationID.String(), Messages: entries(msgs)}
	return g.emit(out, func(w *tabwriter.Writer) { printEntries(w, out.Messages) })
}

func (g globals) offsets(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("offsets", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	group := fs.String("group", "", "")
	limit := fs.Int("limit", 50, "")
	from := fs.Int64("from", 0, "")
	if err := fs.Parse(args); err != nil {
		return usagef("offsets: %v", err)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	page, err := s.ReadOffsets(ctx, shell.OffsetQuery{Group: *group, From: *from, Limit: *limit})
	if err != nil {
		return err
	}
	if page.Offsets == nil {
		page.Offsets = []shell.Offset{}
	}
	return g.emit(page, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%d offset(s)\n\n", page.Total)
		fmt.Fprintln(w, "ID\tGROUP\tPARTITION\tLAST POSITION\tCLAIMED BY\tCLAIMED AT")
		for _, o := range page.Offsets {
			by := o.ClaimedBy
			if !o.Claimed {
				by = "-"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", o.ID, o.Group, shell.PartitionKey(o.Partition), o.LastPosition, by, ts(o.ClaimedAt))
		}
	})
}

func (g globals) groups(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return usagef("groups: want stop|start|reset GROUP")
	}
	op, group := args[0], args[1]
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	switch op {
	case "stop":
		err = s.StopGroup(ctx, group, strings.Join(args[2:], " "))
	case "start":
		err = s.StartGroup(ctx, group)
	case "reset":
		err = s.ResetGroup(ctx, group)
	default:
		return usagef("groups: unknown operation %q (stop, start, reset)", op)
	}
	if err != nil {
		return err
	}
	info, err := s.Group(ctx, group)
	if err != nil {
		return err
	}
	return g.emit(map[string]string{"group": info.ID, "status": string(info.Status)}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s: %s\n", info.ID, info.Status)
	})
}

func (g globals) schedule(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Int("limit", 50, "")
	if err := fs.Parse(args); err != nil {
		return usagef("schedule: %v", err)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	msgs, err := s.ReadScheduled(ctx, *limit)
	if err != nil {
		return err
	}
	type entry struct {
		ID      string
		Type    string
		DueAt   time.Time
		Payload json.RawMessage
	}
	out := []entry{}
	for _, m := range msgs {
		raw, _ := m.Payload.(json.RawMessage)
		out = append(out, entry{m.ID.String(), m.Type, m.CreatedAt, raw})
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "DUE AT\tTYPE\tID\tPAYLOAD")
		for _, e := range out {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", ts(e.DueAt), e.Type, e.ID, e.Payload)
		}
	})
}

func (g globals) migrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	print := fs.Bool("print", false, "")
	if err := fs.Parse(args); err != nil {
		return usagef("migrate: %v", err)
	}
	if *print {
		ms, err := sqlitestore.Migrations(g.prefix)
		if err != nil {
			return err
		}
		// One section per version, for migration tools that take the
		// steps one by one (each records its version when applied).
		fmt.Fprintf(g.out, "-- Sourced schema for prefix %s, versions 1 to %d. Set PRAGMA journal_mode = WAL once, outside a transaction.\n", g.prefix, sqlitestore.SchemaVersion)
		for _, m := range ms {
			if _, err := fmt.Fprintf(g.out, "\n-- sourced migration %d (prefix %s)\n%s\n", m.Version, g.prefix, m.SQL); err != nil {
				return err
			}
		}
		return nil
	}
	if g.db == "" {
		return usagef("no database: give -db FILE (or set SOURCED_DB)")
	}
	s, err := sqlitestore.Install(ctx, g.db, sqlitestore.Options{Prefix: g.prefix, RawPayloads: true})
	if err != nil {
		return err
	}
	defer s.Close()
	return g.emit(map[string]string{"installed": g.db, "prefix": g.prefix}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "installed %s (prefix %s)\n", g.db, g.prefix)
	})
}
