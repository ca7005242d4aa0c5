package driver

import "github.com/google/uuid"

// UnscheduleTx is implemented by a store's Tx that can withdraw scheduled
// messages (see Tx.Append: messages dated after the store's now) before
// they are promoted into the log. The router executes effects.Unschedule
// with it, in the batch's transaction: a workflow's timed Receive whose
// signal came first withdraws its timeout in the transaction that records
// the signal. The memory, SQLite and PostgreSQL stores implement it, and
// the conformance suite (package storetest) holds a store to it; on a store
// whose Tx does not, the router leaves the messages in the schedule (they
// are promoted when due, as a withdrawal that came too late would leave
// them) and logs that once.
type UnscheduleTx interface {
	// Unschedule deletes from the schedule the messages whose ids are ids,
	// and returns how many it deleted. An id not in the schedule (promoted
	// already, withdrawn, never scheduled) is skipped, not an error. The
	// deletions commit or roll back with the transaction.
	Unschedule(ids ...uuid.UUID) (int, error)
}
