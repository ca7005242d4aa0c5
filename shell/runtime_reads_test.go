package shell_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The history keeper's domain: a ledger per account, handled by an
// impure reactor that reads the account's whole history on every batch.
type (
	ledgerEntry struct {
		Account string `json:"account" sourced:"required"`
		N       int    `json:"n"`
	}
	// ledgerNote is in a ledger reader's history when it reads notes,
	// but it never handles one.
	ledgerNote struct {
		Account string `json:"account" sourced:"required"`
	}
)

// ledgerReader is an impure reactor with a history: it records, for each
// batch, the positions of the history it was given and of its guard.
type ledgerReader struct {
	keeps bool
	notes bool // its history also holds ledger.note, which it does not handle
	mu    sync.Mutex
	seen  [][]int64 // per batch: the history's positions
	last  []int64   // per batch: HistoryGuard.LastPosition
}

func (r *ledgerReader) HandledTypes() []string { return []string{"ledger.entry"} }
func (r *ledgerReader) HistoryTypes() []string {
	if r.notes {
		return []string{"ledger.entry", "ledger.note"}
	}
	return []string{"ledger.entry"}
}
func (r *ledgerReader) PartitionKeys() []string { return []string{"account"} }
func (r *ledgerReader) GroupID() string         { return "ledger.reader" }
func (r *ledgerReader) KeepsHistory() bool      { return r.keeps }

func (r *ledgerReader) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pos []int64
	for _, m := range c.History {
		pos = append(pos, m.Position)
	}
	r.mu.Lock()
	r.seen = append(r.seen, pos)
	r.last = append(r.last, c.HistoryGuard.LastPosition)
	r.mu.Unlock()
	return nil, nil
}

// readCounter is a store that records the After of every ReadPartition.
type readCounter struct {
	shell.Store
	mu     sync.Mutex
	afters []int64
}

func (s *readCounter) ReadPartition(ctx context.Context, partition core.Partition, types []string, opts shell.ReadOptions) (shell.ReadResult, error) {
	s.mu.Lock()
	s.afters = append(s.afters, opts.After)
	s.mu.Unlock()
	return s.Store.ReadPartition(ctx, partition, types, opts)
}

