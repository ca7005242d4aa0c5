package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// The floor of BenchmarkPostgresEndToEnd: the same commands, decisions and
// projection as a bare pgx program on a store the library installed (the
// same tables, indexes, triggers and sequence), with the runtime's two
// workers and its wake cooldown (SOURCED_WAKE_COOLDOWN read the same way).
// Per command the appender makes one round trip (the command and its
// decider offset's wake-up in one statement); a worker's round of a group
// makes two (the pick of up to 32 waiting partitions under FOR UPDATE SKIP
// LOCKED with their messages; then every write and the COMMIT in one
// batch). It holds no advisory lock, checks no guard or id, claims by row
// lock rather than by a claim committed beside it, keeps no read horizon
// (a partition's messages are written by one transaction at a time, the
// appender's or its decider's, so a partition's reader skips none of
// them; the log as a whole may show a later position before an earlier
// one), and decides from states kept in memory without reading them
// back. It is an upper bound on what a client deciding in Go gets from
// this machine and this server, not a store. Run it beside the benchmark
// it is the floor of and compare the rates:
//
//	cd bench && go test -run '^$' -bench 'PostgresEndToEnd$|PostgresEndToEndFloor' -benchtime 1x

// BenchmarkPostgresEndToEndFloor is BenchmarkPostgresEndToEnd's work as a
// bare program: 10,000 deposits appended one after the other over 1,000
// accounts while two workers decide them (the event each) and project the
// events (a count each). It reports commands per second, from the first
// append until every command is decided and every event projected, and
// the 50th and 99th percentiles of the time from a command's append to
// the commit of its decision, as the benchmark does.
func BenchmarkPostgresEndToEndFloor(b *testing.B) {
	postgresOnly(b, func(b *testing.B, url string) {
		for range b.N {
			b.StopTimer()
			s := pgOpen(b, url, routerRegistry(b))
			f := openEndToEndFloor(b, s, url)
			b.StartTimer()
			res, err := f.run(context.Background(), 10000, 1000)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.commands)/res.elapsed.Seconds(), "cmds/s")
			b.ReportMetric(float64(res.p50.Microseconds()), "p50-us")
			b.ReportMetric(float64(res.p99.Microseconds()), "p99-us")
			b.StartTimer()
		}
	})
}

// endToEndFloor is the bare program of BenchmarkPostgresEndToEndFloor on
// the store under prefix: its statements, its groups' rows and the
// runtime's settings it follows.
type endToEndFloor struct {
	url      string
	cooldown time.Duration
	// decider and counter are the groups' rows (bench.accounts,
	// bench.counter).
	decider, counter int64
	// appendCmd writes a command and wakes its decider offset; pick
	// locks up to $2 waiting offsets of group $1 and returns their
	// messages of type $3 (up to $4 each); decide writes the events of
	// a round and wakes their projector offsets; ack moves offsets past
	// what a round handled, to their next message of type $3 (NULL: none).
	// A partition's messages are found as the store finds them: their
	// positions from its key rows, then the log's rows by position, the
	// type compared as an expression (|| ''), so that no plan walks the
	// type's index or the log (cached generic plans that joined the two
	// tables did: 20-100 ms a statement).
	appendCmd, pick, decide, ack string
}

// Floor settings: partitions picked per round, messages per partition.
const (
	floorPartitions = 32
	floorBatch      = 50
)

