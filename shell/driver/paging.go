package driver

import (
	"context"
	"iter"

	"github.com/sourced-go/sourced/core"
)

// PageMessages iterates the pages readAll returns, starting from opts and
// fetching the next page only when the iteration gets there; it stops at
// the first error, which it yields. Stores implement Store.All with it.
func PageMessages(ctx context.Context, readAll func(context.Context, ReadAllOptions) (Page, error), opts ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return func(yield func(core.PositionedMessage, error) bool) {
		for {
			page, err := readAll(ctx, opts)
			if err != nil {
				yield(core.PositionedMessage{}, err)
				return
			}
			for _, m := range page.Messages {
				if !yield(m, nil) {
					return
				}
			}
			next, more := page.Next(opts)
			if !more {
				return
			}
			opts = next
		}
	}
}

// PageOffsets iterates the pages readOffsets returns, as PageMessages does;
// stores implement Groups.Offsets with it.
func PageOffsets(ctx context.Context, readOffsets func(context.Context, OffsetQuery) (OffsetPage, error), q OffsetQuery) iter.Seq2[Offset, error] {
	return func(yield func(Offset, error) bool) {
		limit := q.Limit
		if limit <= 0 {
			limit = DefaultPageSize
		}
		for {
			page, err := readOffsets(ctx, q)
			if err != nil {
				yield(Offset{}, err)
				return
			}
			for _, o := range page.Offsets {
				if !yield(o, nil) {
					return
				}
			}
			if len(page.Offsets) < limit {
				return
			}
			q.From = page.Offsets[len(page.Offsets)-1].ID + 1
		}
	}
}
