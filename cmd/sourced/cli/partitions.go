package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// parkedRow is a parked partition as the tool shows it.
type parkedRow struct {
	Group        string         `json:"group"`
	OffsetID     int64          `json:"offset_id"`
	Partition    core.Partition `json:"partition"`
	PartitionKey string         `json:"partition_key"`
	LastPosition int64          `json:"last_position"`
	Attempts     int            `json:"attempts"`
	ParkedAt     time.Time      `json:"parked_at"`
	Failure      shell.Failure  `json:"failure"`
}

func parkedRowOf(p shell.ParkedPartition) parkedRow {
	return parkedRow{p.Group, p.OffsetID, p.Partition, core.Partition(p.Partition).String(), p.LastPosition, p.Attempts(), p.ParkedAt, p.Failure}
}

// partitions lists the partitions the parking strategy set aside, and
// retries, skips or resets one.
func (g *globals) partitions(ctx context.Context, args []string) error {
	fs := g.flags("partitions")
	group := fs.String("group", "", "")
	pos, err := g.parse(fs, args, 1, 3, "want parked, or retry|skip|reset GROUP PARTITION")
	if err != nil {
		return g.helpOr(err)
	}
	op := pos[0]
	switch op {
	case "parked":
		if len(pos) > 1 {
			return g.usagef("unexpected argument %q: parked takes -group GROUP", pos[1])
		}
		return g.parked(ctx, *group)
	case "retry", "skip", "reset":
	default:
		return g.usagef("unknown operation %q (parked, retry, skip, reset)", op)
	}
	if len(pos) != 3 {
		return g.usagef("%s: want GROUP PARTITION, the partition as 'sourced partitions parked' shows it (e.g. course_id:c1)", op)
	}
	if *group != "" {
		return g.usagef("%s takes the group as its argument, not -group", op)
	}
	partition, err := core.ParsePartition(pos[2])
	if err != nil {
		return g.usagef("%s", strip(err.Error()))
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	var (
		p   shell.ParkedPartition
		did string
	)
	switch op {
	case "retry":
		p, err = s.RetryPartition(ctx, pos[1], partition)
		did = fmt.Sprintf("unparked: workers handle %s again", failedAt(p.Failure))
	case "skip":
		p, err = s.SkipFailedMessage(ctx, pos[1], partition)
		did = fmt.Sprintf("unparked past %s (it stays in the log): workers go on with the messages after it", failedAt(p.Failure))
	case "reset":
		p, err = s.ResetPartition(ctx, pos[1], partition)
		did = fmt.Sprintf("unparked and reset: workers replay the partition from the start (it had been processed up to position %d)", p.LastPosition)
	}
	if err != nil {
		return err
	}
	out := struct {
		Command string    `json:"command"`
		Did     string    `json:"did"`
		Parked  parkedRow `json:"was_parked"`
	}{op, did, parkedRowOf(p)}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s %s: %s\n", p.Group, core.Partition(p.Partition).String(), did)
	})
}

// failedAt names the message a partition failed at.
func failedAt(f shell.Failure) string {
	if f.MessageType == "" {
		return fmt.Sprintf("the message at position %d", f.Position)
	}
	return fmt.Sprintf("%s %s (position %d)", f.MessageType, f.MessageID, f.Position)
}

func (g *globals) parked(ctx context.Context, group string) error {
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	ps, err := s.ParkedPartitions(ctx, group)
	if err != nil {
		return err
	}
	out := struct {
		Parked []parkedRow `json:"parked"`
	}{Parked: []parkedRow{}}
	for _, p := range ps {
		out.Parked = append(out.Parked, parkedRowOf(p))
	}
	return g.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%d parked partition(s)\n\n", len(ps))
		fmt.Fprintln(w, "GROUP\tPARTITION\tPARKED AT\tATTEMPTS\tFAILED AT\tERROR")
		for _, p := range ps {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s %d\t%s\n", p.Group, core.Partition(p.Partition).String(), ts(p.ParkedAt), p.Attempts(), p.Failure.MessageType, p.Failure.Position, firstLine(p.Failure.Error))
		}
		if len(ps) > 0 {
			fmt.Fprintln(w, "\nthen: sourced partitions retry|skip|reset GROUP PARTITION")
		}
	})
}
