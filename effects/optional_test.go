package effects_test

import (
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

// TestFromDefinitionGivesItBack pins that an adapted definition is a
// DefinitionProvider returning the definition: the router reads its hooks
// and strategy through it.
func TestFromDefinitionGivesItBack(t *testing.T) {
	type ping struct {
		ID string `json:"id"`
	}
	reg := codec.NewRegistry()
	codec.MustRegister[ping](reg, "ping")
	def := core.Projector[int]{Group: "pings", PartitionBy: []string{"id"}}.With(
		core.Evolve(func(n int, _ ping) int { return n + 1 }),
	)
	r, err := effects.FromDefinition(reg, def)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := r.(effects.DefinitionProvider)
	if !ok {
		t.Fatalf("%T is not an effects.DefinitionProvider", r)
	}
	if got := p.Definition().Spec().Group; got != "pings" {
		t.Errorf("Definition().Spec().Group = %q, want pings", got)
	}
}
