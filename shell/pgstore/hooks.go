package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sourced-go/sourced/shell/driver"
)

// Lifecycle hooks (migration 7): a group registered with
// driver.GroupSpec.Hooks has a row in <p>_group_hooks that counts its
// operator transitions (transitions), how far their hooks ran (hooked),
// keeps the pending ones as JSON (driver.GroupTransition, oldest first),
// and the claim on the oldest. Every operator command (operate) records
// its transition there in its own transaction, under the exclusive lock,
// whoever runs it; the claim statements and the idle probe find nothing
// while transitions > hooked. ClaimTransition and FinishTransition read
// the row FOR UPDATE: of two claimants at once, the second sees the
// first's claim.

// hookRow is a group's row of <p>_group_hooks.
type hookRow struct {
	found               bool
	transitions, hooked int64
	pending             []driver.GroupTransition
	claimedBy           string
	claimedAt           time.Time
}

// setHooks records whether the group's reactor has lifecycle hooks: a row
// of <p>_group_hooks, or none (its pending transitions are forgotten then).
func (t *tx) setHooks(row int64, on bool) error {
	q := t.s.q.g.hooksOff
	if on {
		q = t.s.q.g.hooksOn
	}
	_, err := t.c.Exec(t.ctx, q, row)
	return t.check("register", err)
}

// hookRow reads a group's row of <p>_group_hooks, locked.
func (t *tx) hookRow(row int64) (hookRow, error) {
	var h hookRow
	var pending string
	var claimedAt *time.Time
	err := t.c.QueryRow(t.ctx, t.s.q.g.hookRow, row).Scan(&h.transitions, &h.hooked, &pending, &h.claimedBy, &claimedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, nil
	}
	if err != nil {
		return h, t.fail("lifecycle hooks", err)
	}
	h.found = true
	if claimedAt != nil {
		h.claimedAt = claimedAt.UTC()
	}
	if err := json.Unmarshal([]byte(pending), &h.pending); err != nil {
		return h, fmt.Errorf("pgstore: lifecycle hooks: pending transitions: %w", err)
	}
	return h, nil
}

// recordTransition records an operator transition of the group as
// pending, when it was registered with hooks.
func (t *tx) recordTransition(row int64, cmd driver.GroupCommand, reason string) error {
	h, err := t.hookRow(row)
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
	_, err = t.c.Exec(t.ctx, t.s.q.g.hookRecord, row, h.transitions, string(data))
	return t.check("record transition", err)
}

// ClaimTransition claims the oldest transition of the group whose hook has
// not run; see driver.Groups. A group with none pending is answered by one
// statement outside any transaction.
func (s *Store) ClaimTransition(ctx context.Context, group, claimant string, now time.Time, lease time.Duration) (*driver.GroupTransition, error) {
	if err := driver.CheckClaimTransition(claimant, lease); err != nil {
		return nil, err
	}
	var pending bool
	err := s.pool.QueryRow(ctx, s.q.g.hooksPending, group).Scan(&pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.unknownGroup(ctx, s.pool, group)
	}
	if err != nil {
		return nil, s.wrap(ctx, "claim a transition of "+group, err)
	}
	if !pending {
		return nil, nil
	}
	now = now.UTC().Truncate(time.Microsecond)
	var out *driver.GroupTransition
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		st, err := t.lockState(group)
		if err != nil {
			return err
		}
		h, err := t.hookRow(st.row)
		if err != nil || !h.found || len(h.pending) == 0 {
			return err
		}
		if h.claimedBy != "" && h.claimedAt.After(now.Add(-lease)) {
			return nil
		}
		if _, err := t.c.Exec(t.ctx, s.q.g.hookClaim, st.row, claimant, now); err != nil {
			return t.fail("claim transition", err)
		}
		tr := h.pending[0]
		tr.Group, tr.Claimant, tr.ClaimedAt = group, claimant, now
		out = &tr
		return nil
	})
	if err != nil {
		return nil, s.wrapGroupErr(ctx, "claim a transition of "+group, err)
	}
	return out, nil
}

// FinishTransition records that the hook of a claimed transition ran, or
// releases it; see driver.Groups.
func (s *Store) FinishTransition(ctx context.Context, tr *driver.GroupTransition, ran bool) error {
	err := s.update(ctx, lockExclusive, func(t *tx) error {
		st, err := t.lockState(tr.Group)
		if err != nil {
			return err
		}
		h, err := t.hookRow(st.row)
		if err != nil {
			return err
		}
		if !h.found || len(h.pending) == 0 || h.pending[0].Seq != tr.Seq || h.claimedBy != tr.Claimant {
			return fmt.Errorf("pgstore: finish transition %d of consumer group %s: %w", tr.Seq, tr.Group, driver.ErrNotClaimant)
		}
		if ran {
			h.hooked, h.pending = tr.Seq, h.pending[1:]
		}
		data, err := json.Marshal(h.pending)
		if err != nil {
			return err
		}
		if _, err := t.c.Exec(t.ctx, s.q.g.hookFinish, st.row, h.hooked, string(data)); err != nil {
			return t.fail("finish transition", err)
		}
		if ran && len(h.pending) == 0 {
			// The group's work may be claimed again: wake its workers
			// (here and, through NOTIFY, elsewhere).
			t.announce(st.handled)
		}
		return nil
	})
	if err != nil && !errors.Is(err, driver.ErrNotClaimant) {
		return s.wrapGroupErr(ctx, "finish transition", err)
	}
	return err
}
