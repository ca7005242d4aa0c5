package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// routerStores builds a router on each store the router tests run on.
var routerStores = map[string]func(*testing.T, shell.RouterOptions, ...any) (*shell.Router, shell.Store){
	"memstore": func(t *testing.T, opts shell.RouterOptions, rs ...any) (*shell.Router, shell.Store) {
		return newRouter(t, newClock(), opts, rs...)
	},
	"sqlitestore": sqliteRouter,
}

// silent handles its batches and returns no pairs and no error: it has
// nothing to do for them (a reactor that filters the messages it is
// given). It counts its calls.
type silent struct {
	pure  bool
	mu    sync.Mutex
	calls int
	// cancel, when set, is called from the 50th call on (a guard against
	// a drain that would never end).
	cancel func()
}

func (s *silent) GroupID() string         { return fmt.Sprintf("shell_test.silent_%v", s.pure) }
func (s *silent) HandledTypes() []string  { return []string{"students.notify"} }
func (s *silent) PartitionKeys() []string { return []string{"student_id"} }
func (s *silent) Pure() bool              { return s.pure }
func (s *silent) HandleClaim(context.Context, effects.Claim) ([]effects.Pair, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls >= 50 && s.cancel != nil {
		s.cancel()
	}
	return nil, nil
}

func (s *silent) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// A reactor that returns no pairs (and no error) for a batch has handled
// it with no effects: the batch is acknowledged, once, up to its last
// message, rather than released and claimed again at once, which span a
// worker (and never let Drain return) while the partition had messages.
func TestNoPairsAcknowledgeTheBatch(t *testing.T) {
	for _, name := range []string{"memstore", "sqlitestore"} {
		for _, pure := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pure=%v", name, pure), func(t *testing.T) {
				ctx := context.Background()
				s := &silent{pure: pure}
				rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet()}, s)
				if _, err := store.Append(ctx, []core.Message{
					core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c1"}),
					core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c2"}),
					core.NewMessage(NotifyStudent{StudentID: "s2", CourseID: "c1"}),
				}, shell.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				// Bounded router steps: two partitions, one batch each.
				steps := 0
				for range 20 {
					did, err := rt.HandleNext(ctx, s, "w1")
					if err != nil {
						t.Fatalf("HandleNext: %v", err)
					}
					if !did {
						break
					}
					steps++
				}
				if calls := s.count(); calls != 2 || steps > 2 {
					t.Fatalf("%d calls of the reactor in %d busy HandleNext steps of 20, want 2 (one per partition): a batch without pairs is claimed again at once", calls, steps)
				}
				for _, o := range offsetsOf(t, store, s.GroupID()) {
					want := int64(2)
					if o.Partition["student_id"] == "s2" {
						want = 3
					}
					if o.Claimed || o.LastPosition != want {
						t.Fatalf("offset %+v, want acknowledged at %d and free", o, want)
					}
				}
				// A drain ends, and hands nothing again.
				if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c3"})}, shell.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				dctx, cancel := context.WithCancel(ctx)
				defer cancel()
				s.cancel = cancel
				if err := rt.Drain(dctx, nil); err != nil {
					t.Fatalf("Drain: %v after %d calls of the reactor, want it to end after 3", err, s.count())
				}
				if calls := s.count(); calls != 3 {
					t.Fatalf("%d calls of the reactor, want 3", calls)
				}
			})
		}
	}
}

// busyWrites fails the next fails write transactions and releases with
// ErrBusy (another process holding the write lock), counting the tries.
type busyWrites struct {
	shell.Store
	mu    sync.Mutex
	fails int
	tries int
}

func (b *busyWrites) busy(what string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tries++
	if b.fails > 0 {
		b.fails--
		return fmt.Errorf("test: %s: %w", what, shell.ErrBusy)
	}
	return nil
}

func (b *busyWrites) set(fails int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails, b.tries = fails, 0
}

