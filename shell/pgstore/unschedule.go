package pgstore

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.UnscheduleTx = (*tx)(nil)

// Unschedule deletes the scheduled messages whose ids are ids from the
// schedule, in the transaction, and returns how many; see
// driver.UnscheduleTx. It takes the shared lock (a promotion, under the
// exclusive one, either promoted a row first, which is then not found, or
// finds it gone); the rows' own locks order it against any other writer.
func (t *tx) Unschedule(ids ...uuid.UUID) (int, error) {
	if err := t.enter(lockShared, true); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	text := make([]string, len(ids))
	for i, id := range ids {
		text[i] = id.String()
	}
	tag, err := t.c.Exec(t.ctx, fmt.Sprintf(`DELETE FROM %s WHERE message_id = ANY($1::uuid[])`, t.s.names.scheduled), text)
	if err != nil {
		return 0, t.fail("unschedule", err)
	}
	return int(tag.RowsAffected()), nil
}
