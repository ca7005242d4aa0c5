package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sourced-go/sourced/shell/driver"
)

// maxGroupMembers bounds how many Updates share one commit, so that the
// first of them waits a bounded time for its commit.
const maxGroupMembers = 64

// commitGroup is a write transaction shared by several Update calls
// (members). Each member's work is a savepoint; the member that finds no
// other Update waiting for the writer commits for all of them.
type commitGroup struct {
	members        int
	types          []string // distinct types the members appended to the log
	scheduledTypes []string
	prunedBump     bool
	deletedBumps   int64         // members that bumped the deleted counter
	done           chan struct{} // closed once the group committed or rolled back
	err            error         // why the group did not commit
	commitNo       int64         // Store.commits after the group's commit
}

// errGroupAborted wraps the failure that ended a group's transaction
// (SQLite rolled it back, e.g. after an I/O error): the work of every
// member is lost.
var errGroupAborted = errors.New("sqlitestore: transaction rolled back")

// update is Update; solo marks a member that makes exactly one append,
// whose failure rolls the member back (so the append need not probe for
// duplicate ids that a unique index will catch).
func (s *Store) update(ctx context.Context, solo bool, fn func(tx driver.Tx) error) (err error) {
	defer func() { err = ctxErr(ctx, busyOr(s.readOnlyOr(err))) }()
	if s.readOnly {
		return s.readOnlyError("write")
	}
	s.waiting.Add(1)
	w, err := s.takeWriter(ctx)
	s.waiting.Add(-1)
	if err != nil {
		return err
	}
	g := w.group
	if g == nil {
		// The first member (takeWriter let its context interrupt the
		// transaction, which holds nobody else's work yet).
		if err := w.begin(ctx.Done()); err != nil {
			s.putWriter(w)
			return fmt.Errorf("sqlitestore: begin immediate: %w", err)
		}
		g = &commitGroup{done: make(chan struct{})}
		w.group = g
	}
	g.members++
	t := &tx{s: s, w: w, conn: w.conn, solo: solo, group: g, member: g.members}
	var panicked any
	ferr := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				panicked = r
				err = fmt.Errorf("sqlitestore: panic in Update: %v", r)
			}
		}()
		return s.member(ctx, t, fn)
	}()
	t.done = true
	if t.configChanged {
		w.groupsStale = true
	}
	if ferr == nil {
		g.types = appendNew(g.types, t.types...)
		g.scheduledTypes = appendNew(g.scheduledTypes, t.scheduledTypes...)
		g.prunedBump = g.prunedBump || t.prunedBump
		if t.deletedBump {
			g.deletedBumps++
		}
	}
	if w.conn.AutocommitEnabled() {
		// The transaction is gone: the first member failed, or SQLite
		// rolled everything back (an I/O error, an interruption).
		cause := ferr
		if cause == nil {
			cause = errors.New("the transaction ended inside Update")
		}
		s.endGroup(w, fmt.Errorf("%w: %w", errGroupAborted, cause))
	} else {
		s.settle(w, g)
	}
	if panicked != nil {
		panic(panicked)
	}
	if ferr != nil {
		return ferr
	}
	if g.err != nil {
		return g.err
	}
	return nil
}

// member runs one member's fn. The first member's work is all the
// transaction holds, so its failure (or panic) rolls the transaction back;
// a later member works in a savepoint, rolled back alone. (A savepoint
// from the start would cost the first member, usually the only one, a
// copy of every page it changes in the savepoint journal.)
func (s *Store) member(ctx context.Context, t *tx, fn func(tx driver.Tx) error) (err error) {
	w := t.w
	if err := ctx.Err(); err != nil {
		return err
	}
	// Before the journal mark: sync may empty the key pair cache and its
	// journal.
	if err := w.sync(s); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	t.gs = w.groups
	savepoint := t.member > 1
	if savepoint {
		if err := execPrepped(w.conn, "SAVEPOINT member"); err != nil {
			return fmt.Errorf("sqlitestore: savepoint: %w", err)
		}
	}
	mark := len(w.journal)
	returned := false // false while fn panics
	defer func() {
		switch {
		case returned && err == nil && !savepoint:
			return
		case returned && err == nil:
			if err = execPrepped(w.conn, "RELEASE member"); err == nil {
				return
			}
			err = fmt.Errorf("sqlitestore: release savepoint: %w", err)
		case !savepoint:
			w.rollback()
			return
		}
		w.undo(mark)
		if w.conn.AutocommitEnabled() {
			return // SQLite rolled everything back already
		}
		old := w.conn.SetInterrupt(nil) // roll back even if ctx ended
		rerr := execPrepped(w.conn, "ROLLBACK TO member")
		if rerr == nil {
			rerr = execPrepped(w.conn, "RELEASE member")
		}
		w.conn.SetInterrupt(old)
		if rerr != nil {
			// The connection is in an unknown transaction state; there is
			// no safe way to continue.
			panic("sqlitestore: rollback failed: " + rerr.Error())
		}
	}()
	err = fn(t)
	if err == nil && t.failed == nil {
		err = t.flushWakes()
	}
	returned = true
	if err == nil && t.failed != nil {
		err = fmt.Errorf("sqlitestore: transaction rolled back: an append failed while writing: %w", t.failed)
	}
	return err
}

