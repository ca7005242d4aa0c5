package dashboard

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// The recorder's rings: a fine one for the last minutes and a coarse one
// for the last hours, each a fixed number of slots.
const (
	fineStep    = 5 * time.Second
	fineSlots   = 120 // 10 minutes
	coarseStep  = 75 * time.Second
	coarseSlots = 144 // 3 hours
)

// Defaults of RecorderOptions.
const (
	// DefaultRecorderGroups is how many consumer groups a Recorder keeps
	// series for.
	DefaultRecorderGroups = 32
	// DefaultHotPartitions is how many partitions of a group a Recorder
	// keeps per slot: the hottest by claims and guard conflicts.
	DefaultHotPartitions = 5
	// maxHotKey is the longest partition key kept (longer ones are cut).
	maxHotKey = 64
)

// RecorderOptions configure a Recorder.
type RecorderOptions struct {
	// Groups is how many consumer groups the recorder keeps series for, in
	// the order they are first observed (0: DefaultRecorderGroups). The
	// observations of groups beyond are counted in Dropped only.
	Groups int
	// HotPartitions is how many partitions of a group each slot keeps,
	// the hottest by claims and guard conflicts (0:
	// DefaultHotPartitions; at most 16).
	HotPartitions int
	// Clock is the recorder's clock (nil: time.Now).
	Clock func() time.Time
}

// Recorder keeps what the runtime of this process observes (it is a
// shell.Observer: set it in shell.Config.Observer, RouterOptions.Observer
// or HandleOptions.Observer) in bounded in-memory rings, for the charts of
// the groups page and of each group's page (Options.Recorder): per group,
// the messages handled, the claims, the guard conflicts, the failures and
// retries, and the hottest partitions; beside them, samples of what the
// dashboard reads from the store as its pages render (the log's last
// position, each group's lag).
//
// Its memory is fixed by its options, whatever the number of partitions
// or messages: two rings (120 slots of 5 s, 144 of 75 s: 10 minutes and 3
// hours) per group, for at most Groups groups, each slot keeping its
// counters and at most HotPartitions partition keys of up to 64 bytes.
// See the package doc, "Charts", for the figures.
//
// A Recorder is safe for concurrent use; Observe takes a mutex for a few
// additions and returns.
type Recorder struct {
	mu      sync.Mutex
	now     func() time.Time
	started time.Time
	max     int
	hot     int
	groups  map[string]*groupSeries
	order   []string
	log     *groupSeries // the store's samples that belong to no group: the log's position
	dropped int64
}

// NewRecorder returns an empty recorder.
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.Groups <= 0 {
		opts.Groups = DefaultRecorderGroups
	}
	if opts.HotPartitions <= 0 {
		opts.HotPartitions = DefaultHotPartitions
	}
	if opts.HotPartitions > 16 {
		opts.HotPartitions = 16
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	r := &Recorder{now: opts.Clock, max: opts.Groups, hot: opts.HotPartitions, groups: map[string]*groupSeries{}}
	r.started = r.now()
	r.log = newGroupSeries(0)
	return r
}

// counters are what a slot counts for a group.
type counters struct {
	Handled, Batches, Claims, Conflicts, Failures, Retries, Parked int64
}

// hotPartition is a partition's claims and conflicts in a slot: upper
// bounds, of which the Over counts were inherited from the partition it
// replaced (see addHot), so that Claims-OverClaims and
// Conflicts-OverConflicts are exact lower bounds.
type hotPartition struct {
	Key                       string
	Claims, Conflicts         int64
	OverClaims, OverConflicts int64
}

// heat orders hot partitions: a conflict weighs as much as ten claims.
func (h hotPartition) heat() int64 { return h.Claims + 10*h.Conflicts }

// slot is one interval of a ring for a group.
type slot struct {
	Index int64 // the interval's number: unix time / step; 0: empty
	counters
	Hot []hotPartition
	// Lag and Position are the last samples of the store in the interval
	// (Sampled: any): the group's lag (pending messages; LagKnown) and the
	// position it acked up to (the log's last position for the log's
	// series).
	Lag      int64
	LagKnown bool
	Position int64
	Sampled  bool
}

// ring is a fixed number of slots of one step.
type ring struct {
	step  time.Duration
	slots []slot
}

func newRing(step time.Duration, n, hot int) ring {
	r := ring{step: step, slots: make([]slot, n)}
	for i := range r.slots {
		r.slots[i].Hot = make([]hotPartition, 0, hot)
	}
	return r
}

// at returns the slot of t, cleared when it held an older interval.
func (r *ring) at(t time.Time) *slot {
	idx := t.UnixNano()/int64(r.step) + 1
	s := &r.slots[idx%int64(len(r.slots))]
	if s.Index != idx {
		hot := s.Hot[:0]
		clear(s.Hot[:cap(s.Hot)])
		*s = slot{Index: idx, Hot: hot}
	}
	return s
}

