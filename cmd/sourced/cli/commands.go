package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// emit prints v as JSON with -json, else the table.
func (g *globals) emit(v any, table func(w *tabwriter.Writer)) error {
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

// lagText renders a lag counted up to a cap.
func lagText(n int, capped bool) string {
	if capped {
		return strconv.Itoa(n) + "+"
	}
	return strconv.Itoa(n)
}

// groupLag sums a group's partition lags.
func groupLag(ctx context.Context, s Store, group string, limit int) (lag map[int64]int, total int, capped bool, err error) {
	lag, err = s.Lag(ctx, group, limit)
	if err != nil {
		return nil, 0, false, err
	}
	for _, n := range lag {
		total += n
		if limit > 0 && n >= limit {
			capped = true
		}
	}
	return lag, total, capped, nil
}

type groupRow struct {
	ID         string         `json:"id"`
	Label      string         `json:"label"`
	Status     string         `json:"status"`
	RetryAt    *time.Time     `json:"retry_at,omitempty"`
	Oldest     int64          `json:"oldest_processed"`
	Newest     int64          `json:"newest_processed"`
	Partitions int64          `json:"partitions"`
	Lag        int            `json:"lag"`
	LagCapped  bool           `json:"lag_capped,omitempty"`
	Behind     int            `json:"partitions_behind"`
	Parked     int            `json:"partitions_parked"`
	Failure    *shell.Failure `json:"failure,omitempty"`
}

func (g *globals) stats(ctx context.Context, args []string) error {
	fs := g.flags("stats")
	lagLimit := fs.Int("lag-limit", 10000, "")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
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
	readOnly := false
	if ro, ok := s.(ReadOnlyReporter); ok {
		readOnly = ro.ReadOnly()
	}
	out := struct {
		MaxPosition int64      `json:"max_position"`
		Scheduled   int64      `json:"scheduled"`
		WALBytes    int64      `json:"wal_bytes"`
		ReadOnly    bool       `json:"read_only,omitempty"`
		Groups      []groupRow `json:"groups"`
	}{MaxPosition: st.MaxPosition, Scheduled: st.Scheduled, WALBytes: st.WALBytes, ReadOnly: readOnly, Groups: []groupRow{}}
	parked, err := s.ParkedPartitions(ctx, "")
	if err != nil {
		return err
	}
	parkedIn := map[string]int{}
	for _, p := range parked {
		parkedIn[p.Group]++
	}
	for _, gi := range st.Groups {
		lag, total, capped, err := groupLag(ctx, s, gi.ID, *lagLimit)
		if err != nil {
			return err
		}
		gr := groupRow{ID: gi.ID, Label: gi.Label, Status: string(gi.Status), Oldest: gi.OldestProcessed, Newest: gi.NewestProcessed, Partitions: gi.Partitions, Lag: total, LagCapped: capped, Behind: len(lag), Parked: parkedIn[gi.ID]}
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
		fmt.Fprintf(w, "max position\t%d\nscheduled\t%d\n", st.MaxPosition, st.Scheduled)
		if _, ok := g.driverOf().(sqliteDriver); ok {
			fmt.Fprintf(w, "wal size\t%s\n", byteSize(st.WALBytes))
		}
		if out.ReadOnly {
			fmt.Fprintf(w, "opened\tread-only (%s is not writable)\n", redact(g.db))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "GROUP\tSTATUS\tPARTITIONS\tBEHIND\tLAG\tPARKED\tOLDEST\tNEWEST\tRETRY AT\tERROR")
		for i, gi := range st.Groups {
			gr := out.Groups[i]
			problem := gi.Failure.Error
			if gi.Failure.Reason != "" {
				problem = "stopped: " + gi.Failure.Reason
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", gi.ID, gi.Status, gi.Partitions, gr.Behind, lagText(gr.Lag, gr.LagCapped), gr.Parked, gi.OldestProcessed, gi.NewestProcessed, ts(gi.RetryAt), firstLine(problem))
		}
		w.Flush()
		for _, gi := range st.Groups {
			if f := gi.Failure; f.Error != "" {
				fmt.Fprintf(g.out, "\n%s", failureText(gi.ID, f))
			}
		}
	})
}

// driverOf is the driver of -db (nil when none accepts it).
func (g *globals) driverOf() Driver {
	d, _ := g.driver()
	return d
}

// helpOr prints the command's help for -h and returns nil, or returns err.
func (g *globals) helpOr(err error) error {
	if err == errHelp {
		fmt.Fprintf(g.out, "usage: sourced %s\n  %s\n", g.cmd.synopsis, g.cmd.help)
		return nil
	}
	return err
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
	} else if f.Stack != "" {
		fmt.Fprintf(&b, "  returned:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(f.Stack), "\n", "\n    "))
	} else {
		b.WriteString("  stack: none (a returned error recorded by an older version, which named no place)\n")
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

// entry is a message as log and trace show it.
type entry struct {
	Position      int64           `json:"position"`
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	CreatedAt     time.Time       `json:"created_at"`
	CausationID   string          `json:"causation_id"`
	CorrelationID string          `json:"correlation_id"`
	Payload       json.RawMessage `json:"payload"`
	Metadata      map[string]any  `json:"metadata,omitempty"`
}

func entryOf(m core.PositionedMessage) entry {
	raw, _ := m.Payload.(json.RawMessage)
	return entry{m.Position, m.ID.String(), m.Type, m.CreatedAt, m.CausationID.String(), m.CorrelationID.String(), raw, m.Metadata}
}

// entries converts messages read raw (payloads as stored) to entries.
func entries(msgs []core.PositionedMessage) []entry {
	out := make([]entry, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, entryOf(m))
	}
	return out
}

const entryHeader = "POSITION\tCREATED AT\tTYPE\tPAYLOAD"

func entryLine(e entry) string {
	return fmt.Sprintf("%d\t%s\t%s\t%s", e.Position, ts(e.CreatedAt), e.Type, e.Payload)
}

// printEntries prints the table of messages of log and trace.
func printEntries(w io.Writer, es []entry) {
	fmt.Fprintln(w, entryHeader)
	for _, e := range es {
		fmt.Fprintln(w, entryLine(e))
	}
}

// attrFilter matches payloads on top-level attributes (log -where
// without -type, which the store's conditions cannot express: they
// select messages of a type).
type attrFilter map[string]string

func (f attrFilter) match(payload json.RawMessage) bool {
	if len(f) == 0 {
		return true
	}
	var fields map[string]any
	if json.Unmarshal(payload, &fields) != nil {
		return false
	}
	for k, want := range f {
		v, ok := fields[k]
		if !ok {
			return false
		}
		var got string
		switch v := v.(type) {
		case string:
			got = v
		case nil:
			return false
		default:
			b, _ := json.Marshal(v)
			got = string(b)
		}
		if got != want {
			return false
		}
	}
	return true
}

func (g *globals) log(ctx context.Context, args []string) error {
	fs := g.flags("log")
	limit := fs.Int("limit", 20, "")
	from := fs.Int64("from", 0, "")
	desc := fs.Bool("desc", false, "")
	follow := fs.Bool("follow", false, "")
	interval := fs.Duration("interval", 500*time.Millisecond, "")
	var types, where multi
	fs.Var(&types, "type", "")
	fs.Var(&where, "where", "")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	if *limit < 1 {
		return g.usagef("-limit must be at least 1")
	}
	if *follow && *desc {
		return g.usagef("-follow prints new messages in log order: drop -desc")
	}
	if *interval <= 0 {
		return g.usagef("-interval must be positive")
	}
	attrs := map[string]string{}
	for _, w := range where {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return g.usagef("-where takes name=value, got %q", w)
		}
		attrs[k] = v
	}
	var conds []core.Condition
	for _, t := range types {
		conds = append(conds, core.Condition{Type: t, Attrs: attrs})
	}
	// Without -type the store cannot select by attribute: the tool reads
	// the log and keeps the messages whose payload matches.
	var filter attrFilter
	if len(conds) == 0 {
		filter = attrs
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	opts := shell.ReadAllOptions{From: *from, Conditions: conds, Limit: *limit}
	if *desc || (*follow && *from == 0) {
		opts.Order = shell.Descending // -follow without -from: the newest page first, as tail -f
	}
	msgs, next, last, err := readPage(ctx, s, opts, filter)
	if err != nil {
		return err
	}
	if *follow {
		// Go on after the newest page (up to the log's end), or after the
		// page read from -from (at its next cursor, if it has one).
		next2 := last + 1
		if opts.Order == shell.Descending {
			slices.Reverse(msgs)
		} else if next != nil {
			next2 = *next
		}
		return g.followLog(ctx, s, msgs, conds, filter, next2, *interval)
	}
	out := struct {
		LastPosition int64   `json:"last_position"`
		Next         *int64  `json:"next,omitempty"`
		Messages     []entry `json:"messages"`
	}{LastPosition: last, Next: next, Messages: entries(msgs)}
	return g.emit(out, func(w *tabwriter.Writer) {
		printEntries(w, out.Messages)
		if out.Next != nil {
			fmt.Fprintf(w, "\nmore: -from %d (last position %d)\n", *out.Next, last)
		}
	})
}

// readPage reads up to opts.Limit messages matching filter, and the
// cursor of the next page.
func readPage(ctx context.Context, s Store, opts shell.ReadAllOptions, filter attrFilter) (msgs []core.PositionedMessage, next *int64, last int64, err error) {
	for {
		page, err := s.ReadAll(ctx, opts)
		if err != nil {
			return nil, nil, 0, err
		}
		last = page.LastPosition
		for i, m := range page.Messages {
			raw, _ := m.Payload.(json.RawMessage)
			if !filter.match(raw) {
				continue
			}
			msgs = append(msgs, m)
			if len(msgs) == opts.Limit {
				if i < len(page.Messages)-1 || hasNext(page, opts) {
					n := m.Position + 1
					if opts.Order == shell.Descending {
						n = m.Position - 1
					}
					next = &n
				}
				return msgs, next, last, nil
			}
		}
		n, ok := page.Next(opts)
		if !ok {
			return msgs, nil, last, nil
		}
		opts = n
	}
}

func hasNext(p shell.Page, opts shell.ReadAllOptions) bool {
	_, ok := p.Next(opts)
	return ok
}

// followLog prints msgs, then every new message as it is appended, until
// ctx ends (Ctrl-C): a table line each, or with -json one JSON object per
// line.
func (g *globals) followLog(ctx context.Context, s Store, msgs []core.PositionedMessage, conds []core.Condition, filter attrFilter, from int64, interval time.Duration) error {
	print := func(m core.PositionedMessage) error {
		e := entryOf(m)
		if g.json {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(g.out, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintln(g.out, strings.ReplaceAll(entryLine(e), "\t", "  "))
		return err
	}
	if !g.json {
		fmt.Fprintln(g.out, strings.ReplaceAll(entryHeader, "\t", "  "))
	}
	for _, m := range msgs {
		if err := print(m); err != nil {
			return err
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		opts := shell.ReadAllOptions{From: from, Conditions: conds, Limit: shell.DefaultPageSize}
		for {
			page, err := s.ReadAll(ctx, opts)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			for _, m := range page.Messages {
				from = m.Position + 1
				raw, _ := m.Payload.(json.RawMessage)
				if filter.match(raw) {
					if err := print(m); err != nil {
						return err
					}
				}
			}
			n, ok := page.Next(opts)
			if !ok {
				break
			}
			opts = n
		}
	}
}

// trace prints the causal chain of a message: every message of the log
// sharing its correlation id, in position order.
func (g *globals) trace(ctx context.Context, args []string) error {
	fs := g.flags("trace")
	pos, err := g.parse(fs, args, 1, 1, "want one message id or position (the position column of 'log', the id field of 'log -json')")
	if err != nil {
		return g.helpOr(err)
	}
	arg := pos[0]
	var (
		id       uuid.UUID
		position int64
	)
	if p, perr := strconv.ParseInt(arg, 10, 64); perr == nil {
		if p < 1 {
			return g.usagef("position %d: positions start at 1", p)
		}
		position = p
	} else if id, err = uuid.Parse(arg); err != nil {
		return g.usagef("%q is not a message id or a position: want a UUID such as 01a22fc3-69c7-70b4-93f3-7c2c11288a0a, or a position such as 42 (%v)", arg, err)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if position > 0 {
		page, err := s.ReadAll(ctx, shell.ReadAllOptions{From: position, Limit: 1})
		if err != nil {
			return err
		}
		if len(page.Messages) == 0 || page.Messages[0].Position != position {
			return fmt.Errorf("trace: no message at position %d (the log ends at %d; a deleted message leaves a gap)", position, page.LastPosition)
		}
		id = page.Messages[0].ID
	}
	msgs, err := s.ReadCorrelation(ctx, id)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("trace: no message %s in the log (a scheduled message is traced once promoted)", id)
	}
	out := struct {
		CorrelationID string  `json:"correlation_id"`
		Messages      []entry `json:"messages"`
	}{CorrelationID: msgs[0].CorrelationID.String(), Messages: entries(msgs)}
	return g.emit(out, func(w *tabwriter.Writer) { printEntries(w, out.Messages) })
}

type offsetRow struct {
	ID           int64          `json:"id"`
	Group        string         `json:"group"`
	GroupStatus  string         `json:"group_status"`
	Partition    core.Partition `json:"partition"`
	PartitionKey string         `json:"partition_key"`
	LastPosition int64          `json:"last_position"`
	Lag          int            `json:"lag"`
	LagCapped    bool           `json:"lag_capped,omitempty"`
	Claimed      bool           `json:"claimed"`
	ClaimedAt    *time.Time     `json:"claimed_at,omitempty"`
	ClaimedBy    string         `json:"claimed_by,omitempty"`
}

func (g *globals) offsets(ctx context.Context, args []string) error {
	fs := g.flags("offsets")
	group := fs.String("group", "", "")
	limit := fs.Int("limit", 50, "")
	from := fs.Int64("from", 0, "")
	lagLimit := fs.Int("lag-limit", 10000, "")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	if *limit < 1 {
		return g.usagef("-limit must be at least 1")
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
	lags := map[string]map[int64]int{}
	out := struct {
		Total   int64       `json:"total"`
		Next    *int64      `json:"next,omitempty"`
		Offsets []offsetRow `json:"offsets"`
	}{Total: page.Total, Offsets: []offsetRow{}}
	for _, o := range page.Offsets {
		lag, ok := lags[o.Group]
		if !ok {
			if lag, err = s.Lag(ctx, o.Group, *lagLimit); err != nil {
				return err
			}
			lags[o.Group] = lag
		}
		r := offsetRow{ID: o.ID, Group: o.Group, GroupStatus: string(o.GroupStatus), Partition: o.Partition, PartitionKey: core.Partition(o.Partition).String(), LastPosition: o.LastPosition, Lag: lag[o.ID], Claimed: o.Claimed}
		r.LagCapped = *lagLimit > 0 && r.Lag >= *lagLimit
		if o.Claimed {
			at := o.ClaimedAt
			r.ClaimedAt, r.ClaimedBy = &at, o.ClaimedBy
		}
		out.Offsets = append(out.Offsets, r)
	}
	if len(page.Offsets) == *limit {
		n := page.Offsets[len(page.Offsets)-1].ID + 1
		out.Next = &n
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%d offset(s)\n\n", page.Total)
		fmt.Fprintln(w, "ID\tGROUP\tPARTITION\tLAST POSITION\tLAG\tCLAIMED BY\tCLAIMED AT")
		for _, r := range out.Offsets {
			by, at := "-", "-"
			if r.Claimed {
				by, at = r.ClaimedBy, ts(*r.ClaimedAt)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Group, r.PartitionKey, r.LastPosition, lagText(r.Lag, r.LagCapped), by, at)
		}
		if out.Next != nil {
			fmt.Fprintf(w, "\nmore: -from %d\n", *out.Next)
		}
	})
}

type claimRow struct {
	Group     string    `json:"group"`
	Partition string    `json:"partition"`
	OffsetID  int64     `json:"offset_id"`
	ClaimedAt time.Time `json:"claimed_at"`
}

type workerRow struct {
	ID       string     `json:"id"`
	LastSeen *time.Time `json:"last_seen"`
	Claims   []claimRow `json:"claims"`
}

// workers lists the workers' heartbeats and the claims each holds (a
// claim of a worker without a heartbeat record is listed under its id).
func (g *globals) workers(ctx context.Context, args []string) error {
	fs := g.flags("workers")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	ws, err := s.Workers(ctx)
	if err != nil {
		return err
	}
	rows := map[string]*workerRow{}
	for _, w := range ws {
		at := w.LastSeen
		rows[w.ID] = &workerRow{ID: w.ID, LastSeen: &at, Claims: []claimRow{}}
	}
	for o, err := range s.Offsets(ctx, shell.OffsetQuery{Limit: 500}) {
		if err != nil {
			return err
		}
		if !o.Claimed {
			continue
		}
		r, ok := rows[o.ClaimedBy]
		if !ok {
			r = &workerRow{ID: o.ClaimedBy, Claims: []claimRow{}}
			rows[o.ClaimedBy] = r
		}
		r.Claims = append(r.Claims, claimRow{o.Group, core.Partition(o.Partition).String(), o.ID, o.ClaimedAt})
	}
	out := struct {
		Workers []*workerRow `json:"workers"`
	}{Workers: []*workerRow{}}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		out.Workers = append(out.Workers, rows[id])
	}
	now := s.Now()
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "WORKER\tLAST SEEN\tAGO\tCLAIMS")
		for _, r := range out.Workers {
			seen, ago := "never (no heartbeat)", "-"
			if r.LastSeen != nil {
				seen, ago = ts(*r.LastSeen), now.Sub(*r.LastSeen).Truncate(time.Millisecond).String()
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", r.ID, seen, ago, len(r.Claims))
		}
		w.Flush()
		var any bool
		for _, r := range out.Workers {
			for _, c := range r.Claims {
				if !any {
					fmt.Fprintln(w, "\nWORKER\tGROUP\tPARTITION\tOFFSET\tCLAIMED AT")
					any = true
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", r.ID, c.Group, c.Partition, c.OffsetID, ts(c.ClaimedAt))
			}
		}
	})
}

// groups runs an operator command on a group and says what it did.
func (g *globals) groups(ctx context.Context, args []string) error {
	fs := g.flags("groups")
	wait := fs.Bool("wait", false, "")
	interval := fs.Duration("interval", 500*time.Millisecond, "")
	pos, err := g.parse(fs, args, 2, -1, "want stop|start|reset|retry GROUP")
	if err != nil {
		return g.helpOr(err)
	}
	op, group := pos[0], pos[1]
	if *wait && op != "start" && op != "retry" {
		return g.usagef("-wait waits for the group's workers to catch up: it goes with start or retry (a reset group replays once started: groups start %s -wait)", group)
	}
	if *interval <= 0 {
		return g.usagef("-interval must be positive")
	}
	switch op {
	case "stop":
	case "start", "reset", "retry":
		if len(pos) > 2 {
			return g.usagef("unexpected argument %q: only stop takes a reason", strings.Join(pos[2:], " "))
		}
	default:
		return g.usagef("unknown operation %q (stop, start, reset, retry)", op)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	before, err := s.Group(ctx, group)
	if err != nil {
		return err
	}
	var did string
	switch op {
	case "stop":
		reason := strings.Join(pos[2:], " ")
		err = s.StopGroup(ctx, group, reason)
		did = "stopped: its workers claim nothing until 'sourced groups start " + group + "'"
		if reason != "" {
			did = fmt.Sprintf("stopped (reason: %s): its workers claim nothing until 'sourced groups start %s'", reason, group)
		}
	case "start":
		err = s.StartGroup(ctx, group)
		did = "started: its workers claim from each partition's offset"
	case "reset":
		err = s.ResetGroup(ctx, group)
		did = fmt.Sprintf("reset: the offsets of its %d partition(s) (processed up to position %d) are cleared; once started ('sourced groups start %s') it replays the log from the start", before.Partitions, before.HighestPosition, group)
	case "retry":
		did, err = retryNow(ctx, s, before)
	}
	if err != nil {
		return err
	}
	after, err := s.Group(ctx, group)
	if err != nil {
		return err
	}
	if after.HooksPending > 0 {
		did += fmt.Sprintf("\n%d lifecycle hook(s) pending (OnStop, OnStart, OnReset): a runtime running the group's reactor runs them at its next catch-up poll, and the group claims nothing until they ran", after.HooksPending)
	}
	out := struct {
		Group        string `json:"group"`
		Command      string `json:"command"`
		WasStatus    string `json:"was_status"`
		Status       string `json:"status"`
		Partitions   int64  `json:"partitions"`
		HooksPending int64  `json:"hooks_pending"`
		Did          string `json:"did"`
	}{group, op, string(before.Status), string(after.Status), after.Partitions, after.HooksPending, did}
	if err := g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s: %s -> %s\n%s\n", group, before.Status, after.Status, did)
	}); err != nil || !*wait {
		return err
	}
	return g.waitCaughtUp(ctx, s, group, *interval)
}

// waitCaughtUp waits until the group's workers (the application's, in
// whatever process runs them) have processed every pending message,
// reporting the lag as it falls (with -progress, by default on a
// terminal). A group that stops or fails meanwhile ends the wait with an
// error; so does ctx (Ctrl-C).
func (g *globals) waitCaughtUp(ctx context.Context, s Store, group string, interval time.Duration) error {
	start, last := time.Now(), -1
	first := 0
	for {
		lag, total, _, err := groupLag(ctx, s, group, 0)
		if err != nil {
			return err
		}
		if last < 0 {
			first = total
		}
		if total != last {
			done := 100
			if first > 0 {
				done = 100 * (first - total) / first
			}
			g.progressf("%s: %d message(s) to go in %d partition(s) (%d%% done, %s)", group, total, len(lag), done, time.Since(start).Round(time.Millisecond))
			last = total
		}
		if total == 0 {
			if g.json {
				return nil
			}
			_, err := fmt.Fprintf(g.out, "%s caught up: %d message(s) processed in %s\n", group, first, time.Since(start).Round(time.Millisecond))
			return err
		}
		info, err := s.Group(ctx, group)
		if err != nil {
			return err
		}
		if info.Status == shell.StatusStopped || info.Status == shell.StatusFailed {
			return fmt.Errorf("%s is %s with %d message(s) to go (see 'sourced stats')", group, info.Status, total)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting: %s has %d message(s) to go", group, total)
		case <-time.After(interval):
		}
	}
}

// retryNow makes a retrying group claimable now (keeping its failure and
// retry count), and a failed one active again (it resumes at the failed
// partition's offset).
func retryNow(ctx context.Context, s Store, info shell.GroupInfo) (string, error) {
	switch info.Status {
	case shell.StatusRetrying:
		if err := s.RetryGroup(ctx, info.ID, s.Now(), info.Failure); err != nil {
			return "", err
		}
		return fmt.Sprintf("retrying now instead of at %s (retry %d): its workers claim it at their next poll", ts(info.RetryAt), info.Failure.RetryCount), nil
	case shell.StatusFailed:
		if err := s.StartGroup(ctx, info.ID); err != nil {
			return "", err
		}
		where := ""
		if info.Failure.Partition != "" {
			where = " (partition " + info.Failure.Partition + " retries its failed message first)"
		}
		return "failed group started again: its workers claim from each partition's offset" + where, nil
	}
	return "", fmt.Errorf("groups retry: %s is %s, not retrying or failed: nothing to retry (%s)", info.ID, info.Status, map[shell.Status]string{
		shell.StatusActive:  "its workers are processing it",
		shell.StatusStopped: "start it with 'sourced groups start " + info.ID + "'",
	}[info.Status])
}

func (g *globals) schedule(ctx context.Context, args []string) error {
	fs := g.flags("schedule")
	limit := fs.Int("limit", 50, "")
	pos, err := g.parse(fs, args, 0, 2, "want nothing, or cancel ID")
	if err != nil {
		return g.helpOr(err)
	}
	if len(pos) > 0 {
		if pos[0] != "cancel" {
			return g.usagef("unknown operation %q (cancel ID)", pos[0])
		}
		if len(pos) != 2 {
			return g.usagef("cancel: want the id of a scheduled message (the ID column of 'schedule')")
		}
		return g.cancelScheduled(ctx, pos[1])
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
	type scheduled struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		DueAt   time.Time       `json:"due_at"`
		Payload json.RawMessage `json:"payload"`
	}
	out := struct {
		Scheduled []scheduled `json:"scheduled"`
	}{Scheduled: []scheduled{}}
	for _, m := range msgs {
		raw, _ := m.Payload.(json.RawMessage)
		out.Scheduled = append(out.Scheduled, scheduled{m.ID.String(), m.Type, m.CreatedAt, raw})
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "DUE AT\tTYPE\tID\tPAYLOAD")
		for _, e := range out.Scheduled {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", ts(e.DueAt), e.Type, e.ID, e.Payload)
		}
	})
}

func (g *globals) cancelScheduled(ctx context.Context, arg string) error {
	id, err := uuid.Parse(arg)
	if err != nil {
		return g.usagef("cancel: %q is not a message id (the ID column of 'schedule'): %v", arg, err)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	found, err := s.CancelScheduled(ctx, id)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("schedule cancel: no scheduled message %s (promoted into the log already, or never scheduled: 'sourced schedule' lists them)", id)
	}
	return g.emit(map[string]string{"cancelled": id.String()}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "cancelled scheduled message %s: it will not be appended\n", id)
	})
}
