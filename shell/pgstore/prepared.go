package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgx forgets every statement of a batch that returned an error (it
// deallocates them from its statement cache, as if the error might come
// from a stale plan). A refused append is such a batch: a guard's
// conflict, a duplicate id or a boundary found busy is the documented
// outcome of an append, not a failure, yet after each the next append
// on that connection prepared its statements again, in a round trip of
// their own, and planned each afresh at its first execution, the guard's
// check under the boundary's lock. With 16 writers appending guarded to
// one boundary, nearly every attempt was planned again (pg_stat_statements:
// 12,185 plans of the check for 12,750 attempts), at 0.32 ms a plan
// where an attempt held the lock about 1.4 ms.
//
// So the store's batches (an append's pipeline, a transaction's
// statements, every batch it sends on a connection of its own) run the
// statements of a batch that once returned an error prepared by name on
// the connection (pgx.Conn.Prepare
// with the SQL as the name): a batch uses such a statement instead of its
// cache's, and keeps it whatever the batch returns. Only those: preparing
// by name costs a round trip of its own per statement and connection,
// where pgx prepares a batch's new statements together, and the shapes
// of guards' checks are many (75 statements in a run of
// BenchmarkPostgresEndToEnd, where preparing them all by name cost 10 %).
// The statements are the store's own SQL and live as long as the
// connection. The one error a prepared statement cannot outlive, a plan
// whose result type changed (a migration run by a newer program),
// deallocates the batch's statements, as pgx would.

// sendBatch sends b on c, with the statements of batches that returned
// an error before prepared by name (see above), and marks b's statements
// so when it returns an error. Every batch the store sends on a
// connection of its own goes through it.
func (s *Store) sendBatch(ctx context.Context, c *pgx.Conn, b *pgx.Batch) pgx.BatchResults {
	if s.anyRefusable.Load() { // else nothing is marked: no statement looked up
		for _, q := range b.QueuedQueries {
			if _, ok := s.refusable.Load(q.SQL); !ok {
				continue
			}
			if _, err := c.Prepare(ctx, q.SQL, q.SQL); err != nil {
				break // the batch reports it
			}
		}
	}
	return &keptStatements{BatchResults: c.SendBatch(ctx, b), ctx: ctx, c: c, b: b, s: s}
}

// keptStatements are a batch's results whose Close marks its statements
// when it returned an error, and deallocates them when a plan's result
// type changed under them.
type keptStatements struct {
	pgx.BatchResults
	ctx context.Context
	c   *pgx.Conn
	b   *pgx.Batch
	s   *Store
}

// changedResultType is PostgreSQL's "cached plan must not change result
// type".
const changedResultType = "0A000"

func (k *keptStatements) Close() error {
	err := k.BatchResults.Close()
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == changedResultType {
		for _, q := range k.b.QueuedQueries {
			k.s.refusable.Delete(q.SQL)
			k.c.Deallocate(context.WithoutCancel(k.ctx), q.SQL) // prepared again by the next batch
		}
		return err
	}
	for _, q := range k.b.QueuedQueries {
		k.s.refusable.Store(q.SQL, struct{}{})
	}
	k.s.anyRefusable.Store(true)
	return err
}
