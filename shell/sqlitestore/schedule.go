package sqlitestore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// promoteBatch is how many due rows one statement step fetches; all due
// rows are promoted in the one transaction.
const promoteBatch = 100

// PromoteScheduled moves the scheduled messages due at or before now into
// the log, in the order they were scheduled, in one BEGIN IMMEDIATE
// transaction, and returns how many it moved. A promoted message keeps its
// id, metadata and creation time (the time it was scheduled for) and is
// indexed like any appended message. Promoters in several processes are
// safe: the write lock serialises them, and each deletes the rows it
// promotes, so a message is promoted once.
//
// A due message that cannot be appended as it is (driver.CheckPromotable:
// its type unregistered, its payload no longer decoding or validating) is
// set aside: left in the schedule as it is, while the others are promoted
// and committed; the error is then a *driver.UnpromotedError listing it.
func (s *Store) PromoteScheduled(ctx context.Context, now time.Time) (n int, err error) {
	var aside []driver.UnpromotedMessage
	err = s.Update(ctx, func(stx driver.Tx) error {
		t := stx.(*tx)
		n, aside = 0, aside[:0] // (a retried transaction starts over)
		due := appendTime(nil, now)
		var after int64 // the last row read: set-aside rows stay behind it
		for {
			batch, err := t.dueRows(due, after)
			if err != nil {
				return err
			}
			for i := range batch {
				r := &batch[i]
				after = r.id
				if m, why := t.promotable(r); why != nil {
					aside = append(aside, driver.UnpromotedMessage{ID: m.ID, Type: r.typ, DueAt: m.CreatedAt, Err: why})
					continue
				}
				if err := t.promote(r); err != nil {
					return err
				}
				n++
			}
			if len(batch) < promoteBatch {
				return nil
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if len(aside) > 0 {
		return n, &driver.UnpromotedError{Messages: aside}
	}
	return n, nil
}

// scheduledRow is a due row of the schedule.
type scheduledRow struct {
	id int64
	row
	decoded *core.Message // set by promotable
}

func (t *tx) dueRows(due []byte, after int64) ([]scheduledRow, error) {
	stmt, err := t.conn.Prepare(t.s.q.selectDue)
	if err != nil {
		return nil, err
	}
	stmt.BindText(1, bytesText(due))
	stmt.BindInt64(2, promoteBatch)
	stmt.BindInt64(3, after)
	var out []scheduledRow
	var sc scanner
	for {
		has, err := stmt.Step()
		if err != nil {
			stmt.Reset()
			return nil, fmt.Errorf("sqlitestore: promote: %w", err)
		}
		if !has {
			break
		}
		// Same columns as a message row, with the schedule id first.
		r := scheduledRow{id: stmt.ColumnInt64(0)}
		r.row = sc.scan(stmt)
		r.pos = 0
		out = append(out, r)
	}
	return out, stmt.Reset()
}

// promotable decodes a due row and reports why it cannot be promoted (nil
// when it can): an unregistered type, a payload that no longer decodes or
// validates. m carries what could be read of the message.
func (t *tx) promotable(r *scheduledRow) (m core.Message, why error) {
	m = core.Message{ID: r.row.id, Type: r.typ, CreatedAt: r.created}
	typ, err := t.s.reg.ByName(r.typ)
	if err != nil {
		return m, err
	}
	pm, err := t.s.decode(&r.row)
	if err != nil {
		return m, err
	}
	r.decoded = &pm.Message
	return pm.Message, driver.CheckPromotable(typ, pm.Message)
}

// promote moves one scheduled row, which promotable passed, into the log.
func (t *tx) promote(r *scheduledRow) error {
	s := t.s
	stmt, err := t.conn.Prepare(s.q.deleteScheduled)
	if err != nil {
		return err
	}
	stmt.BindInt64(1, r.id)
	_, err = stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: promote: %w", err)
	}
	// Index the payload as the current code sees it (decoded, upcast, by
	// promotable).
	typ, err := s.reg.ByName(r.typ)
	if err != nil {
		return fmt.Errorf("sqlitestore: promote: %w", err)
	}
	m := *r.decoded
	// Keep the stored payload and its version as they are.
	p := prepared{typ: typ, version: r.version, payload: r.payload, metadata: r.metadata}
	p.keys = keysOf(typ, &m, nil, t.gs.basis)
	// The created_at text as stored: the store's format, which decode
	// accepts and nothing else.
	if _, err := t.insertMessage(&m, &p, nil); err != nil {
		return err
	}
	if !slices.Contains(t.types, m.Type) {
		t.types = append(t.types, m.Type)
	}
	return nil
}

// NextScheduled returns when the earliest scheduled message is due, and
// false when none is scheduled.
func (s *Store) NextScheduled(ctx context.Context) (at time.Time, ok bool, err error) {
	err = s.withReader(ctx, func(conn *sqlite.Conn) error {
		stmt, err := conn.Prepare(s.q.nextScheduled)
		if err != nil {
			return err
		}
		defer stmt.Reset()
		has, err := stmt.Step()
		if err != nil || !has || stmt.ColumnType(0) == sqlite.TypeNull {
			return err
		}
		at, err = parseTime(stmt.ColumnText(0))
		ok = err == nil
		return err
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqlitestore: next scheduled: %w", err)
	}
	return at, ok, nil
}

// ReadScheduled returns up to limit scheduled messages (all when limit <=
// 0), soonest due first: each message's CreatedAt is when it is due.
func (s *Store) ReadScheduled(ctx context.Context, limit int) ([]core.Message, error) {
	if limit <= 0 {
		limit = -1
	}
	var rows []row
	err := s.withReader(ctx, func(conn *sqlite.Conn) error {
		stmt, err := conn.Prepare(s.q.listScheduled)
		if err != nil {
			return err
		}
		stmt.BindInt64(1, int64(limit))
		rows = rows[:0] // (a retried read starts over)
		var sc scanner
		for {
			has, err := stmt.Step()
			if err != nil {
				stmt.Reset()
				return err
			}
			if !has {
				break
			}
			r := sc.scan(stmt)
			r.pos = 0
			rows = append(rows, r)
		}
		return stmt.Reset()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read scheduled: %w", err)
	}
	out := make([]core.Message, 0, len(rows))
	for i := range rows {
		m, err := s.decode(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, m.Message)
	}
	return out, nil
}
