package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The claim benchmarks run against a consumer group partitioned by account
// (handling storeEventType) over a file database in WAL mode, each in two
// planner states: stats=none (no ANALYZE since the store was installed
// empty: Install does not analyze empty tables) and stats=fresh (Optimize
// after the set-up).

const claimGroup = "bench.accounts"

var claimStats = []string{"none", "fresh"}

// claimStore installs a store, registers the group and fills it with one
// message in each of partitions accounts, with set-based SQL in one
// transaction (what as many appends would write: the rows, the account key
// pairs and links, one offset per account linked to its key pair). The
// offsets are caught up when caughtUp, else pending at their message.
func claimStore(b *testing.B, partitions int, caughtUp bool, stats string) *sqlitestore.Store {
	b.Helper()
	s := storeOpen(b)
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: claimGroup, PartitionBy: []string{"account"}, Handled: []string{storeEventType}}); err != nil {
		b.Fatal(err)
	}
	p := s.Prefix()
	err := s.Update(ctx, func(tx shell.Tx) error {
		conn := tx.Context().(*sqlitestore.TxContext).Conn()
		exec := func(sql string, args ...any) error {
			if err := sqlitex.ExecuteTransient(conn, sql, &sqlitex.ExecOptions{Args: args}); err != nil {
				return fmt.Errorf("%s: %w", sql, err)
			}
			return nil
		}
		one := func(sql string, args ...any) (int64, error) {
			var v int64
			err := sqlitex.ExecuteTransient(conn, sql, &sqlitex.ExecOptions{
				Args:       args,
				ResultFunc: func(stmt *sqlite.Stmt) error { v = stmt.ColumnInt64(0); return nil },
			})
			return v, err
		}
		group, err := one(`SELECT id FROM `+p+`_consumer_groups WHERE group_id = ?1`, claimGroup)
		if err != nil {
			return err
		}
		if err := exec(`CREATE TEMP TABLE seq (n INTEGER PRIMARY KEY)`); err != nil {
			return err
		}
		if err := exec(`WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < ?1 - 1) INSERT INTO temp.seq SELECT n FROM c`, partitions); err != nil {
			return err
		}
		posBase, err := one(`SELECT coalesce(max(position), 0) + 1 FROM ` + p + `_messages`)
		if err != nil {
			return err
		}
		err = exec(`INSERT INTO `+p+`_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, created_at)
			SELECT id, ?1, 1, id, id, json_object('account', 'acct-' || n, 'ref', 'ref-' || n), '2025-01-01T00:00:00.000000Z'
			FROM (SELECT n, printf('00000000-0000-7000-8000-%012x', n) AS id FROM temp.seq ORDER BY n)`, storeEventType)
		if err != nil {
			return err
		}
		kpBase, err := one(`SELECT coalesce(max(id), 0) + 1 FROM ` + p + `_key_pairs`)
		if err != nil {
			return err
		}
		if err := exec(`INSERT INTO ` + p + `_key_pairs (name, value) SELECT 'account', 'acct-' || n FROM temp.seq ORDER BY n`); err != nil {
			return err
		}
		if err := exec(`INSERT INTO `+p+`_message_key_pairs (message_position, key_pair_id) SELECT ?1 + n, ?2 + n FROM temp.seq ORDER BY n`, posBase, kpBase); err != nil {
			return err
		}
		offBase, err := one(`SELECT coalesce(max(id), 0) + 1 FROM ` + p + `_offsets`)
		if err != nil {
			return err
		}
		// The partition key is the JSON array of [name, value] pairs.
		err = exec(`INSERT INTO `+p+`_offsets (consumer_group_id, partition_key, last_position, next_position)
			SELECT ?1, json_array(json_array('account', 'acct-' || n)), CASE WHEN ?2 THEN ?3 + n ELSE 0 END, CASE WHEN ?2 THEN NULL ELSE ?3 + n END
			FROM temp.seq ORDER BY n`, group, caughtUp, posBase)
		if err != nil {
			return err
		}
		if err := exec(`INSERT INTO `+p+`_offset_key_pairs (offset_id, key_pair_id) SELECT ?1 + n, ?2 + n FROM temp.seq ORDER BY n`, offBase, kpBase); err != nil {
			return err
		}
		if caughtUp {
			if err := exec(`UPDATE `+p+`_consumer_groups SET highest_position = ?1 WHERE id = ?2`, posBase+int64(partitions)-1, group); err != nil {
				return err
			}
		}
		return exec(`DROP TABLE temp.seq`)
	})
	if err != nil {
		b.Fatal(err)
	}
	if stats == "fresh" {
		if err := s.Optimize(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// claimNothing fails b unless the group has nothing to claim.
func claimNothing(b *testing.B, s *sqlitestore.Store) {
	c, err := s.ClaimNext(context.Background(), claimGroup, "w1", 10)
	if err != nil || c != nil {
		b.Fatalf("claim: %v, %v; want nothing", c, err)
	}
}

// BenchmarkClaimIdle polls a group whose partitions are all caught up and
// which latched after its one empty scan: ns per ClaimNext.
func BenchmarkClaimIdle(b *testing.B) {
	for _, n := range []int{5000, 100_000} {
		b.Run("partitions="+strconv.Itoa(n), func(b *testing.B) {
			for _, stats := range claimStats {
				b.Run("stats="+stats, func(b *testing.B) {
					s := claimStore(b, n, true, stats)
					claimNothing(b, s) // the scan that latches
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						claimNothing(b, s)
					}
				})
			}
		})
	}
}

// BenchmarkClaimDirtyScan makes the group's latch dirty (a raw UPDATE of
// the latch, committed, outside the timer), then times the one ClaimNext
// that scans, finds nothing and latches again: ns/op.
func BenchmarkClaimDirtyScan(b *testing.B) {
	for _, n := range []int{5000, 100_000} {
		b.Run("partitions="+strconv.Itoa(n), func(b *testing.B) {
			for _, stats := range claimStats {
				b.Run("stats="+stats, func(b *testing.B) {
					s := claimStore(b, n, true, stats)
					ctx := context.Background()
					dirty := `UPDATE ` + s.Prefix() + `_consumer_groups SET scan_version = abs(scan_version) + 1 WHERE group_id = ?1`
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						b.StopTimer()
						err := s.Update(ctx, func(tx shell.Tx) error {
							conn := tx.Context().(*sqlitestore.TxContext).Conn()
							return sqlitex.Execute(conn, dirty, &sqlitex.ExecOptions{Args: []any{claimGroup}})
						})
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						claimNothing(b, s)
					}
				})
			}
		})
	}
}