// get returns the slot of interval idx, or nil when the ring no longer
// (or never) held it.
func (r *ring) get(idx int64) *slot {
	s := &r.slots[idx%int64(len(r.slots))]
	if s.Index != idx {
		return nil
	}
	return s
}

// groupSeries are a group's two rings.
type groupSeries struct {
	fine, coarse ring
}

func newGroupSeries(hot int) *groupSeries {
	return &groupSeries{fine: newRing(fineStep, fineSlots, hot), coarse: newRing(coarseStep, coarseSlots, hot)}
}

// each runs f on the slot of t in both rings.
func (g *groupSeries) each(t time.Time, f func(s *slot)) {
	f(g.fine.at(t))
	f(g.coarse.at(t))
}

// series returns the group's series, creating it while under the cap
// (counting an observation dropped beyond it, when observed).
func (r *Recorder) series(group string, observed bool) *groupSeries {
	g, ok := r.groups[group]
	if !ok {
		if len(r.groups) >= r.max {
			if observed {
				r.dropped++
			}
			return nil
		}
		g = newGroupSeries(r.hot)
		r.groups[strings.Clone(group)] = g
		r.order = append(r.order, group)
	}
	return g
}

// addHot adds claims and conflicts to partition key in s, keeping the
// hottest partitions by the space-saving algorithm: a key not kept
// replaces the coolest one and inherits its counts (recorded as Over), so
// that a partition with more than 1/HotPartitions of the slot's heat is
// always kept, and its counts less the inherited ones are exact lower
// bounds.
func addHot(s *slot, key string, claims, conflicts int64) {
	for i := range s.Hot {
		if s.Hot[i].Key == key {
			s.Hot[i].Claims += claims
			s.Hot[i].Conflicts += conflicts
			return
		}
	}
	h := hotPartition{Key: strings.Clone(cutKey(key)), Claims: claims, Conflicts: conflicts}
	if len(s.Hot) < cap(s.Hot) {
		s.Hot = append(s.Hot, h)
		return
	}
	coolest := 0
	for i := range s.Hot {
		if s.Hot[i].heat() < s.Hot[coolest].heat() {
			coolest = i
		}
	}
	h.OverClaims, h.OverConflicts = s.Hot[coolest].Claims, s.Hot[coolest].Conflicts
	h.Claims += h.OverClaims
	h.Conflicts += h.OverConflicts
	s.Hot[coolest] = h
}

// cutKey cuts a partition key to maxHotKey bytes.
func cutKey(k string) string {
	if len(k) <= maxHotKey {
		return k
	}
	return strings.ToValidUTF8(k[:maxHotKey-3], "") + "..."
}

// Observe records o (shell.Observer).
func (r *Recorder) Observe(_ context.Context, o shell.Observation) {
	var group string
	var f func(s *slot)
	switch o := o.(type) {
	case shell.BatchHandled:
		group = o.Group
		f = func(s *slot) { s.Handled += int64(o.Messages); s.Batches++ }
	case shell.Claimed:
		group = o.Group
		key := core.Partition(o.Partition).String()
		f = func(s *slot) { s.Claims++; addHot(s, key, 1, 0) }
	case shell.GuardConflict:
		group = o.Group
		key := core.Partition(o.Partition).String()
		f = func(s *slot) {
			s.Conflicts++
			addHot(s, key, 0, 1)
		}
	case shell.BatchFailed:
		group = o.Group
		f = func(s *slot) {
			s.Failures++
			if o.Retrying {
				s.Retries++
			}
			if o.Parked {
				s.Parked++
			}
		}
	case shell.Appended:
		// A synchronous decision: its command is handled here, by the
		// group that decided it.
		group = o.Group
		f = func(s *slot) { s.Handled++; s.Batches++ }
	default:
		return
	}
	if group == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.series(group, true); g != nil {
		g.each(r.now(), f)
	}
}

// sampleLog records the log's last position, as the store gave it.
func (r *Recorder) sampleLog(pos int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.each(r.now(), func(s *slot) { s.Position, s.Sampled = pos, true })
}

// sampleGroup records a group's acked position and lag, as the store gave
// them.
func (r *Recorder) sampleGroup(group string, acked int64, l lag) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.series(group, false); g != nil {
		g.each(r.now(), func(s *slot) {
			s.Position, s.Sampled = acked, true
			s.Lag, s.LagKnown = int64(l.Total), l.Known
		})
	}
}

// Dropped is how many observations of groups beyond RecorderOptions.Groups
// the recorder did not keep.
func (r *Recorder) Dropped() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}
