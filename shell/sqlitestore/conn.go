package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

var memSeq atomic.Int64

// dbURI turns the path given to Open into what SQLite opens. ":memory:" (or
// "") becomes a private in-memory database on the memdb VFS that every
// connection of the store shares (named with "/" so it is shared, unique per
// call): for tests only, it disappears when the store closes. Anything else
// is a file path or a "file:" URI.
func dbURI(path string) (uri string, memory bool) {
	if path == "" || path == ":memory:" {
		return fmt.Sprintf("file:/sourced-memory-%d?vfs=memdb", memSeq.Add(1)), true
	}
	return path, false
}

const openFlags = sqlite.OpenReadWrite | sqlite.OpenCreate | sqlite.OpenURI

// prepareConn applies the per-connection settings. They are properties of
// the connection, not of the file, so every connection the store opens gets
// them:
//   - foreign_keys = ON: links to messages cascade when messages are
//     deleted, and a link to a missing key pair fails;
//   - busy_timeout: waiting for another process's write lock, instead of
//     failing with SQLITE_BUSY at once;
//   - journal_size_limit = JournalSizeLimit: a WAL restarted from its
//     beginning is truncated to that size (see wal.go);
//   - temp_store = MEMORY: statement and savepoint journals (every Update
//     is a savepoint of a shared transaction) stay in memory instead of
//     spilling to temporary files;
//   - synchronous = NORMAL when the file is in WAL mode: a commit is
//     durable against a crash of the process, and the database cannot be
//     corrupted by a power loss, but the last transactions before a power
//     loss may roll back. Outside WAL SQLite's default (FULL) is kept.
//   - query_only on reader connections, so a read can never write.
func prepareConn(conn *sqlite.Conn, busy time.Duration, reader bool) error {
	conn.SetBusyTimeout(busy)
	if err := sqlitex.ExecuteTransient(conn, "PRAGMA foreign_keys = ON", nil); err != nil {
		return fmt.Errorf("sqlitestore: foreign_keys: %w", err)
	}
	var mode string
	err := sqlitex.ExecuteTransient(conn, "PRAGMA journal_mode", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { mode = stmt.ColumnText(0); return nil },
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: journal_mode: %w", err)
	}
	if strings.EqualFold(mode, "wal") {
		if err := sqlitex.ExecuteTransient(conn, "PRAGMA synchronous = NORMAL", nil); err != nil {
			return fmt.Errorf("sqlitestore: synchronous: %w", err)
		}
	}
	if err := sqlitex.ExecuteTransient(conn, fmt.Sprintf("PRAGMA journal_size_limit = %d", JournalSizeLimit), nil); err != nil {
		return fmt.Errorf("sqlitestore: journal_size_limit: %w", err)
	}
	if err := sqlitex.ExecuteTransient(conn, "PRAGMA temp_store = MEMORY", nil); err != nil {
		return fmt.Errorf("sqlitestore: temp_store: %w", err)
	}
	if reader {
		if err := sqlitex.ExecuteTransient(conn, "PRAGMA query_only = ON", nil); err != nil {
			return fmt.Errorf("sqlitestore: query_only: %w", err)
		}
	}
	return nil
}

// openWriter opens the store's single writer connection.
func openWriter(uri string, flags sqlite.OpenFlags, busy time.Duration) (*sqlite.Conn, error) {
	conn, err := sqlite.OpenConn(uri, flags)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", uri, err)
	}
	if err := prepareConn(conn, busy, false); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// openReaders opens the pool of reader connections.
