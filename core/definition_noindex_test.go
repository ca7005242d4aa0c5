package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

type hiddenKeyCreated struct {
	CourseName string `json:"course_name" sourced:"noindex"`
}

type hiddenKeys struct{}

// A partition key left out of the index by its tag is reported as such,
// not as a value that cannot be indexed.
func TestCheckNamesTheNoindexTag(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[hiddenKeyCreated](reg, "hidden.created")
	d := core.Decider[hiddenKeys]{Group: "hidden", PartitionBy: []string{"course_name"}}.With(
		core.Decide(func(s hiddenKeys, c hiddenKeyCreated) ([]any, error) { return nil, nil }))
	err := d.Check(reg)
	var de *core.DefinitionError
	if !errors.As(err, &de) {
		t.Fatalf("Check = %v, want a *DefinitionError", err)
	}
	if !strings.Contains(err.Error(), "noindex") || strings.Contains(err.Error(), "not indexable") {
		t.Fatalf("Check = %v: want the noindex tag named as the cause", err)
	}
}
