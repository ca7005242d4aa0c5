package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// The floor of BenchmarkPostgresHandle: the same commands as a bare pgx
// program, with no library code in the timed loop, on a store the library
// installed (the same tables, indexes, triggers and sequence). Per
// command it makes the two round trips a read-decide-append cannot do
// without (the history, then every write in one pipelined implicit
// transaction), takes no lock and checks no guard: the upper bound of a
// client that decides in Go on this machine and this server. Run it beside
// the benchmark it is the floor of and compare the rates:
//
//	cd bench && go test -run '^$' -bench 'PostgresHandle$|PostgresHandleFloor' -benchtime 3000x

// BenchmarkPostgresHandleFloor is BenchmarkPostgresHandle's work as a bare
// program: per command, read the partition's 10 events through the key
// index and fold the balance (one round trip), then insert the command and
// its event (their key rows by the store's trigger), set the decider's
// offset past the command, and raise the group's highest position and the
// log's head, in one batch (one round trip, one implicit transaction). It
// reports commands per second.
func BenchmarkPostgresHandleFloor(b *testing.B) {
	postgresOnly(b, func(b *testing.B, url string) {
		s := pgOpen(b, url, routerRegistry(b))
		n := handleSeed(b, s)
		f := openHandleFloor(b, s.Prefix(), url)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := range n {
			if err := f.command(context.Background(), i); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "cmds/s")
	})
}

// handleFloor is the bare connection of BenchmarkPostgresHandleFloor and
// its statements on the store under prefix.
type handleFloor struct {
	conn                           *pgx.Conn
	group                          int64
	read, insert, offset, up, head string
}

// The floor's constant values: the decider's mark on its command, and
// the two message types.
const (
	floorDecidedBy    = `{"sourced_decided_by":"bench.accounts"}`
	floorCommandType  = "bench.deposit"
	floorDepositedTyp = "bench.deposited"
)

