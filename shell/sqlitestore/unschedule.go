package sqlitestore

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.UnscheduleTx = (*tx)(nil)

// Unschedule deletes the scheduled messages whose ids are ids from the
// schedule, in the transaction, and returns how many; see
// driver.UnscheduleTx.
func (t *tx) Unschedule(ids ...uuid.UUID) (int, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	stmt, err := t.conn.Prepare(t.s.q.unscheduleID)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: unschedule: %w", err)
	}
	n := 0
	var buf [36]byte
	for _, id := range ids {
		encodeUUID(buf[:], id)
		stmt.BindText(1, bytesText(buf[:]))
		if _, err := stmt.Step(); err != nil {
			stmt.Reset()
			return n, fmt.Errorf("sqlitestore: unschedule %s: %w", id, err)
		}
		n += t.conn.Changes()
		if err := stmt.Reset(); err != nil {
			return n, fmt.Errorf("sqlitestore: unschedule %s: %w", id, err)
		}
	}
	return n, nil
}
