package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// storeEvent is the payload of the store benchmarks: two indexed
// attributes, one shared by many messages (the partition) and one unique to
// each message.
type storeEvent struct {
	Account string `json:"account"`
	Ref     string `json:"ref"`
}

const storeEventType = "bench.store_event"

// storeAccounts is how many distinct accounts the appends cycle through.
const storeAccounts = 100

func storeRegistry(b *testing.B) *codec.Registry {
	b.Helper()
	reg := codec.NewRegistry()
	if err := codec.Register[storeEvent](reg, storeEventType); err != nil {
		b.Fatal(err)
	}
	return reg
}

// storeOpen installs a store in a fresh file database (WAL).
func storeOpen(b *testing.B) *sqlitestore.Store {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlitestore.Install(context.Background(), path, sqlitestore.Options{Registry: storeRegistry(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func storeAccount(i int) string { return "acct-" + strconv.Itoa(i%storeAccounts) }

// storeBatch builds n messages starting at sequence number seq.
func storeBatch(dst []core.Message, seq, n int, accounts int) []core.Message {
	dst = dst[:0]
	for i := range n {
		k := seq + i
		dst = append(dst, core.Message{Payload: storeEvent{
			Account: "acct-" + strconv.Itoa(k%accounts),
			Ref:     "ref-" + strconv.Itoa(k),
		}})
	}
	return dst
}

// BenchmarkAppend appends batches of messages (one transaction per batch)
// to a file database in WAL mode and reports messages per second; the
// log=N sub-benchmarks append single messages to a log of N messages
// (scaling_test.go), for the rate's dependence on the log's size; with
// SOURCED_TEST_POSTGRES_URL set, also to PostgreSQL (store=postgres/...).
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) { appendLoop(b, storeOpen(b), batch) })
	}
	for _, n := range scalingLogs {
		b.Run(logName(n), func(b *testing.B) { appendScaling(b, n) })
	}
	for _, batch := range []int{1, 100} {
		onPostgres(b, "batch="+strconv.Itoa(batch), func(b *testing.B, url string) { appendLoop(b, pgOpen(b, url, storeRegistry(b)), batch) })
	}
}

