package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// ErrNotSQLite is matched by the error of Conn given a transaction that is
// not the SQLite store's (memstore's, pgstore's, a test double): the
// application's own tables (read models, outboxes) live in the SQLite
// file, so only sync work on this store can reach them. Keep such work
// behind an interface of your own when the same code runs on several
// stores (pgstore.Conn is the PostgreSQL twin).
var ErrNotSQLite = errors.New("sqlitestore: not a transaction of the SQLite store")

// Conn returns the connection of the SQLite write transaction tx, for
// sync work that writes the application's own tables in the same
// transaction as the append and the ack (they commit or roll back
// together). txn is what the store hands out: the core.SyncTx of a Sync
// effect, or the driver.Tx of Update (whose Context it unwraps). Another
// store's transaction gives an error matching ErrNotSQLite, never a
// panic; a transaction whose Update has returned gives an error too (the
// connection belongs to later transactions by then).
//
// Do not begin or end transactions on the connection, and do not keep it
// after the transaction ends. To read the application's tables outside a
// write transaction, use Store.View: it never takes the write lock.
//
// The store's own tables (the log, the offsets, the groups) are not the
// application's: write them only through the store. A message deleted
// from the log by a statement on this connection is unknown to the
// store's state cache (Handle's default: a cached state would still hold
// what it folded), unlike one deleted by an acknowledgement or Clear.
func Conn(txn core.SyncTx) (*sqlite.Conn, error) {
	switch t := txn.(type) {
	case *TxContext:
		if t == nil || t.tx == nil {
			return nil, fmt.Errorf("%w: a nil *TxContext", ErrNotSQLite)
		}
		return t.tx.appConn()
	case *tx:
		return t.appConn()
	case nil:
		return nil, fmt.Errorf("%w: got nil (pass the tx your Sync function or Update received)", ErrNotSQLite)
	}
	if c, ok := txn.(driver.ContextProvider); ok {
		if inner, ok := c.Context().(*TxContext); ok {
			return Conn(inner)
		}
		return nil, fmt.Errorf("%w: got %T, whose Context is %T: this code needs the SQLite store (sqlitestore.Open); memstore has no tables of the application's, and on PostgreSQL use pgstore.Conn", ErrNotSQLite, txn, c.Context())
	}
	return nil, fmt.Errorf("%w: got %T: this code needs the SQLite store (sqlitestore.Open); memstore has no tables of the application's, and on PostgreSQL use pgstore.Conn", ErrNotSQLite, txn)
}

// appConn is Conn of a transaction of this store.
func (t *tx) appConn() (*sqlite.Conn, error) {
	if t.done {
		return nil, fmt.Errorf("sqlitestore: Conn: %w", errTxDone)
	}
	// The application's SQL sees the offsets as the appends left them.
	if err := t.flushWakes(); err != nil {
		return nil, err
	}
	return t.conn, nil
}

// View runs fn on a connection of the store's reader pool, inside one
// read transaction: every statement of fn sees the same committed
// snapshot of the file. It is how an application reads its own tables
// (read models kept by sync work, see Conn) without taking the write
// lock: a View runs while a writer holds it, and a writer never waits for
// a View. The connection is read-only (PRAGMA query_only): a statement
// that writes fails. The snapshot ends when fn returns; do not keep the
// connection, nor begin or end transactions on it. An error of fn is
// returned as it is; a context that ends interrupts fn's statements and
// View's error then matches the context's.
func (s *Store) View(ctx context.Context, fn func(conn *sqlite.Conn) error) error {
	if fn == nil {
		return errors.New("sqlitestore: View: nil function")
	}
	return s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		defer conn.SetInterrupt(conn.SetInterrupt(ctx.Done()))
		return fn(conn)
	})
}
