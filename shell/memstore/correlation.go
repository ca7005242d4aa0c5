package memstore

import (
	"context"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
)

// ReadCorrelation returns, in position order, every message of the log
// sharing the correlation id of the message messageID (its whole causal
// chain); see driver.Store.ReadCorrelation. An id not in the log (unknown,
// or of a scheduled message) gives no messages.
func (s *Store) ReadCorrelation(ctx context.Context, messageID uuid.UUID) ([]core.PositionedMessage, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	pos := s.ids[messageID]
	if pos == 0 {
		return nil, nil // unknown, or scheduled
	}
	i := s.indexAfter(pos - 1)
	if i == len(s.log) || s.log[i].position != pos {
		return nil, nil
	}
	corr := s.log[i].correlation
	if corr == uuid.Nil {
		return nil, nil // as SQL's NULL, a missing correlation matches nothing
	}
	var out []core.PositionedMessage
	for j := range s.log {
		r := &s.log[j]
		if r.correlation != corr {
			continue
		}
		m, err := s.decode(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