// settle ends a member's turn: it hands the open transaction to the next
// waiting Update and waits for the group's commit, or commits the group
// itself when nobody waits (or the group is full).
func (s *Store) settle(w *writer, g *commitGroup) {
	if s.waiting.Load() > 0 && g.members < maxGroupMembers {
		s.putWriter(w)
		select {
		case <-g.done:
			return
		case back := <-s.writer:
			// Nobody was ready to take the transaction (a waiter gave up
			// or is not receiving yet), or it came back after others
			// joined: commit it, unless it is another group's already.
			if back.group != g {
				s.putWriter(back)
				<-g.done
				return
			}
			w = back
		}
	}
	var err error
	if cerr := w.commit(); cerr != nil {
		err = fmt.Errorf("sqlitestore: commit: %w", cerr)
	}
	s.endGroup(w, err)
}

// endGroup finishes the group of w: committed when err is nil, else rolled
// back. It releases the writer, tells the members, and announces the
// appended types.
func (s *Store) endGroup(w *writer, err error) {
	g := w.group
	w.group = nil
	if err != nil {
		w.rollback()
	} else {
		g.commitNo = s.commits.Add(1)
		s.ckpt.committed(g.commitNo)
		if g.prunedBump {
			w.prunedVersion++ // our own prune: the cache dropped its ids already
		}
		w.deletedVersion += g.deletedBumps // our own deletes dropped the states already
	}
	g.err = err
	s.putWriter(w)
	close(g.done)
	if err != nil {
		return
	}
	if len(g.scheduledTypes) > 0 {
		s.scheduledCommits.Add(1) // before the notification (driver.ScheduleCounter)
	}
	switch {
	case len(g.types) > 0:
		s.notifier.Notify(g.types)
	case len(g.scheduledTypes) > 0:
		s.notifier.Notify(g.scheduledTypes)
	}
}

// takeIdleWriter takes the writer outside of any transaction (for Install,
// Optimize, Close): a commit group left open between members is committed
// first.
func (s *Store) takeIdleWriter(ctx context.Context) (*writer, error) {
	for {
		w, err := s.takeWriterWithin(ctx, 0) // until ctx ends: Close must get it
		if err != nil || w.group == nil {
			return w, err
		}
		var cerr error
		if err := w.commit(); err != nil {
			cerr = fmt.Errorf("sqlitestore: commit: %w", err)
		}
		s.endGroup(w, cerr)
	}
}

// appendNew appends the elements of add not in xs.
func appendNew(xs []string, add ...string) []string {
	for _, x := range add {
		if !slices.Contains(xs, x) {
			xs = append(xs, x)
		}
	}
	return xs
}

// Commits counts the write transactions this store's writer committed
// since it was opened (a commit group counts once, however many Update
// calls shared it). Benchmarks divide it by the work done: write
// transactions per command.
func (s *Store) Commits() int64 { return s.commits.Load() }

// ScheduledCommits counts the commits of this store's writer that
// scheduled messages (driver.ScheduleCounter): a runtime wakes its
// scheduler for those only. Other processes' scheduled messages are not
// announced to this process by the store's own notifier (it is
// in-process): its scheduler finds them within its interval, as before.
// With a notifier of the caller's (Options.Notifier), which may announce
// other processes' commits, it returns -1: every notification wakes the
// scheduler.
func (s *Store) ScheduledCommits() int64 {
	if !s.ownNotifier {
		return -1
	}
	return s.scheduledCommits.Load()
}
