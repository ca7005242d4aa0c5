package sqlitestore

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// limitPages caps the database at its current size plus extra pages on
// the writer connection: SQLite then refuses what would grow it with
// SQLITE_FULL, as a full disk does. n <= 0 lifts the cap.
func limitPages(t *testing.T, s *Store, extra int) {
	t.Helper()
	w := <-s.writer
	defer func() { s.writer <- w }()
	limit := "1073741823"
	if extra > 0 {
		pages, err := queryInt(w.conn, "PRAGMA page_count")
		if err != nil {
			t.Fatal(err)
		}
		limit = strconv.FormatInt(pages+int64(extra), 10)
	}
	if err := sqlitex.ExecuteTransient(w.conn, "PRAGMA max_page_count = "+limit, nil); err != nil {
		t.Fatal(err)
	}
}

// A full disk is no reactor's failure: a write it refuses matches
// ErrDiskFull and driver.ErrBusy (transient: nothing written, try again),
// so a worker releases its claim and backs off instead of failing the
// group, and processes everything once space returns.
func TestAFullDiskFailsNoGroup(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	var seen atomic.Int64
	counter := core.Projector[int]{Group: "test.counter", PartitionBy: []string{"account"}}.With(
		core.Evolve(func(n int, _ ev) int { seen.Add(1); return n + 1 }),
	)
	followups := core.Projector[int]{Group: "test.followups", PartitionBy: []string{"account"}}.With(
		core.Evolve(func(n int, _ ev) int { return n + 1 }),
		core.React(func(_ int, e ev) []any { return []any{other{N: len(e.Ref)}} }),
	)
	rt, err := shell.NewRouter(s, shell.RouterOptions{}, counter, followups)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	var msgs []core.Message
	for i := range 200 {
		msgs = append(msgs, core.NewMessage(ev{Account: "a" + strconv.Itoa(i%10), Ref: "r" + strconv.Itoa(i)}))
	}
	if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}

	limitPages(t, s, 1)
	var big []core.Message // 40 KB of indexed values, each within codec.MaxIndexedValueBytes
	for i := range 40 {
		big = append(big, core.NewMessage(ev{Account: "big", Ref: strings.Repeat(strconv.Itoa(i%10), 1000)}))
	}
	_, err = s.Append(ctx, big, driver.AppendOptions{})
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, driver.ErrBusy) {
		t.Fatalf("append to a full database: %v, want ErrDiskFull and driver.ErrBusy", err)
	}
	for i := 0; i < 40; i++ {
		for _, r := range []any{counter, followups} {
			if _, err := rt.HandleNext(ctx, r, "w"+strconv.Itoa(i%3)); err != nil && !errors.Is(err, driver.ErrBusy) {
				t.Fatalf("handle next on a full disk: %v, want nil or a transient error", err)
			}
		}
	}
	for _, g := range []string{"test.counter", "test.followups"} {
		if info, err := s.Group(ctx, g); err != nil || info.Status != driver.StatusActive {
			t.Fatalf("group %s on a full disk: %+v (%v), want it active", g, info, err)
		}
	}

	limitPages(t, s, 0) // space returns
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatalf("drain once space returned: %v", err)
	}
	for _, g := range []string{"test.counter", "test.followups"} {
		if info, err := s.Group(ctx, g); err != nil || info.Status != driver.StatusActive || info.HighestPosition < 200 {
			t.Fatalf("group %s once space returned: %+v (%v), want it active past position 200", g, info, err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.MaxPosition != 400 {
		t.Fatalf("log of %d messages (%v), want 200 events and 200 follow-ups", st.MaxPosition, err)
	}
}
