package bench

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The floors: what BenchmarkHandle and BenchmarkAppend do, written as a
// bare zombiezen program with no library code in the timed loop, on a file
// the library installed (the same schema, indexes, triggers and page size)
// and with the connection settings the store gives its writer. Run each
// beside the benchmark it is the floor of, in the same process, and
// compare the rates:
//
//	go test ./bench -run '^$' -bench 'Handle$|HandleFloor|Append$|AppendFloor' -count 3

// floorConn opens the bare writer connection on path, with the settings
// sqlitestore gives its writer (WAL is a property of the file already).
func floorConn(b testing.TB, path string) *sqlite.Conn {
	b.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	conn.SetBusyTimeout(5 * time.Second)
	for _, p := range []string{"PRAGMA foreign_keys = ON", "PRAGMA synchronous = NORMAL", "PRAGMA temp_store = MEMORY"} {
		if err := sqlitex.ExecuteTransient(conn, p, nil); err != nil {
			b.Fatal(err)
		}
	}
	return conn
}

// floorStep runs a prepared statement that returns no rows.
func floorStep(b testing.TB, stmt *sqlite.Stmt) {
	if _, err := stmt.Step(); err != nil {
		b.Fatal(err)
	}
	if err := stmt.Reset(); err != nil {
		b.Fatal(err)
	}
}

func floorExec(b testing.TB, conn *sqlite.Conn, sql string) {
	stmt := conn.Prep(sql)
	floorStep(b, stmt)
}

// floorKeyPair returns the id of the key pair name=value, selected, or
// inserted when missing.
func floorKeyPair(b testing.TB, conn *sqlite.Conn, name, value string) int64 {
	stmt := conn.Prep(`SELECT id FROM sourced_key_pairs WHERE name = ?1 AND value = ?2`)
	stmt.BindText(1, name)
	stmt.BindText(2, value)
	has, err := stmt.Step()
	if err != nil {
		b.Fatal(err)
	}
	var id int64
	if has {
		id = stmt.ColumnInt64(0)
	}
	if err := stmt.Reset(); err != nil {
		b.Fatal(err)
	}
	if has {
		return id
	}
	stmt = conn.Prep(`INSERT INTO sourced_key_pairs (name, value) VALUES (?1, ?2)`)
	stmt.BindText(1, name)
	stmt.BindText(2, value)
	floorStep(b, stmt)
	return conn.LastInsertRowID()
}

// BenchmarkHandleFloor is BenchmarkHandle's work as a bare program: per
// command, in one BEGIN IMMEDIATE transaction, read the partition's 10
// events through the key-pair index, decode them and fold the balance,
// insert the command and its event with the links of both their indexed
// attributes (account and amount, as the store indexes them), and upsert
// the decider's offset with its key pair link (the rows the store writes
// for a new partition of a group); then commit. It reports commands per
// second.
func BenchmarkHandleFloor(b *testing.B) {
	path := filepath.Join(b.TempDir(), "floor.db")
	n := b.N
	conn, groupRow := handleFloorSeed(b, path, n)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		handleFloorCommand(b, conn, groupRow, i)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
}

// handleFloorSeed installs a store at path with BenchmarkHandle's decider
// and n accounts of 10 deposits each (as handleSeed does), and returns a
// bare connection to it and the decider's group row.
func handleFloorSeed(tb testing.TB, path string, n int) (*sqlite.Conn, int64) {
	ctx := context.Background()
	s, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: routerRegistry(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchAccounts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		tb.Fatal(err)
	}
	for from := 0; from < n; from += 1000 {
		var seed []core.Message
		for i := from; i < min(from+1000, n); i++ {
			for range 10 {
				seed = append(seed, core.NewMessage(benchDeposited{Account: account(i), Amount: 1}))
			}
		}
		if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	conn := floorConn(tb, path)
	var groupRow int64
	err = sqlitex.Execute(conn, `SELECT id FROM sourced_consumer_groups WHERE group_id = 'bench.accounts'`, &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { groupRow = stmt.ColumnInt64(0); return nil },
	})
	if err != nil || groupRow == 0 {
		tb.Fatal("no group row", err)
	}
	return conn, groupRow
}

