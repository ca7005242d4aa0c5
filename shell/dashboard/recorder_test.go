package dashboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell"
)

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestRecorder(opts RecorderOptions) (*Recorder, *fakeClock) {
	c := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	opts.Clock = c.now
	return NewRecorder(opts), c
}

func part(k string) map[string]string { return map[string]string{"course_id": k} }

// Observations land in the slot of their time, per group; the charts
// turn counts into rates per second over the slot's length.
func TestRecorderCountsObservationsPerSlot(t *testing.T) {
	r, clock := newTestRecorder(RecorderOptions{})
	ctx := context.Background()
	for range 10 {
		r.Observe(ctx, shell.BatchHandled{Group: "g", Partition: part("a"), Messages: 5})
		r.Observe(ctx, shell.Claimed{Group: "g", Partition: part("a")})
	}
	r.Observe(ctx, shell.GuardConflict{Group: "g", Partition: part("b"), Attempt: 1, Retried: true})
	r.Observe(ctx, shell.BatchFailed{Group: "g", Partition: part("b"), Err: errors.New("x"), Retrying: true})
	r.Observe(ctx, shell.Appended{Group: "h", Messages: 3})
	r.Observe(ctx, shell.ScheduledPromoted{Count: 4}) // no group: not kept
	clock.add(fineStep)
	tl := r.timelines("g", windowOf("10m"), "/groups/g", true)
	byID := map[string]timeChart{}
	for _, c := range tl.Charts {
		byID[c.ID] = c
	}
	handled := byID["throughput"].Series[0].Values
	if n := len(handled); n != fineSlots {
		t.Fatalf("%d values, want one per slot (%d)", n, fineSlots)
	}
	// The slot before the last holds the observations; the last (now) is
	// empty; those before the recorder started are missing.
	if got, want := handled[fineSlots-2], 50/fineStep.Seconds(); got != want {
		t.Errorf("handled per second = %v, want %v", got, want)
	}
	if handled[fineSlots-1] != 0 || !math.IsNaN(handled[0]) {
		t.Errorf("now: %v (want 0); before the recorder started: %v (want none)", handled[fineSlots-1], handled[0])
	}
	if got := byID["contention"].Series[1].Values[fineSlots-2]; got != 1/fineStep.Seconds() {
		t.Errorf("conflicts per second = %v", got)
	}
	if f, rt := byID["failures"].Series[0].Values[fineSlots-2], byID["failures"].Series[1].Values[fineSlots-2]; f != 1 || rt != 1 {
		t.Errorf("failures %v retries %v, want 1 and 1", f, rt)
	}
	if len(tl.Hot) != 2 || tl.Hot[0].Key != "course_id:b" || tl.Hot[0].Conflicts != 1 || tl.Hot[1].Claims != 10 {
		t.Errorf("hot partitions: %+v, want b (a conflict weighs more) then a with 10 claims", tl.Hot)
	}
	all := r.timelines("", windowOf("10m"), "/", true)
	if got := all.Charts[1].Series[0].Values[fineSlots-2]; got != 51/fineStep.Seconds() {
		t.Errorf("every group's handled per second = %v, want (50+1)/5 (a synchronous decision handles one command)", got)
	}
	// The coarse ring holds the same, in a longer slot (complete, once
	// the clock has left it).
	clock.add(coarseStep)
	hours := r.timelines("g", windowOf("3h"), "/groups/g", true)
	var sum float64
	for _, v := range hours.Charts[1].Series[0].Values {
		if !math.IsNaN(v) {
			sum += v * coarseStep.Seconds()
		}
	}
	if sum != 50 {
		t.Errorf("3h window: %v messages handled, want 50", sum)
	}
}

// A slot is reused once the ring has gone round: old counts never show
// again, and what is older than the window is not drawn.
func TestRecorderForgetsWhatLeftTheWindow(t *testing.T) {
	r, clock := newTestRecorder(RecorderOptions{})
	ctx := context.Background()
	r.Observe(ctx, shell.BatchHandled{Group: "g", Messages: 7})
	clock.add(fineSlots * fineStep) // the same fine slot, one round later
	r.Observe(ctx, shell.BatchHandled{Group: "g", Messages: 1})
	clock.add(fineStep)
	tl := r.timelines("g", windowOf("10m"), "", true)
	var sum float64
	for _, v := range tl.Charts[1].Series[0].Values {
		if !math.IsNaN(v) {
			sum += v * fineStep.Seconds()
		}
	}
	if sum != 1 {
		t.Errorf("10m window after a round: %v messages, want 1 (the old slot cleared)", sum)
	}
}

