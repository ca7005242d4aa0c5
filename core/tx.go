package core

// Tx is the store transaction that sync work runs in. Core never looks
// inside it: each store documents its concrete type (the SQLite store hands
// over a value with Conn() *sqlite.Conn, so sync work writes a read model in
// the same transaction as the append and the ack; the in-memory store hands
// over a value with no methods).
type Tx interface{}
