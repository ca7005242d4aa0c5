package statechart_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/statechart"
)

type (
	CapturedEvent struct {
		OrderRef
		statechart.Move
	}
	WorkingEvent struct {
		OrderRef
		statechart.Move
	}
)

var (
	pCaptured = statechart.Declare[CapturedEvent]("captured")
	pExpired  = statechart.Named("expired")
	pWorking  = statechart.Declare[WorkingEvent]("working")
	wStarted  = statechart.Named("started")
	wProgress = statechart.Named("progressed")
	wDone     = statechart.Named("done")
	oReady    = statechart.Named("ready")
)

var paymentPart = statechart.NewPart("payment", statechart.State{},
	statechart.Initial(statechart.Command[X](pCaptured), statechart.Command[Y](pExpired)),
	statechart.Final(pCaptured),
	statechart.Final(pExpired),
)

var workingPart = statechart.NewPart("working", pWorking,
	statechart.Started(wStarted, statechart.Command[X](wProgress)),
	statechart.Place(wProgress, statechart.Command[Y](wDone)),
	statechart.Final(wDone),
)

func TestPartAsRegion(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP,
			statechart.RegionPart("payment", paymentPart, statechart.OnFinal(pExpired, sOut)),
			statechart.Region("shipping", statechart.Initial(statechart.Command[Z](sB2)), statechart.Final(sB2)),
			statechart.Done(sE),
		),
		statechart.Final(sE),
		statechart.Final(sOut),
	)
	in, _ := decideAll(t, m, m.New(nil), Go{}, Z{})
	if !slices.Equal(in.Paths(), []string{"p", "p.shipping.b2"}) {
		t.Fatalf("%v", in.Paths())
	}
	// Expired is mapped: OnFinal wins over the done join completed in the
	// same decision.
	next, d := decideAll(t, m, in, Y{})
	if !slices.Equal(summary(d.Messages), []string{"Y>p.payment.expired", "on_final>out"}) || !next.In(sOut) {
		t.Fatalf("%v", summary(d.Messages))
	}
	// Captured is not mapped: the done join applies.
	_, d = decideAll(t, m, in, X{})
	if !slices.Equal(summary(d.Messages), []string{"X>p.payment.captured", "done>e"}) {
		t.Fatalf("%v", summary(d.Messages))
	}
	reg := codec.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if ct, err := reg.ByGoType(reflect.TypeFor[CapturedEvent]()); err != nil || ct.Name != "t.runtime.payment.captured" {
		t.Fatalf("%v %v", ct, err)
	}
}

func TestPartMountedTwice(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](sP)),
		statechart.Place(sP,
			statechart.RegionPart("card", paymentPart),
			statechart.RegionPart("cash", paymentPart),
		),
	)
	in, d := decideAll(t, m, m.New(nil), Go{}, X{})
	if !slices.Equal(summary(d.Messages), []string{"X>p.card.captured", "X>p.cash.captured"}) || !slices.Equal(in.Paths(), []string{"p", "p.card.captured", "p.cash.captured"}) {
		t.Fatalf("%v %v", summary(d.Messages), in.Paths())
	}
	if !in.In(pCaptured) {
		t.Fatal("In matches any placement")
	}
}

func TestPartAsCompoundState(t *testing.T) {
	m := tm(t,
		statechart.Initial(statechart.Command[Go](workingPart)),
		statechart.PlacePart(workingPart,
			statechart.OnFinal(wDone, oReady),
			statechart.Command[Z](sOut),
			statechart.Command[X](sOut), // the part's X goes first: it is deeper
		),
		statechart.Final(oReady),
		statechart.Final(sOut),
	)
	in, d := decideAll(t, m, m.New(nil), Go{})
	mv := moves(d.Messages)
	if len(mv) != 1 || !slices.Equal(mv[0].Entered, []string{"working", "working.started"}) || reflect.TypeOf(d.States[0].Payload) != reflect.TypeFor[WorkingEvent]() {
		t.Fatalf("one event of the compound state's type: %+v", d.States)
	}
	in, _ = decideAll(t, m, in, X{})
	if !reflect.DeepEqual(in.ActiveStates().Value(), map[string]any{"working": "progressed"}) || !in.In(workingPart.State()) {
		t.Fatalf("%v", in.ActiveStates().Value())
	}
	next, d := decideAll(t, m, in, Y{})
	if !slices.Equal(summary(d.Messages), []string{"Y>working.done", "on_final>ready"}) || !next.In(oReady) {
		t.Fatalf("%v", summary(d.Messages))
	}
	next, d = decideAll(t, m, in, Z{})
	if mv := moves(d.Messages); mv[0].Source != "working" || !slices.Equal(mv[0].Exited, []string{"working.progressed", "working"}) || !next.In(sOut) {
		t.Fatalf("%+v", mv)
	}
	reg := codec.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if ct, err := reg.ByGoType(reflect.TypeFor[WorkingEvent]()); err != nil || ct.Name != "t.runtime.working" {
		t.Fatalf("%v %v", ct, err)
	}
}

func TestPartCannotBeTargetedFromOutside(t *testing.T) {
	m := statechart.Machine[tctx]{Group: "t", PartitionBy: []string{"id"}}.Chart(
		statechart.Initial(statechart.Command[Go](sP), statechart.Command[X](wProgress)),
		statechart.PlacePart(workingPart),
		statechart.Place(sP),
	)
	if err := m.Err(); err == nil {
		t.Fatal("a part's inner state is not a target of the owner")
	}
}
