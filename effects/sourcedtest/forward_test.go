package sourcedtest_test

import (
	"fmt"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects/sourcedtest"
)

type addOne struct {
	ID string `json:"id" sourced:"required"`
}

type added struct {
	ID string `json:"id"`
}

var counter = core.Decider[int]{Group: "counter", PartitionBy: []string{"id"}}.With(
	core.Evolve(func(n int, _ added) int { return n + 1 }),
	core.Decide(func(n int, c addOne) ([]any, error) {
		if n >= 2 {
			return nil, fmt.Errorf("full")
		}
		return []any{added(c)}, nil
	}),
)

// TestForwarding pins that the deprecated package still runs the kit: a
// test written against it decides as before.
func TestForwarding(t *testing.T) {
	sourcedtest.Decider(t, counter).
		Given(added{ID: "a"}).
		When(addOne{ID: "a"}).
		Then(added{ID: "a"})
	sourcedtest.Decider(t, counter, sourcedtest.AllowOutsidePartition()).
		Given(added{ID: "a"}, added{ID: "a"}, added{ID: "b"}).
		When(addOne{ID: "a"}).
		ThenError("full")
	if !sourcedtest.Match(added{ID: "a"}, core.NewMessage(added{ID: "a"})) {
		t.Error("Match: the same payload does not match")
	}
}
