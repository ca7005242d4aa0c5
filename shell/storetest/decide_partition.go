package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// The tally decider of testHandlePartition: a count per tally, decided
// on the tally's history.
type (
	tallyAdd struct {
		TallyID string `json:"tally_id" sourced:"required"`
	}
	tallyAdded struct {
		TallyID string `json:"tally_id"`
		N       int    `json:"n"`
	}
)

// tallyDecider counts a tally's additions; with seen, its sync work
// records the position of the command it decided (Batch.Messages).
func tallyDecider(seen func(id string, position int64)) core.Decider[int] {
	d := core.Decider[int]{Group: "storetest.tallies", PartitionBy: []string{"tally_id"}}.With(
		core.Evolve(func(_ int, e tallyAdded) int { return e.N }),
		core.Decide(func(n int, c tallyAdd) ([]any, error) { return []any{tallyAdded{TallyID: c.TallyID, N: n + 1}}, nil }),
	)
	if seen != nil {
		d = d.With(core.Sync(func(_ context.Context, _ core.SyncTx, b core.Batch[int]) error {
			seen(b.Messages[0].ID.String(), b.Messages[0].Position)
			return nil
		}))
	}
	return d
}

// testHandlePartition: Handle of a decider on its partition's history
// reports the command at the position the log holds it, and the
// decider's sync work is given that position too, one Handle after
// another and concurrently on one partition (however the store sends
// the command: pgstore's goes with the COMMIT, driver.DeferredCommandAppender).
func (s suite) testHandlePartition(t *testing.T) {
	for _, withSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", withSync), func(t *testing.T) {
			e := s.env(t)
			if err := codec.Register[tallyAdd](e.reg, "storetest.tally_add"); err != nil {
				t.Fatal(err)
			}
			if err := codec.Register[tallyAdded](e.reg, "storetest.tally_added"); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[string]int64{}
			var record func(string, int64)
			if withSync {
				record = func(id string, pos int64) {
					mu.Lock()
					defer mu.Unlock()
					seen[id] = pos // the last attempt's: the one committed
				}
			}
			d := tallyDecider(record)
			const writers, each = 3, 8
			results := make(chan shell.HandleResult[int], writers*each+2)
			for _, tally := range []string{"t1", "t1"} { // one after another first
				res, err := shell.Handle(e.ctx, e.store, d, tallyAdd{TallyID: tally}, nil)
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				results <- res
			}
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for range each {
						res, err := shell.Handle(e.ctx, e.store, d, tallyAdd{TallyID: "t1"}, nil)
						if err != nil {
							t.Errorf("concurrent Handle: %v", err)
							return
						}
						results <- res
					}
				})
			}
			wg.Wait()
			close(results)
			log := e.log()
			at := map[string]int64{}
			for _, m := range log {
				at[m.ID.String()] = m.Position
			}
			states := map[int]bool{}
			for res := range results {
				id := res.Command.ID.String()
				if res.Position == 0 || at[id] != res.Position {
					t.Errorf("Handle reported command %s at %d, the log holds it at %d", id, res.Position, at[id])
				}
				if withSync && seen[id] != res.Position {
					t.Errorf("sync work saw command %s at %d, want %d", id, seen[id], res.Position)
				}
				if states[res.State] {
					t.Errorf("two commands decided to the same count %d", res.State)
				}
				states[res.State] = true
			}
			n, _, err := shell.Load(e.ctx, e.store, d, map[string]string{"tally_id": "t1"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := 2 + writers*each; n != want || len(log) != 2*want {
				t.Errorf("tally %d with %d messages in the log, want %d and %d", n, len(log), want, 2*want)
			}
		})
	}
}
