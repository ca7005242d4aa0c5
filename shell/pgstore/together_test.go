package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
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

// The tests of appends sent together (together.go). Each holds the one
// append a store may have in flight (ConcurrentAppends: 1) on a boundary
// key locked by a session of the test's own, so that the appends made
// meanwhile wait, then lets it go: the waiting ones are sent together.

// keyHolder is a session of the test's holding boundary keys exclusively
// (an append of a message on one waits for it).
type keyHolder struct {
	t    *testing.T
	s    *pgstore.Store
	conn *pgx.Conn
}

func newKeyHolder(t *testing.T, s *pgstore.Store) *keyHolder {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &keyHolder{t: t, s: s, conn: conn}
}

// hold locks the key of rl.deposited messages of account.
func (h *keyHolder) hold(account string) {
	h.t.Helper()
	ns, key := pgstore.BoundaryKey(h.s, "rl.deposited", "account", account)
	if _, err := h.conn.Exec(context.Background(), "SELECT pg_advisory_lock($1, $2)", ns, key); err != nil {
		h.t.Fatal(err)
	}
}

// release unlocks it.
func (h *keyHolder) release(account string) {
	h.t.Helper()
	ns, key := pgstore.BoundaryKey(h.s, "rl.deposited", "account", account)
	var ok bool
	if err := h.conn.QueryRow(context.Background(), "SELECT pg_advisory_unlock($1, $2)", ns, key).Scan(&ok); err != nil || !ok {
		h.t.Fatalf("unlock %s: %v %v", account, ok, err)
	}
}

