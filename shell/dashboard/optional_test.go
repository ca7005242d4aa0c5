package dashboard_test

import (
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/statechart"
)

// A machine tells the machines page its state types.
var _ dashboard.StateTypesProvider = statechart.Machine[struct{}]{}