func openReaders(uri string, flags sqlite.OpenFlags, size int, busy time.Duration) (*sqlitex.Pool, error) {
	pool, err := sqlitex.NewPool(uri, sqlitex.PoolOptions{
		Flags:    flags,
		PoolSize: size,
		PrepareConn: func(conn *sqlite.Conn) error {
			return prepareConn(conn, busy, true)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open readers %s: %w", uri, err)
	}
	return pool, nil
}

// setPageSize sets the page size of a database that has no pages yet (a
// new file); an existing file keeps its own.
func setPageSize(conn *sqlite.Conn, size int) error {
	var pages int64
	err := sqlitex.ExecuteTransient(conn, "PRAGMA page_count", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { pages = stmt.ColumnInt64(0); return nil },
	})
	if err != nil || pages > 0 {
		return err
	}
	return sqlitex.ExecuteTransient(conn, fmt.Sprintf("PRAGMA page_size = %d", size), nil)
}

// setWAL switches the file to write-ahead logging (a property of the file,
// set outside any transaction). In-memory databases keep their mode.
func setWAL(conn *sqlite.Conn) error {
	if err := sqlitex.ExecuteTransient(conn, "PRAGMA journal_mode = WAL", nil); err != nil {
		return fmt.Errorf("sqlitestore: journal_mode = WAL: %w", err)
	}
	return sqlitex.ExecuteTransient(conn, "PRAGMA synchronous = NORMAL", nil)
}

// withReader takes a reader connection for the duration of fn, and puts it
// back clean whatever fn did or however ctx ended: the interrupt is
// cleared first (an ended context interrupts every statement, ROLLBACK
// included), then a transaction fn left open (a read snapshot, which would
// pin the WAL and answer every later read on the connection from the
// past) is rolled back.
func (s *Store) withReader(ctx context.Context, fn func(conn *sqlite.Conn) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	conn, err := s.readers.Take(ctx) // prepares a new connection under ctx
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("sqlitestore: %w", err))
	}
	defer func() {
		conn.SetInterrupt(nil)
		if !conn.AutocommitEnabled() {
			if rerr := execPrepped(conn, "ROLLBACK"); rerr != nil && err == nil {
				err = fmt.Errorf("sqlitestore: end of read: %w", rerr)
			}
		}
		s.readers.Put(conn)
	}()
	return ctxErr(ctx, busyOr(fn(conn)))
}

// ctxErr makes the error of a call whose context ended match the
// context's error (errors.Is(err, context.Canceled) or
// context.DeadlineExceeded), whatever SQLite reported (an interrupted
// statement says only "interrupted").
func ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := ctx.Err()
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, cerr)
}

// busyOr marks an error caused by a lock SQLite could not take within the
// busy timeout (SQLITE_BUSY, SQLITE_LOCKED and their extended codes) as
// driver.ErrBusy, and one caused by a full disk (SQLITE_FULL) as a
// *DiskFullError (matching ErrDiskFull and driver.ErrBusy), so callers can
// tell a transient failure from a real one.
func busyOr(err error) error {
	if err == nil || errors.Is(err, driver.ErrBusy) {
		return err
	}
	switch sqlite.ErrCode(err).ToPrimary() {
	case sqlite.ResultBusy, sqlite.ResultLocked:
		return fmt.Errorf("%w: %w", driver.ErrBusy, err)
	case sqlite.ResultFull:
		return &DiskFullError{Err: err}
	}
	return err
}

// ErrDiskFull is matched by the error of a write SQLite refused because
// the disk (or the database's page limit) is full.
var ErrDiskFull = errors.New("sqlitestore: database or disk is full")

// DiskFullError is the error of a write refused for want of space
// (SQLITE_FULL). The write's transaction was rolled back whole: nothing of
// it was written, and it may be tried again once space is freed. It matches
// ErrDiskFull and driver.ErrBusy: routers and runtimes treat it as
// transient, as they do a busy store (the worker releases its claims,
// backs off and tries again; no group fails for it), so workers carry on
// once space returns.
type DiskFullError struct {
	// Err is SQLite's error.
	Err error
}

func (e *DiskFullError) Error() string {
	return "sqlitestore: the database or disk is full, so the write was refused whole (free space, or raise the file's size limit; it may be retried): " + e.Err.Error()
}

// Is makes errors.Is(err, ErrDiskFull) and errors.Is(err, driver.ErrBusy)
// true.
func (e *DiskFullError) Is(target error) bool {
	return target == ErrDiskFull || target == driver.ErrBusy
}

// Unwrap returns SQLite's error.
func (e *DiskFullError) Unwrap() error { return e.Err }
