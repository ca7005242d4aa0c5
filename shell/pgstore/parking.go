package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.Parking = (*Store)(nil)

// park applies CmdPark (see driver.CmdPark) in the transaction of
// ChangeGroup: the offset of f.OffsetID gets its parked record (none when
// the offset is gone), and a retrying group recovers. It returns the
// group's state afterwards.
func (t *tx) park(st groupState, cur driver.GroupState, f driver.Failure) (driver.GroupState, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return cur, fmt.Errorf("pgstore: encode failure: %w", err)
	}
	if _, err := t.c.Exec(t.ctx, t.s.q.g.park, f.OffsetID, st.row, string(data), t.s.now()); err != nil {
		return cur, t.fail("park", err)
	}
	if st.status != driver.StatusRetrying {
		return cur, nil
	}
	next, err := driver.Transition("", st.status, driver.CmdRecover)
	if err != nil {
		return cur, err
	}
	st.status, st.retryAt = next, time.Time{}
	if err := t.setStatus(st, driver.Failure{}); err != nil {
		return cur, err
	}
	return driver.GroupState{Status: next}, nil
}

// ParkedPartitions returns the parked partitions of group ("" for all);
// see driver.Parking.
func (s *Store) ParkedPartitions(ctx context.Context, group string) (out []driver.ParkedPartition, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		if err := s.knownGroup(ctx, q, group); err != nil {
			return err
		}
		rows, err := q.Query(ctx, s.q.g.parked, group)
		out, err = collectParked(rows, err)
		return err
	})
	if err != nil {
		return nil, s.wrapGroupErr(ctx, "parked partitions", err)
	}
	return out, nil
}

var _ driver.ParkedReader = (*Store)(nil)

// ReadParked returns a page of parked partitions by ascending offset id;
// see driver.ParkedReader. One query.
func (s *Store) ReadParked(ctx context.Context, q driver.ParkedQuery) (out []driver.ParkedPartition, err error) {
	limit, err := driver.CheckParkedQuery(q)
	if err != nil {
		return nil, err
	}
	err = s.snapshot(ctx, func(qr querier) error {
		if err := s.knownGroup(ctx, qr, q.Group); err != nil {
			return err
		}
		rows, err := qr.Query(ctx, fmt.Sprintf(`SELECT o.id, g.group_id, o.partition_key, o.last_position, o.parked, o.parked_at
FROM %s o JOIN %s g ON g.id = o.consumer_group_id WHERE o.parked IS NOT NULL AND ($1 = '' OR g.group_id = $1) AND o.id >= $2 ORDER BY o.id LIMIT $3`, s.names.offsets, s.names.groups), q.Group, q.From, limit)
		out, err = collectParked(rows, err)
		return err
	})
	if err != nil {
		return nil, s.wrapGroupErr(ctx, "parked partitions", err)
	}
	return out, nil
}

// knownGroup returns nil for "" or a registered group, else the group's
// *driver.UnknownGroupError.
func (s *Store) knownGroup(ctx context.Context, q querier, group string) error {
	if group == "" {
		return nil
	}
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.names.groups+` WHERE group_id = $1)`, group).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return s.unknownGroup(ctx, q, group)
	}
	return nil
}

// collectParked reads the rows of a parked-partition query (rows and err
// as Query returned them).
func collectParked(rows pgx.Rows, err error) ([]driver.ParkedPartition, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []driver.ParkedPartition{}
	for rows.Next() {
		p, err := scanParked(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// scanParked reads a row of the parked-partition queries.
func scanParked(row pgx.Row) (driver.ParkedPartition, error) {
	var p driver.ParkedPartition
	var key, failure string
	if err := row.Scan(&p.OffsetID, &p.Group, &key, &p.LastPosition, &failure, &p.ParkedAt); err != nil {
		return p, err
	}
	p.ParkedAt = p.ParkedAt.UTC()
	var err error
	if p.Partition, err = parsePartition(key); err != nil {
		return p, err
	}
	if failure != "" {
		if err := json.Unmarshal([]byte(failure), &p.Failure); err != nil {
			return p, fmt.Errorf("pgstore: offset %d: failure: %w", p.OffsetID, err)
		}
	}
	return p, nil
}

// RetryPartition unparks the partition; see driver.Parking.
func (s *Store) RetryPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, "retry", group, partition, func(*tx, driver.ParkedPartition) error { return nil })
}

// SkipFailedMessage moves the partition past its failed message and
// unparks it; see driver.Parking.
func (s *Store) SkipFailedMessage(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, "skip", group, partition, func(t *tx, p driver.ParkedPartition) error {
		to := max(p.LastPosition, p.Failure.Position)
		b := &pgx.Batch{}
		b.Queue(t.s.q.g.moveTo, p.OffsetID, to)
		b.Queue(t.s.q.g.remark, p.OffsetID)
		if err := t.sendBatch(b).Close(); err != nil {
			return err
		}
		var status driver.Status
		var failure string
		return t.c.QueryRow(t.ctx, t.s.q.g.raiseHighest, t.gs.byName[p.Group].row, to).Scan(&status, &failure)
	})
}

// ResetPartition moves the partition's offset back to the start and
// unparks it; see driver.Parking.
func (s *Store) ResetPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, "reset", group, partition, func(t *tx, p driver.ParkedPartition) error {
		b := &pgx.Batch{}
		b.Queue(t.s.q.g.foldGroup, t.gs.byName[p.Group].row)
		b.Queue(t.s.q.g.resetOffset, p.OffsetID)
		b.Queue(t.s.q.g.remark, p.OffsetID)
		return t.sendBatch(b).Close()
	})
}

// unpark runs change on the parked partition in one transaction under the
// exclusive lock, then clears its parked record.
func (s *Store) unpark(ctx context.Context, verb, group string, partition core.Partition, change func(t *tx, p driver.ParkedPartition) error) (out driver.ParkedPartition, err error) {
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		g := t.gs.byName[group]
		if g == nil {
			return s.unknownGroup(t.ctx, t.c, group)
		}
		if err := driver.CheckPartition(g.name, g.partitionBy, partition); err != nil {
			return err
		}
		tp, err := g.tupleOf(verb, partition)
		if err != nil {
			return err
		}
		p, err := scanParked(t.c.QueryRow(t.ctx, s.q.g.parkedOne, g.row, tp.key))
		if errors.Is(err, pgx.ErrNoRows) {
			return t.notParked(g, partition)
		}
		if err != nil {
			return t.fail(verb+" partition", err)
		}
		out = p
		if err := change(t, p); err != nil {
			return t.fail(verb+" partition", err)
		}
		_, err = t.c.Exec(t.ctx, s.q.g.unpark, p.OffsetID)
		t.announce(g.handled)
		return t.check(verb+" partition", err)
	})
	if err != nil {
		return driver.ParkedPartition{}, err
	}
	return out, nil
}

// notParked describes a partition of g that is not parked.
func (t *tx) notParked(g *groupConf, partition core.Partition) error {
	rows, err := t.c.Query(t.ctx, t.s.q.g.parked, g.name)
	if err != nil {
		return t.fail("parked partitions", err)
	}
	defer rows.Close()
	parked := []string{}
	for rows.Next() {
		p, err := scanParked(rows)
		if err != nil {
			return t.fail("parked partitions", err)
		}
		parked = append(parked, core.Partition(p.Partition).String())
	}
	if err := rows.Err(); err != nil {
		return t.fail("parked partitions", err)
	}
	slices.Sort(parked)
	if len(parked) == 0 {
		parked = nil
	}
	return &driver.NotParkedError{Group: g.name, Partition: maps.Clone(partition), Parked: parked}
}
