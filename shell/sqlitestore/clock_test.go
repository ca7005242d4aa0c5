package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Options.Clock is the store's clock and the one it shares with a
// runtime (driver.Clocked); Options.Now beside it is refused, and a store
// given neither, or only Now, keeps no clock.
func TestOptionsClock(t *testing.T) {
	clk := driver.NewSimClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	s := install(t, dbPath(t), sqlitestore.Options{Clock: clk})
	if s.Clock() != driver.Clock(clk) || !s.Now().Equal(clk.Now()) {
		t.Fatalf("the store keeps %v and reads %v, want the clock given", s.Clock(), s.Now())
	}
	if bare := install(t, dbPath(t), sqlitestore.Options{Now: clk.Now}); bare.Clock() != nil {
		t.Fatalf("a store given only Now keeps the clock %v", bare.Clock())
	}
	if _, err := sqlitestore.Install(context.Background(), dbPath(t), sqlitestore.Options{Registry: registry(t), Now: time.Now, Clock: clk}); err == nil {
		t.Fatal("Options.Now and Options.Clock both set: no error")
	}
}
