// Package memstore is the in-memory twin of the SQLite message store: a
// shell.Store that keeps the log, its key-pair index and the schedule in
// memory, for tests and examples that need a store but no database.
//
// It behaves like the SQLite store in everything the shell.Store contract
// says, and passes the same conformance suite (package storetest):
//
//   - appends stamp messages (UUID v7 ids, the store's clock, causation and
//     correlation defaulting to the message's own id) and give them
//     consecutive positions;
//   - payloads are stored encoded by the codec registry and decoded on every
//     read, so a payload that does not survive a JSON round trip fails here
//     exactly as it does against SQLite; metadata is stored as JSON too;
//   - each message is indexed under its payload's key pairs, so conditions,
//     partitions (conditional AND) and guards see the same messages;
//   - a guarded append that conflicts returns a *core.ConflictError carrying
//     the conflicting messages and writes nothing; so do an unregistered or
//     invalid payload and a duplicate id (shell.ErrDuplicateID);
//   - messages dated after the store's clock go to the schedule and enter the
//     log when PromoteScheduled is called at or after their time;
//   - Update runs a function in one transaction that sees its own writes and
//     is undone completely if the function fails or panics; the notifier is
//     told about appended types only after the commit.
//
// Concurrency: one mutex guards the store. Reads share it; Append, Update
// and PromoteScheduled hold it exclusively, Update for the whole of its
// function, so a transaction never sees another's writes half done. The
// function given to Update must use its Tx, never the Store (that would
// wait for the lock the transaction holds).
//
// The transaction handed to sync work (Tx.Context) is a TxContext: it has no
// methods, since there is nothing beside the log to write to.
package memstore