// openHandleFloor opens the floor's connection to the store installed
// under prefix, whose decider group bench.accounts is registered.
func openHandleFloor(tb testing.TB, prefix, url string) *handleFloor {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	f := &handleFloor{
		conn: conn,
		read: fmt.Sprintf(`SELECT m.payload FROM %[1]s_message_keys k JOIN %[1]s_messages m ON m.position = k.position
WHERE k.key = $1 AND m.message_type = $2 ORDER BY k.position`, prefix),
		// The command and the offset past it in one statement: the
		// fewest a bare program needs.
		insert: fmt.Sprintf(`INSERT INTO %s_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
VALUES ($1, $2, 1, $3, $3, $4::json, $5::json, $6, $7, $8) RETURNING position`, prefix),
		offset: fmt.Sprintf(`INSERT INTO %[1]s_offsets AS o (consumer_group_id, partition_key, keys, last_position)
SELECT $1, $2, $3, position FROM %[1]s_messages WHERE message_id = $4
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET last_position = excluded.last_position`, prefix),
		up:   fmt.Sprintf(`UPDATE %[1]s_consumer_groups SET highest_position = greatest(highest_position, currval('%[1]s_positions')) WHERE id = $1`, prefix),
		head: fmt.Sprintf(`UPDATE %[1]s_head SET last_position = greatest(last_position, currval('%[1]s_positions')) WHERE id = 1`, prefix),
	}
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT id FROM %s_consumer_groups WHERE group_id = 'bench.accounts'`, prefix)).Scan(&f.group); err != nil {
		tb.Fatal("the decider's group row: ", err)
	}
	return f
}

// command is one command of the floor: a deposit of 5 into account(i).
func (f *handleFloor) command(ctx context.Context, i int) error {
	acct := account(i)
	key := "account\x1f" + acct
	rows, err := f.conn.Query(ctx, f.read, key, floorDepositedTyp)
	if err != nil {
		return err
	}
	balance, events := 0, 0
	for rows.Next() {
		var e benchDeposited
		if err := json.Unmarshal(rows.RawValues()[0], &e); err != nil {
			rows.Close()
			return err
		}
		balance += e.Amount
		events++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if events != 10 {
		return fmt.Errorf("read %d events of %s, want 10", events, acct)
	}
	cmd := benchDeposit{Account: acct, Amount: 5}
	cmdPayload, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	evPayload, err := json.Marshal(benchDeposited(cmd))
	if err != nil {
		return err
	}
	cmdID, evID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	at := time.Now().UTC()
	keys := []string{key, "amount\x1f5"}
	names := []string{"account", "amount"}
	var batch pgx.Batch
	batch.Queue(f.insert, cmdID, floorCommandType, cmdID, string(cmdPayload), floorDecidedBy, at, keys, names)
	batch.Queue(f.offset, f.group, `[["account","`+acct+`"]]`, []string{key}, cmdID)
	batch.Queue(f.up, f.group) // to the command, as the store does
	batch.Queue(f.insert, evID, floorDepositedTyp, cmdID, string(evPayload), nil, at, keys, names)
	batch.Queue(f.head)
	if err := f.conn.SendBatch(ctx, &batch).Close(); err != nil {
		return err
	}
	if balance+cmd.Amount != 15 {
		return fmt.Errorf("balance %d, want 15", balance+cmd.Amount)
	}
	return nil
}

// TestPostgresHandleFloorWritesTheStoresRows holds
// BenchmarkPostgresHandleFloor honest: its commands leave the same rows in
// every table the store writes as BenchmarkPostgresHandle's Handle calls
// do (the log and its key rows, the decider's offsets, the group's highest
// position, the log's head), so the ratio of the two measures the store's
// overhead, not rows it writes and the floor does not.
func TestPostgresHandleFloorWritesTheStoresRows(t *testing.T) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		t.Skip(PostgresURLEnv + " is not set")
	}
	const n = 5
	ctx := context.Background()
	queries := []string{
		"SELECT count(*) FROM {p}_messages",
		"SELECT string_agg(message_type || ' ' || coalesce(metadata::text, '-') || ' ' || array_to_string(keys, ',') || ' ' || array_to_string(key_names, ','), '; ' ORDER BY position) FROM {p}_messages",
		"SELECT count(*) FROM {p}_message_keys",
		"SELECT count(*) FROM {p}_offsets",
		"SELECT string_agg(partition_key || ' ' || array_to_string(keys, ',') || ' ' || coalesce(message_id::text, '-') || ' ' || coalesce(next_position::text, '-') || ' ' || claimed || ' ' || drain_check || ' ' || replay_until, '; ' ORDER BY partition_key) FROM {p}_offsets",
		"SELECT sum(o.last_position - m.position) FROM {p}_offsets o JOIN {p}_messages m ON m.position = o.last_position WHERE m.message_type <> 'bench.deposit'",
		"SELECT count(*) FROM {p}_offsets o JOIN {p}_messages m ON m.position = o.last_position AND m.message_type = 'bench.deposit' AND o.partition_key = '[[\"account\",\"' || (m.payload->>'account') || '\"]]'",
		"SELECT highest_position = (SELECT max(position) FROM {p}_messages WHERE message_type = 'bench.deposit') FROM {p}_consumer_groups WHERE group_id = 'bench.accounts'",
		"SELECT last_position = (SELECT max(position) FROM {p}_messages) FROM {p}_head",
		"SELECT count(*) FROM {p}_scheduled_messages",
		"SELECT count(*) FROM {p}_snapshots",
	}
	seeded := func() *pgstore.Store {
		s := pgOpen(t, url, routerRegistry(t))
		seedAccounts(t, s, n)
		return s
	}

	floorStore := seeded()
	f := openHandleFloor(t, floorStore.Prefix(), url)
	for i := range n {
		if err := f.command(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	floor := tableRows(t, url, floorStore.Prefix(), queries)

	s := seeded()
	for i := range n {
		if _, err := shell.Handle(ctx, s, benchAccounts, benchDeposit{Account: account(i), Amount: 5}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sameRows(t, floor, tableRows(t, url, s.Prefix(), queries))
}

// tableRows runs each of queries (one value each; {p} stands for the
// prefix) on the tables of the store installed under prefix and returns
// the values, printed, by query: what a floor's test compares with the
// store's.
func tableRows(t *testing.T, url, prefix string, queries []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	out := make(map[string]string, len(queries))
	for _, q := range queries {
		var v any
		if err := conn.QueryRow(ctx, strings.ReplaceAll(q, "{p}", prefix)).Scan(&v); err != nil {
			t.Fatal(q, err)
		}
		out[q] = fmt.Sprint(v)
	}
	return out
}

// sameRows fails t for each query whose value on the floor's tables
// differs from the one on the store's.
func sameRows(t *testing.T, floor, store map[string]string) {
	t.Helper()
	for q, v := range store {
		if floor[q] != v {
			t.Errorf("%s\nfloor %s\nstore %s", q, floor[q], v)
		}
	}
}
