package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// BenchmarkPostgresAppendParallel measures appends by concurrent writers
// (issue 24): W writers (goroutines, each with its own connection: the
// store's pool holds W+2) append single messages with random UUID ids, b.N
// appends in all, each writer to its own consistency boundary
// (boundaries=disjoint: course_id=w<i>) or all to one
// (boundaries=same: course_id=same). Sub-benchmarks:
//
//	rtt=R/boundaries=B/writers=W             Store.Append, no guard
//	rtt=R/boundaries=B/writers=W/guarded     Store.Append guarded by the boundary
//	rtt=R/boundaries=B/writers=W/impl=floor  the floor: bare pgx, no lock
//
// for R = 0 (the server's Unix socket) and 500us (through a LatencyProxy
// adding 0.25 ms each way: application servers on other hosts), B =
// disjoint and same, W = 1, 4, 16. Each reports msgs/s and p99-us (the
// latency of one Append call, or of one floor INSERT), and rtt-us, the
// median round trip of an empty query on the same path measured before
// the run (what the proxy's delay gives on the machine at the time);
// guarded appends on boundaries=same also report conflicts/s (appends
// whose guard failed).
//
// A guarded writer decides on what it knows of its boundary: its guard's
// LastPosition is its own last append, or what a read of the boundary
// after a conflict returned (shell.ReadOptions.After the last known
// position); each conflict costs that read and a new attempt, and b.N
// counts the appends that succeeded. On disjoint boundaries a conflict is
// a false one and fails the benchmark. After each run the log is checked:
// one message per append, and on each boundary every successful guarded
// append decided on the state left by the one before it (no two decided
// on the same state).
//
// The floor is "floor b" of issue 24, the unsafe upper bound: per append
// one INSERT of the row the store writes (same table, indexes, columns,
// keys and key_names, installed by pgstore.Install), its position from a
// sequence, in an implicit transaction: one round trip, no lock, no
// NOTIFY, no offsets (the store has no consumer groups here).
//
// Each sub-benchmark installs the store under a fresh prefix (on the
// Unix socket, also under rtt=500us) and drops it at the end.
//
//	cd bench && go test -run '^$' -bench 'BenchmarkPostgresAppendParallel' -benchtime 2000x
func BenchmarkPostgresAppendParallel(b *testing.B) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		b.Skip(PostgresURLEnv + " is not set: this benchmark runs on PostgreSQL (see shell/pgstore/internal/pgtest for a throwaway server)")
	}
	for _, rtt := range []struct {
		name  string
		delay time.Duration // each way
	}{{"rtt=0", 0}, {"rtt=500us", 250 * time.Microsecond}} {
		via := url
		if rtt.delay > 0 {
			p, u, err := ProxyPostgres(url, rtt.delay)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close() })
			via = u
		}
		for _, same := range []bool{false, true} {
			for _, w := range []int{1, 4, 16} {
				for _, v := range []struct {
					suffix         string
					guarded, floor bool
				}{{"", false, false}, {"/guarded", true, false}, {"/impl=floor", false, true}} {
					c := parallelCase{writers: w, same: same, guarded: v.guarded, floor: v.floor}
					b.Run(rtt.name+"/"+c.boundaries()+"/writers="+strconv.Itoa(w)+v.suffix, func(b *testing.B) {
						rtt := medianRoundTrip(b, via)
						r := appendParallel(b, url, via, c, b.N, b)
						secs := r.elapsed.Seconds()
						b.ReportMetric(float64(rtt.Microseconds()), "rtt-us")
						b.ReportMetric(float64(r.appends)/secs, "msgs/s")
						b.ReportMetric(float64(r.p99().Microseconds()), "p99-us")
						if c.same && c.guarded {
							b.ReportMetric(float64(r.conflicts)/secs, "conflicts/s")
						}
						// The default ns/op would be the wall time over all
						// writers divided by b.N: msgs/s says it plainly.
					})
				}
			}
		}
	}
}

// parallelEnrolled is the payload of the parallel appends: course_id is
// the boundary, student_id unique to each append (two key pairs, as the
// store benchmarks' messages carry).
type parallelEnrolled struct {
	CourseID  string `json:"course_id"`
	StudentID string `json:"student_id"`
}

const parallelEnrolledType = "bench.parallel_enrolled"

func parallelRegistry(tb testing.TB) *codec.Registry {
	tb.Helper()
	reg := codec.NewRegistry()
	if err := codec.Register[parallelEnrolled](reg, parallelEnrolledType); err != nil {
		tb.Fatal(err)
	}
	return reg
}

