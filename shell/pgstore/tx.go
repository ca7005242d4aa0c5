package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// tx is the driver.Tx (and driver.GroupTx) of an Update: a transaction on
// one pooled connection, under one of the store's advisory locks.
type tx struct {
	s   *Store
	ctx context.Context
	c   *pgxpool.Conn
	// holds is the lock held: lockExclusive, lockShared or lockNone (a
	// lazy transaction before its first operation).
	holds lockMode
	done  bool
	// pre holds statements queued, not yet sent (BEGIN, the shared lock,
	// a delete): they go first in the next batch sent, so they cost no
	// round trip of their own. sent is set once anything was sent.
	pre  []queued
	sent bool
	// restart asks Update to roll back and run fn again under the
	// exclusive lock (see acquire).
	restart bool
	// seenHead is the head an unlocked LastPosition saw (sawHead).
	seenHead int64
	sawHead  bool
	// failed is the first error from PostgreSQL: the transaction is
	// aborted and can only roll back.
	failed error
	// head is the horizon read when the exclusive lock was taken, raised
	// by the transaction's own appends.
	head int64
	gs   *groupSet
	// keys are the boundary locks the transaction holds (see
	// boundary.go); own the positions its appends were given, drew
	// whether an insert was sent (its positions are filled with
	// tombstones if it rolls back); horizon the stored horizon its commit
	// left (0: unknown; see Store.afterCommit).
	keys    boundarySet
	own     []int64
	drew    bool
	horizon int64
	// counted is set once the transaction counts in Store.appending: from
	// the moment it sends a batch that draws positions (countAppending)
	// until it ends.
	counted bool
	// tail holds the statements of deferred appends and offset moves
	// (see deferLocked): they go after pre in the next batch, but for a
	// claim's, which needs none of them, unless they take the store's
	// lock (tailLocks). drawing is set while a deferred insert waits in
	// the tail: the positions it will draw are not known until its
	// result is read.
	tail      []queued
	tailLocks bool
	drawing   bool
	// gen is the store's count of Clears when the transaction began (see
	// advancer.covered).
	gen int
	// gone are the positions the transaction deletes: those above the
	// stored horizon (claimed in the transaction of their append) are
	// filled with tombstones after the commit, so that no reader waits at
	// the hole they leave.
	gone []int64
	// claimState is the group row read by the claim in progress.
	claimState groupState
	// deletes and acks are the deletes and acknowledgements not sent yet:
	// each kind goes as one statement before the transaction's next
	// statement or its COMMIT (see settle). settled holds the offsets
	// acknowledged or released in the transaction, and eager asks for
	// acknowledgements checked at once (see Ack).
	deletes []int64
	acks    []pendingAck
	settled map[int64]bool
	eager   bool
	// sending are the queued statements of the batch being sent.
	sending []queued
	// lastPos is the newest position as LastPosition read it under the
	// transaction's lock (lastKnown), or as the transaction's own append
	// made it; see LastPosition.
	lastPos   int64
	lastKnown bool
	// types are the distinct types appended to the log, for the
	// notifications; scheduledTypes those only scheduled.
	types          []string
	scheduledTypes []string
	// reads are the guards of the reads made before the transaction
	// held the exclusive lock: the next append locks their boundaries and
	// checks, under the locks, that no message has since been appended
	// that they would have read, as whatever takes the exclusive lock
	// does (else fn runs again, under the exclusive lock from its start).
	reads []core.Guard
}

// queued is a statement waiting in tx.pre; onErr, if set, translates
// its failure (a deferred acknowledgement's, into driver.ErrNotClaimant);
// read, if set, reads its result in place of an Exec (a deferred
// append's positions, see deferAppend).
type queued struct {
	sql   string
	args  []any
	onErr func(error) error
	read  func(pgx.BatchResults) error
}

var _ driver.Tx = (*tx)(nil)

var errTxDone = errors.New("pgstore: transaction used after its Update returned")

// errRestart is what an operation returns when its transaction must run
// again under the exclusive lock; Update does so whatever fn returns.
var errRestart = errors.New("pgstore: the transaction runs again under the exclusive lock")

// lockAny is what reads want: the lock already held, else the exclusive
// one (as if the transaction had taken it at BEGIN).
const lockAny lockMode = -1

// begin starts the transaction in the given mode: the exclusive one takes
// its lock and reads the head row in one round trip; the shared and lazy
// ones only queue BEGIN (and the shared lock) for the first statement.
func (t *tx) begin(mode lockMode) error {
	t.queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	switch mode {
	case lockShared:
		return t.acquire(lockShared)
	case lockExclusive:
		return t.acquire(lockExclusive)
	}
	return nil
}

// queue queues a statement for the next batch.
func (t *tx) queue(sql string, args ...any) { t.pre = append(t.pre, queued{sql: sql, args: args}) }

// batch returns a batch holding the queued statements first (the
// deferred deletes and acknowledgements last among them), and how many
// they are.
func (t *tx) batch() (*pgx.Batch, int) { return t.batchOf(true) }