// openEndToEndFloor registers the benchmark's groups in s (as the runtime
// does when it starts) and prepares the floor's statements.
func openEndToEndFloor(tb testing.TB, s *pgstore.Store, url string) *endToEndFloor {
	tb.Helper()
	ctx := context.Background()
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, benchAccounts, benchCounter)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		tb.Fatal(err)
	}
	cfg, err := shell.DefaultConfig().FromEnv(nil)
	if err != nil {
		tb.Fatal(err)
	}
	p := s.Prefix()
	f := &endToEndFloor{
		url:      url,
		cooldown: cfg.WakeCooldown,
		appendCmd: fmt.Sprintf(`WITH m AS (INSERT INTO %[1]s_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
	VALUES ($1, '`+floorCommandType+`', 1, $1, $1, $2::json, NULL, $3, $4, $5) RETURNING position)
INSERT INTO %[1]s_offsets AS o (consumer_group_id, partition_key, keys, next_position)
SELECT $6, $7, $8, m.position FROM m
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET next_position = coalesce(o.next_position, excluded.next_position)`, p),
		pick: fmt.Sprintf(`SELECT o.id, o.partition_key, m.position, m.message_id, m.correlation_id, m.payload
FROM (SELECT id, partition_key, keys, last_position FROM %[1]s_offsets
	WHERE consumer_group_id = $1 AND next_position IS NOT NULL AND NOT claimed
	ORDER BY last_position, id LIMIT $2 FOR UPDATE SKIP LOCKED) o
CROSS JOIN LATERAL (SELECT mm.position, mm.message_id, mm.correlation_id, mm.payload FROM %[1]s_messages mm
	WHERE mm.position = ANY(ARRAY(SELECT k.position FROM %[1]s_message_keys k WHERE k.key = o.keys[1] AND k.position > o.last_position ORDER BY k.position LIMIT 1000))
		AND (mm.message_type || '') = $3
	ORDER BY mm.position LIMIT $4) m
ORDER BY o.id, m.position`, p),
		decide: fmt.Sprintf(`WITH e AS (INSERT INTO %[1]s_messages (message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
	SELECT u.id, '`+floorDepositedTyp+`', 1, u.cause, u.corr, u.payload::json, NULL, $5, ARRAY[u.k1, u.k2], ARRAY['account', 'amount']
	FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $6::text[], $7::text[]) AS u(id, cause, corr, payload, k1, k2)
	RETURNING position, keys[1] AS k)
INSERT INTO %[1]s_offsets AS o (consumer_group_id, partition_key, keys, next_position)
SELECT $8, '[["account","' || split_part(e.k, chr(31), 2) || '"]]', ARRAY[e.k], min(e.position) FROM e GROUP BY e.k
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET next_position = coalesce(o.next_position, excluded.next_position)`, p),
		ack: fmt.Sprintf(`UPDATE %[1]s_offsets o SET last_position = u.pos,
	next_position = (SELECT min(m.position) FROM %[1]s_messages m
		WHERE m.position = ANY(ARRAY(SELECT k.position FROM %[1]s_message_keys k WHERE k.key = o.keys[1] AND k.position > u.pos ORDER BY k.position LIMIT 1000))
			AND (m.message_type || '') = $3)
FROM unnest($1::bigint[], $2::bigint[]) AS u(id, pos) WHERE o.id = u.id`, p),
	}
	for name, id := range map[string]*int64{"bench.accounts": &f.decider, "bench.counter": &f.counter} {
		if err := s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT id FROM %s_consumer_groups WHERE group_id = $1`, p), name).Scan(id); err != nil {
			tb.Fatal("the group row of ", name, ": ", err)
		}
	}
	return f
}

// floorResult is what a run of the floor measured.
type floorResult struct {
	commands int
	elapsed  time.Duration
	p50, p99 time.Duration
}

// floorRun is the state a run's appender and workers share.
type floorRun struct {
	f    *endToEndFloor
	wake chan struct{}
	done chan struct{}

	mu       sync.Mutex
	appended map[uuid.UUID]time.Time
	latency  []time.Duration
	// started is when each group's last round that found work started
	// (the runtime's wake cooldown, per group across workers).
	started map[int64]time.Time
	// balances and counts are the decider's and the projector's states,
	// by partition key.
	balances, counts map[string]int

	decided, projected atomic.Int64
}

// connect opens one of the floor's connections, with sequential scans
// off: its statements are meant to be index probes however the tables
// grow, and a plan cached while they were nearly empty (PostgreSQL
// caches a generic plan after five executions) could otherwise scan the
// log once per partition.
func (f *endToEndFloor) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(f.url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["enable_seqscan"] = "off"
	return pgx.ConnectConfig(ctx, cfg)
}

// run appends commands deposits over accounts accounts while two workers
// decide and project them, and returns once every command is decided and
// every event projected.
func (f *endToEndFloor) run(ctx context.Context, commands, accounts int) (floorResult, error) {
	r := &floorRun{
		f: f, wake: make(chan struct{}, 2), done: make(chan struct{}),
		appended: make(map[uuid.UUID]time.Time, commands),
		started:  map[int64]time.Time{},
		balances: map[string]int{}, counts: map[string]int{},
	}
	conn, err := f.connect(ctx)
	if err != nil {
		return floorResult{}, err
	}
	defer conn.Close(context.Background())
	var workers sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wc, err := f.connect(ctx)
		if err != nil {
			close(r.done)
			workers.Wait()
			return floorResult{}, err
		}
		workers.Add(1)
		go func() {
			defer workers.Done()
			defer wc.Close(context.Background())
			if err := r.work(ctx, wc); err != nil {
				errs <- err
			}
		}()
	}
	stop := func() { close(r.done); workers.Wait() }
	start := time.Now()
	for i := range commands {
		acct := account(i % accounts)
		key := "account\x1f" + acct
		payload, err := json.Marshal(benchDeposit{Account: acct, Amount: 1})
		if err != nil {
			stop()
			return floorResult{}, err
		}
		id := uuid.Must(uuid.NewV7())
		now := time.Now()
		r.mu.Lock()
		r.appended[id] = now
		r.mu.Unlock()
		if _, err := conn.Exec(ctx, f.appendCmd, id, string(payload), now.UTC(), []string{key, "amount\x1f1"}, []string{"account", "amount"},
			f.decider, `[["account","`+acct+`"]]`, []string{key}); err != nil {
			stop()
			return floorResult{}, err
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
		select {
		case err := <-errs: // a worker failed: no use appending on
			stop()
			return floorResult{}, err
		default:
		}
	}
	for r.decided.Load() < int64(commands) || r.projected.Load() < int64(commands) {
		select {
		case err := <-errs:
			stop()
			return floorResult{}, err
		case <-time.After(100 * time.Microsecond):
		}
	}
	elapsed := time.Since(start)
	stop()
	select {
	case err := <-errs:
		return floorResult{}, err
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.latency) != commands {
		return floorResult{}, fmt.Errorf("%d commands decided, want %d", len(r.latency), commands)
	}
	balance, count := 0, 0
	for pk, b := range r.balances {
		balance, count = balance+b, count+r.counts[pk]
	}
	if balance != commands || count != commands || len(r.balances) != accounts {
		return floorResult{}, fmt.Errorf("%d accounts hold %d deposited, %d counted; want %d accounts holding %d", len(r.balances), balance, count, accounts, commands)
	}
	slices.Sort(r.latency)
	return floorResult{commands: commands, elapsed: elapsed, p50: r.latency[len(r.latency)/2], p99: r.latency[len(r.latency)*99/100]}, nil
}

// work is a worker: a round of each group in turn, each group's rounds
// that found work spaced by the cooldown; idle, it waits for a wake-up
// from the appender (or 5 ms, the floor's catch-up).
func (r *floorRun) work(ctx context.Context, conn *pgx.Conn) error {
	for {
		select {
		case <-r.done:
			return nil
		default:
		}
		did, wait := false, time.Duration(-1)
		for _, g := range []int64{r.f.decider, r.f.counter} {
			if d := r.cooling(g); d > 0 {
				if wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			n, err := r.round(ctx, conn, g)
			if err != nil {
				return err
			}
			did = did || n > 0
		}
		if did {
			continue
		}
		if wait < 0 || wait > 5*time.Millisecond {
			wait = 5 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-r.done:
			t.Stop()
			return nil
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// cooling reports how long group g's rounds must wait yet (0: none).
func (r *floorRun) cooling(g int64) time.Duration {
	if r.f.cooldown <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Until(r.started[g].Add(r.f.cooldown))
}

// pickedRow is a message a round picked with its offset.
type pickedRow struct {
	offset   int64
	pk       string
	position int64
	id, corr uuid.UUID
	payload  []byte
}

// round runs one round of group g (the decider or the projector) in one
// transaction, two round trips, and returns how many messages it handled.
func (r *floorRun) round(ctx context.Context, conn *pgx.Conn, g int64) (int, error) {
	started := time.Now()
	typ := floorCommandType
	if g == r.f.counter {
		typ = floorDepositedTyp
	}
	var first pgx.Batch
	first.Queue("BEGIN")
	first.Queue(r.f.pick, g, floorPartitions, typ, floorBatch)
	br := conn.SendBatch(ctx, &first)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return 0, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return 0, err
	}
	var picked []pickedRow
	for rows.Next() {
		var p pickedRow
		if err := rows.Scan(&p.offset, &p.pk, &p.position, &p.id, &p.corr, &p.payload); err != nil {
			rows.Close()
			br.Close()
			return 0, err
		}
		picked = append(picked, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		br.Close()
		return 0, err
	}
	if err := br.Close(); err != nil {
		return 0, err
	}
	if len(picked) == 0 {
		_, err := conn.Exec(ctx, "COMMIT")
		return 0, err
	}
	// The offsets move past what the round handled: each to its last
	// message (rows come in offset and position order).
	var ids, last []int64
	for i, p := range picked {
		if i+1 == len(picked) || picked[i+1].offset != p.offset {
			ids, last = append(ids, p.offset), append(last, p.position)
		}
	}
	if len(ids) < floorPartitions {
		// Spaced by the cooldown, as the runtime's rounds that caught
		// up are; a full round is followed at once.
		r.mu.Lock()
		r.started[g] = started
		r.mu.Unlock()
	}
	var second pgx.Batch
	if g == r.f.decider {
		var evIDs, causes, corrs []uuid.UUID
		var payloads, k1, k2 []string
		balances := map[string]int{}
		for _, p := range picked {
			var c benchDeposit
			if err := json.Unmarshal(p.payload, &c); err != nil {
				return 0, err
			}
			if c.Amount <= 0 {
				return 0, fmt.Errorf("a deposit must be positive")
			}
			ev, err := json.Marshal(benchDeposited(c))
			if err != nil {
				return 0, err
			}
			balances[p.pk] += c.Amount
			evIDs, causes, corrs = append(evIDs, uuid.Must(uuid.NewV7())), append(causes, p.id), append(corrs, p.corr)
			payloads = append(payloads, string(ev))
			k1, k2 = append(k1, "account\x1f"+c.Account), append(k2, "amount\x1f"+fmt.Sprint(c.Amount))
		}
		second.Queue(r.f.decide, evIDs, causes, corrs, payloads, time.Now().UTC(), k1, k2, r.f.counter)
		second.Queue(r.f.ack, ids, last, typ)
		second.Queue("COMMIT")
		if err := conn.SendBatch(ctx, &second).Close(); err != nil {
			return 0, err
		}
		now := time.Now()
		r.mu.Lock()
		for _, p := range picked {
			if at, ok := r.appended[p.id]; ok {
				r.latency = append(r.latency, now.Sub(at))
			}
		}
		for pk, b := range balances {
			// Added, not stored: another worker may have decided the
			// partition's next commands between this commit and now.
			r.balances[pk] += b
		}
		r.mu.Unlock()
		r.decided.Add(int64(len(picked)))
		return len(picked), nil
	}
	counts := map[string]int{}
	for _, p := range picked {
		var e benchDeposited
		if err := json.Unmarshal(p.payload, &e); err != nil {
			return 0, err
		}
		counts[p.pk]++
	}
	second.Queue(r.f.ack, ids, last, typ)
	second.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &second).Close(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	for pk, n := range counts {
		r.counts[pk] += n
	}
	r.mu.Unlock()
	r.projected.Add(int64(len(picked)))
	return len(picked), nil
}

// TestPostgresEndToEndFloorWritesTheStoresRows holds
// BenchmarkPostgresEndToEndFloor honest: its run leaves the same rows as
// BenchmarkPostgresEndToEnd's runtime does in every table both write (the
// log and its key rows, both groups' offsets, each past its partition's
// last message of the type it handles), so the ratio of the two measures
// the store's overhead, not rows it writes and the floor does not. Left
// out: the head row (the read horizon, which the floor does not keep) and
// the store's tombstones (rows of no type at the positions of appends
// that rolled back, which the floor has no reason to make).
func TestPostgresEndToEndFloorWritesTheStoresRows(t *testing.T) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		t.Skip(PostgresURLEnv + " is not set")
	}
	const commands, accounts = 120, 12
	ctx := context.Background()
	queries := []string{
		"SELECT count(*) FROM {p}_messages WHERE message_type <> ''",
		"SELECT string_agg(DISTINCT message_type || ' ' || payload_version || ' ' || coalesce(metadata::text, '-') || ' ' || array_to_string(key_names, ','), '; ') FROM {p}_messages WHERE message_type <> ''",
		"SELECT string_agg(message_type || ' ' || (payload->>'account') || ' ' || array_to_string(keys, ','), '; ' ORDER BY message_type, payload->>'account', position) FROM {p}_messages WHERE message_type <> ''",
		"SELECT count(*) FROM {p}_messages e JOIN {p}_messages c ON c.message_id = e.causation_id AND c.correlation_id = e.correlation_id AND c.payload::text = e.payload::text WHERE e.message_type = 'bench.deposited' AND c.message_type = 'bench.deposit'",
		"SELECT count(*) FROM {p}_messages WHERE message_type = 'bench.deposit' AND causation_id = message_id AND correlation_id = message_id",
		"SELECT count(*) FROM {p}_message_keys",
		"SELECT count(*) FROM {p}_offsets",
		"SELECT string_agg(g.group_id || ' ' || o.partition_key || ' ' || array_to_string(o.keys, ',') || ' ' || coalesce(o.message_id::text, '-') || ' ' || coalesce(o.next_position::text, '-') || ' ' || o.claimed || ' ' || o.replay_until || ' ' || coalesce(o.parked, '-'), '; ' ORDER BY g.group_id, o.partition_key) FROM {p}_offsets o JOIN {p}_consumer_groups g ON g.id = o.consumer_group_id",
		// Each offset at its partition's last message of its type.
		"SELECT count(*) FROM {p}_offsets o JOIN {p}_consumer_groups g ON g.id = o.consumer_group_id WHERE o.last_position = (SELECT max(m.position) FROM {p}_messages m WHERE m.keys[1] = o.keys[1] AND m.message_type = CASE g.group_id WHEN 'bench.accounts' THEN 'bench.deposit' ELSE 'bench.deposited' END)",
		"SELECT count(*) FROM {p}_scheduled_messages",
		"SELECT count(*) FROM {p}_snapshots",
	}
	floorStore := pgOpen(t, url, routerRegistry(t))
	res, err := openEndToEndFloor(t, floorStore, url).run(ctx, commands, accounts)
	if err != nil {
		t.Fatal(err)
	}
	if res.commands != commands || res.p99 < res.p50 {
		t.Fatalf("the floor measured %+v", res)
	}
	floor := tableRows(t, url, floorStore.Prefix(), queries)

	s := pgOpen(t, url, routerRegistry(t))
	cfg := shell.DefaultConfig()
	cfg.Logger = quiet()
	rt, err := shell.NewRuntime(s, cfg, benchAccounts, benchCounter)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range commands {
		if _, err := s.Append(ctx, []core.Message{core.NewMessage(benchDeposit{Account: account(i % accounts), Amount: 1})}, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sameRows(t, floor, tableRows(t, url, s.Prefix(), queries))
}
