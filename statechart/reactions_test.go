package statechart_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

func positioned(ms []core.Message, from int64) []core.PositionedMessage {
	out := make([]core.PositionedMessage, len(ms))
	for i, m := range ms {
		out[i] = core.PositionedMessage{Message: m, Position: from + int64(i)}
	}
	return out
}

// The manual gives every reactor reactions, sync and after-sync work: a
// machine reacts to its own state events (reaction(Paying)) and runs Sync
// with the instance after each decision.
func TestMachineReactionsAndSync(t *testing.T) {
	f := newFixture(t)
	var synced []string
	var after int
	m := f.m
	m.Reactions = []statechart.Reaction[order]{
		statechart.React(func(in statechart.Instance[order], e PayingEvent) []any {
			return []any{ChargeCard{Card: in.Context.Card + "/" + e.Trigger}}
		}),
	}
	m.Sync = []core.SyncFunc[statechart.Instance[order]]{func(_ context.Context, _ core.SyncTx, b core.Batch[statechart.Instance[order]]) error {
		synced = append(synced, strings.Join(b.State.Paths(), ","))
		return nil
	}}
	m.AfterSync = []core.AfterSyncFunc[statechart.Instance[order]]{func(context.Context, core.Batch[statechart.Instance[order]]) error { after++; return nil }}
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Spec().Handled, reflect.TypeFor[PayingEvent]()) {
		t.Fatalf("the group claims what it reacts to: %v", m.Spec().Handled)
	}
	keys := map[string]string{"order_id": "o1"}
	_, hist := f.run(m.New(keys), PlaceOrder{OrderID: "o1", Total: 10, Items: 1})
	hist = f.stamp(hist)
	cmd := f.msg(StartPayment{OrderID: "o1", Card: "4242"})
	history := positioned(hist, 1)
	batch := []core.PositionedMessage{{Message: cmd, Position: int64(len(hist) + 1)}}
	outs, err := m.Step(core.StepInput{Partition: keys, History: history, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || len(outs[0].Sync) != 1 || len(outs[0].AfterSync) != 1 {
		t.Fatalf("%+v", outs)
	}
	if err := outs[0].Sync[0](context.Background(), nil); err != nil || !slices.Equal(synced, []string{"placed,placed.payment.paying"}) {
		t.Fatalf("sync sees the instance after the decision: %v %v", synced, err)
	}
	_ = outs[0].AfterSync[0](context.Background())
	if after != 1 {
		t.Fatal("after sync")
	}
	// The decision's events come back to the group: the state event is
	// applied and reacted to.
	appended := f.stamp(outs[0].Events)
	var paying core.Message
	for _, e := range appended {
		if _, ok := e.Payload.(PayingEvent); ok {
			paying = e
		}
	}
	history = append(history, batch...)
	history = append(history, positioned(appended, int64(len(history)+1))...)
	pos := history[len(history)-1].Position
	for i := range history {
		if history[i].ID == paying.ID {
			pos = history[i].Position
		}
	}
	outs, err = m.Step(core.StepInput{Partition: keys, History: history, Batch: []core.PositionedMessage{{Message: paying, Position: pos}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || len(outs[0].Reactions) != 1 || len(outs[0].Events) != 0 {
		t.Fatalf("%+v", outs)
	}
	r := outs[0].Reactions[0]
	if r.Payload != (ChargeCard{OrderID: "o1", Card: "4242/orders.start_payment"}) || r.CausationID != paying.ID {
		t.Fatalf("the reaction, keys filled in, correlated with the event: %+v", r)
	}
	outs, _ = m.Step(core.StepInput{Partition: keys, History: history, Batch: []core.PositionedMessage{{Message: paying, Position: pos}}, Replaying: true})
	if len(outs[0].Reactions) != 0 {
		t.Fatal("no reactions while replaying")
	}
	// Synchronous handling binds Sync too.
	out, err := m.DecideCommand(keys, positioned(hist, 1), batch[0])
	if err != nil || len(out.Sync) != 1 {
		t.Fatalf("%v %+v", err, out)
	}
}

func TestMachineReactionDefinitionErrors(t *testing.T) {
	m := orderMachine(nil)
	m.Reactions = []statechart.Reaction[order]{
		statechart.React(func(statechart.Instance[order], StartPayment) []any { return nil }),
		statechart.React(func(statechart.Instance[order], PaymentCaptured) []any { return nil }),
		statechart.React(func(statechart.Instance[order], PayingEvent) []any { return nil }),
		statechart.React(func(statechart.Instance[order], PayingEvent) []any { return nil }),
		{},
	}
	err := m.Err()
	for _, want := range []string{"decides statechart_test.StartPayment", "decides statechart_test.PaymentCaptured", "two reactions to statechart_test.PayingEvent", "a zero Reaction"} {
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, core.ErrDefinition) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}