// batchOf is batch; with tail false (a claim's), the deferred appends
// stay queued for a later batch unless they take the store's lock: so a
// transaction that claims more after appending draws its positions, the
// holes no reader passes, only with its last batch (see holdsBack in the
// shell's router).
func (t *tx) batchOf(tail bool) (*pgx.Batch, int) {
	t.settle()
	if tail || t.tailLocks {
		if t.drawing { // a deferred insert goes in this batch: it draws positions
			t.countAppending()
		}
		t.pre = append(t.pre, t.tail...)
		t.tail, t.tailLocks, t.drawing = nil, false, false
	}
	t.pre = t.s.mergeLocks(t.pre)
	b := &pgx.Batch{}
	for _, q := range t.pre {
		b.Queue(q.sql, q.args...)
	}
	n := len(t.pre)
	t.sending, t.pre = t.pre, nil
	return b, n
}

// sendBatch sends b on the transaction's connection (see
// Store.sendBatch).
func (t *tx) sendBatch(b *pgx.Batch) pgx.BatchResults { return t.s.sendBatch(t.ctx, t.c.Conn(), b) }

// send sends b and reads the results of its first n statements (queued
// ones, see batch); the caller reads the rest and closes the results.
func (t *tx) send(b *pgx.Batch, n int) (pgx.BatchResults, error) {
	sending := t.sending
	t.sending = nil
	br := t.sendBatch(b)
	t.sent = true
	for i := range n {
		var err error
		if i < len(sending) && sending[i].read != nil {
			err = sending[i].read(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			br.Close()
			if i < len(sending) && sending[i].onErr != nil {
				err = sending[i].onErr(err)
			}
			return nil, err
		}
	}
	return br, nil
}

// flush sends the queued statements, if any.
func (t *tx) flush() error {
	if len(t.pre) == 0 && len(t.tail) == 0 {
		return nil
	}
	b, n := t.batch()
	br, err := t.send(b, n)
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		return t.fail("begin", err)
	}
	return nil
}

// flushShared sends the queued statements of a transaction holding the
// shared lock (its deferred deletes among them), so that a read sees
// them; before any lock, a read goes before BEGIN, outside the
// transaction.
func (t *tx) flushShared() error {
	if t.holds != lockShared {
		return nil
	}
	return t.flush()
}

