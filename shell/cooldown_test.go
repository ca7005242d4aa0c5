package shell_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// cooldownRig is a runtime on a memstore with one event-sourced projector
// of enrolments by course, whose batches it counts, and the messages it
// handled.
type cooldownRig struct {
	store   *memstore.Store
	rt      *shell.Runtime
	batches atomic.Int64
	mu      sync.Mutex
	handled int
	done    chan struct{} // closed when want messages were handled
	want    int
}

func newCooldownRig(t *testing.T, want int, tune func(*shell.Config)) *cooldownRig {
	t.Helper()
	r := &cooldownRig{store: memstore.New(courseRegistry()), done: make(chan struct{}), want: want}
	counter := core.Projector[int]{Group: "cooldown.counter", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }),
		core.AfterSync(func(_ context.Context, b core.Batch[int]) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.handled += len(b.Messages)
			if r.handled == r.want {
				close(r.done)
			}
			return nil
		}),
	)
	cfg := testConfig(shell.SystemClock{})
	cfg.Observer = shell.ObserverFunc(func(_ context.Context, o shell.Observation) {
		if _, ok := o.(shell.BatchHandled); ok {
			r.batches.Add(1)
		}
	})
	tune(&cfg)
	r.rt = startRuntime(t, r.store, cfg, counter)
	return r
}

