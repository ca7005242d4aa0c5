package shell_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
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
				if err := rt.Drain(dctx); err != nil {
					t.Fatalf("Drain: %v after %d calls of the reactor, want it to end after 3", err, s.count())
				}
				if calls := s.count(); calls != 3 {
					t.Fatalf("%d calls of the reactor, want 3", calls)
				}
			})
		}
	}
}
