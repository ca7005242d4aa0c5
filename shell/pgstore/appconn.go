package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// ErrNotPostgres is matched by the error of Conn given a transaction that
// is not this store's (sqlitestore's, memstore's, a test double): the
// application's own tables live in the PostgreSQL database, so only sync
// work on this store can reach them (sqlitestore.Conn is the SQLite
// twin).
var ErrNotPostgres = errors.New("pgstore: not a transaction of the PostgreSQL store")

// Conn returns the connection of the PostgreSQL transaction txn, for sync
// work that writes the application's own tables in the same transaction
// as the append and the ack. txn is the core.SyncTx of a Sync effect or the
// driver.Tx of Update (whose Context it unwraps). Another store's
// transaction gives an error matching ErrNotPostgres, never a panic; a
// transaction whose Update has returned gives an error too.
//
// Do not begin or end transactions on the connection, and do not keep it
// after the transaction ends. A statement that fails aborts the whole
// transaction (PostgreSQL's rule): return its error. To read the
// application's tables outside a write transaction use Store.View, which
// takes none of the store's locks.
//
// The store's own tables (the log, the offsets, the groups) are not the
// application's: write them only through the store. A message deleted
// from the log by a statement on this connection is unknown to a state
// cache (HandleOptions.Cache: a cached state would still hold what it
// folded).
func Conn(txn core.SyncTx) (*pgx.Conn, error) {
	switch t := txn.(type) {
	case *TxContext:
		if t == nil || t.Conn == nil {
			return nil, fmt.Errorf("%w: a nil *TxContext", ErrNotPostgres)
		}
		if t.tx != nil && t.tx.done {
			return nil, fmt.Errorf("pgstore: Conn: %w", errTxDone)
		}
		return t.Conn, nil
	case *tx:
		if t.done {
			return nil, fmt.Errorf("pgstore: Conn: %w", errTxDone)
		}
		// The app writes in the transaction: it begins now, under the
		// locks of sync work (tx.Context).
		if err := t.syncLock(); err != nil {
			return nil, fmt.Errorf("pgstore: Conn: %w", err)
		}
		return t.c.Conn(), nil
	case nil:
		return nil, fmt.Errorf("%w: got nil (pass the tx your Sync function or Update received)", ErrNotPostgres)
	}
	if c, ok := txn.(driver.ContextProvider); ok {
		if inner, ok := c.Context().(*TxContext); ok {
			return Conn(inner)
		}
	}
	return nil, fmt.Errorf("%w: got %T: this code needs the PostgreSQL store (pgstore.Open); on SQLite use sqlitestore.Conn", ErrNotPostgres, txn)
}

// View runs fn in a read-only REPEATABLE READ transaction on a pooled
// connection: every statement of fn sees one snapshot of the database.
// It is how an application reads its own tables (read models kept by sync
// work, see Conn) without any of the store's locks, so it never waits for
// appends or claims. A statement that writes fails. The transaction is
// rolled back when fn returns; fn's error is returned as it is.
func (s *Store) View(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if fn == nil {
		return errors.New("pgstore: View: nil function")
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s.wrap(ctx, "view", err)
	}
	defer tx.Rollback(context.Background())
	return fn(tx)
}
