package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
)

// tombstoneAge is how long ago a tombstone must have been written before
// Housekeep deletes it. The read horizon passed it already (no reader
// waits on its position any more), and no append can still be drawing
// that position an hour later: an append whose position a tombstone took
// fails on the tombstone's row and goes again with a new one, so its
// row must stay until no such append can be in flight.
const tombstoneAge = time.Hour

// tombstonesPerCall bounds one Housekeep's deletions (the rest go at the
// next heartbeat).
const tombstonesPerCall = 10_000

// Housekeep deletes the log's old tombstones: the rows (an empty type,
// which no read returns) that fill the positions of appends that rolled
// back or died, once the read horizon passed them and they are an hour
// old, at most 10,000 a call (index: schema version 12). A log whose
// appends roll back often (Update functions that fail after appending,
// refusals, killed processes) then keeps no row for each. A deleted
// tombstone leaves a gap below the horizon, as a message deleted on
// acknowledgement does; no position is handed out again.
//
// A shell.Runtime calls it on every heartbeat (driver.Housekeeper); one
// store without a runtime can call it now and then.
func (s *Store) Housekeep(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %[1]s WHERE message_type = '' AND position IN (
	SELECT position FROM %[1]s WHERE message_type = '' AND position <= (SELECT last_position FROM %[2]s WHERE id = 1)
		AND created_at < now() - make_interval(secs => $1) ORDER BY position LIMIT %[3]d)`,
		s.names.messages, s.names.head, tombstonesPerCall), tombstoneAge.Seconds())
	return s.wrap(ctx, "housekeep", err)
}

var _ driver.Housekeeper = (*Store)(nil)
