package sqlitestore

import (
	"strconv"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
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
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "a0", Ref: "r0", User: "u0"}), core.NewMessage(other{N: 0})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	total, batch := 100_000, 5_000
	if testing.Short() {
		total = 20_000 // still past the statistics floor
	}
	for n := 2; n < total; n += batch {
		msgs := make([]core.Message, 0, batch)
		for i := n; i < min(n+batch, total); i++ {
			if i%2 == 0 {
				msgs = append(msgs, core.NewMessage(ev{Account: "a" + strconv.Itoa(i%1000), Ref: "r" + strconv.Itoa(i), User: "u" + strconv.Itoa(i%7)}))
			} else {
				msgs = append(msgs, core.NewMessage(other{N: i}))
			}
		}
		if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.MaxPosition != int64(total) {
		t.Fatalf("last position %d (%v), want %d", st.MaxPosition, err, total)
	}

	n := s.names
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
