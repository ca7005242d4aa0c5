package shell

import (
	"reflect"

	"github.com/sourced-go/sourced/shell/driver"
)

// storeClock returns the clock store keeps (driver.Clocked), or nil.
func storeClock(store Store) Clock {
	if c, ok := store.(driver.Clocked); ok {
		return c.Clock()
	}
	return nil
}

// sameClock tells whether a and b are the same clock value (two values of
// a type that cannot be compared count as the same).
func sameClock(a, b Clock) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if !ta.Comparable() {
		return true
	}
	return a == b
}