// The floor's statements.
const (
	floorReadHistory = `SELECT m.position, m.payload FROM sourced_message_key_pairs l
CROSS JOIN sourced_messages m ON m.position = l.message_position
WHERE l.key_pair_id = ?1 AND m.message_type = ?2 ORDER BY l.message_position`
	floorInsertMessage = `INSERT INTO sourced_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at)
VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7)`
	floorInsertLink   = `INSERT INTO sourced_message_key_pairs (message_position, key_pair_id) VALUES (?1, ?2)`
	floorUpsertOffset = `INSERT INTO sourced_offsets (consumer_group_id, partition_key, last_position) VALUES (?1, ?2, ?3)
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET last_position = excluded.last_position RETURNING id`
	floorLinkOffset = `INSERT OR IGNORE INTO sourced_offset_key_pairs (offset_id, key_pair_id) VALUES (?1, ?2)`
)

// handleFloorCommand is one command of BenchmarkHandleFloor: a deposit of
// 5 into account(i), in one transaction.
func handleFloorCommand(tb testing.TB, conn *sqlite.Conn, groupRow int64, i int) {
	insert := func(id, causation, correlation uuid.UUID, typ string, payload []byte, metadata string, created string) int64 {
		stmt := conn.Prep(floorInsertMessage)
		stmt.BindText(1, id.String())
		stmt.BindText(2, typ)
		stmt.BindText(3, causation.String())
		stmt.BindText(4, correlation.String())
		stmt.BindText(5, string(payload))
		if metadata == "" {
			stmt.BindNull(6)
		} else {
			stmt.BindText(6, metadata)
		}
		stmt.BindText(7, created)
		floorStep(tb, stmt)
		return conn.LastInsertRowID()
	}
	link := func(pos, kp int64) {
		stmt := conn.Prep(floorInsertLink)
		stmt.BindInt64(1, pos)
		stmt.BindInt64(2, kp)
		floorStep(tb, stmt)
	}
	acct := account(i)
	cmd := benchDeposit{Account: acct, Amount: 5}
	floorExec(tb, conn, "BEGIN IMMEDIATE")
	// The partition's key pair, then its events in position order.
	kp := floorKeyPair(tb, conn, "account", acct)
	stmt := conn.Prep(floorReadHistory)
	stmt.BindInt64(1, kp)
	stmt.BindText(2, "bench.deposited")
	balance, events := 0, 0
	for {
		has, err := stmt.Step()
		if err != nil {
			tb.Fatal(err)
		}
		if !has {
			break
		}
		var e benchDeposited
		buf := make([]byte, stmt.ColumnLen(1))
		stmt.ColumnBytes(1, buf)
		if err := json.Unmarshal(buf, &e); err != nil {
			tb.Fatal(err)
		}
		balance += e.Amount
		events++
	}
	if err := stmt.Reset(); err != nil {
		tb.Fatal(err)
	}
	if events != 10 {
		tb.Fatalf("read %d events, want 10", events)
	}
	// The command, then the decision's event, each linked to both its
	// indexed attributes.
	created := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	cmdID := uuid.Must(uuid.NewV7())
	payload, err := json.Marshal(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	amount := floorKeyPair(tb, conn, "amount", strconv.Itoa(cmd.Amount))
	cmdPos := insert(cmdID, cmdID, cmdID, "bench.deposit", payload, `{"decided_by":"bench.accounts"}`, created)
	link(cmdPos, kp)
	link(cmdPos, amount)
	evID := uuid.Must(uuid.NewV7())
	payload, err = json.Marshal(benchDeposited(cmd))
	if err != nil {
		tb.Fatal(err)
	}
	evPos := insert(evID, cmdID, cmdID, "bench.deposited", payload, "", created)
	link(evPos, kp)
	link(evPos, amount)
	// The decider's offset, past the command, and its key pair.
	stmt = conn.Prep(floorUpsertOffset)
	stmt.BindInt64(1, groupRow)
	stmt.BindText(2, `[["account","`+acct+`"]]`)
	stmt.BindInt64(3, cmdPos)
	if has, err := stmt.Step(); err != nil || !has {
		tb.Fatal("upsert offset", err)
	}
	offsetID := stmt.ColumnInt64(0)
	if err := stmt.Reset(); err != nil {
		tb.Fatal(err)
	}
	stmt = conn.Prep(floorLinkOffset)
	stmt.BindInt64(1, offsetID)
	stmt.BindInt64(2, kp)
	floorStep(tb, stmt)
	floorExec(tb, conn, "COMMIT")
	if balance+cmd.Amount != 15 {
		tb.Fatalf("balance %d, want 15", balance+cmd.Amount)
	}
}

// BenchmarkAppendFloor is BenchmarkAppend's work as a bare program: per
// batch, in one BEGIN IMMEDIATE transaction, each message's row and, for
// each of its two key pairs (its account, shared, and its ref, new), the
// key pair's id (selected, inserted when missing) and the link. It reports
// messages per second.
func BenchmarkAppendFloor(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "floor.db")
			s, err := sqlitestore.Install(context.Background(), path, sqlitestore.Options{Registry: storeRegistry(b)})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			appendFloorLoop(b, floorConn(b, path), batch)
		})
	}
}

