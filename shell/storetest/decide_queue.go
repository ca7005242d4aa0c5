package storetest

import (
	"testing"

	"github.com/sourced-go/sourced/core"
)

// testHandleQueue holds shell.Handle on an Exclusive decider with no
// PartitionBy (ChargeQueue) to the manual's id-partitioning: each command
// is decided in its own partition, {core.IDKey: its id}, whose history is
// empty, and the group's offset for that partition moves past it so that
// workers do not decide it again; a command appended without Handle is
// still claimed, alone.
func (s suite) testHandleQueue(t *testing.T) {
	e := s.env(t)
	ge := &genv{env: e, gs: e.store}
	for _, c := range []chargeCard{{"card1", 5}, {"card1", 7}, {"card2", 1}} {
		res := handleAny(e, chargeQueue, c)
		if len(res.Events) != 1 || res.State != 1 {
			t.Fatalf("Handle %+v: state %d, events %v; want one event folded onto an empty history", c, res.State, res.Events)
		}
		if ev := res.Events[0].Payload.(cardCharged); ev != (cardCharged{CardID: c.CardID, Amount: c.Amount}) {
			t.Fatalf("Handle %+v: %+v, want it decided on an empty state", c, ev)
		}
	}
	if n := len(e.log()); n != 6 {
		t.Fatalf("%d messages in the log, want 3 commands and 3 events", n)
	}
	if info := ge.info(chargeGroup); !info.Exclusive || len(info.PartitionBy) > 1 || len(info.PartitionBy) == 1 && info.PartitionBy[0] != core.IDKey {
		t.Fatalf("group %+v, want exclusive, partitioned by message id", info)
	}
	ge.noClaim(chargeGroup, "w1")

	pending := e.append(chargeCard{"card1", 9})
	c := ge.claim(chargeGroup, "w1", 10)
	ge.expectClaim(c, part(core.IDKey, pending.Messages[0].ID.String()), false, pending.Last)
	ge.ack(c, c.Last())
	res := handleAny(e, chargeQueue, chargeCard{"card3", 2})
	if res.State != 1 || res.Position != pending.Last+1 {
		t.Fatalf("Handle after a claim: state %d at %d, want 1 at %d", res.State, res.Position, pending.Last+1)
	}
	ge.noClaim(chargeGroup, "w1")
}
