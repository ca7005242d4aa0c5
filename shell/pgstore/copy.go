package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"

	"github.com/sourced-go/sourced/core"
)

// copyBatch is how many messages one transaction of Copy appends.
const copyBatch = 500

// Copy appends the whole log of src (a SQLite store, for instance) to
// dst, in position order, keeping every message's id, type, payload,
// metadata, causation, correlation and time; it returns how many it
// copied. dst should be empty: positions are handed out again (1, 2, ...,
// so a log with deleted messages is renumbered without its gaps), and a
// message whose id dst holds already fails the copy of its batch
// (driver.ErrDuplicateID) after the batches before it committed, so a
// failed copy is resumed by copying into a fresh store again.
//
// A message dst would refuse (codec.ErrInvalid: one another store took,
// such as SQLite, that breaks the limits every store now holds to, e.g.
// an indexed value over codec.MaxIndexedValueBytes or holding a NUL, or
// one that no longer validates) is left out, and the copy goes on with
// the others: Copy then returns, beside the count copied, a *CopyError
// listing each message left out with its position in src and why.
//
// The schedule is copied after the log when src can list it
// (driver.ScheduleReader: sqlitestore, pgstore and memstore can): each
// scheduled message keeps its id and due time, so a reminder due in two
// days fires from dst in two days (one that fell due during the copy is
// appended to the log at once, as dst's Append does with a past date).
// The count returned includes them.
//
// Copy does not move consumer groups: register the app's groups on dst
// after the copy and they discover the copied log and process it from the
// start, so reactors with side effects run again unless their groups are
// advanced first (see driver.GroupTx.AdvanceOffset).
func Copy(ctx context.Context, src driver.Store, dst *Store) (int, error) {
	n := 0
	var left []NotCopied
	batch := make([]core.Message, 0, copyBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := dst.Append(ctx, batch, driver.AppendOptions{}); err != nil {
			return fmt.Errorf("pgstore: copy: after %d messages: %w", n, err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	for m, err := range src.All(ctx, driver.ReadAllOptions{Limit: copyBatch}) {
		if err != nil {
			return n, fmt.Errorf("pgstore: copy: read the source: %w", err)
		}
		if !dst.raw {
			// Checked as dst's append would, without writing: one message
			// refused would fail its whole batch.
			if _, err := driver.PrepareMessage(dst.reg, m.Message, m.CreatedAt); err != nil {
				if !errors.Is(err, codec.ErrInvalid) {
					return n, fmt.Errorf("pgstore: copy: message %s at position %d: %w", m.ID, m.Position, err)
				}
				left = append(left, NotCopied{Position: m.Position, ID: m.ID, Type: m.Type, Err: err})
				continue
			}
		}
		batch = append(batch, m.Message)
		if len(batch) == copyBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	if sr, ok := src.(driver.ScheduleReader); ok {
		scheduled, err := sr.ReadScheduled(ctx, 0)
		if err != nil {
			return n, fmt.Errorf("pgstore: copy: read the source's schedule: %w", err)
		}
		for _, m := range scheduled {
			if !dst.raw {
				if _, err := driver.PrepareMessage(dst.reg, m, m.CreatedAt); err != nil {
					if !errors.Is(err, codec.ErrInvalid) {
						return n, fmt.Errorf("pgstore: copy: scheduled message %s: %w", m.ID, err)
					}
					left = append(left, NotCopied{ID: m.ID, Type: m.Type, Err: err})
					continue
				}
			}
			batch = append(batch, m)
			if len(batch) == copyBatch {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
		if err := flush(); err != nil {
			return n, err
		}
	}
	if len(left) > 0 {
		return n, &CopyError{Copied: n, NotCopied: left}
	}
	return n, nil
}

// NotCopied is a message of the source that Copy left out.
type NotCopied struct {
	// Position is the message's position in the source (0 for a
	// scheduled message).
	Position int64
	// ID is its id.
	ID uuid.UUID
	// Type is its type string.
	Type string
	// Err says why dst refuses it (it matches codec.ErrInvalid).
	Err error
}

// CopyError reports the messages Copy left out because dst refuses them;
// every other message was copied (Copied of them). It matches
// errors.Is(err, codec.ErrInvalid). Fix or drop the listed messages in the
// source and copy into a fresh store again, or accept the copy without
// them.
type CopyError struct {
	Copied    int
	NotCopied []NotCopied
}

func (e *CopyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pgstore: copy: %d messages copied, %d left out that PostgreSQL's store refuses", e.Copied, len(e.NotCopied))
	const shown = 5
	for i, m := range e.NotCopied {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.NotCopied)-shown)
			break
		}
		fmt.Fprintf(&b, "; position %d (%s %s): %v", m.Position, m.Type, m.ID, m.Err)
	}
	return b.String()
}

// Is makes errors.Is(err, codec.ErrInvalid) true.
func (e *CopyError) Is(target error) bool { return target == codec.ErrInvalid }