// parallelCase is one configuration of BenchmarkPostgresAppendParallel.
type parallelCase struct {
	writers int
	same    bool // all writers on one boundary
	guarded bool
	floor   bool
}

func (c parallelCase) boundaries() string {
	if c.same {
		return "boundaries=same"
	}
	return "boundaries=disjoint"
}

// course is writer w's boundary.
func (c parallelCase) course(w int) string {
	if c.same {
		return "same"
	}
	return "w" + strconv.Itoa(w)
}

// parallelResult is what one run of appendParallel measured.
type parallelResult struct {
	appends   int // successful appends (messages written)
	conflicts int // guarded appends whose guard failed
	elapsed   time.Duration
	latencies []time.Duration // of every Append call (or floor INSERT)
}

// p99 is the 99th percentile of the latencies (nearest rank).
func (r parallelResult) p99() time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	l := slices.Clone(r.latencies)
	slices.Sort(l)
	i := (len(l)*99+99)/100 - 1
	return l[min(max(i, 0), len(l)-1)]
}

// guardedAppend is one successful guarded append: the position its guard
// decided on, and the position it wrote.
type guardedAppend struct {
	course   string
	decided  int64
	position int64
}

// benchTimer is the part of *testing.B appendParallel drives (a no-op in
// the tests that run it).
type benchTimer interface {
	ResetTimer()
	StopTimer()
}

type noTimer struct{}

func (noTimer) ResetTimer() {}
func (noTimer) StopTimer()  {}

