package storetest

import (
	"errors"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// The fixtures of a decider partitioned by message id: an Exclusive
// decider with no PartitionBy, deciding each command on its own (a
// concurrent, unordered queue of commands).
type (
	// ChargeCard is "payments.charge".
	ChargeCard struct {
		CardID string `json:"card_id" sourced:"required"`
		Amount int    `json:"amount"`
	}
	// CardCharged is "payments.charged". Seen is how many charges the
	// decider's state had folded when it decided: always 0, since a
	// command's partition holds only the command.
	CardCharged struct {
		CardID string `json:"card_id"`
		Amount int    `json:"amount"`
		Seen   int    `json:"seen"`
	}
)

// Type strings of the queue fixtures.
const (
	TypeChargeCard  = "payments.charge"
	TypeCardCharged = "payments.charged"
)

// ChargeGroup is the consumer group of ChargeQueue.
const ChargeGroup = "storetest.charges"

func registerQueueFixtures(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[ChargeCard](reg, TypeChargeCard),
		codec.Register[CardCharged](reg, TypeCardCharged),
	)
}

// ChargeQueue decides ChargeCard commands, each in its own partition
// ({core.IDKey: the command's id}): it is Exclusive and declares no
// PartitionBy.
var ChargeQueue = core.Decider[int]{Group: ChargeGroup, Exclusive: true}.With(
	core.Evolve(func(n int, _ CardCharged) int { return n + 1 }),
	core.Decide(func(n int, c ChargeCard) ([]any, error) {
		return []any{CardCharged{CardID: c.CardID, Amount: c.Amount, Seen: n}}, nil
	}),
)
