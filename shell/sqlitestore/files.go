package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

var (
	// ErrNotDatabase is matched by the error of opening a file that is not
	// a SQLite database (so not a Sourced store): check the path.
	ErrNotDatabase = errors.New("sqlitestore: not a SQLite database")
	// ErrReadOnly is matched by the error of a write (Install, an append,
	// a consumer-group operation...) on a store opened read-only (see
	// Open): nothing was written.
	ErrReadOnly = errors.New("sqlitestore: store is read-only")
)

const readOnlyFlags = sqlite.OpenReadOnly | sqlite.OpenURI

// ReadOnly reports whether the store was opened read-only (see Open).
func (s *Store) ReadOnly() bool { return s.readOnly }

// readOnlyURI decides whether the database at path opens read-only: asked
// to (force), or because this process cannot write the file or its
// directory (a read-only mount, a copy it does not own). It returns the
// URI to open it with. A WAL file that cannot be written and has no -wal
// beside it (closed cleanly) is opened immutable: SQLite could not create
// the shared-memory index it reads a WAL database through, and nothing
// can change the file. With a -wal present (a copy of a live file) it is
// opened mode=ro, which reads the -wal too. A "file:" URI is taken as the
// caller wrote it unless force is set.
func readOnlyURI(path string, force bool) (string, bool) {
	if strings.HasPrefix(path, "file:") {
		if !force {
			return "", false
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		return path + sep + "mode=ro", true
	}
	if _, err := os.Stat(path); err != nil {
		return "", false // created (or refused) by SQLite
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	dirWritable := writable(filepath.Dir(abs))
	if !force && writable(abs) && dirWritable {
		return "", false
	}
	q := "mode=ro"
	if _, err := os.Stat(abs + "-wal"); !dirWritable && errors.Is(err, os.ErrNotExist) {
		q += "&immutable=1"
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q}
	return u.String(), true
}

// readOnlyError is the error of a write on a read-only store.
func (s *Store) readOnlyError(op string) error {
	return fmt.Errorf("%w: cannot %s: %s is open read-only (this process cannot write the file or its directory; open a writable copy to change it)", ErrReadOnly, op, s.path)
}

// readOnlyOr marks an error SQLite reports for a write to a database it
// opened read-only (SQLITE_READONLY) as ErrReadOnly.
func (s *Store) readOnlyOr(err error) error {
	if err == nil || errors.Is(err, ErrReadOnly) || sqlite.ErrCode(err).ToPrimary() != sqlite.ResultReadOnly {
		return err
	}
	return fmt.Errorf("%w: %s cannot be written (a read-only file, directory or mount): %w", ErrReadOnly, s.path, err)
}

// notDatabase marks the error of reading a file that is not a SQLite
// database (SQLITE_NOTADB) as ErrNotDatabase, naming the file.
func (s *Store) notDatabase(err error) error {
	if err == nil || sqlite.ErrCode(err).ToPrimary() != sqlite.ResultNotADB {
		return err
	}
	return fmt.Errorf("%w: %s is not a SQLite database, so not a Sourced store (check the path): %w", ErrNotDatabase, s.path, err)
}

// staleFactor is how much the log may have grown since the planner
// statistics were taken before Open refreshes them: more than this many
// times the messages analysed (plus staleSlack, so small logs are left
// alone).
const (
	staleFactor = 2
	staleSlack  = 1000
)

// optimizeIfStale refreshes the planner statistics when the file has none
// for the log although the log is not empty, or when the log grew more
// than staleFactor times since they were taken: the claim scan's plan
// depends on them, and the runtime's first refresh may be a while away. A
// refresh that cannot take the write lock in time is logged and skipped.
func (s *Store) optimizeIfStale(ctx context.Context, conn *sqlite.Conn) error {
	last, err := lastPosition(conn, s.q)
	if err != nil || last < s.statsFloor {
		return err // an empty or small log runs without statistics (see Optimize)
	}
	rows, found, err := analyzedRows(conn, s.names.messages)
	if err != nil {
		return err
	}
	if found && last <= staleFactor*rows+staleSlack {
		return nil
	}
	s.log.DebugContext(ctx, "sqlitestore: refreshing planner statistics at open", "prefix", s.names.prefix, "analyzed", rows, "last_position", last)
	if err := s.optimize(ctx, conn); err != nil {
		if ctx.Err() != nil {
			return ctxErr(ctx, err)
		}
		s.log.WarnContext(ctx, "sqlitestore: could not refresh planner statistics at open", "prefix", s.names.prefix, "error", err)
	}
	return nil
}

// analyzedRows returns the number of rows sqlite_stat1 records for table
// (the first figure of its entries), and false when it records none.
func analyzedRows(conn *sqlite.Conn, table string) (rows int64, found bool, err error) {
	exists, err := queryInt(conn, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'sqlite_stat1'`)
	if err != nil || exists == 0 {
		return 0, false, err
	}
	err = sqlitex.Execute(conn, `SELECT stat FROM sqlite_stat1 WHERE tbl = ?`, &sqlitex.ExecOptions{
		Args: []any{table},
		ResultFunc: func(stmt *sqlite.Stmt) error {
			first, _, _ := strings.Cut(stmt.ColumnText(0), " ")
			if n, err := strconv.ParseInt(first, 10, 64); err == nil {
				found = true
				rows = max(rows, n)
			}
			return nil
		},
	})
	return rows, found, err
}
