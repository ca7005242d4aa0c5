package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// counting is a store that counts the calls a page makes and the rows
// (messages, offsets, groups, counts) they return; before, when set, runs
// at the start of each call.
type counting struct {
	shell.Store
	inner  *sqlitestore.Store
	mu     sync.Mutex
	calls  map[string]int
	rows   int
	before func(ctx context.Context, method string) error
}

func (c *counting) count(ctx context.Context, method string, rows int) error {
	c.mu.Lock()
	c.calls[method]++
	c.rows += rows
	before := c.before
	c.mu.Unlock()
	if before != nil {
		return before(ctx, method)
	}
	return nil
}

func (c *counting) reset() (calls map[string]int, rows int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, rows = c.calls, c.rows
	c.calls, c.rows = map[string]int{}, 0
	return calls, rows
}

func (c *counting) Stats(ctx context.Context) (shell.Stats, error) {
	st, err := c.Store.Stats(ctx)
	return st, c.or(err, c.count(ctx, "Stats", len(st.Groups)))
}

func (c *counting) or(err, hook error) error {
	if err != nil {
		return err
	}
	return hook
}

func (c *counting) Group(ctx context.Context, group string) (shell.GroupInfo, error) {
	g, err := c.Store.Group(ctx, group)
	return g, c.or(err, c.count(ctx, "Group", 1))
}

func (c *counting) ReadOffsets(ctx context.Context, q shell.OffsetQuery) (shell.OffsetPage, error) {
	p, err := c.Store.ReadOffsets(ctx, q)
	return p, c.or(err, c.count(ctx, "ReadOffsets", len(p.Offsets)))
}

func (c *counting) Offsets(ctx context.Context, q shell.OffsetQuery) iter.Seq2[shell.Offset, error] {
	return driver.PageOffsets(ctx, c.ReadOffsets, q)
}

func (c *counting) ParkedPartitions(ctx context.Context, group string) ([]shell.ParkedPartition, error) {
	ps, err := c.Store.ParkedPartitions(ctx, group)
	return ps, c.or(err, c.count(ctx, "ParkedPartitions", len(ps)))
}

func (c *counting) ReadAll(ctx context.Context, opts shell.ReadAllOptions) (shell.Page, error) {
	p, err := c.Store.ReadAll(ctx, opts)
	return p, c.or(err, c.count(ctx, "ReadAll", len(p.Messages)))
}

func (c *counting) All(ctx context.Context, opts shell.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return func(yield func(core.PositionedMessage, error) bool) {
		for {
			p, err := c.ReadAll(ctx, opts)
			if err != nil {
				yield(core.PositionedMessage{}, err)
				return
			}
			for _, m := range p.Messages {
				if !yield(m, nil) {
					return
				}
			}
			next, ok := p.Next(opts)
			if !ok {
				return
			}
			opts = next
		}
	}
}

func (c *counting) Read(ctx context.Context, conds []core.Condition, opts shell.ReadOptions) (shell.ReadResult, error) {
	r, err := c.Store.Read(ctx, conds, opts)
	return r, c.or(err, c.count(ctx, "Read", len(r.Messages)))
}

func (c *counting) ReadPartition(ctx context.Context, partition core.Partition, types []string, opts shell.ReadOptions) (shell.ReadResult, error) {
	r, err := c.Store.ReadPartition(ctx, partition, types, opts)
	return r, c.or(err, c.count(ctx, "ReadPartition", len(r.Messages)))
}

func (c *counting) ReadCorrelation(ctx context.Context, id uuid.UUID) ([]core.PositionedMessage, error) {
	ms, err := c.Store.ReadCorrelation(ctx, id)
	return ms, c.or(err, c.count(ctx, "ReadCorrelation", len(ms)))
}

func (c *counting) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	at, ok, err := c.Store.NextScheduled(ctx)
	return at, ok, c.or(err, c.count(ctx, "NextScheduled", 1))
}

