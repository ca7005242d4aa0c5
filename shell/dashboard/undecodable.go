package dashboard

import (
	"context"
	"errors"
	"iter"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// undecodable is the payload of a message the store cannot decode (its
// type is not registered, or its payload no longer decodes into the
// registered type), as the pages show it in place of the message.
type undecodable struct {
	// Err is the store's *shell.DecodeError.
	Err *shell.DecodeError
}

func (u undecodable) String() string { return u.Err.Error() }

// undecodableOf returns the placeholder of a message that cannot be
// decoded, and false for any other message.
func undecodableOf(m core.Message) (undecodable, bool) {
	u, ok := m.Payload.(undecodable)
	return u, ok
}

// lenient is the store as the pages read the log: a page of ReadAll (and
// so of All) that meets a message the store cannot decode (a
// *shell.DecodeError naming its position) is read again around it, one
// message per query, the undecodable message standing in the page as a
// placeholder whose payload is an undecodable (its position, id, type
// and the error). Reading around costs one query for the log's last position
// and one per message of the page, only for a page that holds an
// undecodable message. Anything
// else is the store's.
type lenient struct {
	shell.Store
	// bad, when set, collects the placeholders of the undecodable
	// messages read.
	bad *[]core.PositionedMessage
}

// ReadAll reads one page of the log, reading around undecodable messages.
func (l lenient) ReadAll(ctx context.Context, opts shell.ReadAllOptions) (shell.Page, error) {
	page, err := l.Store.ReadAll(ctx, opts)
	var de *shell.DecodeError
	if err == nil || !errors.As(err, &de) || de.Position <= 0 {
		return page, err
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = shell.DefaultPageSize
	}
	page = shell.Page{Messages: make([]core.PositionedMessage, 0, limit)}
	// The log's last position, which a page's Next needs: the newest
	// message's, decodable or not.
	newest, err := l.Store.ReadAll(ctx, shell.ReadAllOptions{Order: shell.Descending, Limit: 1})
	switch {
	case errors.As(err, &de) && de.Position > 0:
		page.LastPosition = de.Position
	case err != nil:
		return shell.Page{}, err
	default:
		page.LastPosition = newest.LastPosition
	}
	one := opts
	one.Limit = 1
	for len(page.Messages) < limit {
		p, err := l.Store.ReadAll(ctx, one)
		var pos int64
		switch {
		case errors.As(err, &de) && de.Position > 0:
			m := core.PositionedMessage{Position: de.Position}
			m.ID, m.Type, m.Payload = de.MessageID, de.MessageType, undecodable{de}
			page.Messages = append(page.Messages, m)
			if l.bad != nil {
				*l.bad = append(*l.bad, m)
			}
			pos = de.Position
		case err != nil:
			return shell.Page{}, err
		case len(p.Messages) == 0:
			return page, nil
		default:
			page.Messages = append(page.Messages, p.Messages[0])
			pos = p.Messages[0].Position
		}
		if opts.Order == shell.Descending {
			if pos <= 1 {
				break
			}
			one.From = pos - 1
		} else {
			one.From = pos + 1
		}
	}
	return page, nil
}

// All iterates the log by pages of ReadAll, reading around undecodable
// messages.
func (l lenient) All(ctx context.Context, opts shell.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return func(yield func(core.PositionedMessage, error) bool) {
		for {
			p, err := l.ReadAll(ctx, opts)
			if err != nil {
				yield(core.PositionedMessage{}, err)
				return
			}
			for _, m := range p.Messages {
				if !yield(m, nil) {
					return
				}
			}
			next, ok := p.Next(opts)
			if !ok {
				return
			}
			opts = next
		}
	}
}