// acquire takes the lock an operation wants, if the transaction does not
// hold it (or a stronger one) yet. The shared lock is queued; the
// exclusive one is taken at once, with the head row. A transaction
// holding the shared lock cannot take the exclusive one (two doing so
// would deadlock): it asks to restart, as does one whose unlocked
// LastPosition was overtaken by another append before it took the
// exclusive lock (what it was told is no longer the newest position).
func (t *tx) acquire(want lockMode) error {
	switch {
	case t.holds == lockExclusive:
		return nil
	case t.holds == lockShared && want != lockExclusive:
		return nil
	case t.holds == lockShared:
		t.restart = true
		return errRestart
	case want == lockShared:
		t.queue("SELECT pg_advisory_xact_lock_shared($1)", t.s.lockKey)
		t.holds = lockShared
		return nil
	}
	s := t.s
	b, n := t.batch()
	if s.unorderedPositions {
		b.Queue("SELECT $1::bigint", s.lockKey) // broken on purpose (tests only)
		b.Queue("SELECT 0")                     // and no lock to fill holes under
	} else {
		b.Queue("SELECT pg_advisory_xact_lock($1)", s.lockKey)
		b.Queue(s.q.fillHoles)
	}
	b.Queue(s.q.readHead)
	t.queueReadChecks(b)
	br, err := t.send(b, n)
	var version int64
	if err == nil {
		for range 2 { // the lock, the fill
			if err == nil {
				_, err = br.Exec()
			}
		}
		if err == nil {
			err = br.QueryRow().Scan(&t.head, &version)
		}
		if err == nil {
			err = t.readChecks(br)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if isRefusal(err) {
		t.restart = true
		return errRestart
	}
	if err != nil {
		return t.fail("begin", err)
	}
	t.holds, t.reads = lockExclusive, nil
	t.head = max(t.head, t.ownLast())
	if gs := s.groups.Load(); gs != nil && gs.version == version {
		t.gs = gs
	} else if t.gs, err = s.loadGroups(t.ctx, t.c, version); err != nil {
		return t.fail("begin", err)
	}
	if t.sawHead && t.head != t.seenHead {
		t.restart = true
		return errRestart
	}
	return nil
}

// enter checks that the transaction is usable and takes the lock an
// operation wants; with flush, it also sends the queued statements, for
// operations that use the connection directly.
func (t *tx) enter(want lockMode, flush bool) error {
	if err := t.usable(); err != nil {
		return err
	}
	if want == lockAny {
		want = lockExclusive
		if t.holds == lockShared {
			want = lockShared
		}
	}
	if err := t.acquire(want); err != nil {
		return err
	}
	if flush {
		return t.flush()
	}
	return nil
}

// commit commits, in one round trip, after the statements still queued;
// a transaction that appended advances the horizon in the same round
// trip, after its COMMIT (the notification to other processes follows,
// see wakes). A transaction that sent nothing (fn did nothing) ends
// without a word.
func (t *tx) commit() error {
	s := t.s
	if !t.sent && t.holds == lockNone {
		return nil
	}
	drawing := t.drawing // before batch: a deferred insert goes in this batch
	b, n := t.batch()
	inline := (t.drew || drawing) && s.inlineAdvance()
	if inline && drawing {
		b.Queue(s.q.a.raiseLast) // the session's last position: the newest own
	} else if inline {
		b.Queue(s.q.a.raise, t.ownLast())
	}
	b.Queue("COMMIT")
	after := (t.drew || drawing) && !inline
	if after && drawing {
		b.Queue(s.q.a.raiseAfterLast)
	} else if after {
		b.Queue(s.q.a.raiseAfter, t.ownLast())
	}
	if len(t.gone) > 0 {
		b.Queue(s.q.a.fill, t.gone)
		b.Queue(s.q.advanceTo, slices.Max(t.gone))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), time.Minute)
	defer cancel()
	t.ctx = ctx
	br, err := t.send(b, n)
	if err != nil {
		return err
	}
	if inline {
		if err := br.QueryRow().Scan(&t.horizon); err != nil { // used once committed
			br.Close()
			return err
		}
	}
	if _, err = br.Exec(); err != nil { // COMMIT
		br.Close()
		return err
	}
	if after {
		// Committed: a failed advance leaves it to the advancer.
		if err := br.QueryRow().Scan(&t.horizon); err != nil {
			s.log.Debug("pgstore: advancing the horizon after a commit failed", "err", err)
		}
	}
	if len(t.gone) > 0 {
		// Committed: a failed fill leaves the holes to the next settle.
		var adv advanced
		_, err := br.Exec()
		if err == nil {
			err = adv.scan(br.QueryRow())
		}
		if err == nil {
			s.adv.covered(t.gen, adv.horizon)
		} else {
			s.log.Debug("pgstore: filling deleted positions after a commit failed", "err", err)
		}
	}
	br.Close()
	return nil
}

// rollback rolls the transaction back, whatever the state of its context
// (nothing to do when BEGIN was never sent), and fills the positions its
// appends drew with tombstones.
func (t *tx) rollback() error {
	if !t.sent {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := t.c.Exec(ctx, "ROLLBACK"); err != nil {
		return err
	}
	if t.drew {
		return t.s.fillOn(ctx, t.c, t.own, true)
	}
	return nil
}

// ownLast is the newest position of the transaction's own appends (0:
// none).
func (t *tx) ownLast() int64 {
	if len(t.own) == 0 {
		return 0
	}
	return slices.Max(t.own)
}

// countAppending counts the transaction among the store's appends in
// flight (Store.appending), once, before it sends a batch that draws
// positions: from then on its positions may be holes below others', and
// an append waiting for the horizon to pass them lets the transaction's
// own advance after its commit cover it rather than settle (see
// advancer.run). Update uncounts it when it ends.
func (t *tx) countAppending() {
	if !t.counted {
		t.counted = true
		t.s.appending.Add(1)
	}
}

// usable reports why the transaction cannot be used, if it cannot.
func (t *tx) usable() error {
	if t.done {
		return errTxDone
	}
	if t.restart {
		return errRestart
	}
	if t.failed != nil {
		return fmt.Errorf("pgstore: transaction aborted: %w", t.failed)
	}
	return t.ctx.Err()
}

// fail records an error from PostgreSQL, which aborted the transaction.
func (t *tx) fail(op string, err error) error {
	err = t.s.wrap(t.ctx, op, err)
	if t.failed == nil {
		t.failed = err
	}
	return err
}

// Context is the transaction handed to sync work. Unless the transaction
// holds the exclusive lock, it takes the store's lock in shared mode and
// the boundaries of the transaction's reads in exclusive mode, checking
// the reads under them (see lockReads), as an append does: sync work
// of transactions on other boundaries runs side by side, and writes what
// the transaction decided on reads no other append has overtaken.
func (t *tx) Context() core.SyncTx {
	t.syncLock() // a failure shows on the transaction's next use and at the commit
	return &TxContext{Conn: t.c.Conn(), tx: t}
}

// syncLock takes the locks of sync work (see Context), and sends what is
// queued.
func (t *tx) syncLock() error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.holds == lockExclusive || t.s.unorderedPositions {
		return t.enter(lockExclusive, true)
	}
	gs, err := t.s.currentGroups(t.ctx, false)
	if err != nil {
		return t.fail("sync", err)
	}
	if err := t.lockReads(gs); err != nil {
		return err
	}
	return t.flush()
}

// lockReads takes the store's lock in shared mode (unless the
// transaction holds it) and the boundary locks of the transaction's reads
// it does not hold (tried only, as an append's, when it holds locks
// already: see Append), and checks the group configuration and the reads
// under them, in one round trip.
func (t *tx) lockReads(gs *groupSet) error {
	b, pre, missing := t.lockBatch(gs, boundarySet{})
	br, err := t.send(b, pre)
	if err != nil {
		return t.fail("lock", err)
	}
	err = t.lockedByAppend(br, gs, missing)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = t.fail("lock", cerr)
	}
	return err
}

