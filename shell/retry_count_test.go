package shell_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
)

// failingTogether fails every batch, once every worker holds its claim.
type failingTogether struct {
	arrived *sync.WaitGroup
}

func (f failingTogether) GroupID() string         { return "shell_test.failing_together" }
func (f failingTogether) HandledTypes() []string  { return []string{"students.notify"} }
func (f failingTogether) PartitionKeys() []string { return []string{"student_id"} }
func (f failingTogether) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	f.arrived.Done()
	f.arrived.Wait()
	return nil, errors.New("down")
}

// Workers failing batches of one group at once each count a retry: the
// retry count is read and written in one transaction.
func TestConcurrentFailuresEachCountARetry(t *testing.T) {
	for _, name := range []string{"memstore", "sqlitestore"} {
		t.Run(name, func(t *testing.T) {
			const workers = 4
			for run := range 4 {
				ctx := context.Background()
				var arrived sync.WaitGroup
				arrived.Add(workers)
				f := failingTogether{arrived: &arrived}
				rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet(), ErrorStrategy: core.ErrorStrategy{Retries: 100, After: time.Hour}}, f)
				var msgs []core.Message
				for i := range workers {
					msgs = append(msgs, core.NewMessage(NotifyStudent{StudentID: "s" + strconv.Itoa(i)}))
				}
				if _, err := store.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				for i := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := rt.HandleNext(ctx, f, "w"+strconv.Itoa(i)); err != nil {
							t.Error(err)
						}
					}()
				}
				wg.Wait()
				info, err := store.Group(ctx, f.GroupID())
				if err != nil {
					t.Fatal(err)
				}
				if info.Status != shell.StatusRetrying || info.Failure.RetryCount != workers {
					t.Fatalf("run %d: after %d concurrent failures: %s with retry count %d, want retrying with %d", run, workers, info.Status, info.Failure.RetryCount, workers)
				}
			}
		})
	}
}