// appendParallel runs n appends of case c by c.writers writers on a store
// installed through direct under a fresh prefix and used through via
// (the same server, perhaps through a LatencyProxy), checks the log they
// left, drops the prefix, and returns what it measured. The timer runs
// over the appends only.
func appendParallel(tb testing.TB, direct, via string, c parallelCase, n int, timer benchTimer) parallelResult {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := parallelRegistry(tb)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	admin := OpenPostgres(tb, direct, reg, quiet)
	tb.Cleanup(func() {
		admin.Uninstall(context.Background())
		admin.Close()
	})
	var (
		appendOne func(w, seq int, last int64, guarded bool) (int64, error)
		warm      func() error
		count     func() (int, error)
		store     *pgstore.Store
	)
	if c.floor {
		f := openFloor(tb, admin.Prefix(), via, c.writers)
		appendOne = func(w, seq int, _ int64, _ bool) (int64, error) {
			return f.append(ctx, w, parallelEnrolled{CourseID: c.course(w), StudentID: studentID(w, seq)})
		}
		warm = func() error { return nil } // connections opened by openFloor
		count = f.count
	} else {
		var err error
		store, err = pgstore.Open(ctx, via, pgstore.Options{Registry: reg, Logger: quiet, Prefix: admin.Prefix(), MaxConns: int32(c.writers + 2)})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { store.Close() })
		appendOne = func(w, seq int, last int64, guarded bool) (int64, error) {
			m := core.Message{ID: uuid.New(), Payload: parallelEnrolled{CourseID: c.course(w), StudentID: studentID(w, seq)}}
			var opts shell.AppendOptions
			if guarded {
				opts.Guard = &core.Guard{Conditions: courseCondition(c.course(w)), LastPosition: last}
			}
			res, err := store.Append(ctx, []core.Message{m}, opts)
			return res.Last, err
		}
		// Open every writer's connection before the timer starts: hold
		// c.writers pooled connections at once.
		warm = func() error {
			var hold sync.WaitGroup
			hold.Add(c.writers)
			errs := make(chan error, c.writers)
			for range c.writers {
				go func() {
					errs <- store.View(ctx, func(pgx.Tx) error {
						hold.Done()
						hold.Wait()
						return nil
					})
				}()
			}
			for range c.writers {
				if err := <-errs; err != nil {
					return err
				}
			}
			return nil
		}
		count = func() (int, error) {
			r, err := admin.Read(ctx, []core.Condition{{Type: parallelEnrolledType}}, shell.ReadOptions{})
			return len(r.Messages), err
		}
	}
	if err := warm(); err != nil {
		tb.Fatal(err)
	}

	var (
		tickets   atomic.Int64
		conflicts atomic.Int64
		mu        sync.Mutex
		firstErr  error
		lat       = make([][]time.Duration, c.writers)
		decisions = make([][]guardedAppend, c.writers)
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	timer.ResetTimer()
	start := time.Now()
	for w := range c.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			course := c.course(w)
			var last int64 // the boundary is empty in a fresh store
			seq := 0
			for tickets.Add(1) <= int64(n) {
				for {
					seq++
					t0 := time.Now()
					pos, err := appendOne(w, seq, last, c.guarded)
					lat[w] = append(lat[w], time.Since(t0))
					var conflict *core.ConflictError
					if c.guarded && errors.As(err, &conflict) {
						if !c.same {
							fail(fmt.Errorf("writer %d: a false conflict on its own boundary %s: %w", w, course, err))
							return
						}
						conflicts.Add(1)
						r, err := store.Read(ctx, courseCondition(course), shell.ReadOptions{After: last})
						if err != nil {
							fail(fmt.Errorf("writer %d: read after a conflict: %w", w, err))
							return
						}
						last = r.Guard.LastPosition
						continue
					}
					if err != nil {
						fail(fmt.Errorf("writer %d: append: %w", w, err))
						return
					}
					if c.guarded {
						decisions[w] = append(decisions[w], guardedAppend{course: course, decided: last, position: pos})
					}
					last = pos
					break
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	timer.StopTimer()
	if firstErr != nil {
		tb.Fatal(firstErr)
	}

	r := parallelResult{appends: n, conflicts: int(conflicts.Load()), elapsed: elapsed}
	for _, l := range lat {
		r.latencies = append(r.latencies, l...)
	}
	got, err := count()
	if err != nil {
		tb.Fatal(err)
	}
	if got != n {
		tb.Fatalf("%d messages in the log after %d appends", got, n)
	}
	if c.guarded {
		if err := checkGuardChains(slices.Concat(decisions...)); err != nil {
			tb.Fatal(err)
		}
		if c := len(slices.Concat(decisions...)); c != n {
			tb.Fatalf("%d successful guarded appends recorded, %d messages written", c, n)
		}
	}
	return r
}

// medianRoundTrip is the median time of 31 empty queries (one round trip
// each) on a new connection to url.
func medianRoundTrip(tb testing.TB, url string) time.Duration {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var l []time.Duration
	for range 31 {
		start := time.Now()
		if _, err := conn.Exec(ctx, ";", pgx.QueryExecModeSimpleProtocol); err != nil {
			tb.Fatal(err)
		}
		l = append(l, time.Since(start))
	}
	slices.Sort(l)
	return l[len(l)/2]
}

func studentID(w, seq int) string { return "s" + strconv.Itoa(w) + "-" + strconv.Itoa(seq) }

func courseCondition(course string) []core.Condition {
	return []core.Condition{{Type: parallelEnrolledType, Attrs: map[string]string{"course_id": course}}}
}

// checkGuardChains checks that guarded appends (each the only writer of
// its message's boundary, one message each) are linearizable: on each
// boundary, in the order of their positions, every append decided on a
// state holding the message before it and not its own (previous position
// <= decided < own position), so no two decided on the same state.
func checkGuardChains(appends []guardedAppend) error {
	byCourse := make(map[string][]guardedAppend)
	for _, a := range appends {
		byCourse[a.course] = append(byCourse[a.course], a)
	}
	for course, as := range byCourse {
		slices.SortFunc(as, func(a, b guardedAppend) int { return int(a.position - b.position) })
		var prev int64
		for i, a := range as {
			if i > 0 && a.position == prev {
				return fmt.Errorf("boundary %s: two appends wrote position %d", course, prev)
			}
			if a.decided < prev || a.decided >= a.position {
				return fmt.Errorf("boundary %s: the append at position %d decided on position %d, but the message before it on the boundary is at %d: its guard missed it", course, a.position, a.decided, prev)
			}
			prev = a.position
		}
	}
	return nil
}

// floor is "floor b": per writer a bare pgx connection inserting the rows
// the store writes, positions from a sequence owned by the messages
// table's position column (dropped with the table by Uninstall).
type floor struct {
	conns  []*pgx.Conn
	insert string
	table  string
}

func openFloor(tb testing.TB, prefix, url string, writers int) *floor {
	tb.Helper()
	ctx := context.Background()
	table := prefix + "_messages"
	seq := prefix + "_floor_position"
	f := &floor{
		table: table,
		insert: fmt.Sprintf(`INSERT INTO %s (position, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
VALUES (nextval('%s'), $1, $2, 1, $1, $1, $3::json, NULL, $4, $5, $6) RETURNING position`, table, seq),
	}
	for range writers {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { conn.Close(context.Background()) })
		f.conns = append(f.conns, conn)
	}
	if _, err := f.conns[0].Exec(ctx, fmt.Sprintf(`CREATE SEQUENCE %s OWNED BY %s.position`, seq, table)); err != nil {
		tb.Fatal(err)
	}
	return f
}

// append inserts one message on writer w's connection: one round trip.
func (f *floor) append(ctx context.Context, w int, e parallelEnrolled) (int64, error) {
	payload, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	var pos int64
	err = f.conns[w].QueryRow(ctx, f.insert, uuid.New(), parallelEnrolledType, string(payload),
		time.Now().UTC().Truncate(time.Microsecond),
		[]string{"course_id\x1f" + e.CourseID, "student_id\x1f" + e.StudentID},
		[]string{"course_id", "student_id"}).Scan(&pos)
	return pos, err
}

func (f *floor) count() (int, error) {
	var n int
	err := f.conns[0].QueryRow(context.Background(), "SELECT count(*) FROM "+f.table).Scan(&n)
	return n, err
}

// TestPostgresAppendParallel runs BenchmarkPostgresAppendParallel's body
// once at a small size for each kind of case, directly and through a
// LatencyProxy (its checks of the log are the test's assertions).
func TestPostgresAppendParallel(t *testing.T) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		t.Skip(PostgresURLEnv + " is not set")
	}
	p, via, err := ProxyPostgres(url, 100*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		name string
		via  string
		c    parallelCase
	}{
		{"disjoint", url, parallelCase{writers: 3}},
		{"disjoint/guarded", url, parallelCase{writers: 3, guarded: true}},
		{"same", url, parallelCase{writers: 3, same: true}},
		{"same/guarded", url, parallelCase{writers: 4, same: true, guarded: true}},
		{"same/guarded/proxy", via, parallelCase{writers: 4, same: true, guarded: true}},
		{"disjoint/floor/proxy", via, parallelCase{writers: 3, floor: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 30
			r := appendParallel(t, url, c.via, c.c, n, noTimer{})
			if r.appends != n || len(r.latencies) != n+r.conflicts || r.p99() <= 0 {
				t.Errorf("appends %d, conflicts %d, latencies %d, p99 %v: want %d appends and a latency for each attempt", r.appends, r.conflicts, len(r.latencies), r.p99(), n)
			}
		})
	}
}

