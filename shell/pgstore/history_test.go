package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestKeyedLookupsReadNoHistory: what a lookup by key pairs after a
// position reads of the log grows with the messages after the position,
// not with the partition's history. Through the GIN index of key pairs
// every such lookup (a claim's fetch, a partition read after a position,
// a read of conditions after one, an offset's move past a command) read
// every message the partition ever had: 2,000 rows each for a partition
// 2,000 messages long, to return one. The counts are the server's own
// (pg_stat_xact_user_tables: the rows of the log the transaction's scans
// read), so the test holds whatever plan each statement gets.
func TestKeyedLookupsReadNoHistory(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	const g = "test.history"
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: g, PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	const history = 2000
	d1 := core.Partition{"device_id": "d1"}
	var last int64
	for i := 0; i < history; i += 500 {
		var msgs []core.Message
		for j := i; j < i+500; j++ {
			msgs = append(msgs, core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d1", Name: fmt.Sprint(j)}),
				core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprint("other", j%7), Name: fmt.Sprint(j)}))
		}
		res, err := s.Append(ctx, msgs, driver.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Last
	}
	// The group's worker catches up with the history.
	c, err := s.ClaimNext(ctx, g, "w1", 5*history)
	for c != nil && err == nil {
		if err = s.Ack(ctx, c, c.Messages[len(c.Messages)-1].Position); err == nil {
			c, err = s.ClaimNext(ctx, g, "w1", 5*history)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Optimize(ctx); err != nil { // the planner knows the log is long
		t.Fatal(err)
	}
	next, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1", Name: "next"}), driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const most = 100 // rows of the log a lookup may read: a window, never the history
	err = s.Update(ctx, func(tx driver.Tx) error {
		conn, err := pgstore.Conn(tx)
		if err != nil {
			return err
		}
		read := func() int64 {
			t.Helper()
			var n int64
			if err := conn.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables WHERE relname = $1`, s.Prefix()+"_messages").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		check := func(what string, want int, op func() (int, error)) {
			t.Helper()
			before := read()
			n, err := op()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if want >= 0 && n != want {
				t.Errorf("%s: %d messages, want %d", what, n, want)
			}
			if r := read() - before; r > most {
				t.Errorf("%s read %d rows of the log after a partition %d messages long, want at most %d", what, r, history+1, most)
			}
		}
		check("a partition read after a position", 1, func() (int, error) {
			res, err := tx.ReadPartition(d1, []string{fixtures.TypeDeviceRegistered}, driver.ReadOptions{After: last})
			return len(res.Messages), err
		})
		check("a read of conditions after a position", 1, func() (int, error) {
			res, err := tx.Read([]core.Condition{{Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "d1"}}}, driver.ReadOptions{After: last})
			return len(res.Messages), err
		})
		check("a claim", 1, func() (int, error) {
			cs, err := tx.(driver.ClaimManyTx).ClaimMany(g, "w2", 100, 1)
			if len(cs) != 1 {
				return 0, fmt.Errorf("claimed %d partitions, want d1's", len(cs))
			}
			return len(cs[0].Messages), err
		})
		check("an offset's move", -1, func() (int, error) {
			_, err := tx.(driver.GroupTx).AdvanceOffset(g, d1, next.Last)
			return 0, err
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKeyPairsKept: the table of key pairs (schema version 14) holds
// exactly the pairs of the log's messages, one row per pair and message:
// filled from the log by the migration that creates it, then kept by the
// log's inserts (single and batched appends, a transaction's), updates
// and deletes (a group's delete-on-ack), so that lookups through it find
// what the log holds.
func TestKeyPairsKept(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	prefix := pgtest.Prefix()
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	named := func(sql string) string { return strings.ReplaceAll(sql, "{p}", prefix) }
	exec := func(sql string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, named(sql)); err != nil {
			t.Fatal(err)
		}
	}
	// Both ways the pairs differ from the log's: rows missing, rows extra.
	const diff = `SELECT count(*) FROM ((SELECT k, m.position FROM {p}_messages m CROSS JOIN LATERAL unnest(m.keys) k
	EXCEPT SELECT key, position FROM {p}_message_keys)
	UNION ALL (SELECT key, position FROM {p}_message_keys
	EXCEPT SELECT k, m.position FROM {p}_messages m CROSS JOIN LATERAL unnest(m.keys) k)) d`
	same := func(when string) {
		t.Helper()
		var n, pairs int
		if err := s.Pool().QueryRow(ctx, named(diff)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := s.Pool().QueryRow(ctx, named(`SELECT count(*) FROM {p}_message_keys`)).Scan(&pairs); err != nil {
			t.Fatal(err)
		}
		if n != 0 || pairs == 0 {
			t.Fatalf("%s: %d key pairs differ from the log's (%d in the table)", when, n, pairs)
		}
	}
	device := func(id string) core.Message {
		return core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: "n"})
	}
	if _, err := s.Append(ctx, []core.Message{device("d1"), device("d2"), core.NewMessage(fixtures.AssetRegistered{AssetID: "a1", Label: "l"})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// The database as version 13 left it: no table of pairs, the GIN index.
	exec(`DROP TRIGGER {p}_keys_added ON {p}_messages; DROP TRIGGER {p}_keys_removed ON {p}_messages; DROP TRIGGER {p}_keys_changed ON {p}_messages;
DROP TABLE {p}_message_keys; CREATE INDEX idx_{p}_messages_keys ON {p}_messages USING gin (keys);
DELETE FROM {p}_schema_migrations WHERE version >= 14`)
	if _, err := pgstore.Open(ctx, pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: prefix}); !errors.Is(err, pgstore.ErrSchemaOutdated) {
		t.Fatalf("open at version 13: %v, want ErrSchemaOutdated", err)
	}
	if err := s.Install(ctx); err != nil {
		t.Fatal(err)
	}
	same("after the migration")
	res, err := s.ReadPartition(ctx, core.Partition{"device_id": "d1"}, []string{fixtures.TypeDeviceRegistered}, driver.ReadOptions{})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("read of d1 after the migration: %d messages, %v; want 1", len(res.Messages), err)
	}
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, []core.Message{device("d1")}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx driver.Tx) error {
		_, err := tx.Append([]core.Message{device("d3"), device("d1")}, driver.AppendOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	same("after the appends")
	// A change of a message's keys (no program of the store's makes one:
	// a repair by hand).
	exec(`UPDATE {p}_messages SET keys = array_append(keys, 'repair' || chr(31) || 'x') WHERE position = (SELECT min(position) FROM {p}_messages)`)
	same("after a change of keys")
	// A worker deletes what it processed.
	if _, err := s.ClaimManyUpdate(ctx, "devices", "w", 10, 10, func(tx driver.Tx, claims []*driver.ClaimedPartition) error {
		for _, c := range claims {
			if c.Partition["device_id"] != "d1" {
				continue
			}
			for _, m := range c.Messages {
				if err := tx.(driver.GroupTx).Delete(m.Position); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	same("after the deletes")
	res, err = s.ReadPartition(ctx, core.Partition{"device_id": "d1"}, []string{fixtures.TypeDeviceRegistered}, driver.ReadOptions{})
	if err != nil || len(res.Messages) != 0 {
		t.Fatalf("read of d1 after its deletes: %d messages, %v; want none", len(res.Messages), err)
	}
}
