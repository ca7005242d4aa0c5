package memstore_test

import (
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// The store's optional interfaces: a method renamed would make the
// runtime's probe miss it silently.
var _ shell.LoggerProvider = (*memstore.Store)(nil)
