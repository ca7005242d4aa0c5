package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// The write-ahead log is kept bounded three ways:
//
//   - No read transaction outlives the call that opened it (withReader
//     rolls back whatever a read left open, even when its context ended),
//     so no snapshot pins the WAL between calls.
//   - journal_size_limit (JournalSizeLimit, on every connection): whenever
//     SQLite restarts the WAL from its beginning (after a checkpoint that
//     copied every frame back, when no reader is inside the WAL), the file
//     is truncated to that size instead of keeping its largest size ever.
//   - Housekeep, called by the runtime on every heartbeat: a PASSIVE
//     checkpoint, which never blocks a reader or a writer; then, when the
//     WAL is larger than JournalSizeLimit (readers never all outside the
//     WAL at once, so SQLite's own checkpoints could not finish) or
//     nothing was committed since the last Housekeep (idle), a TRUNCATE
//     checkpoint holding the writer for at most checkpointWait: it waits
//     for the readers inside the WAL (each holds it for one call), lets new
//     ones read the database file, and empties the WAL.
//
// Measured (TestWALStaysBounded): 40,000 appends against non-stop readers
// grew the WAL to tens of MB without this; with it, the WAL is back under
// JournalSizeLimit at the first Housekeep after the readers pause, and
// empty at the first idle one.

// JournalSizeLimit is the size, in bytes, the WAL is truncated to whenever
// SQLite restarts it (PRAGMA journal_size_limit), and beyond which
// Housekeep forces a checkpoint that empties it.
const JournalSizeLimit = 8 << 20

// checkpointWait bounds how long Housekeep's TRUNCATE checkpoint waits for
// readers and other processes' writers (it holds this store's writer
// meanwhile).
const checkpointWait = 200 * time.Millisecond

var _ driver.Housekeeper = (*Store)(nil)

// housekeeping is the state Housekeep keeps between calls.
type housekeeping struct {
	mu      sync.Mutex // held by Housekeep, and by the background checkpointer while it runs
	seen    bool
	version int64 // PRAGMA data_version at the last call
	commits int64 // Store.commits at the last call
}

// Housekeep checkpoints the write-ahead log so it stays bounded (see
// JournalSizeLimit): a PASSIVE checkpoint, then a TRUNCATE one when the WAL
// outgrew JournalSizeLimit or nothing was committed since the last call.
// It implements driver.Housekeeper: a Runtime calls it on every heartbeat.
// It does nothing on a read-only or in-memory store.
func (s *Store) Housekeep(ctx context.Context) (err error) {
	defer func() { err = ctxErr(ctx, busyOr(err)) }()
	if err := ctx.Err(); err != nil || s.readOnly || s.memory {
		return err
	}
	h := &s.hk
	h.mu.Lock()
	defer h.mu.Unlock()
	err = s.withReader(ctx, func(conn *sqlite.Conn) error {
		_, err := checkpoint(conn, "PASSIVE")
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: checkpoint: %w", err)
	}
	commits := s.commits.Load()
	version, verr := s.watch.current()
	idle := verr == nil && h.seen && version == h.version && commits == h.commits
	size, err := s.walSize()
	if err != nil {
		return err
	}
	if idle && size == 0 || !idle && size <= JournalSizeLimit {
		h.seen, h.version, h.commits = verr == nil, version, commits
		return nil
	}
	w, err := s.takeIdleWriter(ctx)
	if err != nil {
		return err
	}
	w.conn.SetBusyTimeout(checkpointWait)
	busy, cerr := checkpoint(w.conn, "TRUNCATE")
	w.conn.SetBusyTimeout(w.busy)
	s.putWriter(w)
	if cerr != nil {
		return fmt.Errorf("sqlitestore: checkpoint: %w", cerr)
	}
	if busy {
		s.log.Debug("sqlitestore: WAL checkpoint could not finish (readers or another writer)", "prefix", s.names.prefix, "wal_bytes", size)
	}
	// Read after the checkpoint (it does not count as a change).
	version, verr = s.watch.current()
	h.seen, h.version, h.commits = verr == nil, version, s.commits.Load()
	return nil
}

// checkpoint runs PRAGMA wal_checkpoint(mode) and reports whether it could
// not finish (readers or a writer in the way).
func checkpoint(conn *sqlite.Conn, mode string) (busy bool, err error) {
	err = sqlitex.ExecuteTransient(conn, "PRAGMA wal_checkpoint("+mode+")", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { busy = stmt.ColumnInt(0) != 0; return nil },
	})
	if sqlite.ErrCode(err).ToPrimary() == sqlite.ResultBusy {
		return true, nil
	}
	return busy, err
}

// walSize returns the size of the WAL file in bytes (0 when there is
// none: not in WAL mode, in memory, or checkpointed away on close).
func (s *Store) walSize() (int64, error) {
	if s.walPath == "" {
		return 0, nil
	}
	fi, err := os.Stat(s.walPath)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: WAL size: %w", err)
	}
	return fi.Size(), nil
}

// mainFile returns the path of the database file conn has open ("" for an
// in-memory database).
func mainFile(conn *sqlite.Conn) (string, error) {
	var file string
	err := sqlitex.ExecuteTransient(conn, "PRAGMA database_list", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error {
			if stmt.ColumnText(1) == "main" {
				file = stmt.ColumnText(2)
			}
			return nil
		},
	})
	return file, err
}
