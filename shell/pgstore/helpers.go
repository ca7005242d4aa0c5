package pgstore

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/core"
)

// Clear deletes everything the store holds (the log, the schedule,
// consumer groups with their offsets and lifecycle-hook records,
// heartbeats, snapshots) and starts positions at 1
// again, for tests that reuse one store. It touches only the store's
// prefix and takes the exclusive lock. Stores of other processes, which
// saw higher positions, may announce their next appends before the
// stored horizon covers them, for at most a second (their check of the
// stored horizon moves it).
func (s *Store) Clear(ctx context.Context) error {
	err := s.update(ctx, lockExclusive, func(t *tx) error {
		n := s.names
		if _, err := t.c.Exec(t.ctx, fmt.Sprintf(`TRUNCATE %s, %s, %s, %s, %s, %s, %s, %s RESTART IDENTITY`, n.hooks, n.snapshots, n.offsets, n.workers, n.groups, n.scheduled, n.keys, n.messages)); err != nil {
			return t.fail("clear", err)
		}
		// The configuration version moves on (never back), so that every
		// process reloads the (now empty) group configuration.
		if _, err := t.c.Exec(t.ctx, fmt.Sprintf(`UPDATE %s SET last_position = 0, config_version = config_version + 1 WHERE id = 1`, n.head)); err != nil {
			return t.fail("clear", err)
		}
		t.head = 0
		return nil
	})
	if err == nil {
		s.adv.cleared()
	}
	return err
}

// ReadScheduled returns up to limit scheduled messages (all when limit <=
// 0), soonest due first, each dated when it is due.
func (s *Store) ReadScheduled(ctx context.Context, limit int) ([]core.Message, error) {
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT 0::bigint, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, available_at
FROM %s ORDER BY available_at, id LIMIT %s`, s.names.scheduled, limitSQL(limit)))
	msgs, err := s.scanMessages(rows, err)
	if err != nil {
		return nil, s.wrap(ctx, "read scheduled", err)
	}
	out := make([]core.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.Message
	}
	return out, nil
}