// lockBatch starts a batch (the queued statements first, pre of them)
// with the statement that takes the store's lock in shared mode (unless
// the transaction holds it) and the boundary locks of keys and of the
// transaction's reads it does not hold yet (missing), and the checks of
// those reads: lockedByAppend reads their results.
func (t *tx) lockBatch(gs *groupSet, keys boundarySet) (b *pgx.Batch, pre int, missing []boundaryKey) {
	for _, r := range t.reads {
		keys.guard(r.Conditions)
	}
	b, pre = t.batch()
	missing = keys.missing(t.keys)
	t.s.queueLock(b, t.holds == lockNone, false, missing, t.holds != lockNone || len(t.keys) > 0, &gs.version, nil)
	t.queueReadChecks(b)
	return b, pre, missing
}

// PositionsMaySkip reports that this store's positions may skip numbers
// (see driver.SkippingPositions): they come from a sequence, drawn as each
// message is inserted.
func (s *Store) PositionsMaySkip() bool { return true }

// TxContext is the transaction handed to sync work (core.SyncTx): Conn is the
// connection of the open transaction, so sync work (a read model, an
// outbox) writes its own tables in the same transaction as the append.
// Do not begin or end transactions on it, and do not keep it after the
// Update returns.
//
// Prefer the package function Conn(tx): it needs no type assertion,
// returns ErrNotPostgres on another store and reports a transaction that
// ended.
type TxContext struct {
	Conn *pgx.Conn
	tx   *tx
}

// LastPosition returns the newest position: the newest message at or
// below the read horizon (see the package doc, "Ordering and locking"),
// or the transaction's own newest position if greater. Unless the
// transaction holds the exclusive lock it takes none, and its next
// append takes the exclusive lock (so that what fn was told stays true
// under it: no message of another transaction follows it), checking that
// the newest position has not moved (else Update runs fn again, holding
// the exclusive lock from its start; as it does when the transaction
// holds the shared lock of a claim or an earlier append).
//
// Under the exclusive lock the answer is kept: no other transaction can
// append while it is held, its own appends move it, and its own deletes
// of the newest message make it read again; so a worker settling many
// claims in one transaction pays one round trip, not one per claim.
func (t *tx) LastPosition() (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if t.lastKnown && t.holds == lockExclusive {
		return t.lastPos, nil
	}
	unlocked := t.holds != lockExclusive
	b, n := t.batch()
	b.Queue(t.s.q.lastPosition)
	br, err := t.send(b, n)
	var last int64
	if err == nil {
		err = br.QueryRow().Scan(&last)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return 0, t.fail("last position", err)
	}
	last = max(last, t.ownLast())
	if unlocked && !t.sawHead {
		t.seenHead, t.sawHead = last, true
	}
	if !unlocked {
		t.lastPos, t.lastKnown = last, true
	}
	return last, nil
}

// Read reads as driver.Tx.Read. Before the transaction holds the
// exclusive lock, a read takes none (a read with Upto or Limit before any
// lock takes the exclusive one): its guard is kept, and the next append
// locks its boundaries and checks it under them, as whatever takes the
// exclusive lock does; if an append has since added a message the read
// would have returned, fn runs again under the exclusive lock from its
// start. So a decision reads and decides with no lock held, and holds
// locks from its append to its commit only. The transaction's own
// appends are read too.
func (t *tx) Read(conds []core.Condition, opts driver.ReadOptions) (driver.ReadResult, error) {
	if t.unlockedRead(opts) {
		if err := t.flushShared(); err != nil {
			return driver.ReadResult{}, err
		}
		return t.keepRead(t.s.read(t.ctx, t.c, conds, opts, t.own))
	}
	if err := t.enter(lockAny, true); err != nil {
		return driver.ReadResult{}, err
	}
	res, err := t.s.read(t.ctx, t.c, conds, opts, t.own)
	if err != nil && !isRefusedRead(err) {
		t.fail("read", err)
	}
	return res, err
}

// ReadPartition reads as driver.Tx.ReadPartition, taking no lock when Read
// would take none.
func (t *tx) ReadPartition(partition core.Partition, types []string, opts driver.ReadOptions) (driver.ReadResult, error) {
	if t.unlockedRead(opts) {
		if err := t.flushShared(); err != nil {
			return driver.ReadResult{}, err
		}
		return t.keepRead(t.s.readPartition(t.ctx, t.c, partition, types, opts, t.own))
	}
	if err := t.enter(lockAny, true); err != nil {
		return driver.ReadResult{}, err
	}
	res, err := t.s.readPartition(t.ctx, t.c, partition, types, opts, t.own)
	if err != nil && !isRefusedRead(err) {
		t.fail("read partition", err)
	}
	return res, err
}

