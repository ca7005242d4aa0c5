package core

// Tx is the store transaction that sync work runs in. Core never looks
// inside it: each store gives the typed way in, which returns an error
// (never panics) on another store's transaction: sqlitestore.Conn(tx) the
// SQLite connection and pgstore.Conn(tx) the PostgreSQL one, so sync work
// writes a read model in the same transaction as the append and the ack.
// The in-memory store has no tables of the application's: sync work that
// needs SQL needs one of those stores.
type Tx interface{}
