package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// A session plans each statement the store sends once, then reuses the
// plan (pgx prepares them; PL/pgSQL caches the plans of its functions'
// statements), until the planner's knowledge of a table it reads
// changes: an ANALYZE or VACUUM of the table, or DDL. A plan made while
// a table was small and known to be small (autovacuum analyses a new
// table after its first 50 rows) is a sequential scan, even for an
// equality probe of a unique index, and a scan it stays while the table
// grows, until autovacuum's next look (a minute apart by default, then
// every 10 % of growth). Measured: the newest position read inside every
// exclusive transaction took 4.4 ms on average over a run that grew the
// log to 20,000 messages, and 90 ms at its worst, where an index probe
// takes microseconds.
//
// So each open store keeps the planner's picture of its growing tables
// current itself: once a second (with heal) it compares each table's
// size on disk with the size the planner last recorded (pg_class.relpages)
// and analyses those that have more than doubled since. The statistics
// change, every session's cached plans of the table are planned again,
// and a table that grows from nothing to millions of rows is analysed
// about a dozen times in all. Another store's ANALYZE counts for this one;
// one the role may not run (not the table's owner: the server skips it
// with a warning) is not tried again before the table doubles again.

// A log that grows from nothing does so fastest at its start, when a
// second is many doublings: a store that began appending to new tables
// planned its claims as scans of the empty tables (EXPLAIN ANALYZE: the
// offsets of a group read whole, the log read whole per partition
// claimed) for up to the first second, and BenchmarkPostgresEndToEnd's
// p99 showed it (0.36-0.5 s for the commands of that second, against 50-90
// ms after). So the advancer also looks at once whenever a commit of this
// store reaches twice the position of its last look (growing), from
// firstStatsLook on: fourteen looks as the log grows to a
// million messages, each the cheap size check of the tick.
//
// And a table is analysed from its first few pages on (statsFloor), not
// from the ten pages the planner assumes of a table never analysed: a
// plan made while the offsets were a page or two stays cached while they
// grow past that. EXPLAIN ANALYZE of such a claim, at 312 offsets: 14 ms,
// nearly all of it in the repair of stale markers, which read the offsets
// whole once per offset it looked at (a correlated probe by id planned
// as a scan). With the old floor the first analysis came at 21 pages;
// BenchmarkPostgresEndToEnd's workers stalled on such claims for 150-400
// ms in about half of the runs (4 of 8: up to 243 commands over 50 ms, p99
// up to 63 ms), and in none of 8 with the first analysis at 5 pages and the first
// look at position 64 (p99 8.6-33 ms, the slowest command 49 ms); the few
// extra analyses of tiny tables cost milliseconds.

// These analyses are for the tables' sizes, which is what the planner
// most needs to know of a growing table, so they sample few rows
// (growthStatsTarget): at the default statistics target, ANALYZE reads
// 30,000 rows of each table, all of a young log, and its every column
// (the payloads, the key pair arrays): 130-170 ms for a log of 20,000
// messages and 30-55 ms for its key pairs on this VM, where a target of
// 10 takes 14 ms and 4 ms. In BenchmarkPostgresEndToEnd those analyses
// (48, 86 and 247 ms in one run) took a core from the appender and the
// workers at once, and bursts of slow commands (up to 70 ms) came with
// them; sampling few rows, it ran 1.09x at the median of five
// alternated pairs, its p99 within its noise. Full statistics come from
// Optimize (at a runtime's start, then hourly) and from autovacuum; a
// column given a statistics target of its own (ALTER TABLE ... SET
// STATISTICS) keeps it.

// growthStatsTarget is the statistics target of the analyses of tables
// that outgrew what the planner knew of them (refreshStats).
const growthStatsTarget = 10

// firstStatsLook is the log position of a store's first early look at
// its tables' sizes.
const firstStatsLook = 64

// statsFloor is the size in pages from which a table is analysed (see
// staleStats), but for the key pairs' table (keysStatsFloor).
const statsFloor = 5

// keysStatsFloor is statsFloor for the key pairs' table: it is left to
// the planner's estimates of a table never analysed until it is this big.
// Every lookup by key pairs is a probe of its primary key by key and
// position; the planner, told the table is small, plans it as a
// sequential scan instead (a generic plan, as the store's sessions make
// them, up to about 12 pages of pairs), and the sessions keep that plan
// while the table grows, until its next analysis. Never analysed, the
// table gets index probes at every size. BenchmarkPostgresEndToEnd's
// acknowledgements so scanned the table once for each offset of their
// batch as soon as the workers fell more than the acknowledgement's window
// behind: 15-28 ms a statement, after which the workers fell further
// behind (a p99 of 0.25-0.85 s in 5 of 16 runs, the analyses then at 5
// and 10 pages, the first of the empty table by the migration that made
// it). A table analysed while smaller (autovacuum analyses a new one
// after its first 50 rows; a migration that filled it from a short log)
// is analysed again when it reaches this size.
const keysStatsFloor = 16

