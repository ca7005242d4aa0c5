package sqlitestore_test

import (
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The store's optional interfaces: a method renamed would make the
// runtime's probe miss it silently.
var _ driver.LoggerProvider = (*sqlitestore.Store)(nil)
