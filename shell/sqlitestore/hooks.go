package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
)

// Lifecycle hooks (migration 5): a group registered with
// driver.GroupSpec.Hooks has a row in <p>_group_hooks that counts its
// operator transitions (transitions), how far their hooks ran (hooked),
// keeps the pending ones as JSON (driver.GroupTransition, oldest first),
// and the claim on the oldest. Every operator command (operate) records
// its transition there in its own transaction, whoever runs it; the claim
// scan answers nothing while transitions > hooked (the group row's state
// read, groupState, reads it by primary key).

// hookRow is a group's row of <p>_group_hooks.
type hookRow struct {
	found               bool
	transitions, hooked int64
	pending             []driver.GroupTransition
	claimedBy           string
	claimedAt           time.Time
}

// setHooks records whether g's reactor has lifecycle hooks: a row of
// <p>_group_hooks, or none (its pending transitions are forgotten then,
// and the group's work claimed again).
func (t *tx) setHooks(g *groupConf, on bool) error {
	q := t.s.q.g.hooksOff
	if on {
		q = t.s.q.g.hooksOn
	}
	n, err := exec(t.conn, q, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) })
	if err == nil && n > 0 && !on {
		err = t.setLatch(g, t.s.q.g.rescan)
	}
	return err
}

// hookRow reads g's row of <p>_group_hooks.
func (t *tx) hookRow(g *groupConf) (hookRow, error) {
	var h hookRow
	var perr error
	err := t.w.rows(t.s.q.g.hookRow, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, g.row) }, func(stmt *sqlite.Stmt) {
		h.found = true
		h.transitions, h.hooked = stmt.ColumnInt64(0), stmt.ColumnInt64(1)
		perr = json.Unmarshal([]byte(stmt.ColumnText(2)), &h.pending)
		if perr == nil && stmt.ColumnType(3) != sqlite.TypeNull {
			h.claimedBy = stmt.ColumnText(3)
			h.claimedAt, perr = parseTime(stmt.ColumnText(4))
		}
	})
	if err == nil && perr != nil {
		err = fmt.Errorf("sqlitestore: consumer group %s: lifecycle hooks: %w", g.name, perr)
	}
	return h, err
}

// recordTransition records an operator transition of g as pending, when
// g was registered with hooks.
func (t *tx) recordTransition(g *groupConf, cmd driver.GroupCommand, reason string) error {
	h, err := t.hookRow(g)
	if err != nil || !h.found {
		return err
	}
	if cmd != driver.CmdStop {
		reason = ""
	}
	h.transitions++
	h.pending = append(h.pending, driver.GroupTransition{Seq: h.transitions, Command: cmd, Reason: reason, At: t.s.now().UTC()})
	data, err := json.Marshal(h.pending)
	if err != nil {
		return err
	}
	_, err = exec(t.conn, t.s.q.g.hookRecord, func(stmt *sqlite.Stmt) {
		stmt.BindInt64(1, g.row)
		stmt.BindInt64(2, h.transitions)
		stmt.BindText(3, string(data))
	})
	return err
}

// ClaimTransition claims the oldest transition of the group whose hook has
// not run; see driver.Groups. A group with none pending is answered from a
// reader, without the writer.
func (s *Store) ClaimTransition(ctx context.Context, group, claimant string, now time.Time, lease time.Duration) (*driver.GroupTransition, error) {
	if err := driver.CheckClaimTransition(claimant, lease); err != nil {
		return nil, err
	}
	pending := false
	err := s.withSnapshot(ctx, func(conn *sqlite.Conn) error {
		found := false
		err := queryRows(conn, s.q.g.hooksPending, func(stmt *sqlite.Stmt) { stmt.BindText(1, group) }, func(stmt *sqlite.Stmt) {
			found, pending = true, stmt.ColumnInt(0) != 0
		})
		if err == nil && !found {
			err = s.unknownGroup(conn, group)
		}
		return err
	})
	if err != nil || !pending {
		return nil, err
	}
	var out *driver.GroupTransition
	err = s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		g, err := t.gs.lookup(group)
		if err != nil {
			return err
		}
		h, err := t.hookRow(g)
		if err != nil || !h.found || len(h.pending) == 0 {
			return err
		}
		if h.claimedBy != "" && h.claimedAt.After(now.Add(-lease)) {
			return nil
		}
		at := formatTime(now)
		if _, err := exec(t.conn, s.q.g.hookClaim, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindText(2, claimant)
			stmt.BindText(3, at)
		}); err != nil {
			return err
		}
		tr := h.pending[0]
		tr.Group, tr.Claimant = g.name, claimant
		tr.ClaimedAt, err = parseTime(at)
		out = &tr
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim a transition of consumer group %s: %w", group, err)
	}
	return out, nil
}

// FinishTransition records that the hook of a claimed transition ran, or
// releases it; see driver.Groups.
func (s *Store) FinishTransition(ctx context.Context, tr *driver.GroupTransition, ran bool) error {
	err := s.update(ctx, false, func(stx driver.Tx) error {
		t := stx.(*tx)
		g, err := t.gs.lookup(tr.Group)
		if err != nil {
			return err
		}
		h, err := t.hookRow(g)
		if err != nil {
			return err
		}
		if !h.found || len(h.pending) == 0 || h.pending[0].Seq != tr.Seq || h.claimedBy != tr.Claimant {
			return driver.ErrNotClaimant
		}
		if ran {
			h.hooked, h.pending = tr.Seq, h.pending[1:]
		}
		data, err := json.Marshal(h.pending)
		if err != nil {
			return err
		}
		if _, err := exec(t.conn, s.q.g.hookFinish, func(stmt *sqlite.Stmt) {
			stmt.BindInt64(1, g.row)
			stmt.BindInt64(2, h.hooked)
			stmt.BindText(3, string(data))
		}); err != nil {
			return err
		}
		if ran && len(h.pending) == 0 {
			// The group's work may be claimed again: wake its workers.
			t.announce(g)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: finish transition %d of consumer group %s: %w", tr.Seq, tr.Group, err)
	}
	return nil
}
