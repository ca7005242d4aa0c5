package topology_test

import (
	"github.com/sourced-go/sourced/shell/topology"
	"github.com/sourced-go/sourced/shell/workflow"
)

// A workflow definition tells the graph its step types.
var _ topology.TypesProvider = (*workflow.Definition[struct{}, struct{}])(nil)