// waiters waits until n sessions wait for a boundary lock of the store
// (tests of other stores may run on the server meanwhile).
func (h *keyHolder) waiters(n int) {
	h.t.Helper()
	ns, _ := pgstore.BoundaryKey(h.s, "", "", "")
	h.eventually(fmt.Sprintf("%d sessions waiting for a boundary", n), func() bool {
		var got int
		err := h.conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2 AND classid = oid($1::bigint & 4294967295)`, ns).Scan(&got)
		return err == nil && got == n
	})
}

func (h *keyHolder) eventually(what string, ok func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// appendCall is one Append's outcome.
type appendCall struct {
	res driver.AppendResult
	err error
}

// goAppend appends msgs with opts in a goroutine of its own.
func goAppend(ctx context.Context, s *pgstore.Store, msgs []core.Message, opts driver.AppendOptions) <-chan appendCall {
	out := make(chan appendCall, 1)
	go func() {
		res, err := s.Append(ctx, msgs, opts)
		out <- appendCall{res, err}
	}()
	return out
}

// openOneInFlight opens a store that sends one append transaction at a
// time (the default, written out).
func openOneInFlight(t *testing.T) *pgstore.Store {
	t.Helper()
	return open(t, pgstore.Options{Registry: rlRegistry(t), ConcurrentAppends: 1, MaxConns: 16})
}

// depositsOf are the conditions of account's deposits.
func depositsOf(account string) []core.Condition {
	return []core.Condition{{Type: "rl.deposited", Attrs: map[string]string{"account": account}}}
}

func deposited(account string) []core.Message {
	return []core.Message{core.NewMessage(rlDeposited{Account: account, Amount: 1})}
}

// occupy starts an append that takes the store's one place in flight and
// waits there until the store's lock, which the holder takes, is
// released (see release); the store's lock, not a boundary's, as an
// append that finds a boundary held gives its place up and waits alone.
func occupy(t *testing.T, s *pgstore.Store, h *keyHolder) <-chan appendCall {
	t.Helper()
	if _, err := h.conn.Exec(context.Background(), "SELECT pg_advisory_lock($1::bigint)", pgstore.LockKey(s)); err != nil {
		t.Fatal(err)
	}
	call := goAppend(context.Background(), s, deposited("first"), driver.AppendOptions{})
	h.eventually("the first append waiting for the store's lock", func() bool { return len(h.storeWaiters()) == 1 })
	return call
}

// storeWaiters are the sessions waiting for the store's lock.
func (h *keyHolder) storeWaiters() []int32 {
	h.t.Helper()
	rows, err := h.conn.Query(context.Background(), `SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1 AND (classid::bigint << 32 | objid::bigint) = $1::bigint`, pgstore.LockKey(h.s))
	if err != nil {
		h.t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		h.t.Fatal(err)
	}
	return pids
}

// writtenWhileHeld checks that the appends free are written while busy,
// an append to the boundary account that the holder holds, waits; then
// releases account, and busy is written.
func writtenWhileHeld(t *testing.T, h *keyHolder, account string, busy <-chan appendCall, free []<-chan appendCall) {
	t.Helper()
	for i, ch := range free {
		select {
		case c := <-ch:
			if c.err != nil {
				t.Fatalf("free append %d: %v", i, c.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("free append %d waits behind the append to the held boundary", i)
		}
	}
	select {
	case c := <-busy:
		t.Fatalf("the append to the held boundary returned while it is held: %v", c.err)
	default:
	}
	h.release(account)
	if c := <-busy; c.err != nil {
		t.Fatal(c.err)
	}
}

// release lets the append that occupy started go.
func release(t *testing.T, s *pgstore.Store, h *keyHolder) {
	t.Helper()
	if _, err := h.conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1::bigint)", pgstore.LockKey(s)); err != nil {
		t.Fatal(err)
	}
}

// transactions counts the transactions that wrote the deposits of accounts.
func transactions(t *testing.T, s *pgstore.Store, accounts []string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(DISTINCT xmin::text) FROM %s_messages WHERE payload->>'account' = ANY($1)`, s.Prefix()), accounts).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Appends made while the store's place in flight is taken wait, and go in
// one transaction; each returns its own positions, readable at once.
func TestAppendsWaitingGoTogether(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	h := newKeyHolder(t, s)
	first := occupy(t, s, h)

	const n = 8
	var accounts []string
	calls := make([]<-chan appendCall, n)
	for i := range n {
		accounts = append(accounts, fmt.Sprint("a", i))
		calls[i] = goAppend(ctx, s, deposited(accounts[i]), driver.AppendOptions{})
	}
	h.eventually("8 appends waiting", func() bool { return pgstore.WaitingAppends(s) == n })
	release(t, s, h)
	if c := <-first; c.err != nil {
		t.Fatal(c.err)
	}
	seen := map[int64]bool{}
	for i, ch := range calls {
		c := <-ch
		if c.err != nil {
			t.Fatalf("append %d: %v", i, c.err)
		}
		if len(c.res.Positions) != 1 || c.res.Last != c.res.Positions[0] || seen[c.res.Last] {
			t.Fatalf("append %d: positions %v, last %d (seen %v)", i, c.res.Positions, c.res.Last, seen)
		}
		seen[c.res.Last] = true
		got, err := s.Read(ctx, depositsOf(accounts[i]), driver.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) != 1 || got.Messages[0].Position != c.res.Last || got.Messages[0].ID != c.res.Messages[0].ID {
			t.Fatalf("append %d at %d: read %v", i, c.res.Last, got.Messages)
		}
	}
	if got := transactions(t, s, accounts); got != 1 {
		t.Errorf("the %d waiting appends were written by %d transactions, want 1", n, got)
	}
}

// A group refused by the server wrote nothing: each of its appends goes
// again alone, and only the ones whose refusal it is fail (a guard's
// conflict, an id appended twice); the others are written.
func TestAppendsTogetherRefusedOneByOne(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	before, err := s.Append(ctx, deposited("guarded"), driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := newKeyHolder(t, s)
	first := occupy(t, s, h)

	guard := &core.Guard{Conditions: depositsOf("guarded"), LastPosition: before.Last - 1}
	conflicted := goAppend(ctx, s, deposited("guarded"), driver.AppendOptions{Guard: guard})
	twice := deposited("twice")
	twice[0] = twice[0].Stamp(uuid.New(), time.Now())
	dups := []<-chan appendCall{goAppend(ctx, s, twice, driver.AppendOptions{}), goAppend(ctx, s, twice, driver.AppendOptions{})}
	var others []<-chan appendCall
	var accounts []string
	for i := range 4 {
		accounts = append(accounts, fmt.Sprint("o", i))
		others = append(others, goAppend(ctx, s, deposited(accounts[i]), driver.AppendOptions{}))
	}
	h.eventually("7 appends waiting", func() bool { return pgstore.WaitingAppends(s) == 7 })
	release(t, s, h)
	if c := <-first; c.err != nil {
		t.Fatal(c.err)
	}

	var ce *core.ConflictError
	if c := <-conflicted; !errors.As(c.err, &ce) || len(ce.Conflicts) != 1 {
		t.Errorf("guarded append: %v, want a conflict with the deposit before", c.err)
	}
	a, b := <-dups[0], <-dups[1]
	if (a.err == nil) == (b.err == nil) || !errors.Is(errors.Join(a.err, b.err), driver.ErrDuplicateID) {
		t.Errorf("one id appended twice: %v and %v, want one written and one ErrDuplicateID", a.err, b.err)
	}
	for i, ch := range others {
		if c := <-ch; c.err != nil {
			t.Errorf("append %d beside the refused ones: %v", i, c.err)
		}
	}
	got, err := s.ReadAll(ctx, driver.ReadAllOptions{Limit: driver.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	// the first deposit, the one that held the place, one of the twins,
	// the four others
	if len(got.Messages) != 7 {
		t.Errorf("%d messages in the log, want 7", len(got.Messages))
	}
}

// A group tries its keys: one held elsewhere refuses it, and its appends
// go alone, so the appends to free boundaries are written while the one
// to the held boundary waits for it.
func TestAppendsTogetherDoNotWaitForABusyBoundary(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	h := newKeyHolder(t, s)
	first := occupy(t, s, h)
	h.hold("busy")
	busy := goAppend(ctx, s, deposited("busy"), driver.AppendOptions{})
	var free []<-chan appendCall
	for i := range 4 {
		free = append(free, goAppend(ctx, s, deposited(fmt.Sprint("f", i)), driver.AppendOptions{}))
	}
	h.eventually("5 appends waiting", func() bool { return pgstore.WaitingAppends(s) == 5 })
	release(t, s, h)
	if c := <-first; c.err != nil {
		t.Fatal(c.err)
	}
	writtenWhileHeld(t, h, "busy", busy, free)
}

// An append whose context ends while it waits to be sent returns the
// context's error and writes nothing; the others are written.
func TestAppendWaitingCancelled(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	h := newKeyHolder(t, s)
	first := occupy(t, s, h)
	cctx, cancel := context.WithCancel(ctx)
	cancelled := goAppend(cctx, s, deposited("cancelled"), driver.AppendOptions{})
	kept := goAppend(ctx, s, deposited("kept"), driver.AppendOptions{})
	h.eventually("2 appends waiting", func() bool { return pgstore.WaitingAppends(s) == 2 })
	cancel()
	if c := <-cancelled; !errors.Is(c.err, context.Canceled) {
		t.Fatalf("cancelled while waiting: %v, want context.Canceled", c.err)
	}
	release(t, s, h)
	for _, ch := range []<-chan appendCall{first, kept} {
		if c := <-ch; c.err != nil {
			t.Fatal(c.err)
		}
	}
	got, err := s.Read(ctx, depositsOf("cancelled"), driver.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 0 {
		t.Errorf("the cancelled append wrote %d messages", len(got.Messages))
	}
}

// Many writers appending at once, guarded on their own boundaries and on
// a shared one: every append is written once or refused for its own
// conflict, and each guard held (no two appends to the shared boundary
// both passed a guard read at the same position).
func TestAppendsTogetherUnderLoad(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	const writers, each = 12, 20
	var mu sync.Mutex
	passed := map[int64]int{} // guard position on the shared boundary -> appends written after it
	written := 0
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	shared := depositsOf("shared")
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				account := fmt.Sprint("w", w)
				conds := depositsOf(account)
				if i%3 == 0 {
					account, conds = "shared", shared
				}
				read, err := s.Read(ctx, conds, driver.ReadOptions{})
				if err != nil {
					errs <- err
					return
				}
				_, err = s.Append(ctx, deposited(account), driver.AppendOptions{Guard: &core.Guard{Conditions: conds, LastPosition: read.Guard.LastPosition}})
				var ce *core.ConflictError
				switch {
				case errors.As(err, &ce) && account == "shared":
				case err != nil:
					errs <- fmt.Errorf("writer %d append %d (%s): %w", w, i, account, err)
					return
				default:
					mu.Lock()
					written++
					if account == "shared" {
						passed[read.Guard.LastPosition]++
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for pos, n := range passed {
		if n > 1 {
			t.Errorf("%d appends to the shared boundary passed a guard read at %d", n, pos)
		}
	}
	got, err := s.ReadAll(ctx, driver.ReadAllOptions{Limit: driver.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != written {
		t.Errorf("%d messages in the log, %d appends written", len(got.Messages), written)
	}
}

// The guards of a group are checked in one statement, each from its own
// position: a guard read after a message of its boundary passes beside
// one read from the start of the log, and the group commits as one.
func TestAppendsTogetherCheckEachGuardFromItsPosition(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	seen, err := s.Append(ctx, deposited("read"), driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	guard := func(account string, pos int64) driver.AppendOptions {
		return driver.AppendOptions{Guard: &core.Guard{Conditions: depositsOf(account), LastPosition: pos}}
	}
	h := newKeyHolder(t, s)
	first := occupy(t, s, h)
	calls := []<-chan appendCall{
		goAppend(ctx, s, deposited("read"), guard("read", seen.Last)), // its boundary's message is before its position
		goAppend(ctx, s, deposited("fresh"), guard("fresh", 0)),       // a boundary with no message
		goAppend(ctx, s, deposited("plain"), driver.AppendOptions{}),
	}
	h.eventually("3 appends waiting", func() bool { return pgstore.WaitingAppends(s) == 3 })
	release(t, s, h)
	if c := <-first; c.err != nil {
		t.Fatal(c.err)
	}
	for i, ch := range calls {
		if c := <-ch; c.err != nil {
			t.Fatalf("append %d: %v", i, c.err)
		}
	}
	if got := transactions(t, s, []string{"fresh", "plain"}); got != 1 {
		t.Errorf("the group was written by %d transactions, want 1 (a guard checked from another's position refused it)", got)
	}
	if got := transactions(t, s, []string{"read"}); got != 2 {
		t.Errorf("the deposits of read were written by %d transactions, want 2 (the first, then the group's)", got)
	}
}

// The statement that checks guards (one, a group's, a transaction's
// reads) is one text whatever their number, positions and conditions, so
// that a session prepares and plans it once: written out guard by guard,
// it was a statement for each number of guards and arrangement of their
// positions (17-32 statements and 49-58 plans in a run of
// BenchmarkPostgresAppendParallel's 16 guarded writers).
func TestGuardsCheckedTogetherOneStatementPerShape(t *testing.T) {
	s := openOneInFlight(t)
	guards := func(positions ...int64) []*core.Guard {
		var gs []*core.Guard
		for i, p := range positions {
			gs = append(gs, &core.Guard{Conditions: depositsOf(fmt.Sprint("account ", i)), LastPosition: p})
		}
		return gs
	}
	want, _ := pgstore.GuardsCheckSQL(s, guards(3, 5, 8), nil)
	for _, positions := range [][]int64{{5, 3, 8}, {8, 5, 3}, {4, 4, 4}, {0, 9}, {7}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}} {
		if got, _ := pgstore.GuardsCheckSQL(s, guards(positions...), nil); got != want {
			t.Errorf("guards at %v checked by another statement than guards at [3 5 8]:\n%s\nwant\n%s", positions, got, want)
		}
	}
	mixed := guards(3, 5)
	mixed[1].Conditions = append(mixed[1].Conditions, core.Condition{Type: "other.type"}, core.Condition{Type: "x", Attrs: map[string]string{"a": "1", "b": "2"}})
	if got, _ := pgstore.GuardsCheckSQL(s, mixed, nil); got != want {
		t.Errorf("guards with other conditions checked by another statement:\n%s", got)
	}
}

// Several guards checked at once refuse exactly when one of them, checked
// alone, would, and name a message that conflicts: each condition from
// its guard's position, every key pair of a condition required, a
// condition without attributes by type, within the window read after the
// oldest position and past it (through the table of key pairs, or by
// type), the positions own ignored.
func TestGuardsCheckedTogether(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	appendOne := func(p any) int64 {
		t.Helper()
		res, err := s.Append(ctx, []core.Message{core.NewMessage(p)}, driver.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Last
	}
	appendOne(fixtures.UserJoinedCourse{CourseName: "c1", UserID: "u2"}) // gA's course, not its user
	appendOne(fixtures.UserJoinedCourse{CourseName: "c2", UserID: "u1"}) // gA's user, not its course
	d1 := appendOne(fixtures.DeviceRegistered{DeviceID: "d1"})
	closed := appendOne(fixtures.CourseClosed{CourseName: "c9"})
	filler := make([]core.Message, 1100) // past the window of 1,000
	for i := range filler {
		filler[i] = core.NewMessage(fixtures.CourseCreated{CourseName: fmt.Sprint("filler ", i)})
	}
	if _, err := s.Append(ctx, filler, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	appendOne(fixtures.UserJoinedCourse{CourseName: "c1", UserID: "u3"}) // gA's course again, past the window
	joined := appendOne(fixtures.UserJoinedCourse{CourseName: "c1", UserID: "u1"})
	closedLate := appendOne(fixtures.CourseClosed{CourseName: "c8"})
	d1Late := appendOne(fixtures.DeviceRegistered{DeviceID: "d1"})

	gA := func(pos int64) *core.Guard {
		return &core.Guard{LastPosition: pos, Conditions: []core.Condition{{Type: fixtures.TypeUserJoinedCourse, Attrs: map[string]string{"course_name": "c1", "user_id": "u1"}}}}
	}
	gB := func(pos int64) *core.Guard {
		return &core.Guard{LastPosition: pos, Conditions: []core.Condition{{Type: fixtures.TypeCourseClosed}}}
	}
	gC := func(pos int64) *core.Guard {
		return &core.Guard{LastPosition: pos, Conditions: []core.Condition{{Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "d1"}}}}
	}
	gBC := func(pos int64) *core.Guard { // two conditions, either conflicts
		return &core.Guard{LastPosition: pos, Conditions: []core.Condition{gB(0).Conditions[0], {Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "d9"}}}}
	}
	// check returns the position a refusal names, 0 for none.
	check := func(guards []*core.Guard, own []int64) int64 {
		t.Helper()
		sql, args := pgstore.GuardsCheckSQL(s, guards, own)
		_, err := s.Pool().Exec(ctx, sql, args...)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &pe) && pe.Code == "SR001":
			pos, perr := strconv.ParseInt(pe.Detail, 10, 64)
			if perr != nil {
				t.Fatalf("refusal detail %q: %v", pe.Detail, perr)
			}
			return pos
		default:
			t.Fatalf("check: %v", err)
			return 0
		}
	}
	cases := []struct {
		name   string
		guards []*core.Guard
		own    []int64
		want   []int64 // the conflicts the refusal may name; none: no refusal
	}{
		{"past the window, both pairs required", []*core.Guard{gA(0), gB(closedLate)}, nil, []int64{joined}},
		{"every guard after its own messages", []*core.Guard{gA(joined), gB(closedLate), gC(d1Late)}, nil, nil},
		{"by type in the window", []*core.Guard{gB(0), gA(joined)}, nil, []int64{closed}},
		{"by type past the window", []*core.Guard{gB(closed), gA(joined)}, nil, []int64{closedLate}},
		{"one pair past the window", []*core.Guard{gC(d1), gA(joined)}, nil, []int64{d1Late}},
		{"own messages ignored", []*core.Guard{gC(d1), gA(joined)}, []int64{d1Late}, nil},
		{"a window not full", []*core.Guard{gA(joined - 1), gC(joined)}, nil, []int64{joined, d1Late}},
		{"two conditions, either", []*core.Guard{gBC(joined), gA(joined)}, nil, []int64{closedLate}},
		{"two conditions, neither", []*core.Guard{gBC(closedLate), gA(joined)}, nil, nil},
		{"several conflicts", []*core.Guard{gA(0), gB(0), gC(0)}, nil, []int64{joined, closed, closedLate, d1, d1Late}},
		{"no attributes at all, in the window", []*core.Guard{gB(0), gB(closedLate)}, nil, []int64{closed}},
		{"no attributes at all, past the window", []*core.Guard{gB(closed), gB(closedLate)}, nil, []int64{closedLate}},
	}
	for _, c := range cases {
		got := check(c.guards, c.own)
		if len(c.want) == 0 && got != 0 || len(c.want) > 0 && !slices.Contains(c.want, got) {
			t.Errorf("%s: refused at %d, want one of %v", c.name, got, c.want)
		}
		alone := false // the guards checked one by one
		for _, g := range c.guards {
			alone = alone || check([]*core.Guard{g}, c.own) != 0
		}
		if alone != (got != 0) {
			t.Errorf("%s: refused together %t, one by one %t", c.name, got != 0, alone)
		}
	}
}

// An append alone in flight that finds its boundary held gives its place
// up and waits for the boundary alone: the appends to other boundaries
// made meanwhile are written while it waits.
func TestAppendWaitingForABoundaryHoldsNoPlace(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	h := newKeyHolder(t, s)
	h.hold("busy")
	busy := goAppend(ctx, s, deposited("busy"), driver.AppendOptions{})
	h.waiters(1)
	var free []<-chan appendCall
	for i := range 4 {
		free = append(free, goAppend(ctx, s, deposited(fmt.Sprint("f", i)), driver.AppendOptions{}))
	}
	writtenWhileHeld(t, h, "busy", busy, free)
}

// A group whose session ends before it answers (its backend terminated
// while the group waits for the store's lock) may have committed, as far
// as the store can tell: each of its appends returns the error, none is
// sent again, and the store's next appends go on.
func TestAppendsTogetherSessionEnded(t *testing.T) {
	s := openOneInFlight(t)
	ctx := context.Background()
	h := newKeyHolder(t, s)
	first := occupy(t, s, h)
	var calls []<-chan appendCall
	for i := range 3 {
		calls = append(calls, goAppend(ctx, s, deposited(fmt.Sprint("g", i)), driver.AppendOptions{}))
	}
	h.eventually("3 appends waiting", func() bool { return pgstore.WaitingAppends(s) == 3 })
	// Another session asks for the store's lock behind the first append:
	// the group, sent once the first commits, waits behind it.
	other, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	locked := make(chan error, 1)
	go func() {
		_, err := other.Exec(ctx, "SELECT pg_advisory_lock($1::bigint)", pgstore.LockKey(s))
		locked <- err
	}()
	h.eventually("the other session queued behind the first append", func() bool { return len(h.storeWaiters()) == 2 })
	release(t, s, h)
	if c := <-first; c.err != nil {
		t.Fatal(c.err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	h.eventually("the group waiting for the store's lock", func() bool { return len(h.storeWaiters()) == 1 })
	if _, err := h.conn.Exec(ctx, "SELECT pg_terminate_backend($1)", h.storeWaiters()[0]); err != nil {
		t.Fatal(err)
	}
	for i, ch := range calls {
		select {
		case c := <-ch:
			if c.err == nil {
				t.Errorf("append %d of the ended session: no error", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("append %d of the ended session did not return (sent again alone, behind the store's lock?)", i)
		}
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1::bigint)", pgstore.LockKey(s)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, deposited("after"), driver.AppendOptions{}); err != nil {
		t.Fatalf("an append after the ended session: %v", err)
	}
	got, err := s.Read(ctx, depositsOf("g0"), driver.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 0 {
		t.Errorf("the ended session's appends wrote %d messages", len(got.Messages))
	}
}
