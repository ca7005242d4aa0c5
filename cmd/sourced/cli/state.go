package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/dashboard"
)

// state prints what a reactor of the application (a tool built with
// WithReactors) holds for a partition just after a position of the log:
// its state folded from the log (a machine's context and active states),
// the message it handles next with what that produced and, for a decision
// with a query of its own, each query part with what it read; and the
// positions to step to (see dashboard.StateAt).
func (g *globals) state(ctx context.Context, args []string) error {
	fs := g.flags("state")
	at := fs.Int64("at", dashboard.Latest, "")
	pos, err := g.parse(fs, args, 2, 2, "want GROUP PARTITION, the partition as key:value pairs joined by | (e.g. course_id:c1)")
	if err != nil {
		return g.helpOr(err)
	}
	if *at < dashboard.Latest {
		return g.usagef("-at %d: want a position of the log (0: before the partition's first message; default: its last)", *at)
	}
	partition, err := core.ParsePartition(pos[1])
	if err != nil {
		return g.usagef("%v", err)
	}
	reg, reactors := g.reactors()
	if len(reactors) == 0 {
		return errNoReactorsFor("state")
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := dashboard.StateAt(ctx, s, reg, reactors, dashboard.StateQuery{Group: pos[0], Partition: partition, At: *at})
	if err != nil {
		return err
	}
	return g.emit(st, func(w *tabwriter.Writer) { writeState(w, st) })
}

// errNoReactorsFor says why the stock tool cannot run cmd.
func errNoReactorsFor(cmd string) error {
	return fmt.Errorf("this sourced binary knows no reactors, and '%s' folds your application's: build your own tool with them: func main() { cli.Main(cli.WithReactors(cli.SQLite(), registry, reactors...)) }", cmd)
}

func writeState(w *tabwriter.Writer, st dashboard.PartitionState) {
	after := fmt.Sprintf("#%d", st.At)
	if st.At == 0 {
		after = "before the partition's first message"
	}
	fmt.Fprintf(w, "group\t%s (%s)\n", st.Group, st.Kind)
	fmt.Fprintf(w, "partition\t%s\n", core.Partition(st.Partition).String())
	fmt.Fprintf(w, "after\t%s (the partition's last: #%d; %d message(s) folded)\n", after, st.Last, st.Folded)
	step := func(p int64, none string) string {
		if p == 0 {
			return none
		}
		return fmt.Sprintf("-at %d", p)
	}
	prev := step(st.Prev, "-at 0")
	if st.At == 0 {
		prev = "(start)"
	}
	fmt.Fprintf(w, "step\tback: %s, forward: %s\n", prev, step(st.Next, "(last)"))
	if len(st.Paths) > 0 {
		fmt.Fprintf(w, "active states\t%s\n", strings.Join(st.Paths, ", "))
	}
	w.Flush()
	var b bytes.Buffer
	if json.Indent(&b, st.State, "  ", "  ") != nil {
		b.Reset()
		b.Write(st.State)
	}
	fmt.Fprintf(w, "\nstate\n  %s\n", b.String())
	msg := func(indent string, m dashboard.StateMessage) {
		fmt.Fprintf(w, "%s#%d\t%s\t%s\n", indent, m.Position, m.Type, cut(string(m.Payload), 120))
	}
	if d := st.Decision; d != nil {
		fmt.Fprintf(w, "\nhandled next\n")
		msg("  ", d.Message)
		for i, q := range d.Queries {
			fmt.Fprintf(w, "  query part %d\t%s\tread %d\n", i, strings.Join(q.Conditions, " OR "), q.Matched)
			for _, m := range q.Read {
				msg("    ", m)
			}
		}
		fmt.Fprintf(w, "  produced\t%d message(s)\n", len(d.Produced))
		for _, m := range d.Produced {
			msg("    ", m)
		}
	} else {
		fmt.Fprintf(w, "\nhandled next\tnothing yet\n")
	}
	fmt.Fprintf(w, "\nthe partition's messages (%s)\n", "> marks the position")
	for _, m := range st.Before {
		mark := "  "
		if m.Position == st.At {
			mark = "> "
		}
		fmt.Fprintf(w, "%s#%d\t%s\t%s\t%s\n", mark, m.Position, m.Type, m.Role, cut(string(m.Payload), 80))
	}
	for _, m := range st.After {
		fmt.Fprintf(w, "  #%d\t%s\t%s\t%s\n", m.Position, m.Type, m.Role, cut(string(m.Payload), 80))
	}
}

// cut cuts s to n runes.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