// BenchmarkClaimAck claims and acks, one batch at a time, a group with one
// pending message in each of 10,000 partitions (when all are processed,
// each gets another message, outside the timer): claim+ack pairs per
// second. With SOURCED_TEST_POSTGRES_URL set, also on PostgreSQL
// (store=postgres: the same group and messages, appended, then ANALYZE).
func BenchmarkClaimAck(b *testing.B) {
	const partitions = 10_000
	for _, stats := range claimStats {
		b.Run("stats="+stats, func(b *testing.B) {
			s := claimStore(b, partitions, false, stats)
			claimAckLoop(b, s, partitions, 1)
		})
	}
	onPostgres(b, "", func(b *testing.B, url string) {
		s := pgOpen(b, url, storeRegistry(b))
		ctx := context.Background()
		if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: claimGroup, PartitionBy: []string{"account"}, Handled: []string{storeEventType}}); err != nil {
			b.Fatal(err)
		}
		claimRefill(b, s, partitions, 0)
		if err := s.Optimize(ctx); err != nil {
			b.Fatal(err)
		}
		claimAckLoop(b, s, partitions, 1)
	})
}

// claimRefill appends one message to each of the partitions accounts.
func claimRefill(b *testing.B, s shell.Store, partitions, round int) {
	msgs := make([]core.Message, 0, 5000)
	for i := range partitions {
		msgs = append(msgs, core.Message{Payload: storeEvent{Account: "acct-" + strconv.Itoa(i), Ref: "round-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)}})
		if len(msgs) == cap(msgs) || i == partitions-1 {
			if _, err := s.Append(context.Background(), msgs, shell.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// claimAckLoop claims and acks batches of claimGroup in s until the
// benchmark ends, refilling the partitions (round by round from round)
// when nothing is left to claim, and reports claims/s.
func claimAckLoop(b *testing.B, s shell.Store, partitions, round int) {
	ctx := context.Background()
	claims := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, err := s.ClaimNext(ctx, claimGroup, "w1", 10)
		if err != nil {
			b.Fatal(err)
		}
		if c == nil {
			b.StopTimer()
			claimRefill(b, s, partitions, round)
			round++
			b.StartTimer()
			if c, err = s.ClaimNext(ctx, claimGroup, "w1", 10); err != nil || c == nil {
				b.Fatalf("claim after a refill: %v, %v", c, err)
			}
		}
		if err := s.Ack(ctx, c, c.Last()); err != nil {
			b.Fatal(err)
		}
		claims++
	}
	b.ReportMetric(float64(claims)/b.Elapsed().Seconds(), "claims/s")
}
