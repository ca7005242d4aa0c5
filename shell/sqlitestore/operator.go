package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
)

// The operator's side of the store, for tools such as cmd/sourced: how far
// behind each partition is, the workers' heartbeats, cancelling a
// scheduled message, and the schema versions a file records.

// Lag returns, for each partition of group with pending work (by offset
// id, as driver.Offset.ID), how many messages of the group's handled types
// it has not processed yet, counting at most limit per partition (0: no
// cap; a count equal to limit means "at least"). Partitions with no
// pending work are absent: their lag is 0. It reads one snapshot; the
// cost is that of reading the pending messages of every pending
// partition, one query each: GroupLag counts within bounds instead.
func (s *Store) Lag(ctx context.Context, group string, limit int) (lag map[int64]int, err error) {
	lag = map[int64]int{}
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		gs, err := loadGroups(conn, s)
		if err != nil {
			return err
		}
		g, err := gs.lookup(group)
		if err != nil {
			return err
		}
		return s.countPending(conn, g, fmt.Sprintf(`SELECT id, partition_key, last_position FROM %s WHERE consumer_group_id = ? AND next_position IS NOT NULL ORDER BY id`, s.names.offsets),
			func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }, limit, lag)
	})
	if err != nil {
		var ue *driver.UnknownGroupError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, fmt.Errorf("sqlitestore: lag of %s: %w", group, err)
	}
	return lag, nil
}

var _ driver.Lagger = (*Store)(nil)

// GroupLag counts the pending work of group within the bounds of q (see
// driver.Lagger): in one snapshot, a count of the pending partitions
// (offsets with a pending marker) and one of the parked ones, the
// partitions to count (q.Offsets, or the q.Partitions furthest behind),
// then one bounded read per partition counted. Unlike Lag, its cost does
// not grow with the number of partitions behind.
func (s *Store) GroupLag(ctx context.Context, group string, q driver.LagQuery) (driver.Lag, error) {
	limit, err := driver.CheckLagQuery(q)
	if err != nil {
		return driver.Lag{}, err
	}
	out := driver.Lag{ByOffset: map[int64]int{}, Limit: limit}
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		gs, err := loadGroups(conn, s)
		if err != nil {
			return err
		}
		g, err := gs.lookup(group)
		if err != nil {
			return err
		}
		bindGroup := func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }
		err = queryRows(conn, fmt.Sprintf(`SELECT count(*) FROM %s WHERE consumer_group_id = ? AND next_position IS NOT NULL`, s.names.offsets),
			bindGroup, func(stmt *sqlite.Stmt) { out.Pending = stmt.ColumnInt64(0) })
		if err != nil {
			return err
		}
		err = queryRows(conn, fmt.Sprintf(`SELECT count(*) FROM %s WHERE consumer_group_id = ?`, s.names.parked),
			bindGroup, func(stmt *sqlite.Stmt) { out.Parked = stmt.ColumnInt64(0) })
		if err != nil {
			return err
		}
		switch {
		case len(q.Offsets) > 0:
			ids, _ := json.Marshal(q.Offsets)
			return s.countPending(conn, g, fmt.Sprintf(`SELECT id, partition_key, last_position FROM %s WHERE consumer_group_id = ? AND next_position IS NOT NULL AND id IN (SELECT value FROM json_each(?)) ORDER BY id`, s.names.offsets),
				func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row); stmt.BindText(2, string(ids)) }, limit, out.ByOffset)
		case q.Partitions > 0:
			return s.countPending(conn, g, fmt.Sprintf(`SELECT id, partition_key, last_position FROM %s WHERE consumer_group_id = ? AND next_position IS NOT NULL ORDER BY last_position, id LIMIT ?`, s.names.offsets),
				func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row); stmt.BindInt64(2, int64(q.Partitions)) }, limit, out.ByOffset)
		}
		return nil
	})
	if err != nil {
		var ue *driver.UnknownGroupError
		if errors.As(err, &ue) {
			return driver.Lag{}, err
		}
		return driver.Lag{}, fmt.Errorf("sqlitestore: lag of %s: %w", group, err)
	}
	return out, nil
}

// countPending counts, for each offset query lists (id, partition_key,
// last_position; bind binds its arguments), the pending messages of g's
// handled types after it, at most limit (0: no cap), into lag by offset
// id (partitions with none are left out).
func (s *Store) countPending(conn *sqlite.Conn, g *groupConf, query string, bind func(*sqlite.Stmt), limit int, lag map[int64]int) error {
	type pending struct {
		id        int64
		partition core.Partition
		last      int64
	}
	var ps []pending
	var perr error
	err := queryRows(conn, query, bind, func(stmt *sqlite.Stmt) {
		p, err := parsePartition(stmt.ColumnText(1))
		if err != nil && perr == nil {
			perr = err
		}
		ps = append(ps, pending{stmt.ColumnInt64(0), p, stmt.ColumnInt64(2)})
	})
	if err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	for _, p := range ps {
		_, b, err := readBound(conn, s.q, driver.ReadOptions{After: p.last})
		if err != nil {
			return err
		}
		rows, err := s.queryPartition(conn, nil, p.partition, g.handled, b, limit)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			lag[p.id] = len(rows)
		}
	}
	return nil
}

