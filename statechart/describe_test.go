package statechart_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/core"
)

func TestDescribeTakesTargetsAndTimersFromTheChart(t *testing.T) {
	f := newFixture(t)
	desc := f.m.Describe()
	if desc.Kind != core.KindMachine {
		t.Fatalf("kind %q", desc.Kind)
	}
	find := func(kind core.FlowKind, consumes reflect.Type) core.Flow {
		t.Helper()
		for _, fl := range desc.Flows {
			if fl.Kind == kind && fl.Consumes == consumes {
				return fl
			}
		}
		t.Fatalf("no %s flow for %v in %+v", kind, consumes, desc.Flows)
		return core.Flow{}
	}
	cancel := find(core.FlowDecide, reflect.TypeFor[CancelOrder]())
	if !cancel.Known || !slices.Equal(cancel.Produces, []reflect.Type{reflect.TypeFor[CancelledEvent]()}) || cancel.Name != "placed" {
		t.Errorf("CancelOrder flow %+v", cancel)
	}
	place := find(core.FlowDecide, reflect.TypeFor[PlaceOrder]())
	if place.Known || !slices.Contains(place.Produces, reflect.TypeFor[PlacedEvent]()) {
		t.Errorf("PlaceOrder (a CommandFunc that may add data events) flow %+v", place)
	}
	pay := find(core.FlowDecide, reflect.TypeFor[StartPayment]())
	if !slices.Equal(pay.Produces, []reflect.Type{reflect.TypeFor[PayingEvent](), reflect.TypeFor[RejectedEvent]()}) {
		t.Errorf("StartPayment flow %+v", pay)
	}
	captured := find(core.FlowReact, reflect.TypeFor[PaymentCaptured]())
	if !captured.Known || !slices.Equal(captured.Produces, []reflect.Type{reflect.TypeFor[PaidEvent]()}) {
		t.Errorf("PaymentCaptured flow %+v", captured)
	}
	after := find(core.FlowAfter, reflect.TypeFor[PayingEvent]())
	if !after.Known || !slices.Equal(after.Produces, []reflect.Type{reflect.TypeFor[ExpirePayment]()}) {
		t.Errorf("timer flow %+v", after)
	}
	if entry := find(core.FlowEntry, reflect.TypeFor[PayingEvent]()); entry.Known {
		t.Errorf("entry action reported known: %+v", entry)
	}
	done := false
	for _, fl := range desc.Flows {
		if fl.Kind == core.FlowAlways && slices.Contains(fl.Produces, reflect.TypeFor[CompletedEvent]()) {
			done = true
		}
	}
	if !done {
		t.Errorf("the Done join to completed is missing: %+v", desc.Flows)
	}
}