func (b *busyWrites) triesSoFar() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tries
}

func (b *busyWrites) Update(ctx context.Context, fn func(shell.Tx) error) error {
	if err := b.busy("update"); err != nil {
		return err
	}
	return b.Store.Update(ctx, fn)
}

func (b *busyWrites) Release(ctx context.Context, c *driver.ClaimedPartition) error {
	if err := b.busy("release"); err != nil {
		return err
	}
	return b.Store.Release(ctx, c)
}

// openStore opens an empty store of the course registry by name.
func openStore(t *testing.T, name string, clk *clock) shell.Store {
	t.Helper()
	if name == "memstore" {
		return memstore.New(courseRegistry(), memstore.WithClock(clk.Now))
	}
	store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "router.db"), sqlitestore.Options{Registry: courseRegistry(), Logger: quiet(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// notifying is an impure reactor that appends a notification per message
// and counts its calls; cancel, when set, is called by the first call,
// which then fails (a worker stopped mid-batch).
type notifying struct {
	mu     sync.Mutex
	calls  int
	cancel func()
}

func (n *notifying) HandledTypes() []string  { return []string{"students.notify"} }
func (n *notifying) PartitionKeys() []string { return []string{"student_id"} }
func (n *notifying) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	n.mu.Lock()
	n.calls++
	cancel := n.cancel
	n.cancel = nil
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		return nil, ctx.Err()
	}
	var pairs []effects.Pair
	for _, m := range c.Messages {
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{
			effects.Append{Messages: []core.Message{core.NewMessage(StudentNotified(m.Payload.(NotifyStudent)))}},
		}})
	}
	return pairs, nil
}

// A batch that meets a busy store is released; when the release meets the
// busy store too, the claim must not stay with the (live, heartbeating)
// worker until MaxClaimAge: the release is tried again, a bounded number
// of times and not once ctx is done, and a claim still held after that is
// released by the worker's next HandleNext, before it claims anything.
// Nothing is lost and nothing handled twice.
func TestBusyReleaseDoesNotStrandTheClaim(t *testing.T) {
	for _, name := range []string{"memstore", "sqlitestore"} {
		for _, c := range []struct {
			name   string
			fails  int  // busy writes from the batch's commit on
			cancel bool // the worker stops mid-batch
		}{
			{"busy for a moment", 3, false},
			{"busy for long", 1000, false},
			{"busy and cancelled", 1000, true},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				clk := newClock()
				store := &busyWrites{Store: openStore(t, name, clk)}
				n := &notifying{}
				rt, err := shell.NewRouter(store, shell.RouterOptions{Now: clk.Now, Logger: quiet()}, n)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if err := rt.Setup(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1", CourseID: "c1"})}, shell.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				hctx, cancel := context.WithCancel(ctx)
				defer cancel()
				if c.cancel {
					n.cancel = cancel
				}
				store.set(c.fails)
				if did, err := rt.HandleNext(hctx, n, "w1"); !did || !errors.Is(err, shell.ErrBusy) && !errors.Is(err, context.Canceled) {
					t.Fatalf("HandleNext on a busy store: did %v, err %v, want ErrBusy or context.Canceled", did, err)
				}
				tries := store.triesSoFar()
				if c.cancel && tries > 2 {
					t.Fatalf("%d busy writes tried once ctx was done, want at most 2 (one release, in one transaction, then one by one): the retries do not honour the cancellation", tries)
				}
				if !c.cancel && c.fails > 3 && tries < 4 {
					t.Fatalf("the busy release was tried %d times in all, want it tried again", tries)
				}
				store.set(0) // the store is free again
				did, err := rt.HandleNext(ctx, n, "w1")
				if err != nil || !did {
					held := ""
					for _, o := range offsetsOf(t, store, "shell_test.notifying") {
						if o.Claimed {
							held = fmt.Sprintf(" (offset %d still claimed by %s)", o.ID, o.ClaimedBy)
						}
					}
					t.Fatalf("HandleNext once the store is free: did %v, err %v%s: the partition stalls until MaxClaimAge", did, err, held)
				}
				if did, err := rt.HandleNext(ctx, n, "w2"); did || err != nil {
					t.Fatalf("a second worker: did %v, err %v, want nothing left", did, err)
				}
				for _, o := range offsetsOf(t, store, "shell_test.notifying") {
					if o.Claimed || o.LastPosition != 1 {
						t.Fatalf("offset %+v, want acknowledged at 1 and free", o)
					}
				}
				if got := len(byType(readAll(t, store), "students.notified")); got != 1 {
					t.Fatalf("%d notifications, want 1", got)
				}
				info, _ := store.Group(ctx, "shell_test.notifying")
				if info.Status != shell.StatusActive || !info.Failure.IsZero() {
					t.Fatalf("group %+v, want active with no failure (a busy store is not the reactor's failure)", info)
				}
			})
		}
	}
}