func (c *counting) ReadScheduled(ctx context.Context, limit int) ([]core.Message, error) {
	ms, err := c.inner.ReadScheduled(ctx, limit)
	return ms, c.or(err, c.count(ctx, "ReadScheduled", len(ms)))
}

func (c *counting) GroupLag(ctx context.Context, group string, q shell.LagQuery) (shell.Lag, error) {
	l, err := c.inner.GroupLag(ctx, group, q)
	// The store's own reads: the pending and parked counts, and one per
	// partition counted.
	return l, c.or(err, c.count(ctx, "GroupLag", 2+len(l.ByOffset)))
}

// Lag is the store's unbounded count (one read per pending partition).
func (c *counting) Lag(ctx context.Context, group string, limit int) (map[int64]int, error) {
	l, err := c.inner.Lag(ctx, group, limit)
	return l, c.or(err, c.count(ctx, "Lag", len(l)))
}

func (c *counting) ReadParked(ctx context.Context, q shell.ParkedQuery) ([]shell.ParkedPartition, error) {
	ps, err := c.inner.ReadParked(ctx, q)
	return ps, c.or(err, c.count(ctx, "ReadParked", len(ps)))
}

func (c *counting) LoadSnapshot(ctx context.Context, group, partition, version string) (shell.Snapshot, bool, error) {
	sn, ok, err := c.inner.LoadSnapshot(ctx, group, partition, version)
	return sn, ok, c.or(err, c.count(ctx, "LoadSnapshot", 1))
}

func (c *counting) SaveSnapshot(ctx context.Context, s shell.Snapshot) error {
	return c.inner.SaveSnapshot(ctx, s)
}

func (c *counting) DeleteSnapshots(ctx context.Context, group string, partitions ...string) (int, error) {
	return c.inner.DeleteSnapshots(ctx, group, partitions...)
}

func (c *counting) Workers(ctx context.Context) ([]sqlitestore.Worker, error) {
	ws, err := c.inner.Workers(ctx)
	return ws, c.or(err, c.count(ctx, "Workers", len(ws)))
}

// bigGroup is a group of the test with many partitions behind.
const bigGroup = "load.welcomes"

