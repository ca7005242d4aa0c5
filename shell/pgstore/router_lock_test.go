package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// The tests in this file hold the router's transactions on PostgreSQL to
// the boundary locks: a decider's batch neither takes the store's
// exclusive lock (which stops every append of every process) nor keeps
// the positions it drew in flight while it handles more batches.

type rlDeposit struct {
	Account string `json:"account" sourced:"required"`
	Amount  int    `json:"amount"`
}

type rlDeposited struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

var rlAccounts = core.Decider[int]{Group: "rl.accounts", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(balance int, e rlDeposited) int { return balance + e.Amount }),
	core.Decide(func(_ int, c rlDeposit) ([]any, error) {
		if c.Amount <= 0 {
			return nil, errors.New("a deposit must be positive")
		}
		return []any{rlDeposited(c)}, nil
	}),
)

func rlRegistry(t *testing.T) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry()
	if err := codec.Register[rlDeposit](reg, "rl.deposit"); err != nil {
		t.Fatal(err)
	}
	if err := codec.Register[rlDeposited](reg, "rl.deposited"); err != nil {
		t.Fatal(err)
	}
	return reg
}

// txTrace records, for each transaction a store commits, the statements
// it sent.
type txTrace struct {
	mu        sync.Mutex
	open      map[*pgx.Conn][]string
	committed [][]string
}

func newTxTrace() *txTrace { return &txTrace{open: map[*pgx.Conn][]string{}} }

func (r *txTrace) add(c *pgx.Conn, sqls ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range sqls {
		switch {
		case strings.HasPrefix(q, "BEGIN"):
			r.open[c] = []string{q}
		case q == "COMMIT":
			r.committed = append(r.committed, append(r.open[c], q))
			delete(r.open, c)
		case q == "ROLLBACK":
			delete(r.open, c)
		default:
			if r.open[c] != nil {
				r.open[c] = append(r.open[c], q)
			}
		}
	}
}

func (r *txTrace) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(c, d.SQL)
	return ctx
}
func (r *txTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *txTrace) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		r.add(c, q.SQL)
	}
	return ctx
}
func (r *txTrace) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *txTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestRouterDecidesUnderBoundaryLocks drains a decider's commands, four
// accounts of three, through the router, and reads what its transactions
// sent. None takes the store's exclusive lock: up to schema version 9,
// ClaimUpdate took it from its start, and a decider's batch (whose
// appends carry guards) read the newest position, which made its
// transaction run again under it. A batch's guards, all from the same
// read, are checked once (the first append's guard), not once per
// command.
func TestRouterDecidesUnderBoundaryLocks(t *testing.T) {
	ctx := t.Context()
	trace := newTxTrace()
	s := open(t, pgstore.Options{Registry: rlRegistry(t), Tracer: trace})
	rt, err := shell.NewRouter(s, shell.RouterOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, rlAccounts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	var cmds []core.Message
	for i := range 12 {
		cmds = append(cmds, core.NewMessage(rlDeposit{Account: fmt.Sprint("a", i%4), Amount: 1 + i/4}))
	}
	if _, err := s.Append(ctx, cmds, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	trace.mu.Lock()
	trace.committed = nil
	trace.mu.Unlock()
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		balance, _, err := shell.Load(ctx, s, rlAccounts, map[string]string{"account": fmt.Sprint("a", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if balance != 6 {
			t.Fatalf("account a%d: balance %d, want 6 (1 + 2 + 3)", i, balance)
		}
	}
	trace.mu.Lock()
	defer trace.mu.Unlock()
	inserts, reads := 0, 0
	for _, tx := range trace.committed {
		for _, q := range tx {
			if q == "SELECT pg_advisory_xact_lock($1)" {
				t.Fatalf("a router transaction took the store's exclusive lock:\n%s", strings.Join(tx, "\n"))
			}
			if strings.HasPrefix(q, "INSERT INTO "+s.Prefix()+"_messages") {
				inserts++
			}
			if strings.HasPrefix(q, "WITH h AS") { // a read
				reads++
			}
		}
	}
	if inserts != 12 {
		t.Fatalf("the router's transactions appended %d times, want once per command (12)", inserts)
	}
	if reads != 4 {
		t.Fatalf("the router's transactions read %d times, want once per partition's batch (4): its guards are checked again", reads)
	}
}

// TestAppendsWaiting: the store tells the router (driver.AppendWaiter)
// when an append waits for positions that an open transaction holds, so
// that the router ends such transactions at the end of a batch.
func TestAppendsWaiting(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgstore.Options{Registry: rlRegistry(t)})
	var _ driver.AppendWaiter = s
	if s.AppendsWaiting() {
		t.Fatal("an idle store says an append waits")
	}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx driver.Tx) error {
			if _, err := tx.Append(core.Messages(rlDeposited{Account: "a1", Amount: 1}), driver.AppendOptions{}); err != nil {
				return err
			}
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, core.Messages(rlDeposited{Account: "a2", Amount: 1}), driver.AppendOptions{})
		appended <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !s.AppendsWaiting() {
		if time.Now().After(deadline) {
			t.Fatal("an append committed above an open transaction's position: the store does not say it waits")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	for s.AppendsWaiting() {
		if time.Now().After(deadline) {
			t.Fatal("the store still says an append waits after the transaction committed")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClaimUpdateBesideAppends: while a ClaimUpdate transaction that
// appended is open, an append to another boundary commits. Up to schema
// version 9 the claim held the store's exclusive lock, and the append
// waited for it.
func TestClaimUpdateBesideAppends(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgstore.Options{Registry: rlRegistry(t)})
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "rl.accounts", PartitionBy: []string{"account"}, Handled: []string{"rl.deposit"}, Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, core.Messages(rlDeposit{Account: "a1", Amount: 1}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.ClaimUpdate(ctx, "rl.accounts", "w1", 10, func(tx driver.Tx, c *driver.ClaimedPartition) error {
			if _, err := tx.Append(core.Messages(rlDeposited{Account: "a1", Amount: 1}), driver.AppendOptions{}); err != nil {
				return err
			}
			close(inside)
			<-release
			return tx.Ack(c, c.Last())
		})
		done <- err
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("the claim ended before its append: %v", err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := s.Update(actx, func(tx driver.Tx) error {
		_, err := tx.Append(core.Messages(rlDeposited{Account: "a2", Amount: 1}), driver.AppendOptions{})
		return err
	})
	cancel()
	close(release)
	if err != nil {
		t.Fatalf("an append to another account while a claim transaction is open: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
