// Package memstore is the in-memory twin of the SQLite message store: a
// driver.Store that keeps the log, its key-pair index and the schedule in
// memory, for tests and examples that need a store but no database.
//
// It behaves like the SQLite store in everything the driver.Store contract
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
//     invalid payload and a duplicate id (driver.ErrDuplicateID);
//   - messages dated after the store's clock go to the schedule and enter the
//     log when PromoteScheduled is called at or after their time;
//   - Update runs a function in one transaction that sees its own writes and
//     is undone completely if the function fails or panics; the notifier is
//     told about appended types only after the commit;
//   - input that could never work is refused with the same errors: indexed
//     text that is not UTF-8, conditions that could never match
//     (driver.CheckConditions), an ack past the claim, a negative claim ttl;
//   - the test helpers of the SQLite store that are not about files are
//     here too: Clear (empty the store, positions from 1 again) and
//     ReadScheduled.
//
// It also implements driver.Groups, and its transactions driver.GroupTx, and
// passes storetest.RunGroups:
//
//   - each registered group keeps its offsets (one per partition) in
//     memory; an append creates the offsets of the partitions its handled
//     messages carry in full (AND discovery, handled types only), and
//     records each such message as pending work of its offset. A message
//     whose partition attribute holds several values belongs to each
//     partition it spans. An id-partitioned group (exclusive, no partition
//     keys) has one partition per message, {core.IDKey: id}, and its
//     types are still indexed by payload for reads and guards;
//   - registering a group (or changing its keys or types) and resetting it
//     discover its partitions in the whole log at once, so its offsets are
//     there before any claim (a store may discover lazily; the figures of
//     the two may differ until a claim scans);
//   - the offsets with pending work that no worker holds are kept in a
//     set, and a claim picks the furthest behind among those only. The claim-scan latch is kept as on SQLite: a sign-encoded
//     version bumped by every append and every release, set clean by a
//     scan that finds nothing, so an idle group's poll does no scan;
//   - a claim's messages are fetched under conditional AND; a partition of
//     one attribute (or a message id) reads its pending positions
//     directly, a composite one scans the log after its offset;
//   - failures are stored through JSON, as SQLite stores them;
//   - PruneOrphanKeyPairs returns 0: there is no dictionary of key pairs,
//     a message's pairs go with it.
//
// Every change a transaction makes (appends, deletes, offsets, claims,
// group state) pushes a function that undoes it, so a failed Update leaves
// the store exactly as it was. Positions of rolled back appends are given
// again; those of deleted messages are not.
//
// Concurrency: one mutex guards the store. Reads share it; Append, Update,
// PromoteScheduled and every consumer-group write (claims included) hold it
// exclusively, Update for the whole of its
// function, so a transaction never sees another's writes half done. The
// function given to Update must use its Tx, never the Store (that would
// wait for the lock the transaction holds).
//
// The transaction handed to sync work (Tx.Context) is a TxContext: it has no
// methods, since there is nothing beside the log to write to.
package memstore