func (r *cooldownRig) enrol(t *testing.T, course string, n int) {
	t.Helper()
	for i := range n {
		e := StudentEnrolled{CourseID: course, StudentID: "s" + string(rune('a'+i%26))}
		if _, err := r.store.Append(context.Background(), []core.Message{core.NewMessage(e)}, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// wait waits (real time) until every message was handled, failing after
// limit.
func (r *cooldownRig) wait(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-r.done:
		return time.Since(start)
	case <-time.After(limit):
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("%d of %d messages handled after %v", r.handled, r.want, limit)
		return 0
	}
}

// A steady stream of appends, one every 5 ms for about 300 ms, is claimed
// a cooldown's worth at a time: with a cooldown of 100 ms, a handful of
// batches (the first at once, then one per cooldown), where the stream
// would wake the projector for nearly every append without one. A busy
// machine makes the appends slower and the batches fewer, never more.
func TestWakeCooldownBatchesAStreamOfAppends(t *testing.T) {
	const appends = 60
	r := newCooldownRig(t, appends, func(c *shell.Config) { c.WakeCooldown = 100 * time.Millisecond })
	settle(t, r.rt)
	start := time.Now()
	for range appends {
		r.enrol(t, "c1", 1)
		time.Sleep(5 * time.Millisecond)
	}
	streamed := time.Since(start)
	r.wait(t, 10*time.Second)
	// One batch at the start, one per cooldown of the stream and one after
	// it; the settle before the stream may have left a round's start
	// within the cooldown, which only makes the first wait.
	if got, most := r.batches.Load(), int64(streamed/(100*time.Millisecond))+3; got > most {
		t.Errorf("%d appends over %v were handled in %d batches, want at most %d with a 100 ms cooldown", appends, streamed.Round(time.Millisecond), got, most)
	}
}

// With the cooldown off (negative), every append still gets handled.
func TestWakeCooldownOff(t *testing.T) {
	const appends = 20
	r := newCooldownRig(t, appends, func(c *shell.Config) { c.WakeCooldown = -1 })
	for range appends {
		r.enrol(t, "c1", 1)
		time.Sleep(time.Millisecond)
	}
	r.wait(t, 10*time.Second)
}

// An append to a reactor that has been quiet for longer than the cooldown
// is claimed at once: the cooldown delays no first append.
func TestWakeCooldownDoesNotDelayAQuietReactor(t *testing.T) {
	const cooldown = time.Second
	r := newCooldownRig(t, 1, func(c *shell.Config) { c.WakeCooldown = cooldown })
	settle(t, r.rt)
	time.Sleep(cooldown + 100*time.Millisecond) // the runtime's first round is older than the cooldown
	r.enrol(t, "c1", 1)
	if took := r.wait(t, 10*time.Second); took >= cooldown*3/4 {
		t.Errorf("an append to a reactor quiet for longer than its cooldown was handled after %v, want well under the cooldown (%v)", took, cooldown)
	}
}

// A backlog drains at full speed: a round that stopped at a cap (here one
// batch per round) is followed at once, whatever the cooldown, so 30
// partitions' worth of work takes 30 quick rounds, not 30 cooldowns.
func TestWakeCooldownDrainsABacklogAtOnce(t *testing.T) {
	const partitions, cooldown = 30, 2 * time.Second
	r := newCooldownRig(t, partitions, func(c *shell.Config) {
		c.WakeCooldown = cooldown
		c.BatchesPerHandle = 1
		c.Workers = 1
	})
	var backlog []core.Message
	for i := range partitions {
		backlog = append(backlog, core.NewMessage(StudentEnrolled{CourseID: "c" + string(rune('A'+i)), StudentID: "s1"}))
	}
	if _, err := r.store.Append(context.Background(), backlog, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two cooldowns at most: the append's wake may come within the
	// cooldown of the runtime's first round, and the last round of the
	// drain (which finds nothing) is not full.
	if took := r.wait(t, 2*cooldown+cooldown/2); took > 2*cooldown {
		t.Errorf("a backlog of %d partitions took %v to drain with a %v cooldown", partitions, took, cooldown)
	}
	if got := r.batches.Load(); got < partitions {
		t.Errorf("%d batches for %d partitions with BatchesPerHandle 1", got, partitions)
	}
}

// A reactor waiting out its cooldown is work the runtime has not done:
// Idle says so, and WaitIdle does the work rather than wait for it; Stop
// does not wait for the cooldown.
func TestWakeCooldownPendingIsNotIdle(t *testing.T) {
	const cooldown = 10 * time.Second
	r := newCooldownRig(t, 1, func(c *shell.Config) { c.WakeCooldown = cooldown })
	r.enrol(t, "c1", 1)
	r.wait(t, 5*time.Second) // a round that handled work: the next waits out the cooldown
	handled := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.handled
	}
	r.enrol(t, "c1", 1)
	time.Sleep(100 * time.Millisecond)
	if r.rt.Idle() || handled() != 1 {
		t.Fatalf("Idle %v with %d of 2 appends handled: want the second waiting out the cooldown, and the runtime not idle", r.rt.Idle(), handled())
	}
	start := time.Now()
	settle(t, r.rt)
	if handled() != 2 {
		t.Fatalf("WaitIdle returned with %d of 2 appends handled", handled())
	}
	if took := time.Since(start); took > cooldown/2 {
		t.Errorf("WaitIdle took %v: it waited for the cooldown (%v)", took, cooldown)
	}
	r.enrol(t, "c1", 1) // handled by WaitIdle's own round: the worker's cooldown still runs
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	if err := r.rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > cooldown/2 {
		t.Errorf("Stop took %v with a reactor waiting out a %v cooldown", took, cooldown)
	}
}

// The cooldown's setting: 5 ms by default, a zero field takes it, the
// environment overrides it, and a negative one (none) is valid.
func TestWakeCooldownConfig(t *testing.T) {
	if d := shell.DefaultConfig().WakeCooldown; d != shell.DefaultWakeCooldown {
		t.Errorf("default WakeCooldown %v, want DefaultWakeCooldown", d)
	}
	env := map[string]string{shell.EnvWakeCooldown: "-1ms"}
	cfg, err := shell.Config{}.FromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.WakeCooldown != -time.Millisecond {
		t.Fatalf("%s=-1ms: WakeCooldown %v, error %v; want -1ms (none), valid", shell.EnvWakeCooldown, cfg.WakeCooldown, err)
	}
	env[shell.EnvWakeCooldown] = "soon"
	if _, err := (shell.Config{}).FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "WakeCooldown") {
		t.Errorf("%s=soon: error %v, want one naming WakeCooldown", shell.EnvWakeCooldown, err)
	}
}
