package pgstore

import (
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// BreakPositionOrder turns s into the classic broken event store, for the
// test that must catch it (TestPositionsVisibleInOrderCatchesASkip): its
// appends take no advisory lock and get their positions from the head row
// in a statement of their own, committed at once (as a sequence's nextval
// is), then wait a little before inserting, so transactions commit in
// another order than their positions. Tests only.
func BreakPositionOrder(s *Store) { s.unorderedPositions = true }

// LockKey is the key of s's advisory lock, for tests that watch pg_locks.
func LockKey(s *Store) int64 { return s.lockKey }

// HealMark ends the statement a store sends once a second to check the
// stored horizon (see heal).
const HealMark = healMark

// ConnectSQL is the statement a new connection of a store's pool is set
// up with (see genericPlans).
const ConnectSQL = genericPlans

// LastPositionSQL is the statement s reads the newest position with (see
// horizonExpr), for the test of its plans.
func LastPositionSQL(s *Store) string { return s.q.lastPosition }

// SetHealEvery makes the stores opened until restore is called check the
// stored horizon and their tables' sizes every d instead of once a
// second (tests only).
func SetHealEvery(d time.Duration) (restore func()) {
	old := healEvery
	healEvery = d
	return func() { healEvery = old }
}

// BoundaryKey is the advisory lock (its two ints) that an append of a
// message of type typ with the key pair name=value takes in shared mode,
// for tests that hold it elsewhere.
func BoundaryKey(s *Store, typ, name, value string) (ns, key int32) {
	return s.boundaryNS, hashKey(typ, keyString(name, value))
}

// WaitingAppends is how many of s's appends wait to be sent together.
func WaitingAppends(s *Store) int {
	s.appends.mu.Lock()
	defer s.appends.mu.Unlock()
	return len(s.appends.waiting)
}

// SetInFlightGrace makes the advancer leave the appends waiting on it to
// the appends of their store in flight for d instead of inFlightGrace
// (tests only).
func SetInFlightGrace(d time.Duration) (restore func()) {
	old := inFlightGrace
	inFlightGrace = d
	return func() { inFlightGrace = old }
}

// RemarkSQL is the statement that recomputes the pending marker of the
// offset whose id is $1 (after a claim is released), for the test of what
// it reads.
func RemarkSQL(s *Store) string { return s.q.g.remark }

// MarkWindow is how many messages past an offset a marker's recomputation
// reads in order before it looks through the table of key pairs.
const MarkWindow = markWindow

// NotifySQL is the statement a store's notifications are sent with.
const NotifySQL = notifySQL

// ParseNotification reads a notification's payload: the sending store's
// origin, the newest position it announces and the types.
func ParseNotification(payload string) (origin string, last int64, types []string) {
	return parseNotification(payload)
}

// NotifyGap is the least time between two notifications of a store while
// its commits keep coming.
const NotifyGap = notifyGap

// GuardsCheckSQL is the statement (and its arguments) that checks
// guards, ignoring the positions own (see refuseConflictsSQL).
func GuardsCheckSQL(s *Store, guards []*core.Guard, own []int64) (string, []any) {
	return s.refuseConflictsSQL(guards, own)
}

// WarmTexts are the statements Warm rehearses on each session for w.
func WarmTexts(s *Store, w driver.Warmup) []string { return s.warmTexts(w, s.groups.Load()) }

// Appending is how many of s's appends and transactions are counted as in
// flight, drawing positions (see Store.appending).
func Appending(s *Store) int64 { return s.appending.Load() }
