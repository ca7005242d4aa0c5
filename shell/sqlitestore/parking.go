package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.Parking = (*Store)(nil)

// park applies CmdPark (see driver.CmdPark) in the transaction of
// ChangeGroup: the offset of f.OffsetID gets its parked record (none when
// the offset is gone), and a retrying group recovers. It returns the
// group's state afterwards.
func (t *tx) park(g *groupConf, r groupRow, f driver.Failure) (driver.GroupState, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return driver.GroupState{}, fmt.Errorf("sqlitestore: consumer group %s: encode failure: %w", g.name, err)
	}
	q := t.s.q.g
	_, err = exec(t.conn, q.park, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, f.OffsetID)
		stmt.BindInt64(2, g.row)
		stmt.BindText(3, string(data))
		stmt.BindText(4, formatTime(t.s.now()))
	})
	if err != nil {
		return driver.GroupState{}, fmt.Errorf("sqlitestore: park a partition of %s: %w", g.name, err)
	}
	st := driver.GroupState{Status: r.status, RetryAt: r.retryAt}
	if r.status != driver.StatusRetrying {
		if err := json.Unmarshal([]byte(r.failure), &st.Failure); err != nil {
			return st, fmt.Errorf("sqlitestore: consumer group %s: failure: %w", g.name, err)
		}
		return st, nil
	}
	next, err := driver.Transition(g.name, r.status, driver.CmdRecover)
	if err != nil {
		return st, err
	}
	r.status, r.retryAt = next, time.Time{}
	if err := t.setStatus(g, r, driver.Failure{}); err != nil {
		return st, err
	}
	return driver.GroupState{Status: next}, nil
}

// ParkedPartitions returns the parked partitions of group ("" for all);
// see driver.Parking.
func (s *Store) ParkedPartitions(ctx context.Context, group string) (out []driver.ParkedPartition, err error) {
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		out = []driver.ParkedPartition{}
		query, bind := s.q.g.parkedAll, func(*sqlite.Stmt) {}
		if group != "" {
			row, err := s.groupRowOf(conn, group)
			if err != nil {
				return err
			}
			query, bind = s.q.g.parkedGroup, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, row) }
		}
		return queryParked(conn, query, bind, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: parked partitions: %w", err)
	}
	return out, nil
}

var _ driver.ParkedReader = (*Store)(nil)

// ReadParked returns a page of parked partitions by ascending offset id;
// see driver.ParkedReader. One query, through the parked records' primary
// key.
func (s *Store) ReadParked(ctx context.Context, q driver.ParkedQuery) (out []driver.ParkedPartition, err error) {
	limit, err := driver.CheckParkedQuery(q)
	if err != nil {
		return nil, err
	}
	cols := fmt.Sprintf(`SELECT p.offset_id, g.group_id, o.partition_key, o.last_position, p.failure, p.parked_at
FROM %s p CROSS JOIN %s o ON o.id = p.offset_id CROSS JOIN %s g ON g.id = p.consumer_group_id`, s.names.parked, s.names.offsets, s.names.groups)
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		out = []driver.ParkedPartition{}
		query := cols + ` WHERE p.offset_id >= ?1 ORDER BY p.offset_id LIMIT ?2`
		bind := func(stmt *sqlite.Stmt) { stmt.BindInt64(1, q.From); stmt.BindInt64(2, int64(limit)) }
		if q.Group != "" {
			row, err := s.groupRowOf(conn, q.Group)
			if err != nil {
				return err
			}
			query = cols + ` WHERE p.offset_id >= ?1 AND p.consumer_group_id = ?3 ORDER BY p.offset_id LIMIT ?2`
			bind = func(stmt *sqlite.Stmt) {
				stmt.BindInt64(1, q.From)
				stmt.BindInt64(2, int64(limit))
				stmt.BindInt64(3, row)
			}
		}
		return queryParked(conn, query, bind, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: parked partitions: %w", err)
	}
	return out, nil
}