// errDeclined is a sentinel error, as packages declare them.
var errDeclined = errors.New("card declined")

// failingWith fails every batch with err (or panics with it).
type failingWith struct {
	err    error
	panics bool
}

func (f failingWith) GroupID() string         { return "shell_test.failing_with" }
func (f failingWith) HandledTypes() []string  { return []string{"students.notify"} }
func (f failingWith) PartitionKeys() []string { return []string{"student_id"} }
func (f failingWith) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	if f.panics {
		panic(f.err)
	}
	return nil, f.err
}

// The type recorded for an error with no type of its own (errors.New, a
// sentinel, fmt.Errorf without %w) names it by the text it was made with,
// as the code that makes it reads, rather than *errors.errorString,
// which every such error shares; a typed error's type is recorded as
// before, whatever wraps it.
func TestFailureNamesSentinelErrors(t *testing.T) {
	long := errors.New(strings.Repeat("x", 100))
	for _, name := range []string{"memstore", "sqlitestore"} {
		for _, c := range []struct {
			name   string
			err    error
			panics bool
			want   string
		}{
			{"sentinel", errDeclined, false, `errors.New("card declined")`},
			{"wrapped sentinel", fmt.Errorf("charging order 7: %w", errDeclined), false, `errors.New("card declined")`},
			{"joined sentinels", fmt.Errorf("charging: %w", errors.Join(errDeclined, io.EOF)), false, `errors.New("card declined")`},
			{"batch error", &core.BatchError{Err: fmt.Errorf("charging: %w", errDeclined)}, false, `errors.New("card declined")`},
			{"no %w", fmt.Errorf("order %d: %v", 7, errDeclined), false, `errors.New("order 7: card declined")`},
			{"stdlib sentinel", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), false, `errors.New("unexpected EOF")`},
			{"long text", long, false, `errors.New("` + strings.Repeat("x", 60) + `…")`},
			{"typed", fmt.Errorf("notifying: %w", &myError{code: 7}), false, "*shell_test.myError"},
			{"typed around a sentinel", &os.PathError{Op: "open", Path: "x", Err: fmt.Errorf("disk: %w", errDeclined)}, false, "*fs.PathError"},
			{"panic", errDeclined, true, `panic(errors.New("card declined"))`},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				ctx := context.Background()
				f := failingWith{err: c.err, panics: c.panics}
				rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet()}, f)
				if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := rt.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
					t.Fatal(err)
				}
				info, err := store.Group(ctx, f.GroupID())
				if err != nil {
					t.Fatal(err)
				}
				if info.Status != shell.StatusFailed || info.Failure.ErrorType != c.want {
					t.Fatalf("group %s, error type %s, want failed with %s", info.Status, info.Failure.ErrorType, c.want)
				}
				if !strings.Contains(info.Failure.Error, c.err.Error()) {
					t.Fatalf("error %q, want the error's own message %q", info.Failure.Error, c.err.Error())
				}
			})
		}
	}
}
