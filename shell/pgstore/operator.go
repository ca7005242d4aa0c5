package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sourced-go/sourced/shell/driver"
)

// The operator's side of the store, for tools such as cmd/sourced: how far
// behind each partition is, the workers' heartbeats, cancelling a
// scheduled message, and the schema versions a database records.

// Lag returns, for each partition of group with pending work (by offset
// id, as driver.Offset.ID), how many messages of the group's handled types
// it has not processed yet, counting at most limit per partition (0: no
// cap; a count equal to limit means "at least"). Partitions with no
// pending work are absent: their lag is 0. It reads one REPEATABLE READ
// snapshot and takes none of the store's locks; it reads the pending
// messages of every pending partition, one query each: GroupLag counts
// within bounds instead.
func (s *Store) Lag(ctx context.Context, group string, limit int) (map[int64]int, error) {
	lag := map[int64]int{}
	err := s.View(ctx, func(tx pgx.Tx) error {
		gs, err := s.loadGroups(ctx, tx, 0)
		if err != nil {
			return err
		}
		g, ok := gs.byName[group]
		if !ok {
			return s.unknownGroup(ctx, tx, group)
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT id, partition_key, last_position FROM %s WHERE consumer_group_id = $1 AND next_position IS NOT NULL ORDER BY id`, s.names.offsets), g.row)
		return s.countPending(ctx, tx, g, rows, err, limit, lag)
	})
	if err != nil {
		var ue *driver.UnknownGroupError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, s.wrap(ctx, "lag of "+group, err)
	}
	return lag, nil
}

var _ driver.Lagger = (*Store)(nil)

// GroupLag counts the pending work of group within the bounds of q (see
// driver.Lagger): in one REPEATABLE READ snapshot taking none of the
// store's locks, one count of the pending and parked partitions, the
// partitions to count (q.Offsets, or the q.Partitions furthest behind),
// then one bounded count per partition counted. Unlike Lag, its cost does
// not grow with the number of partitions behind.
func (s *Store) GroupLag(ctx context.Context, group string, q driver.LagQuery) (driver.Lag, error) {
	limit, err := driver.CheckLagQuery(q)
	if err != nil {
		return driver.Lag{}, err
	}
	out := driver.Lag{ByOffset: map[int64]int{}, Limit: limit}
	err = s.View(ctx, func(tx pgx.Tx) error {
		gs, err := s.loadGroups(ctx, tx, 0)
		if err != nil {
			return err
		}
		g, ok := gs.byName[group]
		if !ok {
			return s.unknownGroup(ctx, tx, group)
		}
		err = tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE next_position IS NOT NULL), count(*) FILTER (WHERE parked IS NOT NULL) FROM %s WHERE consumer_group_id = $1`, s.names.offsets), g.row).
			Scan(&out.Pending, &out.Parked)
		if err != nil {
			return err
		}
		var rows pgx.Rows
		switch {
		case len(q.Offsets) > 0:
			rows, err = tx.Query(ctx, fmt.Sprintf(`SELECT id, partition_key, last_position FROM %s WHERE consumer_group_id = $1 AND next_position IS NOT NULL AND id = ANY($2) ORDER BY id`, s.names.offsets), g.row, q.Offsets)
		case q.Partitions > 0:
			rows, err = tx.Query(ctx, fmt.Sprintf(`SELECT id, partition_key, last_position FROM %s WHERE consumer_group_id = $1 AND next_position IS NOT NULL ORDER BY last_position, id LIMIT $2`, s.names.offsets), g.row, q.Partitions)
		default:
			return nil
		}
		return s.countPending(ctx, tx, g, rows, err, limit, out.ByOffset)
	})
	if err != nil {
		var ue *driver.UnknownGroupError
		if errors.As(err, &ue) {
			return driver.Lag{}, err
		}
		return driver.Lag{}, s.wrap(ctx, "lag of "+group, err)
	}
	return out, nil
}

// countPending counts, for each offset rows lists (id, partition_key,
// last_position; rows and err as tx.Query returned them), the pending
// messages of g's handled types after it, at most limit (0: no cap), into
// lag by offset id (partitions with none are left out).
func (s *Store) countPending(ctx context.Context, tx pgx.Tx, g *groupConf, rows pgx.Rows, err error, limit int, lag map[int64]int) error {
	if err != nil {
		return err
	}
	type pending struct {
		id, last int64
		key      string
	}
	var ps []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.id, &p.key, &p.last); err != nil {
			rows.Close()
			return err
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, p := range ps {
		partition, err := parsePartition(p.key)
		if err != nil {
			return err
		}
		sql, args := s.fetchSQL(partition, g.handled, p.last, limit)
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM ("+sql+") pending", args...).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			lag[p.id] = n
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
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT w.id, w.last_seen, (SELECT count(*) FROM %[2]s o WHERE o.claimed_by = w.id AND o.claimed) FROM %[1]s w ORDER BY w.id`, s.names.workers, s.names.offsets))
	if err != nil {
		return nil, s.wrap(ctx, "workers", err)
	}
	out := []Worker{}
	for rows.Next() {
		var w Worker
		if err := rows.Scan(&w.ID, &w.LastSeen, &w.Claims); err != nil {
			rows.Close()
			return nil, s.wrap(ctx, "workers", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "workers", err)
	}
	return out, nil
}

// CancelScheduled deletes the scheduled message whose id is id, before it
// is promoted into the log, and reports whether there was one (false: no
// such message is scheduled, maybe promoted already).
func (s *Store) CancelScheduled(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE message_id = $1`, s.names.scheduled), id)
	if err != nil {
		return false, s.wrap(ctx, "cancel scheduled "+id.String(), err)
	}
	return tag.RowsAffected() > 0, nil
}

// AppliedMigration is a schema version a database records as applied.
type AppliedMigration struct {
	Version   int
	AppliedAt time.Time
}

// AppliedMigrations returns the schema versions the database at url
// records for prefix (empty: DefaultPrefix), in order: none when the store
// was never installed there. It writes nothing, and works on any version,
// older or newer than this program's (SchemaVersion): compare them to
// Migrations to see what is pending.
func AppliedMigrations(ctx context.Context, url, prefix string) ([]AppliedMigration, error) {
	p, err := checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	defer pool.Close()
	n := namesFor(p)
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, n.migrations).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pgstore: schema versions: %w", err)
	}
	out := []AppliedMigration{}
	if !exists {
		return out, nil
	}
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT version, applied_at FROM %s ORDER BY version`, n.migrations))
	if err != nil {
		return nil, fmt.Errorf("pgstore: schema versions: %w", err)
	}
	for rows.Next() {
		var m AppliedMigration
		if err := rows.Scan(&m.Version, &m.AppliedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: schema versions: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: schema versions: %w", err)
	}
	return out, nil
}
