package sqlitestore

import (
	"math/rand/v2"
	"time"

	"zombiezen.com/go/sqlite"
)

// writer is the store's one writer connection and the state that lives
// with it: the cache of key pair ids.
//
// The cache maps (name, value) to the key pair's id. It is only touched by
// whoever holds the writer, so it needs no lock. Ids inserted by a
// transaction are journaled: if the transaction rolls back, those ids were
// never committed and are dropped from the cache. Ids are never reused
// (key_pairs.id is AUTOINCREMENT), so an entry can only go stale if a key
// pair is deleted; the link's foreign key then fails and the append
// resolves the id again (see tx.link).
//
// The cache has two generations of at most cacheGeneration entries each:
// when the current one fills up it becomes the old one and the previous
// old one is dropped, so memory stays bounded while the values shared by
// many messages (hit again and again) stay cached.
type writer struct {
	conn    *sqlite.Conn
	busy    time.Duration // the busy timeout
	group   *commitGroup  // the open transaction's group, between members
	cur     map[keyPair]int64
	old     map[keyPair]int64
	journal []keyPair // ids cached by the open transaction

	// The consumer-group configuration (see writer.sync).
	groups        *groupSet
	groupsStale   bool  // this writer changed it: reload before use
	dataVersion   int64 // PRAGMA data_version at the last sync
	groupsVersion int64 // the groups counter the configuration was loaded at
	prunedVersion int64 // the key_pairs counter the key pair cache is valid at
	// deletedVersion is the deleted counter Store.StateCache is valid at.
	deletedVersion int64
}

type keyPair struct{ name, value string }

const cacheGeneration = 1 << 16

func newWriter(conn *sqlite.Conn, busy time.Duration) *writer {
	return &writer{conn: conn, busy: busy, cur: make(map[keyPair]int64)}
}

func (w *writer) lookup(k keyPair) (int64, bool) {
	if id, ok := w.cur[k]; ok {
		return id, true
	}
	if id, ok := w.old[k]; ok {
		w.put(k, id)
		return id, true
	}
	return 0, false
}

func (w *writer) put(k keyPair, id int64) {
	if len(w.cur) >= cacheGeneration {
		w.old, w.cur = w.cur, make(map[keyPair]int64, cacheGeneration/4)
	}
	w.cur[k] = id
}

// remember caches an id inserted by the open transaction.
func (w *writer) remember(k keyPair, id int64) {
	w.put(k, id)
	w.journal = append(w.journal, k)
}

// forget drops a cached id (found stale).
func (w *writer) forget(k keyPair) {
	delete(w.cur, k)
	delete(w.old, k)
}

// undo drops the ids cached since journal mark.
func (w *writer) undo(mark int) {
	for _, k := range w.journal[mark:] {
		w.forget(k)
	}
	clear(w.journal[mark:])
	w.journal = w.journal[:mark]
}

// reset empties the cache (after a schema change).
func (w *writer) reset() {
	w.cur = make(map[keyPair]int64)
	w.old = nil
	w.journal = w.journal[:0]
}

// begin opens a BEGIN IMMEDIATE transaction, waiting up to the busy
// timeout for another process's write lock.
//
// It polls for the lock itself, every few hundred microseconds with
// jitter, rather than through SQLite's busy handler: that one sleeps up to
// 100 ms between tries, so a process whose peers commit back to back
// rarely finds the lock free at the moment it wakes and can wait out its
// whole timeout (seen under the race detector with three processes on one
// file). done ends the wait early.
func (w *writer) begin(done <-chan struct{}) error {
	w.journal = w.journal[:0]
	w.conn.SetBusyTimeout(0)
	defer w.conn.SetBusyTimeout(w.busy)
	var deadline time.Time
	var timer *time.Timer
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 2*time.Millisecond) {
		err := execPrepped(w.conn, "BEGIN IMMEDIATE")
		if err == nil || sqlite.ErrCode(err).ToPrimary() != sqlite.ResultBusy {
			return err
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(w.busy)
		}
		if !now.Before(deadline) {
			return err
		}
		d := min(wait/2+rand.N(wait), deadline.Sub(now))
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-done:
			return err
		}
	}
}

func (w *writer) commit() error {
	w.conn.SetInterrupt(nil) // the members' work is not one caller's to cancel
	if err := execPrepped(w.conn, "COMMIT"); err != nil {
		return err
	}
	clear(w.journal)
	w.journal = w.journal[:0]
	return nil
}

// rollback rolls the open transaction back (if SQLite has not already) and
// drops the ids it cached.
func (w *writer) rollback() {
	w.undo(0)
	if w.conn.AutocommitEnabled() {
		return
	}
	// Roll back even if the context was canceled.
	old := w.conn.SetInterrupt(nil)
	defer w.conn.SetInterrupt(old)
	if err := execPrepped(w.conn, "ROLLBACK"); err != nil {
		// The connection is unusable in an unknown transaction state;
		// there is no safe way to continue.
		panic("sqlitestore: rollback failed: " + err.Error())
	}
}

// execPrepped runs a constant statement that returns no rows, through the
// connection's statement cache.
func execPrepped(conn *sqlite.Conn, query string) error {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return err
	}
	_, err = stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	return err
}
