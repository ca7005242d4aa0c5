package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// settles counts the advancer's statements (<prefix>_settle).
type settles struct{ n atomic.Int64 }

func (r *settles) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "SELECT ") && strings.Contains(d.SQL, "_settle(") {
		r.n.Add(1)
	}
	return ctx
}
func (r *settles) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// An append that committed while a position below its own was in flight
// waits for the stored horizon; the append of its store that commits
// last covers it, moving the horizon as far as the settled positions go,
// without a statement of the advancer's: from inside its transaction
// when it is its store's only one in flight, after its COMMIT (in the
// same round trip) when another is (and that other, still open, holds
// back nothing below it).
func TestLastToCommitCoversTheAppendsWaiting(t *testing.T) {
	defer pgstore.SetHealEvery(time.Hour)()
	defer pgstore.SetInFlightGrace(time.Minute)()
	for _, beside := range []bool{false, true} {
		name := "alone in flight"
		if beside {
			name = "beside another"
		}
		t.Run(name, func(t *testing.T) {
			reg, _ := storetest.NewRegistry()
			tr := &settles{}
			s := open(t, pgstore.Options{Registry: reg, Tracer: tr, ConcurrentAppends: -1})
			ctx := t.Context()
			dev := func(id string) []core.Message { return core.Messages(fixtures.DeviceRegistered{DeviceID: id}) }
			if _, err := s.Append(ctx, dev("d0"), driver.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			before := tr.n.Load()
			// hold runs an Update that appends and stays open until
			// release is called; drew is closed once it appended.
			hold := func(id string) (drew chan struct{}, release func(), done chan error) {
				drew, done = make(chan struct{}), make(chan error, 1)
				released := make(chan struct{})
				release = sync.OnceFunc(func() { close(released) })
				// A failing test releases it before the store's cleanup,
				// which waits for its locks.
				t.Cleanup(release)
				go func() {
					done <- s.Update(ctx, func(tx driver.Tx) error {
						if _, err := tx.Append(dev(id), driver.AppendOptions{}); err != nil {
							return err
						}
						close(drew)
						<-released
						return nil
					})
				}()
				return drew, release, done
			}
			within := func(what string, ch <-chan struct{}, d time.Duration) {
				t.Helper()
				select {
				case <-ch:
				case <-time.After(d):
					t.Fatalf("%s: not within %v", what, d)
				}
			}
			uDrew, uRelease, uDone := hold("u")
			within("the first transaction's append", uDrew, 10*time.Second)
			appended := make(chan struct{})
			var res driver.AppendResult
			var appendErr error
			go func() {
				res, appendErr = s.Append(ctx, dev("s"), driver.AppendOptions{})
				close(appended)
			}()
			for deadline := time.Now().Add(10 * time.Second); !s.AppendsWaiting(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the standalone append never waited for the horizon")
				}
			}
			var tRelease func()
			var tDone chan error
			if beside {
				var tDrew chan struct{}
				tDrew, tRelease, tDone = hold("t")
				within("the second transaction's append", tDrew, 10*time.Second)
			}
			uRelease()
			if err := <-uDone; err != nil {
				t.Fatal(err)
			}
			within("the standalone append, once the transaction below it committed", appended, 5*time.Second)
			if appendErr != nil {
				t.Fatal(appendErr)
			}
			var stored int64
			err := s.Pool().QueryRow(ctx, "SELECT last_position FROM "+s.Prefix()+"_head WHERE id = 1").Scan(&stored)
			if err != nil || stored < res.Last {
				t.Fatalf("stored horizon %d (%v) once the append returned, want at least its position %d", stored, err, res.Last)
			}
			if beside {
				tRelease()
				if err := <-tDone; err != nil {
					t.Fatal(err)
				}
			}
			if n := tr.n.Load() - before; n != 0 {
				t.Fatalf("the advancer settled %d times: the last commit did not cover the append waiting", n)
			}
		})
	}
}