// TestFloorWritesTheStoresRow: the floor's INSERT writes the row the
// store writes for the same message, but for its id, position and time.
func TestFloorWritesTheStoresRow(t *testing.T) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		t.Skip(PostgresURLEnv + " is not set")
	}
	ctx := context.Background()
	s := OpenPostgres(t, url, parallelRegistry(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer func() { s.Uninstall(ctx); s.Close() }()
	e := parallelEnrolled{CourseID: "c1", StudentID: "s1"}
	if _, err := s.Append(ctx, []core.Message{{ID: uuid.New(), Payload: e}}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	f := openFloor(t, s.Prefix(), url, 1)
	if _, err := f.conns[0].Exec(ctx, fmt.Sprintf(`SELECT setval('%s_floor_position', (SELECT max(position) FROM %s))`, s.Prefix(), f.table)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.append(ctx, 0, e); err != nil {
		t.Fatal(err)
	}
	rows, err := f.conns[0].Query(ctx, `SELECT position, message_type, payload_version, causation_id = message_id AND correlation_id = message_id,
	payload::text, metadata IS NULL, keys, key_names FROM `+f.table+` ORDER BY position`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var pos int64
		var typ, payload string
		var version int
		var selfCaused, noMeta bool
		var keys, names []string
		if err := rows.Scan(&pos, &typ, &version, &selfCaused, &payload, &noMeta, &keys, &names); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s v%d %v %s %v %q %q", typ, version, selfCaused, payload, noMeta, keys, names))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(got) != 2 || got[0] != got[1] {
		t.Fatalf("rows (store's, then floor's):\n%s", got)
	}
}

// TestCheckGuardChains: the check catches two guarded appends that
// decided on the same state, and one whose guard missed the message
// before it.
func TestCheckGuardChains(t *testing.T) {
	ok := []guardedAppend{{"a", 0, 1}, {"b", 0, 2}, {"a", 1, 3}, {"a", 3, 5}, {"b", 4, 6}}
	if err := checkGuardChains(ok); err != nil {
		t.Errorf("a linearizable history: %v", err)
	}
	for name, bad := range map[string][]guardedAppend{
		"same state": {{"a", 0, 1}, {"a", 0, 2}},
		"missed":     {{"a", 0, 1}, {"a", 1, 2}, {"a", 1, 3}},
		"duplicate":  {{"a", 0, 1}, {"a", 0, 1}},
		"from ahead": {{"a", 4, 3}},
	} {
		if err := checkGuardChains(bad); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}
