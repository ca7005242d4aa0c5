package sqlitestore

import (
	"strconv"
	"testing"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"
)

// benchGroupStore is a store with one group partitioned by account and n
// caught-up offsets (rows only: enough for the scan and the latch).
func benchGroupStore(b *testing.B, n int, analyze bool) *Store {
	b.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[ev](reg, "test.ev")
	s, err := Install(b.Context(), b.TempDir()+"/bench.db", Options{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.RegisterGroup(b.Context(), driver.GroupSpec{ID: "test.accounts", PartitionBy: []string{"account"}, Handled: []string{"test.ev"}}); err != nil {
		b.Fatal(err)
	}
	err = s.Update(b.Context(), func(stx driver.Tx) error {
		_, err := exec(stx.(*tx).conn, `WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < ?1 - 1)
INSERT INTO sourced_offsets (consumer_group_id, partition_key, last_position) SELECT 1, json_array(json_array('account', 'a' || n)), n + 1 FROM c`,
			func(stmt *sqlite.Stmt) { stmt.BindInt64(1, int64(n)) })
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if analyze {
		if err := s.Optimize(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkScanStatement times the claim scan statement alone (on the
// writer, in a transaction) over caught-up groups: the "bare probe" of the
// pending-marker design.
func BenchmarkScanStatement(b *testing.B) {
	for _, n := range []int{5000, 100_000} {
		for _, analyze := range []bool{false, true} {
			b.Run("partitions="+strconv.Itoa(n)+"/analyzed="+strconv.FormatBool(analyze), func(b *testing.B) {
				s := benchGroupStore(b, n, analyze)
				err := s.Update(b.Context(), func(stx driver.Tx) error {
					t := stx.(*tx)
					for b.Loop() {
						found := false
						if err := t.w.rows(s.q.g.scan, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, 1) }, func(*sqlite.Stmt) { found = true }); err != nil {
							return err
						}
						if found {
							b.Fatal("the scan found work")
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkLatchedClaimUncached times ClaimNext of a latched group with
// the idle-claim cache off: the writer's transaction reading the latch.
func BenchmarkLatchedClaimUncached(b *testing.B) {
	s := benchGroupStore(b, 5000, true)
	s.noIdleCache = true
	for b.Loop() {
		if c, err := s.ClaimNext(b.Context(), "test.accounts", "w1", 10); c != nil || err != nil {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkCommitFloor times the cheapest write transactions on this
// machine: an empty one, and one updating a group's row.
func BenchmarkCommitFloor(b *testing.B) {
	s := benchGroupStore(b, 10, false)
	b.Run("empty", func(b *testing.B) {
		for b.Loop() {
			if err := s.Update(b.Context(), func(driver.Tx) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-row", func(b *testing.B) {
		for b.Loop() {
			err := s.Update(b.Context(), func(stx driver.Tx) error {
				_, err := exec(stx.(*tx).conn, s.q.g.dirty, func(stmt *sqlite.Stmt) { stmt.BindInt64(1, 1) })
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
