package shell

import (
	"context"
	"errors"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// undecodable meets a claim that failed because a message could not be
// decoded (a *DecodeError): the group's failure, not an idle group. The
// error strategy applies as to a failed batch, with the message as the
// one that failed; when no partition is named (a handled type the
// registry does not know) there is nothing to park, and the group fails
// once its retries ran out. ok is false for any other error.
func (rt *Router) undecodable(ctx context.Context, re *reactor, err error) (failed *GroupFailedError, ok bool, _ error) {
	var de *DecodeError
	if !errors.As(err, &de) || transient(ctx, err) {
		return nil, false, nil
	}
	claim := &driver.ClaimedPartition{Group: re.info.Group, Partition: de.Partition, OffsetID: de.OffsetID}
	if de.MessageType != "" {
		m := core.PositionedMessage{Position: de.Position}
		m.ID, m.Type = de.MessageID, de.MessageType
		claim.Messages = []core.PositionedMessage{m}
	}
	if de.OffsetID == 0 {
		strategy := rt.opts.ErrorStrategy
		if re.strategy != nil {
			strategy = *re.strategy
		}
		if strategy.Park {
			strategy.Park = false
			cp := *re
			cp.strategy = &strategy
			re = &cp
		}
	}
	failed, ferr := rt.fail(context.WithoutCancel(ctx), re, claim, err, 0)
	return failed, true, ferr
}
