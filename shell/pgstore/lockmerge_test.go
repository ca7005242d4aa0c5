package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// lockStatements counts the boundary-lock statements the store sends
// (<prefix>_lock), alone or in a batch.
type lockStatements struct {
	roundTrips
	locks atomic.Int64
}

func (l *lockStatements) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "_lock($1, $2, $3") {
			l.locks.Add(1)
		}
	}
	return l.roundTrips.TraceBatchStart(ctx, c, d)
}

// A Handle defers three writes to its COMMIT (the command, its offset's
// advance, the events), each on boundaries of its own; they go in one
// lock statement, not one each: its boundaries sorted, taken at once.
// Concurrent Handles on the same accounts still serialise on them: every
// deposit is counted once and no guard is lost.
func TestHandleTakesItsBoundariesInOneStatement(t *testing.T) {
	tr := &lockStatements{}
	s := open(t, pgstore.Options{Registry: rlRegistry(t), Tracer: tr, MaxConns: 8})
	ctx := context.Background()
	if _, err := shell.Handle(ctx, s, rlAccounts, rlDeposit{Account: "warm", Amount: 1}, nil); err != nil {
		t.Fatal(err) // registers the group
	}
	const n = 20
	before := tr.locks.Load()
	for i := range n {
		if _, err := shell.Handle(ctx, s, rlAccounts, rlDeposit{Account: fmt.Sprint("a", i%4), Amount: 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.locks.Load() - before; got != n {
		t.Errorf("%d lock statements for %d Handles, want one each", got, n)
	}

	const workers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := shell.Handle(ctx, s, rlAccounts, rlDeposit{Account: fmt.Sprint("b", (w+i)%2), Amount: 1}, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for i := range 2 {
		bal, _, err := shell.Load(ctx, s, rlAccounts, map[string]string{"account": fmt.Sprint("b", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		total += bal
	}
	if total != workers*each {
		t.Errorf("balances add up to %d after %d concurrent deposits, want every one counted once", total, workers*each)
	}
}