// appendFloorLoop appends batches of storeEvent messages through the bare
// connection until the benchmark ends and reports msgs/s.
func appendFloorLoop(b *testing.B, conn *sqlite.Conn, batch int) {
	const (
		insertMessage = `INSERT INTO sourced_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at)
VALUES (?1, ?2, 1, ?3, ?4, ?5, NULL, ?6)`
		insertLink = `INSERT INTO sourced_message_key_pairs (message_position, key_pair_id) VALUES (?1, ?2)`
	)
	keyPair := func(name, value string) int64 { return floorKeyPair(b, conn, name, value) }
	msgs := make([]core.Message, 0, batch)
	seq := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		msgs = storeBatch(msgs, seq, batch, storeAccounts)
		seq += batch
		floorExec(b, conn, "BEGIN IMMEDIATE")
		created := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
		for _, m := range msgs {
			e := m.Payload.(storeEvent)
			payload, err := json.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			id := uuid.Must(uuid.NewV7()).String()
			stmt := conn.Prep(insertMessage)
			stmt.BindText(1, id)
			stmt.BindText(2, storeEventType)
			stmt.BindText(3, id)
			stmt.BindText(4, id)
			stmt.BindText(5, string(payload))
			stmt.BindText(6, created)
			floorStep(b, stmt)
			pos := conn.LastInsertRowID()
			for _, kp := range [2][2]string{{"account", e.Account}, {"ref", e.Ref}} {
				stmt := conn.Prep(insertLink)
				stmt.BindInt64(1, pos)
				stmt.BindInt64(2, keyPair(kp[0], kp[1]))
				floorStep(b, stmt)
			}
		}
		floorExec(b, conn, "COMMIT")
	}
	b.ReportMetric(float64(seq)/time.Since(start).Seconds(), "msgs/s")
}

// TestHandleFloorWritesTheStoresRows holds BenchmarkHandleFloor honest:
// its commands leave the same rows in every table the store writes as
// BenchmarkHandle's Handle calls do (the log, the links of every indexed
// attribute, the key pairs, the decider's offsets and their key pairs),
// so the ratio of the two measures the store's overhead, not rows it
// writes and the floor does not.
func TestHandleFloorWritesTheStoresRows(t *testing.T) {
	const n = 5
	counts := func(conn *sqlite.Conn) map[string]int64 {
		out := map[string]int64{}
		for _, q := range []string{
			"SELECT count(*) FROM sourced_messages",
			"SELECT count(*) FROM sourced_message_key_pairs",
			"SELECT count(*) FROM sourced_key_pairs",
			"SELECT count(*) FROM sourced_offsets",
			"SELECT count(*) FROM sourced_offsets WHERE next_position IS NULL AND claimed = 0",
			"SELECT count(*) FROM sourced_offset_key_pairs",
			"SELECT count(*) FROM sourced_key_pair_candidates",
			"SELECT count(*) FROM sourced_scheduled_messages",
			"SELECT sum(last_position) FROM sourced_offsets",
			"SELECT count(*) FROM sourced_messages WHERE metadata IS NOT NULL",
		} {
			if err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{ResultFunc: func(stmt *sqlite.Stmt) error {
				out[q] = stmt.ColumnInt64(0)
				return nil
			}}); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}

	floorPath := filepath.Join(t.TempDir(), "floor.db")
	conn, groupRow := handleFloorSeed(t, floorPath, n)
	for i := range n {
		handleFloorCommand(t, conn, groupRow, i)
	}
	floor := counts(conn)

	storePath := filepath.Join(t.TempDir(), "store.db")
	s, err := sqlitestore.Install(t.Context(), storePath, sqlitestore.Options{Registry: routerRegistry(t)})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchAccounts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	var seed []core.Message
	for i := range n {
		for range 10 {
			seed = append(seed, core.NewMessage(benchDeposited{Account: account(i), Amount: 1}))
		}
	}
	if _, err := s.Append(t.Context(), seed, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := shell.Handle(t.Context(), s, benchAccounts, benchDeposit{Account: account(i), Amount: 5}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	store := counts(floorConn(t, storePath))
	if !maps.Equal(floor, store) {
		t.Fatalf("the floor's rows differ from the store's:\nfloor %v\nstore %v", floor, store)
	}
}