// appendLoop appends batches of batch messages to s until the benchmark
// ends and reports msgs/s.
func appendLoop(b *testing.B, s shell.Store, batch int) {
	ctx := context.Background()
	msgs := make([]core.Message, 0, batch)
	seq := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		msgs = storeBatch(msgs, seq, batch, storeAccounts)
		seq += batch
		if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkAppendGuarded appends single messages, each guarded by a
// condition on its partition (the account), as a decider does.
func BenchmarkAppendGuarded(b *testing.B) { appendGuardedLoop(b, storeOpen(b)) }

// appendGuardedLoop appends single guarded messages to s until the
// benchmark ends and reports msgs/s.
func appendGuardedLoop(b *testing.B, s shell.Store) {
	ctx := context.Background()
	var last int64
	msgs := make([]core.Message, 0, 1)
	seq := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		msgs = storeBatch(msgs, seq, 1, storeAccounts)
		seq++
		g := core.Guard{
			Conditions:   []core.Condition{{Type: storeEventType, Attrs: map[string]string{"account": storeAccount(seq - 1)}}},
			LastPosition: last,
		}
		res, err := s.Append(ctx, msgs, shell.AppendOptions{Guard: &g})
		if err != nil {
			b.Fatal(err)
		}
		last = res.Last
	}
	b.ReportMetric(float64(seq)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkReadPartition reads one 100-message partition out of logs of
// 10,000 and one million messages (accounts of 100 messages each, spread
// over the whole log; every message also carries a unique attribute). Each
// log is built once per process, with set-based SQL in one transaction
// (storeBulkLog), which writes what that many appends would: rows, key
// pairs and links (see scaling_test.go).
func BenchmarkReadPartition(b *testing.B) {
	for _, n := range scalingLogs {
		b.Run(logName(n), func(b *testing.B) { readPartitionScaling(b, n) })
	}
}

// storeBulkLog fills a store with n storeEvent messages (account
// acct-<i mod accounts>, ref ref-<i>) in one transaction, with set-based
// SQL run on the transaction's connection (sqlitestore.TxContext): the
// rows, key pairs and links a million appends would write. The secondary
// indexes are dropped for the load and rebuilt from their own CREATE INDEX
// text afterwards (one sorted pass each).
func storeBulkLog(ctx context.Context, s *sqlitestore.Store, n, accounts int) error {
	p := s.Prefix()
	return s.Update(ctx, func(tx shell.Tx) error {
		conn := tx.Context().(*sqlitestore.TxContext).Conn()
		exec := func(sql string, args ...any) error {
			if err := sqlitex.ExecuteTransient(conn, sql, &sqlitex.ExecOptions{Args: args}); err != nil {
				return fmt.Errorf("%s: %w", sql, err)
			}
			return nil
		}
		// Rows inserted by one INSERT ... SELECT get consecutive ids: find
		// where each range starts.
		first := func(sql string, args ...any) (int64, error) {
			var v int64
			err := sqlitex.ExecuteTransient(conn, sql, &sqlitex.ExecOptions{
				Args:       args,
				ResultFunc: func(stmt *sqlite.Stmt) error { v = stmt.ColumnInt64(0); return nil },
			})
			return v, err
		}
		var drops, creates []string
		err := sqlitex.ExecuteTransient(conn, `SELECT name, sql FROM sqlite_schema
			WHERE type = 'index' AND sql IS NOT NULL AND tbl_name LIKE ?1 ESCAPE '\'`, &sqlitex.ExecOptions{
			Args: []any{strings.ReplaceAll(p, "_", `\_`) + `\_%`},
			ResultFunc: func(stmt *sqlite.Stmt) error {
				drops = append(drops, `DROP INDEX "`+stmt.ColumnText(0)+`"`)
				creates = append(creates, stmt.ColumnText(1))
				return nil
			},
		})
		if err != nil {
			return err
		}
		for _, q := range drops {
			if err := exec(q); err != nil {
				return err
			}
		}
		if err := exec(`CREATE TEMP TABLE seq (n INTEGER PRIMARY KEY)`); err != nil {
			return err
		}
		if err := exec(`WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < ?1 - 1) INSERT INTO temp.seq SELECT n FROM c`, n); err != nil {
			return err
		}
		next := `SELECT coalesce(max(%s), 0) + 1 FROM ` + p + `_%s`
		posBase, err := first(fmt.Sprintf(next, "position", "messages"))
		if err != nil {
			return err
		}
		err = exec(`INSERT INTO `+p+`_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, created_at)
			SELECT id, ?1, 1, id, id, json_object('account', 'acct-' || (n % ?2), 'ref', 'ref-' || n), '2025-01-01T00:00:00.000000Z'
			FROM (SELECT n, printf('00000000-0000-7000-8000-%012x', n) AS id FROM temp.seq ORDER BY n)`, storeEventType, accounts)
		if err != nil {
			return err
		}
		acctBase, err := first(fmt.Sprintf(next, "id", "key_pairs"))
		if err != nil {
			return err
		}
		if err := exec(`INSERT INTO `+p+`_key_pairs (name, value) SELECT 'account', 'acct-' || n FROM temp.seq WHERE n < ?1 ORDER BY n`, accounts); err != nil {
			return err
		}
		refBase := acctBase + int64(accounts)
		if err := exec(`INSERT INTO ` + p + `_key_pairs (name, value) SELECT 'ref', 'ref-' || n FROM temp.seq ORDER BY n`); err != nil {
			return err
		}
		err = exec(`INSERT INTO `+p+`_message_key_pairs (message_position, key_pair_id)
			SELECT ?1 + n, k FROM (SELECT n, ?2 + n % ?3 AS k FROM temp.seq UNION ALL SELECT n, ?4 + n FROM temp.seq) ORDER BY n, k`,
			posBase, acctBase, accounts, refBase)
		if err != nil {
			return err
		}
		if err := exec(`DROP TABLE temp.seq`); err != nil {
			return err
		}
		for _, q := range creates {
			if err := exec(q); err != nil {
				return err
			}
		}
		return nil
	})
}
