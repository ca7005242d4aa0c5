package sqlitestore

import (
	"context"
	"fmt"
	"strings"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// clearedTables are the tables Clear empties, children before their parents
// (foreign keys stay satisfied at every step): every table of the store but
// the schema record (<prefix>_schema_migrations) and the change counters
// (<prefix>_counters), which Clear bumps instead.
func (n names) clearedTables() []string {
	return []string{n.snapshots, n.parked, n.hooks, n.offsetKeyPairs, n.offsets, n.groups, n.messageKeyPairs, n.orphans, n.keyPairs, n.messages, n.scheduled, n.workers}
}

// installedTables are every table Install creates, children before their
// parents (dropping a parent first would fail its children's foreign
// keys), the schema record last.
func (n names) installedTables() []string {
	return append(n.clearedTables(), n.counters, n.migrations)
}

// Clear deletes everything the store holds: the log, the schedule, the
// key pairs, consumer groups with their offsets (and parked partitions),
// deciders' snapshots and worker heartbeats.
// The AUTOINCREMENT counters start over, so the next message appended gets
// position 1 (and the next key pair, group and offset id 1). The schema
// stays installed. Tables of other prefixes in the file are untouched.
//
// Clear is for tests (a fresh store per test without a new file): it
// destroys data and cannot be undone. It runs in one write transaction,
// serialised with the store's other writes; consumer groups must be
// registered again afterwards. Other Store values open on the same file
// and prefix (other processes) notice, through the change counters, that
// their cached key pair ids and group configuration are stale.
func (s *Store) Clear(ctx context.Context) error {
	return s.alone(ctx, "clear", func(w *writer) error { return s.clear(w.conn) }, func(w *writer) error {
		// Every cached key pair id is gone from the table and its id will
		// be handed out again; the groups are gone. The next transaction
		// reloads the configuration and the counters (w.sync).
		w.reset()
		w.groups = nil
		return nil
	})
}

// alone runs change in a write transaction of the writer alone, not a
// member of an Update's commit group (Clear and Uninstall invalidate the
// writer's caches, which must not happen under other members' journaled
// work), then, after the commit and still holding the writer, after.
func (s *Store) alone(ctx context.Context, op string, change, after func(w *writer) error) (err error) {
	defer func() {
		if err != nil {
			err = ctxErr(ctx, busyOr(s.readOnlyOr(fmt.Errorf("sqlitestore: %s: %w", op, err))))
		}
	}()
	if s.readOnly {
		return s.readOnlyError(op)
	}
	w, err := s.takeIdleWriter(ctx)
	if err != nil {
		return err
	}
	defer func() { s.putWriter(w) }()
	if err := w.begin(ctx.Done()); err != nil {
		return err
	}
	if err := change(w); err != nil {
		w.rollback()
		return err
	}
	if err := w.commit(); err != nil {
		w.rollback()
		return err
	}
	s.commits.Add(1)
	return after(w)
}

// clear deletes the rows of the store's tables inside the open transaction
// of conn.
func (s *Store) clear(conn *sqlite.Conn) error {
	tables := s.names.clearedTables()
	for _, t := range tables {
		if err := sqlitex.ExecuteTransient(conn, "DELETE FROM "+t, nil); err != nil {
			return err
		}
	}
	// Exact names: a LIKE on the prefix would also match the tables of a
	// longer prefix (prefix "app" and "app_v2").
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(tables)), ", ")
	args := make([]any, len(tables))
	for i, t := range tables {
		args[i] = t
	}
	if err := sqlitex.ExecuteTransient(conn, "DELETE FROM sqlite_sequence WHERE name IN ("+marks+")", &sqlitex.ExecOptions{Args: args}); err != nil {
		return err
	}
	// Bumped, not deleted: other processes' writers compare the values with
	// the ones they loaded their caches at, so the values must move.
	for _, c := range []string{counterGroups, counterPruned, counterDeleted} {
		if _, err := exec(conn, s.q.g.bumpCount, func(stmt *sqlite.Stmt) { stmt.BindText(1, c) }); err != nil {
			return err
		}
	}
	return nil
}

// Uninstall drops the store's tables with their indexes and triggers,
// <prefix>_schema_migrations included, leaving the file as if the prefix
// had never been installed: Open then fails with driver.ErrNotInstalled,
// and Install (Store.Install, or Install) creates the schema afresh.
// Tables of other prefixes in the file are untouched. It does nothing for
// tables already missing.
//
// Uninstall is for tests: it destroys data and cannot be undone. The
// store stays open but, until installed again, every other operation
// fails; other Store values open on the same prefix (other processes) must
// not be in use while it runs, and should be reopened afterwards.
func (s *Store) Uninstall(ctx context.Context) error {
	drop := func(w *writer) error {
		for _, t := range s.names.installedTables() {
			// Dropping a table drops its indexes and triggers, its
			// sqlite_sequence entry and its planner statistics.
			if err := sqlitex.ExecuteTransient(w.conn, "DROP TABLE IF EXISTS "+t, nil); err != nil {
				return err
			}
		}
		return nil
	}
	return s.alone(ctx, "uninstall", drop, func(w *writer) error {
		// A fresh writer connection: the statement cache of the old one
		// holds statements prepared against the dropped tables, and its
		// key pair and group caches describe them.
		conn, err := openWriter(s.uri, s.flags, w.busy)
		if err != nil {
			w.reset()
			w.groups = nil
			return fmt.Errorf("the tables are dropped, but the writer connection could not be renewed: %w", err)
		}
		old := w.conn
		*w = *newWriter(conn, w.busy)
		if err := old.Close(); err != nil {
			s.log.Warn("sqlitestore: uninstall: closing the old writer connection", "prefix", s.names.prefix, "error", err)
		}
		s.log.Debug("sqlitestore: uninstalled schema", "prefix", s.names.prefix)
		return nil
	})
}
