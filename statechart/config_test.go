package statechart_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// stamp gives messages ids, times and stored types, as a store would.
func (f *fixture) stamp(ms []core.Message) []core.Message {
	out := make([]core.Message, len(ms))
	for i, m := range ms {
		ct, err := f.reg.TypeOf(m.Payload)
		if err != nil {
			f.t.Fatal(err)
		}
		f.now = f.now.Add(time.Second)
		out[i] = m.Stamp(uuid.New(), f.now)
		out[i].Type = ct.Name
	}
	return out
}

// The manual's entered_by: the state event that entered each active state
// (id, type, time), and visited: states entered at least once.
func TestEnteredByAndVisited(t *testing.T) {
	f := newFixture(t)
	in := f.m.New(map[string]string{"order_id": "o1"})
	live, history := f.run(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 1}, StartPayment{OrderID: "o1", Card: "4242"})
	by, ok := live.ActiveStates().EnteredBy(Paying)
	if !ok || by.Type != "order_machine.runtime.paying" || by.ID != uuid.Nil || by.At.IsZero() {
		t.Fatalf("live: %+v %v", by, ok)
	}
	stored := f.stamp(history)
	loaded, err := f.m.Load(map[string]string{"order_id": "o1"}, stored)
	if err != nil {
		t.Fatal(err)
	}
	var payingEvent core.Message
	for _, m := range stored {
		if m.Type == "order_machine.runtime.paying" {
			payingEvent = m
		}
	}
	by, ok = loaded.ActiveStates().EnteredBy(Paying)
	want := statechart.EnteredBy{ID: payingEvent.ID, Type: "order_machine.runtime.paying", At: payingEvent.CreatedAt}
	if !ok || by != want {
		t.Fatalf("loaded: %+v, want %+v", by, want)
	}
	if by, _ := loaded.ActiveStates().EnteredBy(Placed); by.Type != "order_machine.runtime.placed" {
		t.Fatalf("placed entered by %+v", by)
	}
	if _, ok := loaded.ActiveStates().EnteredBy(Paid); ok {
		t.Fatal("an inactive state has no entered_by")
	}
	// Cancel, then: paying was visited, paid never.
	next, _ := f.decide(loaded, CancelOrder{OrderID: "o1"})
	if !next.ActiveStates().Visited(Paying) || !next.ActiveStates().Visited(Cancelled) || next.ActiveStates().Visited(Paid) {
		t.Fatal("visited")
	}
	cfg, err := f.m.ActiveStates(next.Paths())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.EnteredBy(Cancelled); ok || cfg.Visited(Paying) || !cfg.Visited(Cancelled) {
		t.Fatal("a configuration from paths knows only its active states")
	}
}
