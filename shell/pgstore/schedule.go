package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// promotionBatch is how many scheduled messages one transaction of
// PromoteScheduled moves at most.
const promotionBatch = 500

// PromoteScheduled moves the scheduled messages due at or before now into
// the log, in the order they were scheduled, keeping their ids and their
// due times as CreatedAt, and returns how many. Each batch is one
// transaction under the exclusive lock that reads the due rows, deletes
// them and appends them, so a message is promoted exactly once however
// many processes promote at once (the second finds the rows gone).
// Promoted messages are appended like any other: indexed, creating and
// waking the offsets of the groups that handle them, announced.
func (s *Store) PromoteScheduled(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := s.update(ctx, lockExclusive, func(t *tx) error {
			var err error
			n, err = t.promote(now)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < promotionBatch {
			return total, nil
		}
	}
}

func (t *tx) promote(now time.Time) (int, error) {
	s := t.s
	rows, err := t.c.Query(t.ctx, s.q.dueScheduled, now, promotionBatch)
	if err != nil {
		return 0, t.fail("promote", err)
	}
	type due struct {
		id  int64
		row msgRow
	}
	var dues []due
	for rows.Next() {
		var d due
		r := &d.row
		if err := rows.Scan(&d.id, &r.id, &r.typ, &r.version, &r.causation, &r.correlation, &r.payload, &r.metadata, &r.created); err != nil {
			rows.Close()
			return 0, t.fail("promote", err)
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, t.fail("promote", err)
	}
	if len(dues) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	ups := newUpserts()
	ids := make([]int64, len(dues))
	for i := range dues {
		d := &dues[i]
		ids[i] = d.id
		pm, err := s.decode(&d.row)
		if err != nil {
			return 0, err
		}
		m := pm.Message
		typ, err := s.reg.ByName(m.Type)
		if err != nil {
			return 0, fmt.Errorf("pgstore: promote %s: %w", m.ID, err)
		}
		p := prepared{typ: typ, version: *d.row.version, payload: d.row.payload, metadata: d.row.metadata}
		p.keys = indexKeys(typ, &m, t.gs.byID)
		t.queueInsert(b, ups, &m, &p)
	}
	b.Queue(s.q.deleteScheduled, ids)
	ups.queue(b, s)
	if err := t.c.SendBatch(t.ctx, b).Close(); err != nil {
		return 0, t.fail("promote", err)
	}
	return len(dues), nil
}

// NextScheduled returns when the earliest scheduled message is due, and
// false when none is scheduled.
func (s *Store) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	var at *time.Time
	if err := s.pool.QueryRow(ctx, s.q.nextScheduled).Scan(&at); err != nil {
		return time.Time{}, false, s.wrap(ctx, "next scheduled", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return at.UTC(), true, nil
}
