package sqlitestore

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
)

// correlationQueries memoises the SQL text of ReadCorrelation per messages
// table, so that every call of a store prepares the same text and hits the
// connection's statement cache.
var correlationQueries sync.Map // messages table name -> SQL

// correlationQuery returns the statement of ReadCorrelation: the message's
// correlation id from the unique message_id index, then the messages
// sharing it from the correlation_id index. That index holds each
// correlation's entries in rowid (position) order, so the ORDER BY needs
// no sort. Param: ?1 message id.
func correlationQuery(n names) string {
	if q, ok := correlationQueries.Load(n.messages); ok {
		return q.(string)
	}
	q := fmt.Sprintf(`SELECT %[1]s FROM %[2]s m
WHERE m.correlation_id = (SELECT c.correlation_id FROM %[2]s c WHERE c.message_id = +?1)
ORDER BY m.position`, messageColumns, n.messages)
	correlationQueries.Store(n.messages, q)
	return q
}

// ReadCorrelation returns, in position order, every message sharing the
// correlation id of the message messageID (its whole causal chain), in one
// read transaction; see driver.Store.ReadCorrelation. An id not in the log
// gives no messages.
func (s *Store) ReadCorrelation(ctx context.Context, messageID uuid.UUID) (msgs []core.PositionedMessage, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		rows, err := s.queryCorrelation(conn, messageID)
		if err != nil {
			return err
		}
		msgs, err = s.decodeRows(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read correlation of %s: %w", messageID, err)
	}
	return msgs, nil
}

func (s *Store) queryCorrelation(conn *sqlite.Conn, messageID uuid.UUID) ([]row, error) {
	stmt, err := conn.Prepare(correlationQuery(s.names))
	if err != nil {
		return nil, err
	}
	stmt.BindText(1, messageID.String()) // the canonical form ids are stored in
	return appendRows(nil, stmt)
}