// Worker is a worker's heartbeat record.
type Worker struct {
	ID       string
	LastSeen time.Time
	// Claims is the number of partitions the worker holds claimed.
	Claims int
}

// Workers returns the heartbeat records of the workers (see
// driver.Groups.Heartbeat), by id, with the number of claims each holds
// (counted through the index of claimed offsets: the cost follows the
// claims held, not the partitions). A worker that stopped cleanly removed
// its record (RemoveWorkers); the claims themselves are in ReadOffsets.
func (s *Store) Workers(ctx context.Context) ([]Worker, error) {
	out := []Worker{}
	var perr error
	err := s.withReader(ctx, func(conn *sqlite.Conn) error {
		return queryRows(conn, fmt.Sprintf(`SELECT w.id, w.last_seen, (SELECT count(*) FROM %[2]s o WHERE o.claimed_by = w.id AND o.claimed = 1) FROM %[1]s w ORDER BY w.id`, s.names.workers, s.names.offsets), nil, func(stmt *sqlite.Stmt) {
			at, err := parseTime(stmt.ColumnText(1))
			if err != nil && perr == nil {
				perr = err
			}
			out = append(out, Worker{ID: stmt.ColumnText(0), LastSeen: at, Claims: stmt.ColumnInt(2)})
		})
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: workers: %w", err)
	}
	return out, nil
}

// CancelScheduled deletes the scheduled message whose id is id, before it
// is promoted into the log, and reports whether there was one (false: no
// such message is scheduled, maybe promoted already).
func (s *Store) CancelScheduled(ctx context.Context, id uuid.UUID) (found bool, err error) {
	err = s.Update(ctx, func(tx driver.Tx) error {
		conn, err := Conn(tx)
		if err != nil {
			return err
		}
		stmt, err := conn.Prepare(fmt.Sprintf(`DELETE FROM %s WHERE message_id = ?`, s.names.scheduled))
		if err != nil {
			return err
		}
		stmt.BindText(1, id.String())
		if _, err := stmt.Step(); err != nil {
			stmt.Reset()
			return err
		}
		found = conn.Changes() > 0
		return stmt.Reset()
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: cancel scheduled %s: %w", id, err)
	}
	return found, nil
}

// AppliedMigration is a schema version a database records as applied.
type AppliedMigration struct {
	Version   int
	AppliedAt time.Time
}

// AppliedMigrations returns the schema versions the SQLite file at path
// records for prefix (empty: DefaultPrefix), in order: none when the
// store was never installed there. It opens the file read-only, never
// creates it (a missing file is an error matching os.ErrNotExist), and
// works on any version, older or newer than this program's
// (SchemaVersion): compare them to Migrations to see what is pending.
func AppliedMigrations(ctx context.Context, path, prefix string) ([]AppliedMigration, error) {
	p, err := checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	uri := path
	if u, ok := readOnlyURI(path, true); ok {
		uri = u // immutable on a read-only mount, where SQLite could not make the WAL index
	}
	conn, err := sqlite.OpenConn(uri, sqlite.OpenReadOnly|sqlite.OpenURI)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	defer conn.Close()
	defer conn.SetInterrupt(conn.SetInterrupt(ctx.Done()))
	n := namesFor(p)
	have, err := schemaVersion(conn, n)
	if err != nil {
		if sqlite.ErrCode(err).ToPrimary() == sqlite.ResultNotADB {
			return nil, fmt.Errorf("%w: %s", ErrNotDatabase, path)
		}
		return nil, fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	out := []AppliedMigration{}
	if have < 0 {
		return out, nil
	}
	var perr error
	err = queryRows(conn, fmt.Sprintf(`SELECT version, applied_at FROM %s ORDER BY version`, n.migrations), nil, func(stmt *sqlite.Stmt) {
		at, err := time.Parse("2006-01-02T15:04:05.999Z", stmt.ColumnText(1))
		if err != nil && perr == nil {
			perr = fmt.Errorf("applied_at %q: %w", stmt.ColumnText(1), err)
		}
		out = append(out, AppliedMigration{Version: stmt.ColumnInt(0), AppliedAt: at})
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: schema versions: %w", path, err)
	}
	return out, nil
}