// The hottest partitions are kept however many partitions are claimed
// (space-saving): a partition with more than 1/HotPartitions of the
// claims (or contended) among thousands claimed once stays in the slot's
// few, its counts shown as lower bounds (the cold ones, whose counts are
// all inherited, not shown); the slot never holds more than its
// HotPartitions.
func TestRecorderKeepsTheHottestPartitions(t *testing.T) {
	r, _ := newTestRecorder(RecorderOptions{HotPartitions: 4})
	ctx := context.Background()
	for i := range 5000 {
		r.Observe(ctx, shell.Claimed{Group: "g", Partition: part(fmt.Sprintf("cold-%d", i))})
		if i%2 == 0 {
			r.Observe(ctx, shell.Claimed{Group: "g", Partition: part("hot")})
		}
		if i%4 == 0 {
			r.Observe(ctx, shell.GuardConflict{Group: "g", Partition: part("contended")})
		}
	}
	r.Observe(ctx, shell.Claimed{Group: "g", Partition: part(strings.Repeat("x", 500))})
	g := r.groups["g"]
	for _, rg := range []*ring{&g.fine, &g.coarse} {
		s := rg.at(r.now())
		if len(s.Hot) > 4 || cap(s.Hot) != 4 {
			t.Fatalf("a slot keeps %d partitions (cap %d), want at most 4", len(s.Hot), cap(s.Hot))
		}
		for _, h := range s.Hot {
			if len(h.Key) > maxHotKey {
				t.Errorf("a kept key of %d bytes", len(h.Key))
			}
		}
	}
	tl := r.timelines("g", windowOf("10m"), "", true)
	keys := map[string]bool{}
	for _, h := range tl.Hot {
		keys[h.Key] = true
	}
	if !keys["course_id:hot"] || !keys["course_id:contended"] {
		t.Errorf("hot partitions %+v: want course_id:hot and course_id:contended among them", tl.Hot)
	}
	for _, h := range tl.Hot {
		if h.Key == "course_id:hot" && (h.Claims > 2500 || h.Claims < 2000) {
			t.Errorf("hot: %d claims shown, want a lower bound of its 2,500", h.Claims)
		}
		if strings.Contains(h.Key, "cold") && h.Claims > 1 {
			t.Errorf("a cold partition shown with %d claims (it had 1)", h.Claims)
		}
	}
}

// Groups beyond the cap are not kept: memory stays bounded however many
// groups report.
func TestRecorderCapsTheGroups(t *testing.T) {
	r, _ := newTestRecorder(RecorderOptions{Groups: 3})
	for i := range 10 {
		r.Observe(context.Background(), shell.BatchHandled{Group: fmt.Sprintf("g%d", i), Messages: 1})
	}
	r.sampleGroup("g9", 5, lag{Known: true, Total: 1}) // a page's sample is not an observation
	if len(r.groups) != 3 || r.Dropped() != 7 {
		t.Errorf("%d groups kept, %d observations dropped; want 3 and 7", len(r.groups), r.Dropped())
	}
}

// TestRecorderMemory measures a recorder's memory at its worst: every
// group of DefaultRecorderGroups with every slot of both rings holding
// DefaultHotPartitions keys of the longest length kept. Run with -v for
// the figure.
func TestRecorderMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, clock := newTestRecorder(RecorderOptions{})
	ctx := context.Background()
	long := strings.Repeat("k", maxHotKey)
	fill := func(slots int, step time.Duration) {
		for s := range slots {
			for g := range DefaultRecorderGroups {
				for p := range DefaultHotPartitions + 1 {
					r.Observe(ctx, shell.Claimed{Group: fmt.Sprintf("group-%02d", g), Partition: map[string]string{"id": fmt.Sprintf("%s-%d-%d", long, s, p)}})
				}
				r.Observe(ctx, shell.BatchHandled{Group: fmt.Sprintf("group-%02d", g), Messages: 1})
			}
			clock.add(step)
		}
	}
	fill(coarseSlots, coarseStep) // every coarse slot
	fill(fineSlots, fineStep)     // every fine slot
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(r)
	t.Logf("recorder at its worst (%d groups, %d+%d slots, %d hot partitions of %d-byte keys per slot): %.1f MiB", DefaultRecorderGroups, fineSlots, coarseSlots, DefaultHotPartitions, maxHotKey, float64(used)/(1<<20))
	if used > 12<<20 {
		t.Errorf("the recorder holds %d bytes at its worst, want at most 12 MiB", used)
	}
}

// The current slot's rate is over the part of it gone by, so that a
// steady rate does not dip at "now".
func TestRecorderRatesTheCurrentSlotOverItsElapsedTime(t *testing.T) {
	r, clock := newTestRecorder(RecorderOptions{})
	clock.add(2 * time.Second) // 10:00:02, two seconds into a 5 s slot
	r.Observe(context.Background(), shell.BatchHandled{Group: "g", Messages: 10})
	tl := r.timelines("g", windowOf("10m"), "", true)
	if got := tl.Charts[1].Series[0].Values[fineSlots-1]; got != 5 {
		t.Errorf("now: %v per second, want 10 messages in 2 s: 5", got)
	}
}

// BenchmarkRecorderObserve is what an observation costs the runtime: a
// claim (its partition key rendered, the hot partitions updated) and a
// batch handled.
func BenchmarkRecorderObserve(b *testing.B) {
	r := NewRecorder(RecorderOptions{})
	ctx := context.Background()
	parts := make([]map[string]string, 1000)
	for i := range parts {
		parts[i] = map[string]string{"course_id": fmt.Sprintf("c%d", i)}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := parts[i%len(parts)]
		r.Observe(ctx, shell.Claimed{Group: "g", Partition: p})
		r.Observe(ctx, shell.BatchHandled{Group: "g", Partition: p, Messages: 1})
	}
}
