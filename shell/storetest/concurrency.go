package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

func (s suite) testConcurrency(t *testing.T) {
	writers, ops := 4, 30
	if testing.Short() {
		writers, ops = 2, 10
	}

	t.Run("concurrent appends keep every message once, without gaps", func(t *testing.T) {
		e := s.env(t)
		results := make([][]driver.AppendResult, writers)
		for w := range writers {
			results[w] = make([]driver.AppendResult, ops)
		}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range ops {
					batch := msgs(userRegistered{UserID: fmt.Sprintf("w%d-%d", w, i), Name: "a"})
					if i%3 == 0 {
						batch = append(batch, msgs(userRegistered{UserID: fmt.Sprintf("w%d-%d", w, i), Name: "b"})...)
					}
					res, err := e.store.Append(e.ctx, batch, driver.AppendOptions{})
					if err != nil {
						t.Errorf("writer %d append %d: %v", w, i, err)
						return
					}
					results[w][i] = res
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		log := e.log()
		byID := make(map[uuid.UUID]core.PositionedMessage, len(log))
		for i, m := range log {
			if m.Position != int64(i+1) {
				t.Fatalf("position %d at index %d: the log has a gap", m.Position, i)
			}
			byID[m.ID] = m
		}
		total := 0
		for w, rs := range results {
			var prev int64
			for i, res := range rs {
				for j, m := range res.Messages {
					total++
					got, ok := byID[m.ID]
					if !ok || got.Position != res.Positions[j] {
						t.Fatalf("writer %d append %d message %d: logged at %d (found %v), want %d", w, i, j, got.Position, ok, res.Positions[j])
					}
					if res.Positions[j] <= prev {
						t.Fatalf("writer %d: position %d after %d", w, res.Positions[j], prev)
					}
					prev = res.Positions[j]
				}
			}
		}
		if len(log) != total || len(byID) != total {
			t.Fatalf("log holds %d messages (%d ids), want %d", len(log), len(byID), total)
		}
	})

	t.Run("guards are linearizable", func(t *testing.T) {
		s.linearizable(t, writers, ops)
	})
}

// linearizable has writers read with random conditions or partitions and
// append random messages under the guard they read, concurrently, and then
// checks every outcome against the final log: an append that succeeded had
// no message matching its guard between the guard's position and its own
// first position, and an append that conflicted was shown messages that
// are in the log and do match its guard.
func (s suite) linearizable(t *testing.T, writers, ops int) {
	e := s.env(t)
	type outcome struct {
		writer int
		guard  core.Guard
		res    driver.AppendResult
		err    *core.ConflictError
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
	)
	seed := rand.Uint64()
	run := func(round int) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(round*writers+w)))
				g := gen{pick: func(n int, _ string) int { return r.IntN(n) }, reg: e.reg, types: courseTypes}
				for range ops {
					var read driver.ReadResult
					var err error
					if r.IntN(2) == 0 {
						read, err = e.store.Read(e.ctx, g.conditions(1, 2), driver.ReadOptions{})
					} else {
						p := g.partition()
						read, err = e.store.ReadPartition(e.ctx, p, g.partitionTypes(p), driver.ReadOptions{})
					}
					if err != nil {
						t.Errorf("writer %d read: %v", w, err)
						return
					}
					runtime.Gosched()
					batch := make([]any, 1+r.IntN(2))
					for i := range batch {
						batch[i] = g.payload()
					}
					res, err := e.appendGuarded(read.Guard, batch...)
					o := outcome{writer: w, guard: read.Guard, res: res}
					if err != nil && !errors.As(err, &o.err) {
						t.Errorf("writer %d append: %v", w, err)
						return
					}
					mu.Lock()
					outcomes = append(outcomes, o)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	// Contention is likely but not certain: run more rounds until some
	// appends conflicted.
	conflicts := 0
	for round := 0; round < 5 && conflicts == 0 && !t.Failed(); round++ {
		run(round)
		conflicts = 0
		for _, o := range outcomes {
			if o.err != nil {
				conflicts++
			}
		}
	}
	if t.Failed() {
		return
	}

	log := e.log()
	matches := func(g core.Guard, m core.PositionedMessage) bool {
		return core.MatchAny(g.Conditions, m.Type, keysOf(e.reg, m.Payload))
	}
	at := func(pos int64) core.PositionedMessage {
		if pos < 1 || pos > int64(len(log)) {
			t.Fatalf("position %d is outside the log of %d messages (seed %d)", pos, len(log), seed)
		}
		return log[pos-1]
	}
	for i, m := range log {
		if m.Position != int64(i+1) {
			t.Fatalf("position %d at index %d: the log has a gap", m.Position, i)
		}
	}
	appended := 0
	for _, o := range outcomes {
		if o.err != nil {
			if len(o.err.Conflicts) == 0 {
				t.Fatalf("writer %d: a conflict without conflicting messages (guard %v)", o.writer, o.guard)
			}
			for _, c := range o.err.Conflicts {
				if c.Position <= o.guard.LastPosition || !matches(o.guard, c) || at(c.Position).ID != c.ID {
					t.Fatalf("writer %d: conflict %d:%s%+v is not a logged message matching guard %v (seed %d)", o.writer, c.Position, c.Type, c.Payload, o.guard, seed)
				}
			}
			continue
		}
		appended += len(o.res.Messages)
		first := o.res.Positions[0]
		for j, m := range o.res.Messages {
			if at(o.res.Positions[j]).ID != m.ID {
				t.Fatalf("writer %d: message %s is not at its position %d", o.writer, m.ID, o.res.Positions[j])
			}
		}
		for p := o.guard.LastPosition + 1; p < first; p++ {
			if m := at(p); matches(o.guard, m) {
				t.Fatalf("writer %d appended at %d under guard %v, but %d:%s%+v matched it after the read (seed %d)",
					o.writer, first, o.guard, m.Position, m.Type, m.Payload, seed)
			}
		}
	}
	if appended != len(log) {
		t.Fatalf("the log holds %d messages, the successful appends %d", len(log), appended)
	}
	if conflicts == 0 || conflicts == len(outcomes) {
		t.Fatalf("%d of %d appends conflicted: the test needs both outcomes (seed %d)", conflicts, len(outcomes), seed)
	}
	t.Logf("%d appends, %d conflicts", len(outcomes), conflicts)
}
