package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testGroupConcurrency runs goroutine workers against an appender: the
// appender appends commands to many partitions in random batches while
// the workers claim them, and each command batch is processed in one
// Update that appends an event per command and acks the batch (commands
// that only emit events: the stranding scenario of the changes file). A
// second group projects the events. Everything must drain, each message
// processed once per group and in order within its partition, and both
// groups must end idle.
func (s suite) testGroupConcurrency(t *testing.T) {
	const workers = 4
	partitions, perPartition := 200, 3
	if testing.Short() {
		partitions, perPartition = 40, 2
	}
	e := s.genv(t, devices, bindings)
	total := partitions * perPartition
	seed := rand.Uint64()

	type progress struct {
		mu   sync.Mutex
		seen map[uuid.UUID]string // message id -> worker that processed it
		last map[string]int64     // partition -> last processed position
		done atomic.Int64
	}
	newProgress := func() *progress {
		return &progress{seen: map[uuid.UUID]string{}, last: map[string]int64{}}
	}
	prog := map[string]*progress{devices: newProgress(), bindings: newProgress()}

	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	var appended atomic.Bool
	var claims, empty atomic.Int64 // claims made and empty polls
	var progressed atomic.Int64    // unix nanoseconds of the last batch processed or append
	progressed.Store(time.Now().UnixNano())
	var wg sync.WaitGroup

	wg.Go(func() {
		defer appended.Store(true)
		r := rand.New(rand.NewPCG(seed, 0))
		var cmds []any
		for round := range perPartition {
			for _, p := range r.Perm(partitions) {
				cmds = append(cmds, deviceRegistered{DeviceID: fmt.Sprint("d", p), Name: fmt.Sprint("round ", round)})
			}
		}
		for len(cmds) > 0 {
			n := min(len(cmds), 1+r.IntN(8))
			if _, err := e.store.Append(ctx, msgs(cmds[:n]...), driver.AppendOptions{}); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			cmds = cmds[n:]
			progressed.Store(time.Now().UnixNano())
			if r.IntN(4) == 0 {
				time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
			}
		}
	})

	process := func(w string, c *driver.ClaimedPartition) error {
		p := prog[c.Group]
		p.mu.Lock()
		key := core.Partition(c.Partition).String()
		for _, m := range c.Messages {
			if by, dup := p.seen[m.ID]; dup {
				p.mu.Unlock()
				return fmt.Errorf("%s: message %d of %s processed again by %s (first by %s)", c.Group, m.Position, key, w, by)
			}
			if m.Position <= p.last[key] {
				p.mu.Unlock()
				return fmt.Errorf("%s: message %d of %s delivered after %d", c.Group, m.Position, key, p.last[key])
			}
			p.seen[m.ID] = w
			p.last[key] = m.Position
		}
		p.mu.Unlock()
		err := e.update(func(tx driver.Tx, gtx driver.GroupTx) error {
			if c.Group == devices {
				events := make([]any, len(c.Messages))
				for i, m := range c.Messages {
					events[i] = deviceBound{m.Payload.(deviceRegistered).DeviceID, "a"}
				}
				if _, err := tx.Append(msgs(events...), driver.AppendOptions{}); err != nil {
					return err
				}
			}
			return gtx.Ack(c, c.Last())
		})
		if err != nil {
			return fmt.Errorf("%s: process %s as %s: %w", c.Group, key, w, err)
		}
		p.done.Add(int64(len(c.Messages)))
		progressed.Store(time.Now().UnixNano())
		return nil
	}

	for i := range workers {
		w := fmt.Sprint("worker-", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				worked := false
				for _, group := range []string{devices, bindings} {
					c, err := e.gs.ClaimNext(ctx, group, w, 5)
					if err != nil {
						t.Errorf("%s claims %s: %v", w, group, err)
						cancel()
						return
					}
					if c == nil {
						empty.Add(1)
						continue
					}
					claims.Add(1)
					worked = true
					if err := process(w, c); err != nil {
						t.Error(err)
						cancel()
						return
					}
				}
				if worked {
					continue
				}
				if appended.Load() && prog[devices].done.Load() == int64(total) && prog[bindings].done.Load() == int64(total) {
					return
				}
				if stalled := time.Since(time.Unix(0, progressed.Load())); appended.Load() && stalled > 3*time.Second {
					t.Errorf("%s: nothing to claim for %v, with %d of %d commands and %d of %d events processed: partitions are stranded",
						w, stalled.Round(time.Millisecond), prog[devices].done.Load(), total, prog[bindings].done.Load(), total)
					cancel()
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("seed %d", seed)
	}
	t.Logf("%d claims, %d empty polls", claims.Load(), empty.Load())
	for _, group := range []string{devices, bindings} {
		if got := prog[group].done.Load(); got != int64(total) {
			t.Fatalf("%s processed %d of %d messages before the deadline: partitions were stranded (seed %d)", group, got, total, seed)
		}
		for i := range workers {
			e.noClaim(group, fmt.Sprint("worker-", i))
		}
		offs := e.offsets(group)
		if len(offs) != partitions {
			t.Fatalf("%s has %d offsets, want %d", group, len(offs), partitions)
		}
		for _, o := range offs {
			if o.Claimed || o.LastPosition != prog[group].last[core.Partition(o.Partition).String()] {
				t.Fatalf("%s offset %+v, want unclaimed at its last processed position %d", group, o, prog[group].last[core.Partition(o.Partition).String()])
			}
		}
	}
	if n := len(e.log()); n != 2*total {
		t.Fatalf("the log holds %d messages, want %d commands and as many events", n, total)
	}
}
