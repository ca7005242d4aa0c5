package sqlitestore_test

import (
	"testing"

	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// ClaimMany keeps ClaimNext's latch: the scan that finds nothing latches
// the group clean, and an append makes it dirty again.
func TestClaimManyLatches(t *testing.T) {
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	register(t, s, enrolments)
	appendOK(t, s, userJoined{"Algebra", "joe"}, userJoined{"Algebra", "ann"}, userJoined{"Logic", "joe"})
	latch := func() int64 {
		return rawInt(t, path, `SELECT scan_version FROM sourced_consumer_groups WHERE group_id = ?1`, enrolments.ID)
	}
	many := func(n int) []*driver.ClaimedPartition {
		var out []*driver.ClaimedPartition
		err := s.Update(t.Context(), func(tx driver.Tx) error {
			var err error
			out, err = tx.(driver.ClaimManyTx).ClaimMany(enrolments.ID, "w1", 10, n)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := many(2); len(got) != 2 {
		t.Fatalf("%d claims, want 2", len(got))
	}
	if got := many(2); len(got) != 1 {
		t.Fatalf("%d claims, want the third partition", len(got))
	}
	if latch() < 0 {
		t.Fatal("latched clean by scans that found work")
	}
	if got := many(2); len(got) != 0 {
		t.Fatalf("%d claims of held partitions", len(got))
	}
	clean := latch()
	if clean >= 0 {
		t.Fatalf("latch %d after an empty ClaimMany, want clean (< 0)", clean)
	}
	if got := many(2); len(got) != 0 || latch() != clean {
		t.Fatalf("a latched ClaimMany: %d claims, latch %d (was %d)", len(got), latch(), clean)
	}
	appendOK(t, s, userJoined{"Logic", "ann"})
	if latch() < 0 {
		t.Fatal("still latched after an append")
	}
	if got := many(2); len(got) != 1 {
		t.Fatalf("%d claims after the append, want the new partition", len(got))
	}
}