// ReadPartitions reads several partitions in one round trip (see
// driver.PartitionsReader): in a transaction holding the store's shared
// lock (a worker's, which claimed the partitions), the statements a
// ReadPartition of each would send, in one batch after the queued ones,
// each read kept for the checks as ReadPartition keeps it. Other reads
// (a transaction before its first statement, or holding the exclusive
// lock; a read ReadPartition would refuse or send as another statement)
// are read one by one.
func (t *tx) ReadPartitions(reads []driver.PartitionRead) ([]driver.ReadResult, error) {
	out := make([]driver.ReadResult, 0, len(reads))
	type query struct {
		sql   string
		args  []any
		conds []core.Condition
	}
	// Holding the shared lock, every read is unlocked (see unlockedRead).
	together := len(reads) > 1 && t.holds == lockShared && t.unlockedRead(driver.ReadOptions{})
	var qs []query
	for _, r := range reads {
		if !together {
			break
		}
		sql, args, conds, one, err := t.s.partitionQuery(r.Partition, r.Types, r.Opts, t.own)
		together = err == nil && one
		qs = append(qs, query{sql, args, conds})
	}
	if !together {
		for _, r := range reads {
			res, err := t.ReadPartition(r.Partition, r.Types, r.Opts)
			if err != nil {
				return out, err
			}
			out = append(out, res)
		}
		return out, nil
	}
	b, n := t.batch() // the queued statements first, as flushShared sends them before a read
	for _, q := range qs {
		b.Queue(q.sql, q.args...)
	}
	br, err := t.send(b, n)
	if err != nil {
		return out, t.fail("begin", err)
	}
	for i, q := range qs {
		var msgs []core.PositionedMessage
		var last int64
		rows, err := br.Query()
		if err == nil {
			msgs, last, err = t.s.scanLast(rows)
		}
		if err != nil {
			br.Close()
			_, err := t.keepRead(driver.ReadResult{}, t.s.wrap(t.ctx, "read partition", err))
			return out, err
		}
		res, _ := t.keepRead(driver.ReadResult{Messages: msgs, Guard: guardFor(q.conds, reads[i].Opts, msgs, last)}, nil)
		out = append(out, res)
	}
	if err := br.Close(); err != nil {
		return out, t.fail("read partition", err)
	}
	return out, nil
}

// queueReadChecks queues the check of the transaction's unlocked reads
// (see Read), for the statement that takes the exclusive lock or the
// append that locks their boundaries: one statement for all of them,
// each read checked from its own position (a worker's transaction reads
// the history of every partition it claimed: a statement each was a
// dozen in its COMMIT's pipeline).
func (t *tx) queueReadChecks(b *pgx.Batch) {
	if len(t.reads) == 0 {
		return
	}
	guards := make([]*core.Guard, len(t.reads))
	for i := range t.reads {
		guards[i] = &t.reads[i]
	}
	sql, args := t.s.refuseConflictsSQL(guards, t.own)
	b.Queue(sql, args...)
}