func ledgerStore(t *testing.T) *sqlitestore.Store {
	t.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[ledgerEntry](reg, "ledger.entry")
	codec.MustRegister[ledgerNote](reg, "ledger.note")
	s, err := sqlitestore.Install(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), sqlitestore.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A router keeps the history of a HistoryKeeper between its batches and
// hands each batch the same history, with the same guard, as a full read.
// When the reactor's history is what it handles, a batch that began where
// the kept history ends needs no read at all: the claim holds the rest
// (Claim.After). When the history holds more (ledger.note here), the
// second batch of a partition reads only what was appended after the
// first one's read. A reactor that does not keep its history reads it in
// full every time.
func TestRouterKeepsHistories(t *testing.T) {
	cases := []struct {
		name         string
		keeps, notes bool
		// reads and incremental are the ReadPartition calls expected in
		// all and those after a kept position.
		reads, incremental int
	}{
		{"keeper", true, false, 2, 0},
		{"keeper of more than it handles", true, true, 4, 2},
		{"not a keeper", false, false, 4, 0},
		{"not a keeper of more than it handles", false, true, 4, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			raw := ledgerStore(t)
			s := &readCounter{Store: raw}
			r := &ledgerReader{keeps: c.keeps, notes: c.notes}
			rt, err := shell.NewRouter(s, shell.RouterOptions{StateCache: shell.NewStateCache(10)}, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			appendEntries := func(account string, ns ...int) { appendLedger(t, raw, account, ns...) }
			drain := func() {
				t.Helper()
				if err := rt.Drain(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			appendEntries("a", 1, 2, 3)
			appendEntries("b", 1) // another partition, between a's messages
			drain()
			if c.notes {
				if _, err := raw.Append(ctx, []core.Message{core.NewMessage(ledgerNote{Account: "a"})}, shell.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			appendEntries("a", 4)
			appendEntries("b", 2)
			appendEntries("a", 5, 6)
			drain()

			// What a full read gives now, for partition a.
			full, err := raw.ReadPartition(ctx, map[string]string{"account": "a"}, r.HistoryTypes(), shell.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			for _, m := range full.Messages {
				want = append(want, m.Position)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			s.mu.Lock()
			defer s.mu.Unlock()
			// The last batch is a's second (b's come in between or
			// before; find a's by its first position).
			var got []int64
			var guard int64
			for i, seen := range r.seen {
				if len(seen) > 0 && seen[0] == want[0] {
					got, guard = seen, r.last[i]
				}
			}
			if !equalInt64s(got, want) {
				t.Fatalf("a's last batch got history %v, want the full read's %v", got, want)
			}
			if guard != full.Guard.LastPosition {
				t.Errorf("a's last batch got a guard at %d, want the full read's %d", guard, full.Guard.LastPosition)
			}
			incremental := 0
			for _, after := range s.afters {
				if after > 0 {
					incremental++
				}
			}
			if len(s.afters) != c.reads || incremental != c.incremental {
				t.Errorf("the reads were after %v: want %d reads, %d of them after a kept position", s.afters, c.reads, c.incremental)
			}
		})
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// nextCounter is a store that counts its NextScheduled calls (the
// scheduler's wake-ups), keeping every method of the SQLite store.
type nextCounter struct {
	*sqlitestore.Store
	next atomic.Int64
}

func (s *nextCounter) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	s.next.Add(1)
	return s.Store.NextScheduled(ctx)
}

// A runtime on the SQLite store wakes its scheduler for the commits that
// scheduled messages only (driver.ScheduleCounter), not for every append:
// appends of plain messages do not make it read when the next message is
// due; a scheduled one still wakes it at once (well before its interval).
func TestSchedulerWokenByScheduledCommitsOnly(t *testing.T) {
	ctx := t.Context()
	s := &nextCounter{Store: ledgerStore(t)}
	if n := s.ScheduledCommits(); n != 0 {
		t.Fatalf("ScheduledCommits = %d on a new store, want 0", n)
	}
	cfg := shell.DefaultConfig()
	cfg.CatchUpInterval = time.Minute // the scheduler's interval: never reached here
	rt, err := shell.NewRuntime(s, cfg, &ledgerReader{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.WithoutCancel(ctx))
	time.Sleep(50 * time.Millisecond) // the tasks' first ticks
	before := s.next.Load()
	const appends = 40
	for i := range appends {
		if _, err := s.Append(ctx, []core.Message{core.NewMessage(ledgerEntry{Account: "a", N: i})}, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if woken := s.next.Load() - before; woken > 2 {
		t.Errorf("the scheduler read the next due time %d times for %d plain appends, want it left asleep", woken, appends)
	}

	due := time.Now().Add(300 * time.Millisecond)
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(ledgerEntry{Account: "later", N: 1}).At(due)}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := s.ScheduledCommits(); n != 1 {
		t.Errorf("ScheduledCommits = %d after one scheduling commit, want 1", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := s.ReadPartition(ctx, map[string]string{"account": "later"}, []string{"ledger.entry"}, shell.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduled message was not promoted: the scheduler was not woken for it")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A notifier of the caller's may announce other processes' commits:
	// the store does not count then.
	reg := codec.NewRegistry()
	codec.MustRegister[ledgerEntry](reg, "ledger.entry")
	codec.MustRegister[ledgerNote](reg, "ledger.note")
	other, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "other.db"), sqlitestore.Options{Registry: reg, Notifier: new(driver.InlineNotifier)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if n := other.ScheduledCommits(); n != -1 {
		t.Errorf("ScheduledCommits = %d with the caller's notifier, want -1", n)
	}
}

// An event-sourced projector whose state the router caches reads a
// partition's history for its first batch only: each later batch that
// begins where the cached state ends holds the rest of the history
// itself (claimCovers), and its state is still the full fold. A batch cut
// short by the batch size reads.
func TestRouterFoldsClaimsWithoutReads(t *testing.T) {
	ctx := t.Context()
	raw := ledgerStore(t)
	s := &recordingStore{Store: raw}
	var mu sync.Mutex
	sums := map[string]int{}
	sum := core.Projector[int]{Group: "ledger.sum", PartitionBy: []string{"account"}}.With(
		core.Evolve(func(n int, e ledgerEntry) int { return n + e.N }),
		core.Sync(func(_ context.Context, _ core.SyncTx, b core.Batch[int]) error {
			mu.Lock()
			defer mu.Unlock()
			sums[b.Partition["account"]] = b.State
			return nil
		}),
	)
	rt, err := shell.NewRouter(s, shell.RouterOptions{StateCache: shell.NewStateCache(10), BatchSize: 4}, sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	appendEntries := func(account string, ns ...int) { appendLedger(t, raw, account, ns...) }
	reads := func() int {
		n := 0
		for _, op := range s.ops {
			if op == "read" {
				n++
			}
		}
		return n
	}
	step := func(wantReads int, wantSums map[string]int) {
		t.Helper()
		before := reads()
		if err := rt.Drain(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := reads() - before; got != wantReads {
			t.Errorf("%d partition reads, want %d", got, wantReads)
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range wantSums {
			if sums[k] != v {
				t.Errorf("account %s: state %d, want %d", k, sums[k], v)
			}
		}
	}
	appendEntries("a", 1, 2, 3)
	appendEntries("b", 10)
	step(2, map[string]int{"a": 6, "b": 10}) // first batches: nothing cached
	appendEntries("a", 4)
	appendEntries("b", 20)
	appendEntries("a", 5)
	step(0, map[string]int{"a": 15, "b": 30})
	appendEntries("a", 1, 1, 1, 1, 1) // more than a batch: the first is cut short
	step(1, map[string]int{"a": 20})
}

// appendLedger appends entries of account, one per n, in one append.
func appendLedger(t *testing.T, s shell.Store, account string, ns ...int) {
	t.Helper()
	var ms []core.Message
	for _, n := range ns {
		ms = append(ms, core.NewMessage(ledgerEntry{Account: account, N: n}))
	}
	if _, err := s.Append(t.Context(), ms, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}
