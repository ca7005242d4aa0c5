package statechart_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

func TestDefinitionErrors(t *testing.T) {
	unplaced := statechart.Named("nowhere")
	guard := statechart.If(func(tctx) bool { return true })
	partA := statechart.NewPart("billing.pay", statechart.Named("pay"), statechart.Initial(), statechart.Final(statechart.Named("x")))
	partB := statechart.NewPart("shop.pay", statechart.Named("pay"), statechart.Initial(), statechart.Final(statechart.Named("y")))
	cases := []struct {
		name  string
		elems []statechart.Elem
		want  string
	}{
		{"unplaced target", []statechart.Elem{statechart.Initial(statechart.Command[Go](unplaced))}, `targets state "nowhere", which is not placed`},
		{"sibling region", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](sP)),
			statechart.Place(sP,
				statechart.Region("a", statechart.Started(sA1, statechart.Command[X](sB1))),
				statechart.Region("b", statechart.Started(sB1))),
		}, "in a sibling region"},
		{"no start", []statechart.Elem{statechart.Place(sA1)}, "the root region has no start"},
		{"two starts", []statechart.Elem{statechart.Initial(), statechart.Started(sA1)}, "both an Initial position and a Started state"},
		{"placed twice", []statechart.Elem{statechart.Initial(), statechart.Place(sA1), statechart.Place(sA1)}, `state "a1" is placed twice`},
		{"same name", []statechart.Elem{statechart.Initial(), statechart.Place(sA1), statechart.Place(statechart.Named("a1"))}, `two states are named "a1"`},
		{"bad name", []statechart.Elem{statechart.Initial(), statechart.Place(statechart.Named("Paying"))}, "names are lower-case"},
		{"transient with commands", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1)),
			statechart.Place(sA1, statechart.Always(sA2), statechart.Command[X](sA2)), statechart.Place(sA2)}, "transient (an unguarded Always) and cannot accept commands"},
		{"transient with timers", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1)),
			statechart.Place(sA1, statechart.After(time.Second, Tick{}), statechart.Always(sA2)), statechart.Place(sA2)}, "cannot have timers"},
		{"transient with regions", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1)),
			statechart.Place(sA1, statechart.Always(sA2), statechart.Started(sB1)), statechart.Place(sA2)}, "cannot have regions or sub-states"},
		{"unreachable always", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1)),
			statechart.Place(sA1, statechart.Always(sA2), statechart.Always(sB1, guard)), statechart.Place(sA2), statechart.Place(sB1)}, "after an unguarded Always is unreachable"},
		{"unreachable done", []statechart.Elem{statechart.Initial(statechart.Command[Go](sD)),
			statechart.Place(sD, statechart.Started(sA1), statechart.Done(sE), statechart.Done(sF, guard)), statechart.Final(sE), statechart.Final(sF)}, "a Done after an unguarded Done is unreachable"},
		{"done on atomic", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1)), statechart.Place(sA1, statechart.Done(sA2)), statechart.Place(sA2)}, "Done on a state with no sub-states"},
		{"several targets without handler", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1, sA2)), statechart.Place(sA1), statechart.Place(sA2)}, "give it a handler that picks one"},
		{"final with commands", []statechart.Elem{statechart.Initial(statechart.Command[Go](sE)), statechart.Final(sE, statechart.Command[X](sE))}, "a final state only has Entry, Exit and Stops"},
		{"initial with an always", []statechart.Elem{statechart.Initial(statechart.Always(sA1)), statechart.Place(sA1)}, "an Initial position only accepts commands and events"},
		{"command in a region", []statechart.Elem{statechart.Initial(), statechart.Command[X](sA1), statechart.Place(sA1)}, "belongs in a state, not directly in a region"},
		{"context type", []statechart.Elem{statechart.Initial(statechart.CommandFunc(func(int, X, *statechart.Do) error { return nil }))}, "takes a context of type int"},
		{"clashing part prefixes", []statechart.Elem{statechart.Initial(statechart.Command[Go](sP)),
			statechart.Place(sP, statechart.RegionPart("one", partA), statechart.RegionPart("two", partB))}, "their prefixes end the same way"},
		{"accepted twice", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1), statechart.Command[Go](sA1)), statechart.Place(sA1)}, "accepts statechart_test.Go after an unguarded handler of that type"},
		{"starts several without a handler", []statechart.Elem{statechart.Initial(statechart.Command[AddLine]().Starts(lineItems.Child(), payments.Child()))}, "starts one of several children without a handler"},
		{"starts on a state", []statechart.Elem{statechart.Initial(statechart.Command[Go](sA1)), statechart.Place(sA1, statechart.Always(sA2, guard).Starts(lineItems.Child())), statechart.Place(sA2)}, "Starts and MayStart belong on handlers"},
		{"history of an atomic state", []statechart.Elem{statechart.Initial(statechart.Command[Go](statechart.History(sA1))), statechart.Place(sA1)}, "which has no sub-states or regions"},
	}
	for _, c := range cases {
		m := statechart.Machine[tctx]{Group: "t", PartitionBy: []string{"id"}}.Chart(c.elems...)
		err := m.Err()
		if !errors.Is(err, core.ErrDefinition) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestCheckPartitionSchema(t *testing.T) {
	reg := orderRegistry()
	m := orderMachine(reg)
	if err := m.Check(reg); err == nil || !strings.Contains(err.Error(), "order_machine.runtime.placed") && !strings.Contains(err.Error(), "PlacedEvent") {
		t.Fatalf("state types must be registered (Register): %v", err)
	}
	_ = m.Register(reg)
	noKeys := m
	noKeys.PartitionBy = nil
	if err := noKeys.Check(reg); !errors.Is(err, core.ErrDefinition) || !strings.Contains(err.Error(), "a machine needs PartitionBy") {
		t.Fatalf("%v", err)
	}
	wrong := m
	wrong.PartitionBy = []string{"order_id", "tenant_id"}
	err := wrong.Check(reg)
	if !errors.Is(err, core.ErrDefinition) || !strings.Contains(err.Error(), `message orders.start_payment, key "tenant_id"`) {
		t.Fatalf("%v", err)
	}
	named := statechart.Machine[tctx]{Group: "t", PartitionBy: []string{"id"}}.Chart(statechart.Initial(statechart.Command[Go](sA1)), statechart.Place(sA1))
	reg2 := codec.NewRegistry()
	codec.MustRegister[Go](reg2, "t.go")
	if err := named.Check(reg2); !strings.Contains(err.Error(), `state "a1" has no event type`) || !strings.Contains(err.Error(), `key "id"`) {
		t.Fatalf("%v", err)
	}
}