// groupRowOf returns the row id of group, or its *driver.UnknownGroupError.
func (s *Store) groupRowOf(conn *sqlite.Conn, group string) (int64, error) {
	row, found := int64(0), false
	err := queryRows(conn, s.q.g.groupByName, func(stmt *sqlite.Stmt) { stmt.BindText(1, group) }, func(stmt *sqlite.Stmt) {
		row, found = stmt.ColumnInt64(0), true
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, s.unknownGroup(conn, group)
	}
	return row, nil
}

// queryParked appends the rows of a parked-partition query to out.
func queryParked(conn *sqlite.Conn, query string, bind func(*sqlite.Stmt), out *[]driver.ParkedPartition) error {
	var perr error
	err := queryRows(conn, query, bind, func(stmt *sqlite.Stmt) {
		p, err := scanParked(stmt)
		if err != nil && perr == nil {
			perr = err
		}
		*out = append(*out, p)
	})
	if err == nil {
		err = perr
	}
	return err
}

// scanParked reads a row of the parked-partition queries.
func scanParked(stmt *sqlite.Stmt) (driver.ParkedPartition, error) {
	p := driver.ParkedPartition{OffsetID: stmt.ColumnInt64(0), Group: stmt.ColumnText(1), LastPosition: stmt.ColumnInt64(3)}
	var err error
	if p.Partition, err = parsePartition(stmt.ColumnText(2)); err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(stmt.ColumnText(4)), &p.Failure); err != nil {
		return p, fmt.Errorf("offset %d: failure: %w", p.OffsetID, err)
	}
	if p.ParkedAt, err = parseTime(stmt.ColumnText(5)); err != nil {
		return p, fmt.Errorf("offset %d: parked_at: %w", p.OffsetID, err)
	}
	return p, nil
}

// RetryPartition unparks the partition; see driver.Parking.
func (s *Store) RetryPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, "retry", group, partition, func(*tx, *groupConf, driver.ParkedPartition) error { return nil })
}

// SkipFailedMessage moves the partition past its failed message and
// unparks it; see driver.Parking.
func (s *Store) SkipFailedMessage(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, "skip", group, partition, func(t *tx, g *groupConf, p driver.ParkedPartition) error {
		to := max(p.LastPosition, p.Failure.Position)
		kps, err := t.offsetKeys(p.OffsetID)
		if err != nil {
			return err
		}
		next, err := t.wakeAfter(g, kps, to)
		if err != nil {
			return err
		}
		q := t.s.q.g
		_, err = exec(t.conn, q.advance, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, p.OffsetID)
			stmt.BindInt64(2, to)
			bindNullable(stmt, 3, next)
		})
		if err != nil {
			return err
		}
		_, err = exec(t.conn, q.raiseHighest, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindInt64(2, to)
		})
		return err
	})
}

// ResetPartition moves the partition's offset back to the start and
// unparks it; see driver.Parking.
func (s *Store) ResetPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, "reset", group, partition, func(t *tx, g *groupConf, p driver.ParkedPartition) error {
		for _, query := range []string{t.s.q.g.foldOffset, t.s.q.g.resetOffset} {
			if _, err := exec(t.conn, query, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, p.OffsetID) }); err != nil {
				return err
			}
		}
		_, err := t.remark(g, p.OffsetID, 0)
		return err
	})
}

// unpark runs change on the parked partition in one write transaction,
// then deletes its parked record and makes the group's claim scan dirty.
func (s *Store) unpark(ctx context.Context, verb, group string, partition core.Partition, change func(t *tx, g *groupConf, p driver.ParkedPartition) error) (out driver.ParkedPartition, err error) {
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		g, err := t.gs.lookup(group)
		if err != nil {
			return err
		}
		if err := driver.CheckPartition(g.name, g.partitionBy, partition); err != nil {
			return err
		}
		_, key, err := partitionOf(g, partition)
		if err != nil {
			return err
		}
		q := s.q.g
		found := false
		var perr error
		err = t.w.rows(q.parkedOne, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindText(2, bytesText(key))
		}, func(stmt *sqlite.Stmt) {
			found = true
			out, perr = scanParked(stmt)
		})
		if err == nil {
			err = perr
		}
		if err != nil {
			return fmt.Errorf("sqlitestore: %s partition: %w", verb, err)
		}
		if !found {
			return t.notParked(g, partition)
		}
		if err := change(t, g, out); err != nil {
			return fmt.Errorf("sqlitestore: %s partition %s of %s: %w", verb, core.Partition(partition).String(), g.name, err)
		}
		if _, err := exec(t.conn, q.unpark, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, out.OffsetID) }); err != nil {
			return fmt.Errorf("sqlitestore: %s partition: %w", verb, err)
		}
		t.announce(g)
		return t.setLatch(g, q.dirty)
	})
	if err != nil {
		return driver.ParkedPartition{}, err
	}
	return out, nil
}

// notParked describes a partition of g that is not parked.
func (t *tx) notParked(g *groupConf, partition core.Partition) error {
	var parked []string
	var perr error
	err := t.w.rows(t.s.q.g.parkedKeys, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }, func(stmt *sqlite.Stmt) {
		p, err := parsePartition(stmt.ColumnText(0))
		if err != nil && perr == nil {
			perr = err
		}
		parked = append(parked, core.Partition(p).String())
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	slices.Sort(parked)
	cp := make(map[string]string, len(partition))
	for k, v := range partition {
		cp[k] = v
	}
	return &driver.NotParkedError{Group: g.name, Partition: cp, Parked: parked}
}