// growing tells the advancer to look at the tables' sizes at once when
// a commit reached position last, twice the position of the last look.
func (s *Store) growing(last int64) {
	at := s.statsAt.Load()
	if last < at || !s.statsAt.CompareAndSwap(at, 2*last) {
		return
	}
	select {
	case s.statsNow <- struct{}{}:
	default:
	}
}

// statsWatch is the check of the tables whose statistics a store keeps
// current (see above): their names, the size in pages from which each is
// analysed, and the size at which each was last analysed or tried.
type statsWatch struct {
	tables []string
	floors []int64
	tried  map[string]int64
}

// newStatsWatch watches the tables that grow with use: the log and its
// key pairs, the scheduled messages, and the offsets (one per partition
// of each group).
func newStatsWatch(n names) *statsWatch {
	w := &statsWatch{tables: []string{n.messages, n.keys, n.scheduled, n.offsets}, tried: map[string]int64{}}
	for _, t := range w.tables {
		w.floors = append(w.floors, n.floorOf(t))
	}
	return w
}

// floorOf is the size in pages from which table is analysed: statsFloor
// or keysStatsFloor for the tables that grow with use, 0 for the others
// (they stay a page or two).
func (n names) floorOf(table string) int64 {
	switch table {
	case n.keys:
		return keysStatsFloor
	case n.messages, n.scheduled, n.offsets:
		return statsFloor
	}
	return 0
}

// relPages is the size in pages of the table c (pg_class) holds.
const relPages = "pg_relation_size(c.oid) / current_setting('block_size')::bigint"

// staleStats is the statement of the check: each table ($1) with its
// size in pages, where that reaches the table's floor ($2) and exceeds
// twice what the planner knows (a table never analysed has relpages 0),
// or what the planner knows is below the floor.
const staleStats = `SELECT c.relname::text, s.pages FROM unnest($1::regclass[], $2::bigint[]) AS t(oid, floor)
	JOIN pg_class c ON c.oid = t.oid
	CROSS JOIN LATERAL (SELECT ` + relPages + ` AS pages) s
	WHERE s.pages >= t.floor AND (s.pages > 2 * c.relpages OR c.relpages < t.floor)`

// bigEnough returns those of tables that are at least as big as their
// floors (names.floorOf).
func (s *Store) bigEnough(ctx context.Context, tables []string) ([]string, error) {
	floors := make([]int64, len(tables))
	for i, t := range tables {
		floors[i] = s.names.floorOf(t)
	}
	rows, err := s.pool.Query(ctx, `SELECT c.relname::text FROM unnest($1::regclass[], $2::bigint[]) AS t(oid, floor)
	JOIN pg_class c ON c.oid = t.oid WHERE `+relPages+` >= t.floor`, tables, floors)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// refreshStats analyses the store's tables that outgrew what the planner
// knows of them (see above), bounded by ctx; errors are logged, as the
// next look tries again.
func (s *Store) refreshStats(ctx context.Context, w *statsWatch) {
	rows, err := s.pool.Query(ctx, staleStats+" "+healMark, w.tables, w.floors)
	if err != nil {
		s.log.Debug("pgstore: reading table sizes failed", "err", err)
		return
	}
	var stale []string
	var pages []int64
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			rows.Close()
			return
		}
		if n > 2*w.tried[name] {
			stale, pages = append(stale, name), append(pages, n)
		}
	}
	rows.Close()
	if rows.Err() != nil || len(stale) == 0 {
		return
	}
	// ANALYZE waits for a VACUUM of the table (autovacuum's): not long.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL lock_timeout = '200ms'")
	b.Queue("SET LOCAL default_statistics_target = " + strconv.Itoa(growthStatsTarget))
	b.Queue(fmt.Sprintf("ANALYZE %s %s", strings.Join(stale, ", "), healMark))
	b.Queue("COMMIT")
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		s.log.Debug("pgstore: analysing grown tables failed", "tables", stale, "err", err)
		return
	}
	for i, name := range stale {
		w.tried[name] = pages[i]
	}
}
