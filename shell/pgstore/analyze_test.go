package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// tableSize is what the server and its planner know of s's table (its
// name after the prefix): its size in pages, the pages and rows of its
// last analysis (relpages 0 and reltuples -1 for a table never analysed
// nor vacuumed).
func tableSize(t *testing.T, s *pgstore.Store, table string) (pages, relpages int64, tuples float64) {
	t.Helper()
	if err := s.Pool().QueryRow(t.Context(), `SELECT pg_relation_size(oid) / current_setting('block_size')::bigint, relpages, reltuples
		FROM pg_class WHERE oid = $1::regclass`, s.Prefix()+table).Scan(&pages, &relpages, &tuples); err != nil {
		t.Fatal(err)
	}
	return pages, relpages, tuples
}

// unhealedStore opens a store of the fixtures' types whose heal tick is
// an hour away for the test's length: only the test (and the store's
// looks as its log doubles) analyses its tables.
func unhealedStore(t *testing.T) *pgstore.Store {
	t.Helper()
	restore := pgstore.SetHealEvery(time.Hour)
	reg, err := storetest.NewRegistry()
	if err != nil {
		restore()
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	t.Cleanup(restore)
	return s
}

// appendCourses appends n courses to s, 100 an append, with names long
// enough that the log fills pages.
func appendCourses(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		msgs := make([]core.Message, min(100, n-i))
		for j := range msgs {
			msgs[j] = core.NewMessage(fixtures.CourseCreated{CourseName: fmt.Sprintf("course %d of a name long enough to fill pages", i+j)})
		}
		if _, err := s.Append(t.Context(), msgs, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A store appending to new tables has the planner's picture of them
// brought up to date as the log doubles, not only on its once-a-second
// tick (here an hourly one): 3,000 messages appended, the log has been
// analysed (pg_class.relpages set, 0 for a table never analysed nor
// vacuumed) within a couple of seconds. Without the early looks only the
// tick analyses it.
func TestNewLogAnalysedAsItGrows(t *testing.T) {
	s := unhealedStore(t)
	appendCourses(t, s, 3000)
	var pages int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, pages, _ = tableSize(t, s, "_messages"); pages > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pages == 0 {
		t.Fatal("the log of 3,000 messages was never analysed: relpages is 0")
	}
}

// The analyses a store runs as its tables grow are for their sizes, and
// sample few rows (statistics target 10, see analyze.go): the log's
// position histogram has at most 11 bounds, where the default target
// (100) gives 101 for 3,000 distinct positions. Autovacuum is off on the
// log, so that only the store analyses it during the test.
func TestGrowthAnalysesSampleFewRows(t *testing.T) {
	s := unhealedStore(t)
	ctx := t.Context()
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`ALTER TABLE %s_messages SET (autovacuum_enabled = false)`, s.Prefix())); err != nil {
		t.Fatal(err)
	}
	appendCourses(t, s, 3000)
	bounds := 0
	deadline := time.Now().Add(10 * time.Second)
	for bounds == 0 && time.Now().Before(deadline) {
		if err := s.Pool().QueryRow(ctx, `SELECT coalesce(max(array_length(histogram_bounds::text::bigint[], 1)), 0) FROM pg_stats
			WHERE schemaname = current_schema() AND tablename = $1 AND attname = 'position'`, s.Prefix()+"_messages").Scan(&bounds); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if bounds == 0 {
		t.Fatal("the log of 3,000 messages was never analysed")
	}
	if bounds > 11 {
		t.Fatalf("the store's analysis of its growing log kept a histogram of %d bounds: it sampled as many rows as a full ANALYZE (want at most 11)", bounds)
	}
}

// A store appending to new tables analyses each of them while it is still
// small, before it passes 16 pages: a claim planned (and its plan cached
// by every session) while the offsets were a page or two read them whole
// for every offset it repaired, and BenchmarkPostgresEndToEnd's workers
// stalled on it for 150-400 ms in about half the runs (see analyze.go)
// until the first analysis, which the old threshold (more than twice ten
// pages for a table never analysed) put at 21 pages.
func TestSmallTablesAnalysedEarly(t *testing.T) {
	s := unhealedStore(t)
	ctx := t.Context()
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "test.devices", PartitionBy: []string{"device_id"},
		Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	const most = 16
	tables := []string{"_messages", "_offsets"}
	analysed := map[string]bool{}
	for i := 0; len(analysed) < len(tables); i++ {
		msgs := make([]core.Message, 10)
		for j := range msgs {
			id := fmt.Sprintf("device %d", 10*i+j)
			msgs[j] = core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id})
		}
		if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // the look runs beside the appends
		for _, table := range tables {
			pages, relpages, _ := tableSize(t, s, table)
			switch {
			case relpages > 0:
				analysed[table] = true
			case pages > most:
				t.Fatalf("%s grew to %d pages, never analysed (relpages 0); want an analysis by %d", table, pages, most)
			}
		}
	}
}

