package sqlitestore

import (
	"strconv"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// A store analysed when its log is near-empty (a runtime's first
// refresh, at start), then filled to 100,000 messages, still reads a
// partition through the key index and fetches each message by its
// position: O(partition), not a scan of the log per message. The
// statistics of a near-empty log are not kept (Optimize), so neither the
// connection that took them nor one opened since plans on them. (Before,
// the partition reads planned "SCAN m" once ANALYZE had recorded one-row
// tables.)
func TestPlansAfterANearEmptyLogIsAnalysed(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "a0", Ref: "r0", User: "u0"}), core.NewMessage(other{N: 0})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	// Filled in SQL, as appends would index it (test.ev messages under
	// their account, 1,000 partitions), so that the test stays fast; under
	// the race detector (SQLite 20 times slower) to 20,000 messages, still
	// past the statistics floor.
	total := 100_000
	if underRace || testing.Short() {
		total = 20_000
	}
	n := s.names
	fill := []string{
		`WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 999)
INSERT INTO ` + n.keyPairs + ` (name, value) SELECT 'account', 'a' || x FROM c WHERE true ON CONFLICT (name, value) DO NOTHING`,
		`WITH RECURSIVE c(x) AS (SELECT 3 UNION ALL SELECT x + 1 FROM c WHERE x < ` + strconv.Itoa(total) + `)
INSERT INTO ` + n.messages + ` (message_id, message_type, payload, created_at)
SELECT 'fill-' || x, CASE WHEN x % 2 = 0 THEN 'test.ev' ELSE 'test.other' END, '{}', '2025-01-01T00:00:00.000000Z' FROM c`,
		`INSERT INTO ` + n.messageKeyPairs + ` (message_position, key_pair_id)
SELECT m.position, k.id FROM ` + n.messages + ` m JOIN ` + n.keyPairs + ` k ON k.name = 'account' AND k.value = 'a' || (m.position % 1000)
WHERE m.message_id LIKE 'fill-%' AND m.message_type = 'test.ev'`,
	}
	err := s.Update(ctx, func(tx driver.Tx) error {
		conn, err := Conn(tx)
		if err != nil {
			return err
		}
		for _, q := range fill {
			if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx); err != nil || st.MaxPosition != int64(total) {
		t.Fatalf("last position %d (%v), want %d", st.MaxPosition, err, total)
	}

	keyIndex := "USING COVERING INDEX idx_" + n.prefix + "_message_key_pairs_key (key_pair_id=? AND message_position>? AND message_position<?)"
	cases := []struct {
		name string
		sh   shape
		want []string
	}{
		{"partition of one attribute", shape{kind: shapeKeys, attrs: 1, types: 2}, []string{"SEARCH l1 " + keyIndex, "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"condition of two attributes", shape{kind: shapeKeys, attrs: 2, types: 1}, []string{"SEARCH l1 " + keyIndex, "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"partition of two attributes", shape{kind: shapePartition, attrs: 2, types: 2}, []string{"SEARCH l " + keyIndex, "SEARCH m USING "}},
		{"pending marker", shape{kind: shapeWake, attrs: 1, types: 1}, []string{"SEARCH l1 " + keyIndex, "SEARCH m USING "}},
	}
	check := func(t *testing.T, conn *sqlite.Conn) {
		for _, tc := range cases {
			plan := explainOn(t, conn, s.q.get(tc.sh))
			for _, want := range tc.want {
				if !strings.Contains(plan, want) {
					t.Errorf("%s: plan lacks %q:\n%s", tc.name, want, plan)
				}
			}
			for _, bad := range []string{"SCAN m\n", "SCAN m ", "SCAN l", "SCAN " + n.messages} {
				if strings.Contains(plan, bad) {
					t.Errorf("%s: plan scans (%q):\n%s", tc.name, strings.TrimSpace(bad), plan)
				}
			}
		}
	}
	t.Run("the connection that analysed", func(t *testing.T) {
		w := <-s.writer
		defer func() { s.writer <- w }()
		check(t, w.conn)
	})
	t.Run("a connection opened since", func(t *testing.T) {
		if err := s.withReader(ctx, func(conn *sqlite.Conn) error { check(t, conn); return nil }); err != nil {
			t.Fatal(err)
		}
	})
}

// explainOn returns the query plan of query on conn, one line per step.
func explainOn(t *testing.T, conn *sqlite.Conn, query string) string {
	t.Helper()
	stmt, _, err := conn.PrepareTransient("EXPLAIN QUERY PLAN " + query)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer stmt.Finalize()
	var b strings.Builder
	for {
		has, err := stmt.Step()
		if err != nil {
			t.Fatalf("explain %s: %v", query, err)
		}
		if !has {
			return b.String()
		}
		b.WriteString(stmt.ColumnText(3))
		b.WriteByte('\n')
	}
}
