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
	// chargeCard is "payments.charge".
	chargeCard struct {
		CardID string `json:"card_id" sourced:"required"`
		Amount int    `json:"amount"`
	}
	// cardCharged is "payments.charged". Seen is how many charges the
	// decider's state had folded when it decided: always 0, since a
	// command's partition holds only the command.
	cardCharged struct {
		CardID string `json:"card_id"`
		Amount int    `json:"amount"`
		Seen   int    `json:"seen"`
	}
)

// Type strings of the queue fixtures.
const (
	typeChargeCard  = "payments.charge"
	typeCardCharged = "payments.charged"
)

// chargeGroup is the consumer group of ChargeQueue.
const chargeGroup = "storetest.charges"

func registerQueueFixtures(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[chargeCard](reg, typeChargeCard),
		codec.Register[cardCharged](reg, typeCardCharged),
	)
}

// chargeQueue decides ChargeCard commands, each in its own partition
// ({core.IDKey: the command's id}): it is Exclusive and declares no
// PartitionBy.
var chargeQueue = core.Decider[int]{Group: chargeGroup, Exclusive: true}.With(
	core.Evolve(func(n int, _ cardCharged) int { return n + 1 }),
	core.Decide(func(n int, c chargeCard) ([]any, error) {
		return []any{cardCharged{CardID: c.CardID, Amount: c.Amount, Seen: n}}, nil
	}),
)
