package sqlitestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
)

// watcher is a dedicated reader connection that reads PRAGMA data_version:
// a number that changes whenever any other connection (this store's writer,
// another process) commits to the file. Reading it costs one shared lock
// on the WAL index and touches no table.
//
// It serves two things:
//   - the idle-claim cache: a ClaimNext that found the group latched (or
//     not claimable) without writing reads the data version while its
//     transaction still holds the write lock (so nothing can commit in
//     between) and remembers it; a later ClaimNext of the group that reads
//     the same version knows the database is what that answer was computed
//     from, and answers nil without taking the writer (until the retry
//     time of a retrying group). Any commit by anyone, raw SQL included,
//     changes the version and sends the next poll to the database, where
//     the latch answers in O(1) again. A commit of this store's own writer
//     is known without reading the version (Store.commits).
//   - Changed (driver.ChangeDetector), for the runtime's catch-up poll.
type watcher struct {
	mu   sync.Mutex
	conn *sqlite.Conn
	// memory is set for a private in-memory database: no other connection
	// writes it, the store's own commits tell all, and the version is not
	// read (memdb would make the read wait for the writer).
	memory  bool
	idle    map[string]idleClaim
	changed int64 // the version Changed last saw
	own     int64 // the store's own commits Changed last saw
	seen    bool
}

// idleClaim is a remembered "nothing to claim" answer.
type idleClaim struct {
	version int64     // the data version it was computed at
	commits int64     // the store's own commits then (Store.commits)
	until   time.Time // zero: until the version changes
}

var _ driver.ChangeDetector = (*Store)(nil)

func openWatcher(uri string, flags sqlite.OpenFlags, memory bool) (*watcher, error) {
	conn, err := sqlite.OpenConn(uri, flags)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", uri, err)
	}
	// No busy timeout: a version that cannot be read at once (a WAL
	// recovery by another process, a writer holding an exclusive lock in
	// rollback mode) counts as changed.
	if err := prepareConn(conn, 0, true); err != nil {
		conn.Close()
		return nil, err
	}
	return &watcher{conn: conn, idle: map[string]idleClaim{}, memory: memory}, nil
}

// version reads the data version; the caller holds mu.
func (w *watcher) version() (int64, error) {
	if w.memory {
		return 0, nil
	}
	return queryInt(w.conn, "PRAGMA data_version")
}

// idleNow reports whether group was found idle at the current data
// version (and its idle time has not passed). commits is the store's
// count of its own commits: when it moved since, the version has too, and
// the version is not read.
func (w *watcher) idleNow(group string, commits int64, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.idle[group]
	if !ok || e.commits != commits || !e.until.IsZero() && !now.Before(e.until) {
		return false
	}
	v, err := w.version()
	return err == nil && v == e.version
}

// current reads the data version (for remember).
func (w *watcher) current() (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version()
}

// remember records that group had nothing to claim at version.
func (w *watcher) remember(group string, e idleClaim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idle[group] = e
}

func (w *watcher) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn.Close()
}

// Changed reports whether anything was committed to the database since the
// last call (true on the first call): by another process, or by this store
// (its own commits count, since they are made on another connection). It
// reads PRAGMA data_version on a dedicated connection, so a catch-up poll
// that finds nothing changed costs a few microseconds and no claim scan.
// It implements driver.ChangeDetector.
func (s *Store) Changed(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	w := s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	own := s.commits.Load()
	v, err := w.version()
	if err != nil {
		w.seen = false // cannot tell: changed, now and next time
		return true, nil
	}
	changed := !w.seen || v != w.changed || own != w.own
	w.seen, w.changed, w.own = true, v, own
	return changed, nil
}
