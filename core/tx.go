package core

// SyncTx is the store transaction that sync work (Sync) runs in: what the
// store's transaction of the batch hands out (shell.Tx's Context), distinct
// from that shell.Tx, which appends and reads. Core never looks inside it.
// Each store gives the typed way in, which returns an error (never panics)
// on another store's transaction: sqlitestore.Conn(tx) the SQLite
// connection and pgstore.Conn(tx) the PostgreSQL one, so sync work writes a
// read model in the same transaction as the append and the ack. The
// in-memory store has no tables of the application's: sync work that needs
// SQL needs one of those stores.
type SyncTx interface{}