// readChecks reads the result of queueReadChecks' statement: a refusal
// (isRefusal) says a read was overtaken.
func (t *tx) readChecks(br pgx.BatchResults) error {
	if len(t.reads) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// unlockedRead reports whether a read with opts keeps its guard for the
// next append (see Read).
func (t *tx) unlockedRead(opts driver.ReadOptions) bool {
	if t.usable() != nil || t.s.unorderedPositions {
		return false
	}
	return t.holds == lockShared || t.holds == lockNone && opts.Upto == 0 && opts.Limit == 0
}

// keepRead keeps the guard of an unlocked read, for the next append or
// whatever takes the exclusive lock next to check.
func (t *tx) keepRead(res driver.ReadResult, err error) (driver.ReadResult, error) {
	if err != nil {
		if t.sent && !isRefusedRead(err) {
			t.fail("read", err) // inside the transaction: it is aborted
		}
		return res, err
	}
	if g := res.Guard; len(g.Conditions) > 0 {
		g.Conditions = slices.Clone(g.Conditions)
		t.reads = append(t.reads, g)
	}
	return res, nil
}

func (t *tx) ReadAll(opts driver.ReadAllOptions) (driver.Page, error) {
	if err := t.enter(lockAny, true); err != nil {
		return driver.Page{}, err
	}
	page, err := t.s.readAll(t.ctx, t.c, opts, t.own)
	if err != nil && !isRefusedRead(err) {
		t.fail("read all", err)
	}
	return page, err
}

// prepared is one message ready to write.
type prepared struct {
	typ       *codec.Type
	version   int
	payload   []byte
	metadata  []byte // nil: NULL
	scheduled bool
	keys      []codec.KeyPair
	// givenID is set when the message came with its id (else the store
	// stamped it).
	givenID bool
}

// Append validates, stamps and encodes every message, checks the guard
// and that no id is stored yet, all before it writes anything, so an
// append failing for a documented reason leaves no trace: the checks run
// inside a savepoint, rolled back when one refuses (PostgreSQL aborts a
// transaction at its first failed statement).
//
// Unless the transaction holds the exclusive lock, the append takes the
// store's lock in shared mode and the boundary locks of what it writes,
// of its guard and of the transaction's reads since its last append (see
// boundary.go), and checks those reads under them; all in the round trip
// of its checks and writes. A transaction that already holds locks (a
// claim's row locks, an earlier append's boundaries) only tries the
// ones it lacks: when one is held elsewhere, fn runs again holding the
// exclusive lock from its start, so that no two transactions ever wait
// on each other in a cycle. An append after LastPosition, or with more
// keys than maxBoundaryKeys, takes the exclusive lock.
func (t *tx) Append(msgs []core.Message, opts driver.AppendOptions) (driver.AppendResult, error) {
	if err := t.usable(); err != nil {
		return driver.AppendResult{}, err
	}
	s := t.s
	if len(msgs) == 0 {
		return driver.AppendResult{}, nil
	}
	if t.sawHead {
		if err := t.enter(lockExclusive, true); err != nil {
			return driver.AppendResult{}, err
		}
	}
	gs := t.gs
	if t.holds != lockExclusive {
		var err error
		if gs, err = s.currentGroups(t.ctx, false); err != nil {
			return driver.AppendResult{}, t.fail("append", err)
		}
	}
	now := s.now()
	stamped, preps, err := s.prepareAll(msgs, now, gs, opts)
	if err != nil {
		return driver.AppendResult{}, err
	}
	plan := planAppend(stamped, preps, opts.Guard)
	var keys boundarySet
	if t.holds != lockExclusive {
		if keys = plan.locks(preps, t.reads); keys == nil {
			if err := t.enter(lockExclusive, true); err != nil {
				return driver.AppendResult{}, err
			}
		}
	}
	locked := t.holds == lockExclusive
	if opts.Deferred && !locked && !s.unorderedPositions {
		return t.deferAppend(gs, plan, preps, keys, now), nil
	}
	b, pre := t.batch()
	var missing []boundaryKey
	if !locked {
		missing = keys.missing(t.keys)
		s.queueLock(b, t.holds == lockNone, false, missing, t.holds != lockNone || len(t.keys) > 0, &gs.version, nil)
		t.queueReadChecks(b)
	}
	// The checks run inside a savepoint, so that a refusal leaves the
	// transaction usable; an append with none (no guard, every id the
	// store's own) needs no savepoint.
	checks := 0
	if plan.checked() {
		b.Queue("SAVEPOINT sourced_append")
		checks = s.queueChecks(b, plan)
		b.Queue("RELEASE SAVEPOINT sourced_append")
	}
	s.queueWrites(b, gs, plan, preps, now)
	if plan.n > 0 {
		t.countAppending()
	}
	br, err := t.send(b, pre)
	if err != nil {
		return driver.AppendResult{}, t.fail("append", err)
	}
	if !locked {
		if err := t.lockedByAppend(br, gs, missing); err != nil {
			br.Close()
			return driver.AppendResult{}, err
		}
	}
	if checks > 0 {
		if _, err = br.Exec(); err == nil { // SAVEPOINT
			for range checks {
				if _, err = br.Exec(); err != nil {
					break
				}
			}
		}
		if err != nil {
			br.Close()
			return t.refusedInTx(err, plan.guard)
		}
		_, err = br.Exec() // RELEASE
	}
	if err == nil && plan.n > 0 {
		t.drew = true
	}
	positions := make([]int64, 0, plan.n)
	start := plan.commitAt - plan.writes // the batch index of the first write
	for i := start; err == nil && i < plan.commitAt; i++ {
		if plan.isInsert(i) {
			n := len(positions)
			if positions, err = readPositions(br, positions); err == nil {
				t.own = append(t.own, positions[n:]...)
			}
			continue
		}
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if again, _ := s.uniqueViolation(err); again {
			t.restart = true // a tombstone took a position: run again
			return driver.AppendResult{}, errRestart
		}
		if _, derr := s.uniqueViolation(err); derr != nil {
			t.fail("append", err)
			return driver.AppendResult{}, derr
		}
		return driver.AppendResult{}, t.fail("append", err)
	}
	res := plan.result(positions)
	for _, typ := range plan.types {
		t.types = appendDistinct(t.types, typ)
	}
	for _, typ := range plan.scheduledTypes {
		t.scheduledTypes = appendDistinct(t.scheduledTypes, typ)
	}
	if plan.n > 0 {
		t.head = max(t.head, res.Last)
		if locked && t.lastKnown {
			t.lastPos = max(t.lastPos, res.Last) // the newest, under the exclusive lock
		}
	}
	return res, nil
}

// deferAppend queues an append (see driver.AppendOptions.Deferred) to go
// with the transaction's next batch, its COMMIT's at the latest (see
// deferLocked): after the locks, its checks (the ids it came with, its
// guard), its inserts and the offsets' wake-ups. The positions the
// inserts are given are read into own as their results come. A check
// that refuses fails the transaction with a *deferredRefusal, which
// Update turns into the append's error once it rolled back.
func (t *tx) deferAppend(gs *groupSet, plan *appendPlan, preps []prepared, keys boundarySet, now time.Time) driver.AppendResult {
	checkFrom, checks := 0, 0
	t.deferLocked(gs, keys, func(b *pgx.Batch) {
		checkFrom = b.Len()
		checks = t.s.queueChecks(b, plan)
		t.s.queueWrites(b, gs, plan, preps, now)
	}, func(i int, q *queued) {
		switch {
		case i >= checkFrom && i < checkFrom+checks:
			guard := plan.guard
			q.onErr = func(err error) error {
				if isRefusal(err) {
					return &deferredRefusal{err: err, guard: guard}
				}
				return err
			}
		case plan.isInsert(i):
			q.read = t.deferredInsert
			t.drawing = true
		}
	})
	for _, typ := range plan.types {
		t.types = appendDistinct(t.types, typ)
	}
	for _, typ := range plan.scheduledTypes {
		t.scheduledTypes = appendDistinct(t.scheduledTypes, typ)
	}
	return driver.AppendResult{Messages: plan.stamped}
}

// deferredRefusal is the refusal of a deferred append's check (an id
// stored already, a guard's conflict), met when its batch went: Update
// rolls back, then reads what refused it (Store.refused), outside the
// aborted transaction.
type deferredRefusal struct {
	err   error
	guard *core.Guard
}

func (e *deferredRefusal) Error() string { return e.err.Error() }
func (e *deferredRefusal) Unwrap() error { return e.err }

// deferLocked queues statements to go in the transaction's next batch
// (but a claim's, see batchOf), so that they cost no round trip of their
// own: the store's lock
// in shared mode (unless held), the boundary locks of keys and of the
// transaction's reads it does not hold (tried only, as an append's), the
// reads' checks (none of these when nothing is missing), then what add
// queues (hook may set how the result of
// each of its statements, by its index in add's batch, is read). The transaction
// counts the locks as held from now; a lock or a read check refused when
// the batch goes makes fn run again under the exclusive lock
// (deferredCheck), as it would have in Append.
func (t *tx) deferLocked(gs *groupSet, keys boundarySet, add func(b *pgx.Batch), hook func(i int, q *queued)) {
	for _, r := range t.reads {
		keys.guard(r.Conditions)
	}
	missing := keys.missing(t.keys)
	b := &pgx.Batch{}
	// Nothing to lock, to check, nor a configuration newer than the one
	// the transaction checked already: no lock statement.
	if t.holds == lockNone || len(missing) > 0 || len(t.reads) > 0 || t.gs == nil || t.gs.version != gs.version {
		t.s.queueLock(b, t.holds == lockNone, false, missing, t.holds != lockNone || len(t.keys) > 0, &gs.version, nil)
		t.queueReadChecks(b)
	}
	checks := b.Len()
	add(b)
	t.tailLocks = t.tailLocks || t.holds == lockNone
	for i, q := range b.QueuedQueries {
		item := queued{sql: q.SQL, args: q.Arguments}
		if i < checks {
			item.read = t.deferredCheck
		} else if hook != nil {
			hook(i, &item)
		}
		t.tail = append(t.tail, item)
	}
	if t.keys == nil {
		t.keys = boundarySet{}
	}
	for _, k := range missing {
		t.keys.add(k.key, k.exclusive)
	}
	t.holds, t.gs, t.reads = lockShared, gs, nil
}

// deferredCheck reads the result of a deferred append's lock or of one
// of its read checks: a refusal makes fn run again.
func (t *tx) deferredCheck(br pgx.BatchResults) error {
	_, err := br.Exec()
	if isRefusal(err) {
		t.restart = true
		return errRestart
	}
	return err
}

// deferredInsert reads the positions a deferred append's insert was
// given into own; from then on the transaction drew positions (filled
// with tombstones if it rolls back, the one a failed insert drew too).
func (t *tx) deferredInsert(br pgx.BatchResults) error {
	t.drew = true
	positions, err := readPositions(br, nil)
	t.own = append(t.own, positions...)
	if err == nil {
		return nil
	}
	again, derr := t.s.uniqueViolation(err)
	switch {
	case again: // a tombstone took a position: run again
		t.restart = true
		return errRestart
	case derr != nil:
		return derr
	}
	return err
}

// lockedByAppend reads the results of the locks, the configuration check
// and the checks of the unlocked reads that an append sent before its
// own statements, and records the locks the transaction now holds. A
// stale group configuration, a read that another append has overtaken
// since, or a boundary lock held elsewhere (when only tried) makes fn
// run again, under the exclusive lock from its start.
func (t *tx) lockedByAppend(br pgx.BatchResults, gs *groupSet, missing []boundaryKey) error {
	_, err := br.Exec()
	if err == nil {
		err = t.readChecks(br)
	}
	if isRefusal(err) {
		t.restart = true
		return errRestart
	}
	if err != nil {
		return t.fail("append", err)
	}
	if t.keys == nil {
		t.keys = boundarySet{}
	}
	for _, k := range missing {
		t.keys.add(k.key, k.exclusive)
	}
	t.holds, t.gs, t.reads = lockShared, gs, nil
	return nil
}

// refusedInTx turns a refusal of an append's checks into its error, after
// rolling back to the savepoint so that the transaction goes on.
func (t *tx) refusedInTx(err error, guard *core.Guard) (driver.AppendResult, error) {
	if !isRefusal(err) {
		return driver.AppendResult{}, t.fail("append", err)
	}
	if _, rerr := t.c.Exec(t.ctx, "ROLLBACK TO SAVEPOINT sourced_append"); rerr != nil {
		return driver.AppendResult{}, t.fail("append", rerr)
	}
	_, _, err = t.s.refused(t.ctx, t.c, err, guard)
	if err != nil && !isRefusalOutcome(err) {
		t.fail("append: guard check", err)
	}
	return driver.AppendResult{}, err
}

// prepareAll validates, stamps and encodes every message of an append
// (in the order given, refusing an id given twice) and checks the guard's
// conditions, before anything is sent to the server.
func (s *Store) prepareAll(msgs []core.Message, now time.Time, gs *groupSet, opts driver.AppendOptions) ([]core.Message, []prepared, error) {
	stamped := make([]core.Message, len(msgs))
	preps := make([]prepared, len(msgs))
	seen := make(map[uuid.UUID]struct{}, len(msgs))
	for i, m := range msgs {
		given := m.ID != uuid.Nil
		m, p, err := s.prepare(m, now, gs.byID)
		p.givenID = given
		if err == nil {
			err = gs.checkValues(m, p)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("pgstore: append message %d of %d: %w", i+1, len(msgs), err)
		}
		if _, dup := seen[m.ID]; dup {
			return nil, nil, fmt.Errorf("pgstore: append message %d of %d: id %s appears twice in the batch: %w", i+1, len(msgs), m.ID, driver.ErrDuplicateID)
		}
		seen[m.ID] = struct{}{}
		stamped[i], preps[i] = m, p
	}
	if g := opts.Guard; g != nil && len(g.Conditions) > 0 {
		if err := driver.CheckConditions(s.typed(), g.Conditions); err != nil {
			return nil, nil, fmt.Errorf("pgstore: append: guard: %w", err)
		}
	}
	return stamped, preps, nil
}

// queueInsert queues the insert of one message at the sequence's next
// position (a promotion's, under the exclusive lock), and collects the
// offsets it creates or wakes.
func (t *tx) queueInsert(b *pgx.Batch, ups *upserts, m *core.Message, p *prepared) {
	s := t.s
	keys, keyNames := keyStrings(p.keys)
	b.Queue(s.q.a.insert, m.ID, m.Type, p.version, m.CausationID, m.CorrelationID,
		string(p.payload), jsonArg(p.metadata), m.CreatedAt, keys, keyNames)
	t.drew = true
	t.countAppending()
	t.types = appendDistinct(t.types, m.Type)
	for _, g := range t.gs.byType[m.Type] {
		for _, tp := range g.tuples(p.keys, m.ID) {
			ups.add(g.row, tp, m.ID, 0)
		}
	}
}

// jsonArg passes nil JSON as NULL.
func jsonArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// keySep separates a key pair's name from its value in the keys columns:
// attribute names hold no control characters (codec), so the first one
// ends the name.
const keySep = "\x1f"

func keyString(name, value string) string { return name + keySep + value }

// keyStrings renders key pairs for the keys column, and the distinct names
// for key_names.
func keyStrings(keys []codec.KeyPair) (ks, names []string) {
	ks = make([]string, len(keys))
	for i, k := range keys {
		ks[i] = keyString(k.Name, k.Value)
		if !slices.Contains(names, k.Name) {
			names = append(names, k.Name)
		}
	}
	if names == nil {
		names = []string{}
	}
	return ks, names
}

// prepare validates, stamps and encodes one message, and extracts the key
// pairs it is indexed under (only core.IDKey for the handled types of an
// id-partitioned group).
func (s *Store) prepare(m core.Message, now time.Time, byID map[string]bool) (core.Message, prepared, error) {
	pm, err := driver.PrepareMessage(s.reg, m, now)
	if err != nil {
		return m, prepared{}, err
	}
	m, typ := pm.Message, pm.Type
	p := prepared{typ: typ, version: typ.Version, payload: pm.Payload, metadata: pm.Metadata, scheduled: pm.Scheduled}
	if !p.scheduled {
		p.keys = indexKeys(typ, &m, byID)
		for _, k := range p.keys {
			if strings.ContainsRune(k.Value, 0) {
				return m, prepared{}, fmt.Errorf("attribute %s of %s holds a NUL character, which PostgreSQL text cannot store: %w", k.Name, typ.Name, codec.ErrInvalid)
			}
		}
	}
	return m, p, nil
}

// indexKeys returns the key pairs a message is indexed under: its
// payload's, and for the handled types of an id-partitioned group (a
// delete-on-ack queue) core.IDKey with its id too, as on SQLite (the queue
// claims a message by its id, reads and guards see its payload).
func indexKeys(typ *codec.Type, m *core.Message, byID map[string]bool) []codec.KeyPair {
	keys := typ.Keys(m.Payload, nil)
	if byID[typ.Name] {
		keys = append(keys, codec.KeyPair{Name: core.IDKey, Value: m.ID.String()})
	}
	return keys
}

func appendDistinct(types []string, typ string) []string {
	if slices.Contains(types, typ) {
		return types
	}
	return append(types, typ)
}
