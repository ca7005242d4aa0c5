package sqlitestore

import (
	"context"
	"sync"
	"sync/atomic"

	"zombiezen.com/go/sqlite"
)

// The WAL is checkpointed off the writer. SQLite's automatic checkpoint
// runs inside the COMMIT of the connection whose commit takes the WAL past
// wal_autocheckpoint pages: the store's writer, which then holds every
// other write of the process (and the callers of its commit group) while
// it copies a thousand pages back to the database file and syncs it.
// Measured on BenchmarkEndToEnd: one commit in fifty took 5 ms or more,
// a sixth of the run's time, and those commits were the p99.
//
// So the writer's automatic checkpoint is raised to a backstop
// (autoCheckpointBackstop pages, reached only when the checkpointer cannot
// keep up), and every checkpointEvery commits the writer wakes a
// goroutine that runs a PASSIVE checkpoint on a reader connection: it
// copies the frames no reader still needs while the writer goes on
// appending (SQLite lets one checkpoint run beside one writer), and the
// next write transaction after a complete one restarts the WAL from its
// beginning, so the file stays as small as before.

// checkpointEvery is how many commits of the writer pass between two
// background checkpoints: at the ten to twenty pages a small commit
// writes, a few hundred pages, fewer than SQLite's automatic checkpoint
// (1,000 pages) let the WAL hold.
const checkpointEvery = 32

// autoCheckpointBackstop is the writer's wal_autocheckpoint: SQLite
// checkpoints in the committing writer only past it. A busy writer rarely
// leaves the background checkpoint a moment to copy the last frames (it
// commits more while one runs), and only a complete checkpoint lets the
// next write restart the WAL from its beginning: so the WAL still reaches
// the backstop under a steady load, and the writer then copies what the
// background checkpoints left (a few commits' pages, not a thousand)
// and restarts it. 2,000 pages of the default 2 KiB are under
// JournalSizeLimit.
const autoCheckpointBackstop = 2000

// checkpointer is the background checkpoint goroutine of a file store.
type checkpointer struct {
	wake chan struct{}
	stop chan struct{}
	done sync.WaitGroup
	runs atomic.Int64 // checkpoints run
}

// startCheckpointer starts s's checkpointer (not for an in-memory or
// read-only store).
func (s *Store) startCheckpointer() {
	c := &checkpointer{wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.ckpt = c
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for {
			select {
			case <-c.stop:
				return
			case <-c.wake:
			}
			// Not while Housekeep runs (it checkpoints itself): two
			// checkpoints at once, one fails at once with SQLITE_BUSY (the
			// checkpointer lock takes no busy handler), and an idle
			// Housekeep's TRUNCATE so left the WAL whole (TestWALStaysBounded,
			// about one run in 25).
			if !s.hk.mu.TryLock() {
				continue
			}
			err := s.withReader(context.Background(), func(conn *sqlite.Conn) error {
				_, err := checkpoint(conn, "PASSIVE")
				return err
			})
			s.hk.mu.Unlock()
			c.runs.Add(1)
			if err != nil {
				s.log.Debug("sqlitestore: background WAL checkpoint failed (the next one, or the writer's automatic one, catches up)", "prefix", s.names.prefix, "error", err)
			}
		}
	}()
}

// committed tells the checkpointer that the writer committed its n-th
// transaction: every checkpointEvery-th wakes it (without waiting).
func (c *checkpointer) committed(n int64) {
	if c == nil || n%checkpointEvery != 0 {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default: // one is running or due already
	}
}

// close stops the checkpointer and waits for a running checkpoint.
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	close(c.stop)
	c.done.Wait()
}
