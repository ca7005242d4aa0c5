package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
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
//
// A due message that cannot be appended as it is (driver.CheckPromotable:
// its type unregistered, its payload no longer decoding or validating, an
// indexed value over codec.MaxIndexedValueBytes or holding a NUL, which
// PostgreSQL would refuse and fail the whole batch with) is set aside: left
// in the schedule as it is, while the others are promoted; the error is
// then a *driver.UnpromotedError listing it, beside the count.
func (s *Store) PromoteScheduled(ctx context.Context, now time.Time) (int, error) {
	total := 0
	var aside []driver.UnpromotedMessage
	var after int64 // the last row read: set-aside rows stay behind it
	for {
		var n, read int
		var set []driver.UnpromotedMessage
		last := after
		err := s.update(ctx, lockExclusive, func(t *tx) error {
			var err error
			n, read, last, set, err = t.promote(now, after)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		aside = append(aside, set...)
		after = last
		if read < promotionBatch {
			break
		}
	}
	if len(aside) > 0 {
		return total, &driver.UnpromotedError{Messages: aside}
	}
	return total, nil
}

// promote promotes the due rows after the row id after, one batch: it
// returns how many it promoted, how many it read, the last row id read,
// and the messages it set aside.
func (t *tx) promote(now time.Time, after int64) (n, read int, last int64, aside []driver.UnpromotedMessage, err error) {
	s := t.s
	last = after
	rows, err := t.c.Query(t.ctx, s.q.dueScheduled, now, after)
	if err != nil {
		return 0, 0, last, nil, t.fail("promote", err)
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
			return 0, 0, last, nil, t.fail("promote", err)
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, last, nil, t.fail("promote", err)
	}
	if len(dues) == 0 {
		return 0, 0, last, nil, nil
	}
	last = dues[len(dues)-1].id
	b := &pgx.Batch{}
	ups := newUpserts()
	ids := make([]int64, 0, len(dues))
	for i := range dues {
		d := &dues[i]
		m, typ, why := s.promotable(&d.row)
		if why != nil {
			aside = append(aside, driver.UnpromotedMessage{ID: d.row.id.Bytes, Type: d.row.typ.String, DueAt: d.row.created.Time.UTC(), Err: why})
			continue
		}
		ids = append(ids, d.id)
		p := prepared{typ: typ, version: int(d.row.version.Int32), payload: d.row.payload, metadata: d.row.metadata}
		p.keys = indexKeys(typ, &m, t.gs.byID)
		t.queueInsert(b, ups, &m, &p)
	}
	if len(ids) == 0 {
		return 0, len(dues), last, aside, nil
	}
	b.Queue(s.q.deleteScheduled, ids)
	ups.queue(b, s)
	br := t.sendBatch(b)
	var err2 error
	for range ids { // the inserts come first: their positions are the transaction's own
		var pos int64
		if err2 = br.QueryRow().Scan(&pos); err2 != nil {
			break
		}
		t.own = append(t.own, pos)
	}
	if cerr := br.Close(); err2 == nil {
		err2 = cerr
	}
	if err2 != nil {
		return 0, 0, after, nil, t.fail("promote", err2)
	}
	return len(ids), len(dues), last, aside, nil
}

// promotable decodes a due row and reports why it cannot be promoted (nil
// when it can): see driver.CheckPromotable.
func (s *Store) promotable(r *msgRow) (core.Message, *codec.Type, error) {
	pm, err := s.decode(r)
	if err != nil {
		return core.Message{}, nil, err
	}
	m := pm.Message
	typ, err := s.reg.ByName(m.Type)
	if err != nil {
		return m, nil, fmt.Errorf("pgstore: promote %s: %w", m.ID, err)
	}
	if s.raw {
		return m, typ, nil // the payload is raw JSON: nothing to validate
	}
	return m, typ, driver.CheckPromotable(typ, m)
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
