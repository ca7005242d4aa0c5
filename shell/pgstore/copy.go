package pgstore

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// copyBatch is how many messages one transaction of Copy appends.
const copyBatch = 500

// Copy appends the whole log of src (a SQLite store, for instance) to
// dst, in position order, keeping every message's id, type, payload,
// metadata, causation, correlation and time; it returns how many it
// copied. dst should be empty: positions are handed out again (1, 2, ...,
// so a log with deleted messages is renumbered without its gaps), and a
// message whose id dst holds already fails the copy of its batch
// (shell.ErrDuplicateID) after the batches before it committed, so a
// failed copy is resumed by copying into a fresh store again.
//
// Copy does not move scheduled messages (promote them, or let them fire,
// first) nor consumer groups: register the app's groups on dst after the
// copy and they discover the copied log and process it from the start,
// so reactors with side effects run again unless their groups are
// advanced first (see shell.GroupTx.AdvanceOffset).
func Copy(ctx context.Context, src shell.Store, dst *Store) (int, error) {
	n := 0
	batch := make([]core.Message, 0, copyBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := dst.Append(ctx, batch, shell.AppendOptions{}); err != nil {
			return fmt.Errorf("pgstore: copy: after %d messages: %w", n, err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	for m, err := range src.All(ctx, shell.ReadAllOptions{Limit: copyBatch}) {
		if err != nil {
			return n, fmt.Errorf("pgstore: copy: read the source: %w", err)
		}
		batch = append(batch, m.Message)
		if len(batch) == copyBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}
