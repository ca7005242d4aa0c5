package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

var warmup = driver.Warmup{Sessions: 3, BatchSize: 50, Claims: []int{1, 20}}

// warmStore is a store with a keyed group and a queue, a few messages
// for each, and one claim of each acknowledged: what a runtime warms.
func warmStore(t *testing.T, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	ctx := t.Context()
	opts.Registry, _ = storetest.NewRegistry()
	opts.MaxConns = 4
	s := open(t, opts)
	for _, spec := range []driver.GroupSpec{
		{ID: "test.keyed", PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}},
		{ID: "test.queue", Exclusive: true, Handled: []string{fixtures.TypeAssetRegistered}},
	} {
		if err := s.RegisterGroup(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"d1", "d2", "d3"} {
		msgs := []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id}), core.NewMessage(fixtures.AssetRegistered{AssetID: id})}
		if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"test.keyed", "test.queue"} {
		c, err := s.ClaimNext(ctx, g, "w1", 10)
		if err != nil || c == nil {
			t.Fatalf("claim of %s: %v, %v", g, c, err)
		}
		if err := s.Ack(ctx, c, c.Messages[len(c.Messages)-1].Position); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// eachSession calls check with every connection the pool holds now (at
// most n), all acquired at once so that each is a different one.
func eachSession(t *testing.T, s *pgstore.Store, n int, check func(i int, c *pgxpool.Conn)) {
	t.Helper()
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range min(n, int(s.Pool().Stat().TotalConns())) {
		c, err := s.Pool().Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if len(conns) < n {
		t.Fatalf("%d sessions in the pool, want %d", len(conns), n)
	}
	for i, c := range conns {
		check(i, c)
	}
}

// clean fails t unless c is outside any transaction and holds no lock.
func clean(t *testing.T, i int, c *pgxpool.Conn) {
	t.Helper()
	if st := c.Conn().PgConn().TxStatus(); st != 'I' {
		t.Errorf("session %d left in transaction status %q", i, st)
	}
	var locks int
	if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype IN ('advisory', 'tuple', 'transactionid')`).Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if locks != 0 {
		t.Errorf("session %d holds %d locks", i, locks)
	}
}

// Warm opens the sessions asked for and plans every statement of the
// hot paths on each: a claim of each size, the acknowledgement, the
// append, the guards' check, the horizon's moves.
func TestWarmPlansTheHotStatementsOnEachSession(t *testing.T) {
	s := warmStore(t, pgstore.Options{})
	if err := s.Warm(t.Context(), warmup); err != nil {
		t.Fatal(err)
	}
	texts := pgstore.WarmTexts(s, warmup)
	if len(texts) < 10 {
		t.Fatalf("%d statements warmed, want the hot paths' (at least 10)", len(texts))
	}
	eachSession(t, s, warmup.Sessions, func(i int, c *pgxpool.Conn) {
		for _, text := range texts {
			var plans int64
			err := c.QueryRow(t.Context(), `SELECT coalesce(max(generic_plans), 0) FROM pg_prepared_statements WHERE statement = $1`, text).Scan(&plans)
			if err != nil {
				t.Fatal(err)
			}
			if plans == 0 {
				t.Errorf("session %d: not planned: %.100s", i, text)
			}
		}
	})
}

// A warm-up leaves nothing: no message, offset, key pair or position
// drawn, the horizon where it was, no transaction open and no lock held
// on any session.
func TestWarmLeavesNoTrace(t *testing.T) {
	s := warmStore(t, pgstore.Options{})
	ctx := t.Context()
	p := s.Prefix()
	state := func() string {
		t.Helper()
		var out string
		err := s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT concat_ws(' ',
			(SELECT count(*) FROM %[1]s_messages), (SELECT count(*) FROM %[1]s_message_keys),
			(SELECT string_agg(concat_ws(':', id, next_position, last_position, claimed, claimed_by), ',' ORDER BY id) FROM %[1]s_offsets),
			(SELECT concat_ws(':', last_position, config_version) FROM %[1]s_head),
			(SELECT concat_ws(':', last_value, is_called) FROM %[1]s_positions))`, p)).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := state()
	for range 2 {
		if err := s.Warm(ctx, warmup); err != nil {
			t.Fatal(err)
		}
	}
	if after := state(); after != before {
		t.Fatalf("the store after Warm: %s, before: %s", after, before)
	}
	eachSession(t, s, warmup.Sessions, func(i int, c *pgxpool.Conn) { clean(t, i, c) })
	// The store works on: the next append takes the next position.
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d4", Name: "d4"})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var holes int
	if err := s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s_messages WHERE message_type = ''`, p)).Scan(&holes); err != nil {
		t.Fatal(err)
	}
	if holes != 0 {
		t.Fatalf("%d tombstones after Warm and an append: the warm-up drew positions", holes)
	}
}

// A warm-up never waits long for the store's work: with the log locked
// by another transaction (every statement's parse waits for it), Warm
// returns soon, without error, and the store's sessions are clean.
func TestWarmDoesNotWaitForLocks(t *testing.T) {
	s := warmStore(t, pgstore.Options{})
	ctx := t.Context()
	blocker, err := pgx.Connect(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	if _, err := blocker.Exec(ctx, fmt.Sprintf(`BEGIN; LOCK TABLE %[1]s_messages IN ACCESS EXCLUSIVE MODE; SELECT 1 FROM %[1]s_head FOR UPDATE`, s.Prefix())); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Warm(ctx, warmup); err != nil {
		t.Fatalf("Warm beside a lock: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Warm took %v beside a lock, want a few of its lock timeouts", took)
	}
	if _, err := blocker.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	eachSession(t, s, warmup.Sessions, func(i int, c *pgxpool.Conn) { clean(t, i, c) })
}

// cancelAt cancels a context at the n-th savepoint a session sends
// (alone or in a batch): halfway through a warm-up.
type cancelAt struct {
	n      atomic.Int64
	at     int64
	cancel context.CancelFunc
}

func (c *cancelAt) saw(sql string) {
	if sql == "SAVEPOINT warm" && c.n.Add(1) == c.at {
		c.cancel()
	}
}

func (c *cancelAt) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.saw(d.SQL)
	return ctx
}
func (c *cancelAt) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *cancelAt) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		c.saw(q.SQL)
	}
	return ctx
}
func (c *cancelAt) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *cancelAt) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A warm-up cancelled halfway returns context.Canceled and leaves every
// session clean; one cancelled before it starts opens none.
func TestWarmCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	tracer := &cancelAt{at: 5, cancel: cancel}
	s := warmStore(t, pgstore.Options{Tracer: tracer})
	if err := s.Warm(ctx, warmup); !errors.Is(err, context.Canceled) {
		t.Fatalf("Warm cancelled halfway: %v, want context.Canceled", err)
	}
	if tracer.n.Load() < tracer.at {
		t.Fatalf("cancelled at savepoint %d, before the warm-up reached %d", tracer.n.Load(), tracer.at)
	}
	eachSession(t, s, warmup.Sessions, func(i int, c *pgxpool.Conn) { clean(t, i, c) })
	if _, err := s.Append(t.Context(), []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: "d4", Name: "d4"})}, driver.AppendOptions{}); err != nil {
		t.Fatalf("append after a cancelled warm-up: %v", err)
	}
	if err := s.Warm(ctx, warmup); !errors.Is(err, context.Canceled) {
		t.Fatalf("Warm with a cancelled context: %v, want context.Canceled", err)
	}
}

// A warm-up never waits long for the pool: with every connection held
// by other work (which might need one more to finish), Warm gives up
// within seconds instead of holding what it got and waiting for theirs;
// with some free, it warms those.
func TestWarmDoesNotWaitForTheWholePool(t *testing.T) {
	s := warmStore(t, pgstore.Options{})
	ctx := t.Context()
	size := int(s.Pool().Config().MaxConns)
	var held []*pgxpool.Conn
	for range size - 1 {
		c, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	start := time.Now()
	if err := s.Warm(ctx, driver.Warmup{Sessions: size, BatchSize: 10}); err != nil {
		t.Fatalf("Warm with one connection free: %v", err)
	}
	last, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Warm(ctx, driver.Warmup{Sessions: size, BatchSize: 10}); err == nil {
		t.Fatal("Warm with every connection held: nil, want an error (no session to warm)")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Warm beside a busy pool took %v", took)
	}
	last.Release()
	for _, c := range held {
		c.Release()
	}
	if err := s.Warm(ctx, warmup); err != nil {
		t.Fatal(err)
	}
}

// The claims warmed are those of the kinds of group registered: none
// without groups, a keyed group's, then a queue's too.
func TestWarmClaimsOfTheGroupsRegistered(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	count := func() int {
		t.Helper()
		if err := s.Warm(ctx, warmup); err != nil { // loads the configuration
			t.Fatal(err)
		}
		return len(pgstore.WarmTexts(s, warmup))
	}
	none := count()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "test.keyed", PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	keyed := count()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "test.queue", Exclusive: true, Handled: []string{fixtures.TypeAssetRegistered}}); err != nil {
		t.Fatal(err)
	}
	both := count()
	// Two claim sizes (1, and 20 claimed as up to 32), each claimed
	// before and after the transaction's appends.
	if keyed-none != 4 || both-keyed != 4 {
		t.Fatalf("statements warmed: %d without groups, %d with a keyed group, %d with a queue too; want 4 more each time", none, keyed, both)
	}
}
