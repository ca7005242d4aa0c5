package sqlitestore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// groupTestStore is a store with a group partitioned by account (handling
// test.ev), one partitioned by (account, user), and a queue of test.other,
// holding caught-up and pending partitions of each.
func groupTestStore(t *testing.T, partitions int) *Store {
	t.Helper()
	ctx := t.Context()
	s := newTestStore(t, Options{})
	for _, spec := range []driver.GroupSpec{
		{ID: "test.accounts", PartitionBy: []string{"account"}, Handled: []string{"test.ev"}},
		{ID: "test.users", PartitionBy: []string{"account", "user"}, Handled: []string{"test.ev"}},
		{ID: "test.queue", Exclusive: true, Handled: []string{"test.other"}},
	} {
		if err := s.RegisterGroup(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []core.Message
	for i := range partitions {
		msgs = append(msgs, core.NewMessage(ev{Account: "a" + strconv.Itoa(i), Ref: "r" + strconv.Itoa(i), User: "u" + strconv.Itoa(i%7)}))
		msgs = append(msgs, core.NewMessage(other{N: i}))
	}
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// Catch most partitions up.
	for _, g := range []string{"test.accounts", "test.users", "test.queue"} {
		for range partitions * 9 / 10 {
			c, err := s.ClaimNext(ctx, g, "w1", 10)
			if err != nil || c == nil {
				t.Fatalf("claim %s: %v, %v", g, c, err)
			}
			if err := s.Ack(ctx, c, c.Last()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// The claim scan, the pending-marker probes and every other consumer-group
// statement are index-backed, with no statistics (a new store: Install
// does not analyze empty tables) and with fresh ones.
func TestGroupQueryPlans(t *testing.T) {
	s := groupTestStore(t, 100)
	n := s.names
	idx := func(name string) string { return "idx_" + n.prefix + "_" + name }
	q := s.q.g
	cases := []struct {
		name  string
		query string
		want  []string // substrings of the plan
	}{
		{"claim scan", q.scan, []string{"SEARCH " + n.offsets + " USING INDEX " + idx("offsets_pending") + " (consumer_group_id=?)"}},
		{"claim scan of ClaimMany", q.scanMany, []string{"SEARCH " + n.offsets + " USING INDEX " + idx("offsets_pending") + " (consumer_group_id=?)"}},
		{"pending marker, one attribute", s.q.get(shape{kind: shapeWake, attrs: 1, types: 1}),
			[]string{"SEARCH l1 USING COVERING INDEX " + idx("message_key_pairs_key") + " (key_pair_id=? AND message_position>? AND message_position<?)", "SEARCH m USING "}},
		{"pending marker, two attributes", s.q.get(shape{kind: shapeWake, attrs: 2, types: 2}),
			[]string{"SEARCH l1 USING COVERING INDEX " + idx("message_key_pairs_key"), "SEARCH l2 USING", "SEARCH m USING "}},
		{"eager wake", q.wake, []string{"SEARCH " + n.offsets + " USING INDEX " + idx("offsets_partition") + " (consumer_group_id=? AND partition_key=?)"}},
		{"offset by partition", q.offsetByKey, []string{"USING INDEX " + idx("offsets_partition")}},
		{"claim", q.claim, []string{"USING INTEGER PRIMARY KEY"}},
		{"held", q.held, []string{"USING INTEGER PRIMARY KEY"}},
		{"ack", q.ack, []string{"USING INTEGER PRIMARY KEY"}},
		{"offset keys", q.offsetKeys, []string{"USING PRIMARY KEY (offset_id=?)"}},
		{"offsets waiting on a message", q.offsetsAtNext, []string{"USING INDEX " + idx("offsets_next")}},
		{"offsets to check for draining", q.drainable, []string{"USING INDEX " + idx("offsets_drain")}},
		{"stale claims", q.releaseStale, []string{"USING INDEX " + idx("offsets_claimed")}},
		{"old claims", q.oldClaims, []string{"USING INDEX " + idx("offsets_claimed")}},
		{"release old claims", q.releaseOld, []string{"USING INDEX " + idx("offsets_claimed")}},
		{"remove worker", q.removeWorker, []string{"USING"}},
		{"flag drained", q.flagDrain, []string{"USING PRIMARY KEY (message_position=?)", "USING COVERING INDEX " + idx("offset_key_pairs_key")}},
		{"prune", q.prune, []string{"USING COVERING INDEX " + idx("message_key_pairs_key"), "USING COVERING INDEX " + idx("offset_key_pairs_key")}},
		{"group state", q.groupState, []string{"USING INTEGER PRIMARY KEY"}},
		{"group by name", q.groupByName, []string{"USING COVERING INDEX " + idx("consumer_groups_id")}},
		{"read group offsets", q.readGroupOffsets, []string{"SEARCH o USING INDEX " + idx("offsets_group") + " (consumer_group_id=? AND rowid>?)"}},
		{"read offsets", q.readOffsets, []string{"SEARCH o USING INTEGER PRIMARY KEY (rowid>?)"}},
		{"group figures", q.groupInfo, []string{"SEARCH g USING INDEX " + idx("consumer_groups_id") + " (group_id=?)", "SEARCH o USING INDEX " + idx("offsets_group") + " (consumer_group_id=?)"}},
	}
	check := func(t *testing.T) {
		for _, tc := range cases {
			plan := explain(t, s, tc.query)
			for _, want := range tc.want {
				if !strings.Contains(plan, want) {
					t.Errorf("%s: plan lacks %q:\n%s", tc.name, want, plan)
				}
			}
			// A SCAN of a partial index reads only its few rows: fine.
			for _, bad := range []string{"SCAN " + n.offsets, "SCAN " + n.messages, "SCAN m", "SCAN l", "SCAN o", "TEMP B-TREE"} {
				if strings.Contains(plan, bad+"\n") || strings.Contains(plan, bad+" ") && !strings.Contains(plan, bad+" USING INDEX") {
					t.Errorf("%s: plan has %q:\n%s", tc.name, bad, plan)
				}
			}
		}
	}
	t.Run("no statistics", func(t *testing.T) {
		if stats := statRows(t, s); stats != 0 {
			t.Fatalf("%d rows in sqlite_stat1 before any ANALYZE", stats)
		}
		check(t)
	})
	t.Run("fresh statistics", func(t *testing.T) {
		s.statsFloor = 0 // keep the statistics of these small tables
		if err := s.Optimize(t.Context()); err != nil {
			t.Fatal(err)
		}
		if stats := statRows(t, s); stats == 0 {
			t.Fatal("no rows in sqlite_stat1 after Optimize")
		}
		check(t)
	})
}

func statRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	err := s.withReader(t.Context(), func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteTransient(conn, `SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'`, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { n = stmt.ColumnInt(0); return nil },
		})
	})
	if err != nil || n == 0 {
		return 0
	}
	err = s.withReader(t.Context(), func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteTransient(conn, `SELECT count(*) FROM sqlite_stat1`, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { n = stmt.ColumnInt(0); return nil },
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pendingMarkers checks that every offset's pending marker is what it
// recomputes to.
func pendingMarkers(t *testing.T, s *Store) {
	t.Helper()
	err := s.update(t.Context(), false, func(stx driver.Tx) error {
		tx := stx.(*tx)
		type off struct{ id, group, last, next int64 }
		var offs []off
		err := queryRows(tx.conn, fmt.Sprintf(`SELECT id, consumer_group_id, last_position, coalesce(next_position, 0) FROM %s`, s.names.offsets), nil, func(stmt *sqlite.Stmt) {
			offs = append(offs, off{stmt.ColumnInt64(0), stmt.ColumnInt64(1), stmt.ColumnInt64(2), stmt.ColumnInt64(3)})
		})
		if err != nil {
			return err
		}
		for _, o := range offs {
			kps, err := tx.offsetKeys(o.id)
			if err != nil {
				return err
			}
			want, err := tx.wakeAfter(tx.gs.byRow[o.group], kps, o.last)
			if err != nil {
				return err
			}
			if o.next != want {
				t.Errorf("offset %d at %d: pending marker %d, want %d", o.id, o.last, o.next, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The pending markers stay exact through appends, claims, acks, partial
// acks, releases, advances, deletes, resets and late registration.
func TestPendingMarkersStayExact(t *testing.T) {
	ctx := context.Background()
	s := groupTestStore(t, 40)
	pendingMarkers(t, s)
	// Partial acks and releases.
	for range 5 {
		c, err := s.ClaimNext(ctx, "test.users", "w1", 1)
		if err != nil || c == nil {
			t.Fatal(c, err)
		}
		if err := s.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	var more []core.Message
	for i := range 30 {
		more = append(more, core.NewMessage(ev{Account: "a" + strconv.Itoa(i%3), Ref: "x" + strconv.Itoa(i), User: "u" + strconv.Itoa(i%2)}))
	}
	res, err := s.Append(ctx, more, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pendingMarkers(t, s)
	for {
		c, err := s.ClaimNext(ctx, "test.accounts", "w1", 3)
		if err != nil || c == nil {
			t.Fatal(c, err)
		}
		if len(c.Messages) > 1 { // a partial ack
			if err := s.Ack(ctx, c, c.Messages[1].Position); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err := s.Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
	}
	pendingMarkers(t, s)
	// Deletes of pending messages, advances.
	err = s.Update(ctx, func(tx driver.Tx) error {
		if err := tx.Delete(res.Positions[0], res.Positions[5], res.Positions[7]); err != nil {
			return err
		}
		_, err := tx.AdvanceOffset("test.accounts", map[string]string{"account": "a2"}, res.Positions[10])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pendingMarkers(t, s)
	if err := s.StopGroup(ctx, "test.users", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetGroup(ctx, "test.users"); err != nil {
		t.Fatal(err)
	}
	pendingMarkers(t, s)
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "test.late", PartitionBy: []string{"user"}, Handled: []string{"test.ev"}}); err != nil {
		t.Fatal(err)
	}
	pendingMarkers(t, s)
}

// The benchmarks build offsets with SQLite's json_array: for plain values
// it writes the same text as partitionKey.
func TestPartitionKeyMatchesJSONArray(t *testing.T) {
	s := newTestStore(t, Options{})
	var got string
	err := s.withReader(t.Context(), func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteTransient(conn, `SELECT json_array(json_array('account', 'acct-1'), json_array('user', 'u 2'))`, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { got = stmt.ColumnText(0); return nil },
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := string(partitionKey(nil, []string{"account", "user"}, []string{"acct-1", "u 2"})); got != want {
		t.Fatalf("json_array gives %s, partitionKey %s", got, want)
	}
	p, err := parsePartition(got)
	if err != nil || p["account"] != "acct-1" || p["user"] != "u 2" || len(p) != 2 {
		t.Fatalf("parse %s: %v, %v", got, p, err)
	}
}

// A store on a private in-memory database claims, latches and sees its own
// appends.
func TestMemoryStoreGroups(t *testing.T) {
	reg := codec.NewRegistry()
	codec.MustRegister[ev](reg, "test.ev")
	s, err := Install(t.Context(), ":memory:", Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "test.accounts", PartitionBy: []string{"account"}, Handled: []string{"test.ev"}}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if _, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "a", Ref: strconv.Itoa(round)})}, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		c, err := s.ClaimNext(ctx, "test.accounts", "w1", 10)
		if err != nil || c == nil || len(c.Messages) != 1 {
			t.Fatalf("round %d: claim %v, %v", round, c, err)
		}
		if err := s.Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if c, err := s.ClaimNext(ctx, "test.accounts", "w1", 10); c != nil || err != nil {
				t.Fatalf("round %d: idle claim %v, %v", round, c, err)
			}
		}
	}
}
