package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// peers opens n stores on one prefix, each with its own pool, as n
// processes (or machines) would: the first installs the schema.
func peers(t *testing.T, n int) []*pgstore.Store {
	t.Helper()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	prefix := pgtest.Prefix()
	first := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	out := []*pgstore.Store{first}
	for range n - 1 {
		s, err := pgstore.Open(t.Context(), pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: prefix, MaxConns: 8})
		if err != nil {
			t.Fatalf("open peer: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// scale is how much work the concurrent tests do.
func scale(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// TestPositionsVisibleInOrder appends from several stores (own pools, so
// truly concurrent transactions) while tailing readers on other stores
// follow the log with a cursor, as a catch-up poll or a projection does:
// every read after the cursor must start right after it and have no gap.
// A store whose positions could commit out of order (a sequence handing
// out 11 and 12, 12 committing first) would let a reader see 12, move its
// cursor past 11 and skip 11 for ever.
func TestPositionsVisibleInOrder(t *testing.T) {
	ss := peers(t, 4)
	if err := tailWhileAppending(t, ss); err != nil {
		t.Fatal(err)
	}
}

// TestPositionsVisibleInOrderCatchesASkip runs the same appends and
// readers on stores broken on purpose (pgstore.BreakPositionOrder: no
// advisory lock, positions handed out outside the transaction as a
// sequence does), and requires the check to report a skipped position:
// the ordering test can fail.
func TestPositionsVisibleInOrderCatchesASkip(t *testing.T) {
	ss := peers(t, 4)
	for _, s := range ss {
		pgstore.BreakPositionOrder(s)
	}
	err := tailWhileAppending(t, ss)
	if err == nil || !strings.Contains(err.Error(), "was skipped") {
		t.Fatalf("on a store whose positions commit out of order the check reported %v, want a skipped position", err)
	}
	t.Logf("caught: %v", err)
}

// tailWhileAppending appends from two of ss while tailing readers on the
// two others follow the log, and returns the first skip a reader saw (or
// another failure).
func tailWhileAppending(t *testing.T, ss []*pgstore.Store) error {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	writers, each := 3, scale(300, 60)
	total := int64(writers * each)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[w%2]
			for i := range each {
				batch := []core.Message{core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprintf("w%d-%d", w, i), Name: "x"})}
				if i%3 == 0 { // several messages in one commit too
					batch = append(batch, core.NewMessage(fixtures.AssetRegistered{AssetID: fmt.Sprintf("w%d-%d", w, i), Label: "y"}))
				}
				if _, err := s.Append(ctx, batch, driver.AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var want atomic.Int64
	want.Store(-1)
	readers := 3
	seen := make([][]int64, readers) // each reader's positions, in order
	var rg sync.WaitGroup
	var reads atomic.Int64
	for r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			s := ss[2+r%2]
			var cursor int64
			for {
				var page driver.Page
				var err error
				if r == 2 {
					// A condition read, as a partition reader does.
					var res driver.ReadResult
					res, err = s.Read(ctx, []core.Condition{{Type: "device.registered"}, {Type: "asset.registered"}}, driver.ReadOptions{After: cursor, Limit: 37})
					page.Messages = res.Messages
				} else {
					page, err = s.ReadAll(ctx, driver.ReadAllOptions{From: cursor + 1, Limit: 50})
				}
				if err != nil {
					errs <- err
					return
				}
				reads.Add(1)
				for _, m := range page.Messages {
					if m.Position <= cursor {
						errs <- fmt.Errorf("reader %d: after position %d it saw %d", r, cursor, m.Position)
						return
					}
					cursor = m.Position
					seen[r] = append(seen[r], m.Position)
				}
				if w := want.Load(); w >= 0 && cursor >= w {
					return
				}
			}
		}()
	}
	wg.Wait()
	// On a failure, stop the readers before returning it.
	stop := func(err error) error {
		cancel()
		rg.Wait()
		return err
	}
	select {
	case err := <-errs:
		return stop(err)
	default:
	}
	st, err := ss[0].Stats(ctx)
	if err != nil {
		return stop(err)
	}
	last := st.MaxPosition
	if min := total; last < min {
		return stop(fmt.Errorf("the log ends at %d, want at least %d", last, min))
	}
	want.Store(last)
	rg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	if err := checkTails(ctx, ss[0], seen); err != nil {
		return err
	}
	t.Logf("%d positions, %d reads", last, reads.Load())
	return nil
}

// checkTails compares what each tailing reader saw, in order, with the
// log as it ends: a reader must have seen every message up to the last
// it saw. Positions may skip numbers (a position whose append never
// committed holds no message, driver.SkippingPositions), so a gap is a
// skip only when the log holds a message there now: one that committed
// after a reader had moved past it.
func checkTails(ctx context.Context, s *pgstore.Store, seen [][]int64) error {
	var log []int64
	for m, err := range s.All(ctx, driver.ReadAllOptions{}) {
		if err != nil {
			return err
		}
		log = append(log, m.Position)
	}
	for r, got := range seen {
		for i, p := range got {
			if i >= len(log) || log[i] != p {
				prev := int64(0)
				if i > 0 {
					prev = got[i-1]
				}
				missing := p
				if i < len(log) {
					missing = log[i]
				}
				return fmt.Errorf("reader %d: after position %d it saw %d: position %d was skipped", r, prev, p, missing)
			}
		}
	}
	return nil
}

// TestGuardsAcrossStores is the dcb.events consistency check: writers on
// four stores each read a course's partition, decide from what they read
// (a course takes at most three students) and append under the read's
// guard. Afterwards the log is re-derived: for every successful append, no
// message its guard covers may lie between the guard's position and the
// append (what the writer should have seen), and no course may hold more
// than three students.
func TestGuardsAcrossStores(t *testing.T) {
	ss := peers(t, 4)
	ctx := t.Context()
	reg := ss[0].Registry()
	types := []string{"course.created", "user.joined_course", "course.closed"}
	type success struct {
		guard core.Guard
		first int64
	}
	var mu sync.Mutex
	var ok []success
	var conflicts atomic.Int64
	courses := []string{"algebra", "biology", "chemistry"}
	for _, c := range courses {
		if _, err := ss[0].Append(ctx, []core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: c})}, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	rounds := scale(40, 10)
	errs := make(chan error, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[w%len(ss)]
			for i := range rounds {
				course := courses[(w+i)%len(courses)]
				res, err := s.ReadPartition(ctx, map[string]string{"course_name": course}, types, driver.ReadOptions{})
				if err != nil {
					errs <- err
					return
				}
				students := 0
				for _, m := range res.Messages {
					if m.Type == "user.joined_course" {
						students++
					}
				}
				if students >= 3 {
					continue
				}
				g := res.Guard
				ar, err := s.Append(ctx, []core.Message{core.NewMessage(fixtures.UserJoinedCourse{CourseName: course, UserID: fmt.Sprintf("u%d-%d", w, i)})}, driver.AppendOptions{Guard: &g})
				switch {
				case errors.Is(err, driver.ErrConcurrentAppend):
					conflicts.Add(1)
				case err != nil:
					errs <- err
					return
				default:
					mu.Lock()
					ok = append(ok, success{guard: g, first: ar.Positions[0]})
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
	var log []core.PositionedMessage
	for m, err := range ss[0].All(ctx, driver.ReadAllOptions{Limit: 500}) {
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, m)
	}
	keys := core.KeysFrom(reg)
	violations := 0
	for _, s := range ok {
		var between []core.PositionedMessage
		for _, m := range log {
			if m.Position < s.first {
				between = append(between, m)
			}
		}
		if c := s.guard.Conflicting(between, keys); len(c) > 0 {
			violations++
			t.Errorf("the append at %d succeeded although its guard (after %d) covers %d later messages, e.g. %d", s.first, s.guard.LastPosition, len(c), c[0].Position)
		}
	}
	for _, c := range courses {
		n := 0
		for _, m := range log {
			if j, is := m.Payload.(fixtures.UserJoinedCourse); is && j.CourseName == c {
				n++
			}
		}
		if n > 3 {
			t.Errorf("course %s has %d students, the decision allowed 3", c, n)
		}
	}
	if len(ok) != 3*len(courses) {
		t.Errorf("%d successful joins, want %d (three per course)", len(ok), 3*len(courses))
	}
	if conflicts.Load() == 0 {
		t.Error("no writer conflicted: the test did not race")
	}
	t.Logf("%d appends, %d conflicts, %d violations", len(ok), conflicts.Load(), violations)
	_ = codec.KeyPair{}
}

// TestClaimsAcrossStores runs workers on three stores (FOR UPDATE SKIP
// LOCKED under the shared lock) while a fourth appends: every message is
// processed exactly once per group, in order within its partition, and
// every group ends idle.
func TestClaimsAcrossStores(t *testing.T) {
	ss := peers(t, 4)
	ctx := t.Context()
	spec := driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}}
	if err := ss[0].RegisterGroup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	partitions, each := 40, scale(15, 5)
	total := partitions * each
	var appended atomic.Bool
	go func() {
		defer appended.Store(true)
		for i := range each {
			for p := range partitions {
				m := core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprintf("d%02d", p), Name: fmt.Sprint(i)})
				if _, err := ss[3].Append(ctx, []core.Message{m}, driver.AppendOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var mu sync.Mutex
	seen := map[int64]int{}
	lastOf := map[string]int64{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[w%3]
			id := fmt.Sprintf("worker-%d", w)
			for time.Now().Before(deadline) {
				c, err := s.ClaimNext(ctx, "devices", id, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					mu.Lock()
					done := len(seen) >= total
					mu.Unlock()
					if done && appended.Load() {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				for _, m := range c.Messages {
					seen[m.Position]++
					key := c.Partition["device_id"]
					if m.Position <= lastOf[key] {
						t.Errorf("partition %s: position %d after %d", key, m.Position, lastOf[key])
					}
					lastOf[key] = m.Position
				}
				mu.Unlock()
				if err := s.Ack(ctx, c, c.Last()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("processed %d messages, want %d", len(seen), total)
	}
	for pos, n := range seen {
		if n != 1 {
			t.Errorf("position %d processed %d times", pos, n)
		}
	}
	if c, err := ss[1].ClaimNext(ctx, "devices", "late", 10); err != nil || c != nil {
		t.Fatalf("a drained group still claims %v, %v", c, err)
	}
}

// TestPromotionExactlyOnce promotes one schedule from three stores at once.
func TestPromotionExactlyOnce(t *testing.T) {
	ss := peers(t, 3)
	ctx := t.Context()
	now := time.Now()
	n := scale(300, 60)
	var batch []core.Message
	for i := range n {
		batch = append(batch, core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprint(i)}).At(now.Add(time.Hour)))
	}
	if _, err := ss[0].Append(ctx, batch, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var promoted atomic.Int64
	var wg sync.WaitGroup
	for _, s := range ss {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := s.PromoteScheduled(ctx, now.Add(2*time.Hour))
				if err != nil {
					t.Error(err)
				}
				promoted.Add(int64(k))
			}()
		}
	}
	wg.Wait()
	if promoted.Load() != int64(n) {
		t.Fatalf("promoted %d in all, want %d", promoted.Load(), n)
	}
	var ids []string
	for m, err := range ss[1].All(ctx, driver.ReadAllOptions{Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID.String())
	}
	slices.Sort(ids)
	if len(ids) != n || len(slices.Compact(ids)) != n {
		t.Fatalf("the log holds %d messages, want %d distinct", len(ids), n)
	}
}
