package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A standalone append, guarded or not, is one round trip to the server:
// its checks, inserts and commit go in one pipeline.
func TestAppendIsOneRoundTrip(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	rts := &roundTrips{}
	s := open(t, pgstore.Options{Registry: reg, Tracer: rts, MaxConns: 1})
	ctx := context.Background()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
		t.Fatal(err)
	}
	cond := core.Condition{Type: "device.registered", Attrs: map[string]string{"device_id": "d1"}}
	appendBoth := func() {
		t.Helper()
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d0"}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		last, err := s.Read(ctx, []core.Condition{cond}, driver.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g := last.Guard
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{Guard: &g}); err != nil {
			t.Fatal(err)
		}
	}
	appendBoth() // warms the statement cache and the group configuration
	before := rts.n.Load()
	const n = 10
	for range n {
		appendBoth()
	}
	// Each round: an append, a read, a guarded append.
	if got := rts.n.Load() - before; got != 3*n {
		t.Fatalf("%d round trips for %d rounds of append, read, guarded append; want %d (one each)", got, n, 3*n)
	}
}

// No append holds the store's lock while its session waits for the
// client ("idle in transaction"): sampled from pg_locks while writers
// append, standalone and guarded.
func TestAppendNeverHoldsTheLockIdle(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	key := pgstore.LockKey(s)
	var idle, held, samples atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var nIdle, nHeld int64
			err := s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE a.state = 'idle in transaction'), count(*)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key).Scan(&nIdle, &nHeld)
			if err != nil {
				t.Error(err)
				return
			}
			idle.Add(nIdle)
			held.Add(nHeld)
			samples.Add(1)
		}
	})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := range 100 {
				id := string(rune('a'+w)) + "-" + time.Now().Format("150405.000000000")
				cond := core.Condition{Type: "device.registered", Attrs: map[string]string{"device_id": id}}
				opts := driver.AppendOptions{}
				if i%2 == 1 {
					opts.Guard = &core.Guard{Conditions: []core.Condition{cond}}
				}
				if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: id}), opts); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%d samples, lock seen held %d times, by an idle session %d times", samples.Load(), held.Load(), idle.Load())
	if idle.Load() > 0 {
		t.Fatalf("the store's lock was held by a session idle in transaction in %d of %d samples", idle.Load(), samples.Load())
	}
	if samples.Load() == 0 {
		t.Fatal("no sample taken")
	}
}

// An append from a process whose cached group configuration is stale (a
// group was registered by another process since) is refused by the
// server before it writes, and made again with the configuration read
// anew: the new group gets its offsets.
func TestAppendWithStaleGroupConfiguration(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	a := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	b, err := pgstore.Open(ctx, pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: a.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d0"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err) // a caches the configuration: no group
	}
	if err := b.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
	if err != nil || res.Last != 2 {
		t.Fatalf("append: %+v %v, want position 2", res, err)
	}
	seen := map[string]bool{}
	for range 3 {
		c, err := b.ClaimNext(ctx, "devices", "w", 10)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		seen[c.Partition["device_id"]] = true
		if err := b.Update(ctx, func(tx driver.Tx) error { return tx.Ack(c, c.Last()) }); err != nil {
			t.Fatal(err)
		}
	}
	if !seen["d0"] || !seen["d1"] {
		t.Fatalf("claimed partitions %v, want d0 (discovered at registration) and d1 (appended with the stale cache)", seen)
	}
}