// TestKeyPairsPlannedAsProbes: lookups by key pairs never scan the key
// pairs' table. A session plans each statement once and keeps the plan
// until the table is analysed again; the planner, told that the table is
// small (an ANALYZE at a few pages), plans the lookups as sequential
// scans, and the sessions keep them while it grows (see keysStatsFloor).
// Here a new store's log grows, its own looks at the tables' sizes
// running meanwhile, and at three sizes a worker far behind claims,
// acknowledges (past the acknowledgement's window, where it looks the
// partition's next message up by its key pairs) and reads, on the
// store's one session, and the server counts no sequential scan of the
// table: at 3 pages and at 12 after the store's Optimize of its empty
// tables (a runtime's first housekeeping), at 17 after an ANALYZE at 12
// pages, as autovacuum may run on a young table (the store analyses it
// again once it reaches its floor), and at 24 pages, analysed, with
// random page reads weighed at four times their default cost.
func TestKeyPairsPlannedAsProbes(t *testing.T) {
	defer pgstore.SetHealEvery(20 * time.Millisecond)()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg, MaxConns: 1})
	ctx := t.Context()
	const g = "test.devices"
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: g, PartitionBy: []string{"device_id"},
		Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	keys := s.Prefix() + "_message_keys"
	size := func() (pages, relpages int64) {
		t.Helper()
		pages, relpages, _ = tableSize(t, s, "_message_keys")
		return pages, relpages
	}
	devices, cycle := 0, 0 // new devices, or (cycle > 0) the first cycle ones again
	grow := func(to int64) {
		t.Helper()
		for pages, _ := size(); pages < to; pages, _ = size() {
			msgs := make([]core.Message, 100)
			for j := range msgs {
				id := fmt.Sprintf("device %d", devices)
				devices++
				if cycle > 0 {
					id = fmt.Sprintf("device %d", devices%cycle)
				}
				msgs[j] = core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id})
			}
			if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // the looks run beside the appends
		}
		time.Sleep(100 * time.Millisecond)
	}
	lookups := func(at string, settings ...string) {
		t.Helper()
		err := s.Update(ctx, func(tx driver.Tx) error {
			conn, err := pgstore.Conn(tx)
			if err != nil {
				return err
			}
			for _, set := range settings { // before the statements are planned again (the tables were analysed)
				if _, err := conn.Exec(ctx, set); err != nil {
					return err
				}
			}
			scans := func() (n int64) {
				t.Helper()
				if err := conn.QueryRow(ctx, `SELECT coalesce(max(seq_scan), 0) FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`, keys).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			check := func(what string, op func() error) {
				t.Helper()
				before := scans()
				if err := op(); err != nil {
					t.Fatalf("%s: %s: %v", at, what, err)
				}
				if n := scans() - before; n > 0 {
					t.Errorf("%s: %s scanned the key pairs' table %d times (sequential scans), want index probes", at, what, n)
				}
			}
			var c *driver.ClaimedPartition
			check("a claim", func() error {
				cs, err := tx.(driver.ClaimManyTx).ClaimMany(g, "w1", 100, 1)
				if err == nil && len(cs) != 1 {
					err = fmt.Errorf("claimed %d partitions, want 1", len(cs))
				}
				if err == nil {
					c = cs[0]
				}
				return err
			})
			check("an acknowledgement past its window, and a partition read", func() error {
				if err := tx.Ack(c, c.Last()); err != nil {
					return err
				}
				_, err := tx.ReadPartition(c.Partition, []string{fixtures.TypeDeviceRegistered}, driver.ReadOptions{})
				return err
			})
			check("a read of conditions", func() error {
				_, err := tx.Read([]core.Condition{{Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "device 7"}}}, driver.ReadOptions{After: 3})
				return err
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A runtime optimises its store when it starts (shell.Config's
	// OptimizeInterval), here while the tables are empty.
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	grow(3)
	lookups("at 3 pages")
	grow(12)
	lookups("at 12 pages")
	if _, err := s.Pool().Exec(ctx, "ANALYZE "+keys); err != nil {
		t.Fatal(err)
	}
	grow(17)
	deadline := time.Now().Add(10 * time.Second)
	for _, relpages := size(); relpages < 16; _, relpages = size() {
		if time.Now().After(deadline) {
			t.Fatalf("the key pairs' table, analysed at 12 pages, was not analysed again by 17 (the planner knows %d pages)", relpages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	lookups("at 17 pages, analysed at 12")
	// Analysed at 24 pages of a thousand partitions, a few messages
	// each. Asked for a key pair array at once, the planner weighed ten
	// probes against one scan of the table, nearly even at the default
	// random_page_cost of 4 (see keyRange); on a server that weighs a
	// random page read at 16 sequential ones, each pair's probe must
	// still beat a scan.
	cycle = 1000
	grow(24)
	if _, err := s.Pool().Exec(ctx, "ANALYZE "+keys); err != nil {
		t.Fatal(err)
	}
	lookups("at 24 pages of 1000 partitions, random_page_cost 16", "SET LOCAL random_page_cost = 16")
}

// TestOptimizeLeavesSmallTables: Optimize analyses the store's tables
// that grow with use only once they have reached their floors, and
// leaves them to the planner's estimates for a table never analysed
// (pg_class.reltuples -1) until then, which plan the lookups as index
// probes (see Store.Optimize). A runtime calls it when it starts: on a
// new store it analysed them empty. Here, on the empty store, only the
// tables that stay small (the groups', the head) are analysed; once the
// log holds 30 pages of messages and 16 of key pairs, both are, and the
// growing tables still small (the schedule's, the offsets') are not.
func TestOptimizeLeavesSmallTables(t *testing.T) {
	s := unhealedStore(t)
	ctx := t.Context()
	analysed := func(table string) bool {
		t.Helper()
		_, _, tuples := tableSize(t, s, table)
		return tuples >= 0
	}
	growing := []string{"_messages", "_message_keys", "_offsets", "_scheduled_messages"}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range growing {
		if analysed(table) {
			t.Errorf("%s analysed empty by Optimize, want it left never analysed", table)
		}
	}
	for _, table := range []string{"_consumer_groups", "_head"} {
		if !analysed(table) {
			t.Errorf("%s not analysed by Optimize", table)
		}
	}
	pages := func(table string) int64 {
		t.Helper()
		n, _, _ := tableSize(t, s, table)
		return n
	}
	for i := 0; pages("_messages") < 30 || pages("_message_keys") < 16; i++ {
		msgs := make([]core.Message, 100)
		for j := range msgs {
			id := fmt.Sprintf("device %d", 100*i+j)
			msgs[j] = core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id})
		}
		if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range growing {
		if want := table == "_messages" || table == "_message_keys"; analysed(table) != want {
			t.Errorf("%s (%d pages) analysed: %t, want %t", table, pages(table), !want, want)
		}
	}
}
