package effects

import (
	"context"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

// Signal is an inert instruction for the shell: Append, Sync, AfterSync,
// Ack or Unschedule.
type Signal interface{ signal() }

// Append appends Messages in the batch's transaction. Messages dated in the
// future are scheduled (see core.Message.At).
//
// With a Guard, the append fails if a message matching the guard arrived
// after the guard's position from another transaction; messages appended
// earlier in the same batch never conflict with it, so several commands of
// one partition decided in one batch do not conflict with each other.
//
// Unless Correlated is set, each message is correlated (see
// core.Message.Correlate) with Source, or with the pair's source when
// Source is nil.
type Append struct {
	Messages   []core.Message
	Guard      *core.Guard
	Source     *core.Message
	Correlated bool
}

// Sync runs Work inside the batch's transaction; its error rolls the batch
// back.
type Sync struct {
	Work func(ctx context.Context, tx core.SyncTx) error
}

// AfterSync runs Work after the batch's transaction committed.
type AfterSync struct {
	Work func(ctx context.Context) error
}

// Ack acknowledges the pair's source message. Every pair's source is
// acknowledged when the batch commits (the group's offset moves past the
// last one), so a plain Ack only says so explicitly; Ack{Delete: true} also
// removes the source message from the log (delete-on-ack queues). Deletion
// is never implied by anything else.
type Ack struct {
	Delete bool
}

// Unschedule withdraws, in the batch's transaction, the scheduled
// messages whose ids are IDs (messages appended dated in the future, see
// Append): those still waiting in the schedule are deleted from it and
// never enter the log; the batch rolling back leaves them scheduled. An id
// not in the schedule (promoted already, withdrawn before, never
// scheduled) is no error, so a reactor that withdraws a message must still
// tolerate its arrival: it may have been promoted first. A workflow's timed
// Receive withdraws its timeout this way when its signal comes first.
//
// The shell withdraws through the store's transaction (driver.UnscheduleTx:
// the memory, SQLite and PostgreSQL stores, held to it by the conformance
// suite); on a store whose transaction cannot, the messages stay scheduled
// and are promoted when due.
type Unschedule struct {
	IDs []uuid.UUID
}

func (Append) signal()     {}
func (Sync) signal()       {}
func (AfterSync) signal()  {}
func (Ack) signal()        {}
func (Unschedule) signal() {}

// Pair is what a reactor returns for one claimed message: its signals, in
// the order they are to run, and the message they came from (used for
// correlation and to move the offset on ack).
type Pair struct {
	Signals []Signal
	Source  core.PositionedMessage
}