// A retried append whose first attempt committed (its outcome unknown to
// the caller, after a network error) is refused whole with
// driver.ErrDuplicateID, saying the message is already in the log, and
// writes nothing a second time.
func TestAppendRetriedAfterCommitIsRefused(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	msgs := core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}, fixtures.DeviceRegistered{DeviceID: "d2"})
	for i := range msgs {
		msgs[i] = msgs[i].Stamp(uuid.New(), time.Now())
	}
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, msgs, driver.AppendOptions{})
	if !errors.Is(err, driver.ErrDuplicateID) {
		t.Fatalf("retry: %v, want driver.ErrDuplicateID", err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.MaxPosition != 2 {
		t.Fatalf("log ends at %d (%v), want 2", st.MaxPosition, err)
	}
}

// A decision in an Update reads without the store's lock: another
// process appends while fn sits between its read and its append. An
// append to another partition meanwhile lets fn commit in one run; one to
// the partition it read makes fn run again (under the lock), and the
// second run sees it.
func TestUpdateReadsWithoutTheLock(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	types := []string{"device.registered"}
	decide := func(other string) (runs int, seen []int) {
		t.Helper()
		err := s.Update(ctx, func(tx driver.Tx) error {
			runs++
			res, err := tx.ReadPartition(map[string]string{"device_id": "d1"}, types, driver.ReadOptions{})
			if err != nil {
				return err
			}
			seen = append(seen, len(res.Messages))
			if runs == 1 {
				// Another process appends between the read and the append;
				// it would wait for the lock if the read held it.
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if _, err := s.Append(actx, core.Messages(fixtures.DeviceRegistered{DeviceID: other}), driver.AppendOptions{}); err != nil {
					return err
				}
			}
			_, err = tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return runs, seen
	}
	if runs, seen := decide("d2"); runs != 1 || seen[0] != 0 {
		t.Fatalf("an append to another partition: %d runs seeing %v messages, want 1 run seeing 0", runs, seen)
	}
	if runs, seen := decide("d1"); runs != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("an append to the partition read: %d runs seeing %v messages, want 2 runs seeing 1 then 2", runs, seen)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.MaxPosition != 4 {
		t.Fatalf("log ends at %d (%v), want 4 (each fn's append once, each other append once)", st.MaxPosition, err)
	}
}

var errHeld = errors.New("held, rolled back")

// A standalone append that waits for a lock when its context ends
// fails with the context's error and writes nothing; its connection is
// not reused with a cancel request in flight, and the store goes on.
func TestAppendCancelledWhileWaitingForTheLock(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	locked, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := s.Update(ctx, func(tx driver.Tx) error {
			// A guarded append holds its boundary's lock in exclusive
			// mode until the transaction ends (rolled back here).
			guard := &core.Guard{Conditions: []core.Condition{{Type: "device.registered", Attrs: map[string]string{"device_id": "d1"}}}}
			if _, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{Guard: guard}); err != nil {
				return err
			}
			close(locked)
			<-release
			return errHeld
		})
		if !errors.Is(err, errHeld) {
			t.Error(err)
		}
	})
	<-locked
	actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := s.Append(actx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
	close(release)
	wg.Wait()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append: %v, want context.DeadlineExceeded", err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.MaxPosition != 0 {
		t.Fatalf("log ends at %d (%v), want 0: the cancelled append wrote nothing", st.MaxPosition, err)
	}
	for range 10 { // every connection of the pool is clean
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d2"}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A guard's check reads the messages after the guard's position in
// position order up to a window, and looks further through the key pairs'
// index only past it: a conflict inside the window and one past it are
// both found, by a standalone append and by one in an Update.
func TestGuardCheckLooksPastItsWindow(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	cond := core.Condition{Type: "device.registered", Attrs: map[string]string{"device_id": "d1"}}
	guard := &core.Guard{Conditions: []core.Condition{cond}}
	msg := func() []core.Message { return core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}) }
	check := func(what string, after int64, wantConflict bool) {
		t.Helper()
		guard.LastPosition = after
		var ce *core.ConflictError
		res, err := s.Append(ctx, msg(), driver.AppendOptions{Guard: guard})
		if got := errors.As(err, &ce); got != wantConflict || (!got && err != nil) {
			t.Fatalf("%s, standalone: %v, want a conflict: %v", what, err, wantConflict)
		}
		if !wantConflict {
			guard.LastPosition = res.Last // past its own message
		}
		err = s.Update(ctx, func(tx driver.Tx) error {
			_, err := tx.Append(msg(), driver.AppendOptions{Guard: guard})
			return err
		})
		if got := errors.As(err, &ce); got != wantConflict || (!got && err != nil) {
			t.Fatalf("%s, in an Update: %v, want a conflict: %v", what, err, wantConflict)
		}
	}
	others := make([]any, 1200)
	for i := range others {
		others[i] = fixtures.DeviceRegistered{DeviceID: "other"}
	}
	if _, err := s.Append(ctx, core.Messages(others...), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// Nothing matches, neither in the window of 1,000 after position 0
	// nor past it: both appends go (positions 1201, 1202).
	check("no match", 0, false)
	// From position 0, the matches are past the window.
	check("a match past the window", 0, true)
	// From position 1200, inside it.
	check("a match inside the window", 1200, true)
}

// The unlocked reads of an Update are checked by whatever takes the
// exclusive lock after them, not only by an append: sync work (tx.Context)
// after a read that another append has overtaken makes fn run again, so
// what it writes beside the append is decided on what is there.
func TestUpdateChecksItsReadsWhenSyncWorkTakesTheLock(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	runs := 0
	var seen []int
	err := s.Update(ctx, func(tx driver.Tx) error {
		runs++
		res, err := tx.ReadPartition(map[string]string{"device_id": "d1"}, []string{"device.registered"}, driver.ReadOptions{})
		if err != nil {
			return err
		}
		seen = append(seen, len(res.Messages))
		if runs == 1 {
			if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{}); err != nil {
				return err
			}
		}
		_ = tx.Context() // sync work: the exclusive lock
		_, err = tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
		return err
	})
	if err != nil || runs != 2 || seen[1] != 1 {
		t.Fatalf("update: %v after %d runs seeing %v messages, want 2 runs, the second seeing 1", err, runs, seen)
	}
}

