package statechart_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// A machine's commands and On events must declare every partition key as a
// required attribute, so that one without it is refused rather than
// decided in the partition "" (issue 11, item 7).
func TestCheckRefusesMachineKeysThatAreNotRequired(t *testing.T) {
	type (
		Ring struct {
			BellID string `json:"bell_id"`
		}
		Rung struct {
			BellID string `json:"bell_id"`
		}
		RingRequired struct {
			BellID string `json:"bell_id" sourced:"required"`
		}
		RungRequired struct {
			BellID string `json:"bell_id" sourced:"required"`
		}
		Ringing struct {
			BellID string `json:"bell_id"`
			statechart.Move
		}
	)
	reg := codec.NewRegistry()
	codec.MustRegister[Ring](reg, "bells.ring")
	codec.MustRegister[Rung](reg, "bells.rung")
	codec.MustRegister[RingRequired](reg, "bells.ring_required")
	codec.MustRegister[RungRequired](reg, "bells.rung_required")
	ringing := statechart.Declare[Ringing]("ringing")
	machine := func(cmd, on statechart.Elem) statechart.Machine[struct{}] {
		return statechart.Machine[struct{}]{Group: "bells", PartitionBy: []string{"bell_id"}}.Chart(
			statechart.Initial(cmd), statechart.Place(ringing, on))
	}
	good := machine(statechart.Command[RingRequired](ringing), statechart.On[RungRequired](ringing))
	if err := good.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := good.Check(reg); err != nil {
		t.Fatalf("a machine whose keys are required: %v", err)
	}
	for name, m := range map[string]statechart.Machine[struct{}]{
		"bells.ring": machine(statechart.Command[Ring](ringing), statechart.On[RungRequired](ringing)),
		"bells.rung": machine(statechart.Command[RingRequired](ringing), statechart.On[Rung](ringing)),
	} {
		err := m.Check(reg)
		var de *core.DefinitionError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "required attribute") {
			t.Fatalf("%s: Check = %v, want a definition error naming it and the required attribute", name, err)
		}
	}
}