// costEnv is the demo's store, wrapped in a counting store, with pending
// partitions of bigGroup (none processed, the first parked of them
// parked), and its dashboard.
func costEnv(t *testing.T, pending, parked int, opts dashboard.Options) (*env, *counting) {
	t.Helper()
	ctx := context.Background()
	app := demo.New()
	inner := stores["sqlitestore"](t, app).(*sqlitestore.Store)
	if _, err := app.Seed(ctx, inner); err != nil {
		t.Fatal(err)
	}
	if err := inner.RegisterGroup(ctx, driver.GroupSpec{ID: bigGroup, PartitionBy: []string{"student_id"}, Handled: []string{"courses.welcome_sent"}}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]core.Message, pending)
	for i := range msgs {
		msgs[i] = core.NewMessage(demo.WelcomeSent{StudentID: fmt.Sprintf("s%05d", i), CourseID: "algebra"})
	}
	if _, err := inner.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for range parked {
		cl, err := inner.ClaimNext(ctx, bigGroup, "w", 1)
		if err != nil || cl == nil {
			t.Fatalf("claim to park: %v, %v", cl, err)
		}
		m := cl.Messages[0]
		f := shell.Failure{OffsetID: cl.OffsetID, Partition: core.Partition(cl.Partition).String(), MessageType: m.Type, MessageID: m.ID.String(), Position: m.Position, ErrorType: "*errors.errorString", Error: "poison"}
		if _, err := inner.ChangeGroup(ctx, bigGroup, func(shell.GroupState) (shell.GroupChange, error) {
			return shell.GroupChange{Command: shell.CmdPark, Failure: f}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := inner.Release(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	c := &counting{Store: inner, inner: inner, calls: map[string]int{}}
	opts.Reactors = app.Reactors()
	d, err := dashboard.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", d)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, store: c, srv: srv, app: app}, c
}

// costPages are the pages whose cost must not grow with the partitions.
var costPages = []string{"/", "/groups/" + bigGroup, "/partitions", "/partitions?group=" + bigGroup, "/groups/courses.search_index",
	"/log", "/scheduled", "/workflows", "/machines", "/topology", "/groups/courses.seats/state?partition=course_id:algebra"}

// Each page costs the same number of store calls and rows whatever the
// number of partitions behind (issue 30, item 1: a page ran one lag query
// per pending partition and /partitions read every offset: 43 s for / at
// 82k partitions behind).
func TestPagesCostTheSameWhateverThePartitionsBehind(t *testing.T) {
	type cost struct {
		calls map[string]int
		rows  int
	}
	measure := func(pending, parked int) map[string]cost {
		// The topology page reads the newest ObserveLast messages (its
		// bound whatever the log): a window smaller than either log here.
		// The charts' recorder has heard of every partition: its memory
		// and the pages' charts stay the same size.
		rec := dashboard.NewRecorder(dashboard.RecorderOptions{})
		for i := range pending {
			p := map[string]string{"student_id": fmt.Sprintf("s%05d", i)}
			rec.Observe(context.Background(), shell.Claimed{Group: bigGroup, Partition: p})
			rec.Observe(context.Background(), shell.GuardConflict{Group: bigGroup, Partition: p})
		}
		e, c := costEnv(t, pending, parked, dashboard.Options{ObserveLast: 100, Recorder: rec})
		out := map[string]cost{}
		for _, p := range costPages {
			c.reset()
			status, body := e.get(p)
			if status != http.StatusOK {
				t.Fatalf("%s with %d partitions behind: %d\n%s", p, pending, status, body)
			}
			calls, rows := c.reset()
			out[p] = cost{calls, rows}
			if n := strings.Count(body, `class="hot-partition"`); n > 10 {
				t.Errorf("%s lists %d hot partitions, want at most 10", p, n)
			}
		}
		return out
	}
	small, large := measure(120, 55), measure(1200, 110)
	for _, p := range costPages {
		s, l := small[p], large[p]
		n := 0
		for _, k := range l.calls {
			n += k
		}
		if fmt.Sprint(s.calls) != fmt.Sprint(l.calls) || s.rows != l.rows || n > 40 || l.rows > 1000 {
			t.Errorf("%s: %v calls and %d rows with 120 partitions behind (55 parked), %v and %d with 1,200 (110 parked): want the same, bounded", p, s.calls, s.rows, l.calls, l.rows)
		}
	}
	// Parked partitions come a page at a time.
	e, _ := costEnv(t, 60, 55, dashboard.Options{})
	for _, p := range []string{"/groups/" + bigGroup, "/partitions?group=" + bigGroup} {
		_, body := e.get(p)
		if n := strings.Count(body, `<tr class="parked-partition"`); n != 50 || !strings.Contains(body, "Parked partitions (55)") || !strings.Contains(body, "More parked partitions") {
			t.Errorf("%s: %d parked partitions listed, want the first 50 of 55 and a link to the others", p, n)
		}
		more := regexp.MustCompile(`class="more-parked" href="([^"]+)"`).FindStringSubmatch(body)
		if more == nil {
			continue
		}
		_, body = e.get(html.UnescapeString(more[1]))
		if n := strings.Count(body, `<tr class="parked-partition"`); n != 5 || strings.Contains(body, "More parked partitions") {
			t.Errorf("%s: the next page lists %d parked partitions, want the last 5", more[1], n)
		}
	}
	// The lag is shown as a lower bound over the partitions counted (the
	// demo's two welcomes make 252 partitions behind).
	e, _ = costEnv(t, 250, 0, dashboard.Options{LagPartitions: 5})
	_, body := e.get("/groups/" + bigGroup)
	mustContain(t, body, "at least 5 pending in 252 partition(s)", "counted in the 5 partition(s) furthest behind")
	_, body = e.get("/")
	row := body[strings.Index(body, `data-group="`+bigGroup+`"`):]
	row = row[:strings.Index(row, "</tr>")]
	mustContain(t, row, "≥</span>5 <small>in 252</small>")
}

// At most Options.MaxConcurrentPages requests are served at once, so
// that the dashboard never holds more of the store's readers than that:
// one beyond waits up to PageWait, then is refused with 503 and
// Retry-After (issue 30, item 1: five tabs on / held the readers and an
// application's read took 70 s). Static files are served regardless.
func TestConcurrentPagesAreCapped(t *testing.T) {
	e, c := costEnv(t, 10, 0, dashboard.Options{MaxConcurrentPages: 1, PageWait: 20 * time.Millisecond})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.before = func(ctx context.Context, method string) error {
		if method == "Stats" {
			once.Do(func() { close(entered); <-release })
		}
		return nil
	}
	first := make(chan int)
	go func() {
		res, err := http.Get(e.srv.URL + "/")
		if err != nil {
			first <- 0
			return
		}
		res.Body.Close()
		first <- res.StatusCode
	}()
	<-entered
	res, err := http.Get(e.srv.URL + "/log")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "MaxConcurrentPages") {
		t.Errorf("a page beyond the cap: %d, Retry-After %q; want 503 with Retry-After\n%s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if status, _ := e.get("/static/app.css"); status != http.StatusOK {
		t.Errorf("a static file while a page is served: %d", status)
	}
	close(release)
	if status := <-first; status != http.StatusOK {
		t.Errorf("the page served: %d", status)
	}
	if status, _ := e.get("/log"); status != http.StatusOK {
		t.Errorf("a page once the first is done: %d", status)
	}
}

// Each request runs under Options.PageTimeout: its store calls see the
// deadline, and a page that runs out of it answers 503 saying so.
func TestPagesRunUnderATimeBudget(t *testing.T) {
	e, c := costEnv(t, 10, 0, dashboard.Options{PageTimeout: 50 * time.Millisecond})
	var deadline bool
	c.before = func(ctx context.Context, method string) error {
		if method == "Stats" {
			_, deadline = ctx.Deadline()
			<-ctx.Done() // a query that outlives the budget
			return ctx.Err()
		}
		return nil
	}
	res, err := http.Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !deadline || res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "PageTimeout") {
		t.Errorf("a page past its budget: deadline %v, %d; want a deadline and 503 naming PageTimeout\n%s", deadline, res.StatusCode, body)
	}
}

// The workflows page reads the newest runs of each workflow only, so
// that its cost does not grow with the runs in the log (it folded every
// run of every workflow).
func TestWorkflowsPageCostTheSameWhateverTheRuns(t *testing.T) {
	e, c := costEnv(t, 10, 0, dashboard.Options{})
	ctx := context.Background()
	start := func(n int) {
		for i := range n {
			if _, err := workflow.Start(ctx, e.store, e.app.Greeting, "x", workflow.WithID(fmt.Sprintf("run-%d-%d", n, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure := func() (map[string]int, int, string) {
		c.reset()
		status, body := e.get("/workflows")
		if status != http.StatusOK {
			t.Fatalf("/workflows: %d\n%s", status, body)
		}
		calls, rows := c.reset()
		return calls, rows, body
	}
	start(120)
	calls, rows, body := measure()
	mustContain(t, body, "The newest 100 runs (older ones are not read)")
	start(240)
	calls2, rows2, _ := measure()
	if fmt.Sprint(calls) != fmt.Sprint(calls2) || rows != rows2 {
		t.Errorf("/workflows: %v calls and %d rows with 121 runs, %v and %d with 361: want the same", calls, rows, calls2, rows2)
	}
}

// The state page folds at most MaxStateHistory messages of a partition:
// a longer history up to the position asked is refused, after one read
// of MaxStateHistory+1 messages, whatever its length, unless the decider
// has a snapshot at or before the position to fold the rest onto.
func TestStatePageCostIsBounded(t *testing.T) {
	e, c := costEnv(t, 10, 0, dashboard.Options{})
	msgs := make([]core.Message, dashboard.MaxStateHistory+5)
	for i := range msgs {
		msgs[i] = core.NewMessage(demo.SeatReserved{CourseID: "big", StudentID: fmt.Sprintf("s%d", i)})
	}
	if _, err := c.inner.Append(context.Background(), msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	c.reset()
	status, body := e.get("/groups/courses.seats/state?partition=course_id:big")
	calls, rows := c.reset()
	if status != http.StatusBadRequest || !strings.Contains(body, "MaxStateHistory") {
		t.Errorf("a partition of %d messages: %d, want 400 naming MaxStateHistory\n%.1000s", len(msgs), status, body)
	}
	if calls["ReadPartition"] != 1 || calls["LoadSnapshot"] != 1 || rows > dashboard.MaxStateHistory+2 {
		t.Errorf("refusing it read %v calls and %d rows, want one read of at most %d messages and a look for a snapshot", calls, rows, dashboard.MaxStateHistory+1)
	}
	// From the decider's snapshot, when it has one at or before the
	// position: the messages after it are folded onto it.
	part := map[string]string{"course_id": "big"}
	all, err := c.inner.ReadPartition(context.Background(), part, []string{"courses.seat_reserved"}, shell.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snapAt := all.Messages[len(all.Messages)-3].Position // 3 messages before the last
	if err := c.inner.SaveSnapshot(context.Background(), shell.Snapshot{Group: "courses.seats", Partition: core.Partition(part).Key(), Version: "seats/v1",
		Position: snapAt, State: []byte(`{"reserved":5000}`)}); err != nil {
		t.Fatal(err)
	}
	c.reset()
	st, err := dashboard.StateAt(context.Background(), c, nil, e.app.Reactors(), dashboard.StateQuery{Group: "courses.seats", Partition: part, At: dashboard.Latest})
	calls, rows = c.reset()
	if err != nil || st.FromSnapshot != snapAt || st.Folded != 2 || !strings.Contains(string(st.State), `"reserved":5002`) || st.Prev != all.Messages[len(all.Messages)-2].Position {
		t.Errorf("from a snapshot: %v, from %d, %d folded, state %s, prev %d; want 2 folded onto the snapshot at %d: 5002", err, st.FromSnapshot, st.Folded, st.State, st.Prev, snapAt)
	}
	if calls["ReadPartition"] != 3 || rows > dashboard.MaxStateHistory+1+1+2 {
		t.Errorf("from a snapshot: %v calls and %d rows, want the refused read, the read after the snapshot and the next", calls, rows)
	}
	_, body = e.get("/groups/courses.seats/state?partition=course_id:big")
	mustContain(t, body, fmt.Sprintf("onto the decider's snapshot at #%d", snapAt))
	// Before the snapshot, it is refused again.
	if _, err := dashboard.StateAt(context.Background(), c, nil, e.app.Reactors(), dashboard.StateQuery{Group: "courses.seats", Partition: part, At: snapAt - 1}); !errors.Is(err, dashboard.ErrStateTooLong) {
		t.Errorf("before the snapshot: %v, want ErrStateTooLong", err)
	}
	// Up to a position within the bound, it is folded from the log.
	res, err := c.inner.ReadPartition(context.Background(), map[string]string{"course_id": "big"}, []string{"courses.seat_reserved"}, shell.ReadOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	at := res.Messages[99].Position
	status, body = e.get(fmt.Sprintf("/groups/courses.seats/state?partition=course_id:big&at=%d", at))
	if status != http.StatusOK || !strings.Contains(body, "&#34;reserved&#34;: 100") {
		t.Errorf("at the 100th reservation: %d\n%.1000s", status, body)
	}
}