// TestIDCheckNeverScansTheLog: the check that refuses a message id
// already stored probes the unique indexes, whatever the plan cached for
// it. Version 8 matched ids = ANY(ids) with LIMIT 1, and the plan the
// session cached while the log was small was a sequential scan, kept as
// the log grew: every append read the whole log inside its transaction.
// The plans of the check's statements are read with auto_explain,
// reported to this session as notices, after the log grows.
func TestIDCheckNeverScansTheLog(t *testing.T) {
	noScanAsTheLogGrows(t, func(t *testing.T, c *pgx.Conn, s *pgstore.Store) {
		if _, err := c.Exec(t.Context(), `SELECT `+s.Prefix()+`_lock(NULL, false, 0, NULL, NULL, false, NULL, $1::uuid[])`, []uuid.UUID{uuid.New()}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNewestPositionNeverScansTheLog: the newest message at or below the
// read horizon (what LastPosition returns and an exclusive transaction
// reads first) is found by index probes however the log grew after the
// session cached its plans, also past a run of tombstones longer than
// the probes (searched by a statement planned afresh). Version 9's
// statement, whose cached plan scanned the log and called the horizon
// function once per row, fails it.
func TestNewestPositionNeverScansTheLog(t *testing.T) {
	var got []int64
	noScanAsTheLogGrows(t, func(t *testing.T, c *pgx.Conn, s *pgstore.Store) {
		var last int64
		if err := c.QueryRow(t.Context(), pgstore.LastPositionSQL(s)).Scan(&last); err != nil {
			t.Fatal(err)
		}
		got = append(got, last)
	})
	if got[0] != 4 || got[len(got)-1] != 20000 {
		t.Fatalf("newest positions %v: want 4 on the small log, 20000 below the tombstones of the grown one", got)
	}
}

// noScanAsTheLogGrows runs check ten times on a 4-message log, analysed
// (the session caches its plans), grows the log to 20,000 messages and
// 10 tombstones above them (the stored horizon covering them), waits for
// the store to analyse the grown log (refreshStats, within about a
// second), and runs check again. auto_explain reports every plan to the
// session, nested ones too: after the growth none may scan the log (the
// scheduled messages, empty, may be scanned), and no plan, before or after, may filter rows
// by the horizon function (a call per row).
func noScanAsTheLogGrows(t *testing.T, check func(t *testing.T, c *pgx.Conn, s *pgstore.Store)) {
	t.Helper()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	plans := func() string {
		mu.Lock()
		defer mu.Unlock()
		all := strings.Join(notices, "\n")
		notices = nil
		return all
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	p := s.Prefix()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	fill := func(from, to int, typ string) {
		t.Helper()
		exec(`INSERT INTO `+p+`_messages (position, message_id, message_type, payload, created_at)
			SELECT g, gen_random_uuid(), $3, '{}', now() FROM generate_series($1::bigint, $2::bigint) g`, from, to, typ)
		exec(`UPDATE `+p+`_head SET last_position = $1 WHERE id = 1`, to)
	}
	perRow := func(phase, plans string) {
		t.Helper()
		for _, line := range strings.Split(plans, "\n") {
			if strings.Contains(line, "Filter:") && strings.Contains(line, p+"_horizon()") {
				t.Fatalf("%s, a plan calls the horizon function for each row it filters:\n%s", phase, plans)
			}
		}
	}
	fill(1, 4, "x")
	// Analysed while small, as autovacuum does a new table after its
	// first 50 rows (one run of the benchmarks had it analysed at 4): the
	// planner then knows it as small until the next.
	exec(`ANALYZE ` + p + `_messages, ` + p + `_scheduled_messages`)
	for _, set := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_nested_statements = on`, `SET auto_explain.log_level = notice`} {
		if _, err := c.Exec(ctx, set); err != nil {
			t.Skipf("auto_explain is not available to this session (%v): the plan cannot be read", err)
		}
	}
	for range 10 { // the session's plans settle while the log is small
		check(t, c, s)
	}
	perRow("on the small log", plans())
	fill(5, 20000, "x")
	fill(20001, 20010, "") // tombstones
	deadline := time.Now().Add(10 * time.Second)
	for pages := 0; pages <= 10; {
		if time.Now().After(deadline) {
			t.Fatalf("the store did not analyse its log within 10 s of its growth (the planner knows %d pages)", pages)
		}
		time.Sleep(50 * time.Millisecond)
		if err := s.Pool().QueryRow(ctx, `SELECT relpages FROM pg_class WHERE oid = $1::regclass`, p+"_messages").Scan(&pages); err != nil {
			t.Fatal(err)
		}
	}
	plans()
	check(t, c, s)
	grown := plans()
	if !strings.Contains(grown, p+"_messages") {
		t.Fatalf("no plan reading the log was reported:\n%s", grown)
	}
	if strings.Contains(grown, "Seq Scan on "+p+"_messages") {
		t.Fatalf("a plan scans the log:\n%s", grown)
	}
	perRow("on the grown log", grown)
}

// TestStoredHorizonHeals: a message committed without its append moving
// the stored horizon (its process died between its commit and its
// advancer's statement) is covered by the stored horizon within about a
// second, by any open store, without another append: claims, which read
// up to the stored horizon, do not wait for the next append to see it.
func TestStoredHorizonHeals(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1", Name: "a"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	p := s.Prefix()
	var pos int64
	if err := s.Pool().QueryRow(ctx, `INSERT INTO `+p+`_messages (message_id, message_type, payload, created_at, keys, key_names)
		VALUES (gen_random_uuid(), 'device.registered', '{"device_id":"d2","name":"b"}', now(), '{"device_id`+"\x1f"+`d2"}', '{device_id}') RETURNING position`).Scan(&pos); err != nil {
		t.Fatal(err)
	}
	stored := func() (h int64) {
		t.Helper()
		if err := s.Pool().QueryRow(ctx, `SELECT last_position FROM `+p+`_head WHERE id = 1`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := stored(); h >= pos {
		t.Fatalf("the stored horizon %d covers %d before any store moved it: the test proves nothing", h, pos)
	}
	deadline := time.Now().Add(5 * time.Second)
	for stored() < pos {
		if time.Now().After(deadline) {
			t.Fatalf("the stored horizon stays at %d, below the committed position %d", stored(), pos)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAppendAfterClearWaitsForTheStoredHorizon: after Clear starts
// positions at 1 again, an append beside others (which hands its position
// to the store's advancer) still returns only once the stored horizon
// covers it, though the store saw a higher stored horizon before.
func TestAppendAfterClearWaitsForTheStoredHorizon(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	appendOne := func(w, i int) driver.AppendResult {
		t.Helper()
		res, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: fmt.Sprintf("d%d-%d", w, i), Name: "a"}), driver.AppendOptions{})
		if err != nil {
			t.Error(err)
		}
		return res
	}
	for i := range 200 {
		appendOne(0, i)
	}
	if err := s.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20 {
				res := appendOne(w, i)
				var stored int64
				if err := s.Pool().QueryRow(ctx, `SELECT last_position FROM `+s.Prefix()+`_head WHERE id = 1`).Scan(&stored); err != nil {
					t.Error(err)
					return
				}
				if stored < res.Last {
					t.Errorf("append at %d returned with the stored horizon at %d", res.Last, stored)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A refused append (a guard's conflict) leaves its statements prepared:
// pgx forgets every statement of a batch that returned an error, so
// that after each refusal the next append prepared them again and
// planned its guard's check afresh under the boundary's lock. Counted on
// the server: once a check was refused, its statement is prepared by
// name and serves every later attempt.
func TestRefusalsKeepStatementsPrepared(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	s := open(t, pgstore.Options{Registry: reg, MaxConns: 1, ConcurrentAppends: -1})
	ctx := t.Context()
	cond := core.Condition{Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "d1"}}
	const rounds = 10
	for range rounds {
		res, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var conflict *core.ConflictError
		stale := &core.Guard{Conditions: []core.Condition{cond}, LastPosition: res.Last - 1}
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{Guard: stale}); !errors.As(err, &conflict) {
			t.Fatalf("append with a stale guard: %v, want a ConflictError", err)
		}
		fresh := &core.Guard{Conditions: []core.Condition{cond}, LastPosition: res.Last}
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{Guard: fresh}); err != nil {
			t.Fatal(err)
		}
	}
	checkUses(t, s, 2*rounds-1)
	// The same in transactions (a decision refused at its append, as the
	// router's are), whose batches are the transaction's own.
	s = open(t, pgstore.Options{Registry: reg, MaxConns: 1})
	for range rounds {
		res, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, last := range []int64{res.Last - 1, res.Last} {
			err := s.Update(ctx, func(tx driver.Tx) error {
				_, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{Guard: &core.Guard{Conditions: []core.Condition{cond}, LastPosition: last}})
				return err
			})
			var conflict *core.ConflictError
			if stale := last < res.Last; stale != errors.As(err, &conflict) || !stale && err != nil {
				t.Fatalf("guarded append at %d in a transaction (newest %d): %v", last, res.Last, err)
			}
		}
	}
	checkUses(t, s, 2*rounds-1)
}

// checkUses fails t unless s's one connection holds one prepared
// statement of a guard's check, used at least want times.
func checkUses(t *testing.T, s *pgstore.Store, want int64) {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), `SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH w AS%'`)
	if err != nil {
		t.Fatal(err)
	}
	uses, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) != 1 || uses[0] < want {
		t.Fatalf("the guard's check prepared %d times, used %v times; want once, for the %d checks after the first refusal", len(uses), uses, want)
	}
}
