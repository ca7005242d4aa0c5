package bench

import (
	"context"
	"encoding/json"
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
func floorConn(b *testing.B, path string) *sqlite.Conn {
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
func floorStep(b *testing.B, stmt *sqlite.Stmt) {
	if _, err := stmt.Step(); err != nil {
		b.Fatal(err)
	}
	if err := stmt.Reset(); err != nil {
		b.Fatal(err)
	}
}

func floorExec(b *testing.B, conn *sqlite.Conn, sql string) {
	stmt := conn.Prep(sql)
	floorStep(b, stmt)
}

// BenchmarkHandleFloor is BenchmarkHandle's work as a bare program: per
// command, in one BEGIN IMMEDIATE transaction, read the partition's 10
// events through the key-pair index, decode them and fold the balance,
// insert the command and its event with their key pair links, and upsert
// the decider's offset; then commit. It reports commands per second.
func BenchmarkHandleFloor(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "floor.db")
	s, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: routerRegistry(b)})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchAccounts)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	n := b.N
	for from := 0; from < n; from += 1000 {
		var seed []core.Message
		for i := from; i < min(from+1000, n); i++ {
			for range 10 {
				seed = append(seed, core.NewMessage(benchDeposited{Account: account(i), Amount: 1}))
			}
		}
		if _, err := s.Append(ctx, seed, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}

	conn := floorConn(b, path)
	var groupRow int64
	err = sqlitex.Execute(conn, `SELECT id FROM sourced_consumer_groups WHERE group_id = 'bench.accounts'`, &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { groupRow = stmt.ColumnInt64(0); return nil },
	})
	if err != nil || groupRow == 0 {
		b.Fatal("no group row", err)
	}
	const (
		selectKeyPair = `SELECT id FROM sourced_key_pairs WHERE name = ?1 AND value = ?2`
		readHistory   = `SELECT m.position, m.payload FROM sourced_message_key_pairs l
CROSS JOIN sourced_messages m ON m.position = l.message_position
WHERE l.key_pair_id = ?1 AND m.message_type = ?2 ORDER BY l.message_position`
		insertMessage = `INSERT INTO sourced_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at)
VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7)`
		insertLink   = `INSERT INTO sourced_message_key_pairs (message_position, key_pair_id) VALUES (?1, ?2)`
		upsertOffset = `INSERT INTO sourced_offsets (consumer_group_id, partition_key, last_position) VALUES (?1, ?2, ?3)
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET last_position = excluded.last_position`
	)
	insert := func(id, causation, correlation uuid.UUID, typ string, payload []byte, metadata string, created string) int64 {
		stmt := conn.Prep(insertMessage)
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
		floorStep(b, stmt)
		return conn.LastInsertRowID()
	}
	link := func(pos, kp int64) {
		stmt := conn.Prep(insertLink)
		stmt.BindInt64(1, pos)
		stmt.BindInt64(2, kp)
		floorStep(b, stmt)
	}

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		acct := account(i)
		cmd := benchDeposit{Account: acct, Amount: 5}
		floorExec(b, conn, "BEGIN IMMEDIATE")
		// The partition's key pair, then its events in position order.
		stmt := conn.Prep(selectKeyPair)
		stmt.BindText(1, "account")
		stmt.BindText(2, acct)
		has, err := stmt.Step()
		if err != nil || !has {
			b.Fatal("no key pair", err)
		}
		kp := stmt.ColumnInt64(0)
		if err := stmt.Reset(); err != nil {
			b.Fatal(err)
		}
		stmt = conn.Prep(readHistory)
		stmt.BindInt64(1, kp)
		stmt.BindText(2, "bench.deposited")
		balance, events := 0, 0
		for {
			has, err := stmt.Step()
			if err != nil {
				b.Fatal(err)
			}
			if !has {
				break
			}
			var e benchDeposited
			buf := make([]byte, stmt.ColumnLen(1))
			stmt.ColumnBytes(1, buf)
			if err := json.Unmarshal(buf, &e); err != nil {
				b.Fatal(err)
			}
			balance += e.Amount
			events++
		}
		if err := stmt.Reset(); err != nil {
			b.Fatal(err)
		}
		if events != 10 {
			b.Fatalf("read %d events, want 10", events)
		}
		// The command, then the decision's event.
		created := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
		cmdID := uuid.Must(uuid.NewV7())
		payload, err := json.Marshal(cmd)
		if err != nil {
			b.Fatal(err)
		}
		cmdPos := insert(cmdID, cmdID, cmdID, "bench.deposit", payload, `{"decided_by":"bench.accounts"}`, created)
		link(cmdPos, kp)
		evID := uuid.Must(uuid.NewV7())
		payload, err = json.Marshal(benchDeposited(cmd))
		if err != nil {
			b.Fatal(err)
		}
		evPos := insert(evID, cmdID, cmdID, "bench.deposited", payload, "", created)
		link(evPos, kp)
		// The decider's offset, past the command.
		stmt = conn.Prep(upsertOffset)
		stmt.BindInt64(1, groupRow)
		stmt.BindText(2, `[["account","`+acct+`"]]`)
		stmt.BindInt64(3, cmdPos)
		floorStep(b, stmt)
		floorExec(b, conn, "COMMIT")
		if balance+cmd.Amount != 15 {
			b.Fatalf("balance %d, want 15", balance+cmd.Amount)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
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
		selectKeyPair = `SELECT id FROM sourced_key_pairs WHERE name = ?1 AND value = ?2`
		insertKeyPair = `INSERT INTO sourced_key_pairs (name, value) VALUES (?1, ?2)`
		insertMessage = `INSERT INTO sourced_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at)
VALUES (?1, ?2, 1, ?3, ?4, ?5, NULL, ?6)`
		insertLink = `INSERT INTO sourced_message_key_pairs (message_position, key_pair_id) VALUES (?1, ?2)`
	)
	keyPair := func(name, value string) int64 {
		stmt := conn.Prep(selectKeyPair)
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
		stmt = conn.Prep(insertKeyPair)
		stmt.BindText(1, name)
		stmt.BindText(2, value)
		floorStep(b, stmt)
		return conn.LastInsertRowID()
	}
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
