package shell_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

type holdDeposit struct {
	Account string `json:"account" sourced:"required"`
	Amount  int    `json:"amount"`
}

type holdDeposited struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

var holdAccounts = core.Decider[int]{Group: "hold.accounts", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(balance int, e holdDeposited) int { return balance + e.Amount }),
	core.Decide(func(_ int, c holdDeposit) ([]any, error) {
		if c.Amount <= 0 {
			return nil, errors.New("a deposit must be positive")
		}
		return []any{holdDeposited(c)}, nil
	}),
)

// skippingStore is a SQLite store that says its positions may skip and
// whether appends wait (as pgstore does), and counts the ClaimUpdate
// transactions that handled a claim.
type skippingStore struct {
	*sqlitestore.Store
	waiting bool
	handled atomic.Int64
}

func (s *skippingStore) PositionsMaySkip() bool { return true }
func (s *skippingStore) AppendsWaiting() bool   { return s.waiting }
func (s *skippingStore) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx shell.Tx, c *shell.Claim) error) (bool, error) {
	did, err := s.Store.ClaimUpdate(ctx, group, workerID, batchSize, fn)
	if did && err == nil {
		s.handled.Add(1)
	}
	return did, err
}

// TestRouterCommitsAppendsThatHoldOthersBack: on a store whose positions
// may skip, a router transaction that appended ends with its batch when
// an append waits for positions in flight (four partitions, four
// transactions), and handles the other partitions' batches in the same
// transaction when none waits (one). A decider's guards are checked once
// per batch either way: every account ends with its three deposits.
func TestRouterCommitsAppendsThatHoldOthersBack(t *testing.T) {
	for _, tc := range []struct {
		waiting bool
		want    int64
	}{{true, 4}, {false, 1}} {
		t.Run(fmt.Sprintf("waiting=%v", tc.waiting), func(t *testing.T) {
			ctx := context.Background()
			reg := codec.NewRegistry()
			codec.MustRegister[holdDeposit](reg, "hold.deposit")
			codec.MustRegister[holdDeposited](reg, "hold.deposited")
			sq, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "hold.db"), sqlitestore.Options{Registry: reg, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			s := &skippingStore{Store: sq, waiting: tc.waiting}
			rt, err := shell.NewRouter(s, shell.RouterOptions{Logger: quiet()}, holdAccounts)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			var cmds []core.Message
			for i := range 12 {
				cmds = append(cmds, core.NewMessage(holdDeposit{Account: fmt.Sprint("a", i%4), Amount: 1 + i/4}))
			}
			if _, err := s.Append(ctx, cmds, shell.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := rt.HandleNext(ctx, holdAccounts, "w1"); err != nil {
				t.Fatal(err)
			}
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if got := s.handled.Load(); got != tc.want {
				t.Fatalf("%d transactions handled the four partitions, want %d", got, tc.want)
			}
			for i := range 4 {
				balance, _, err := shell.Load(ctx, s, holdAccounts, map[string]string{"account": fmt.Sprint("a", i)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if balance != 6 {
					t.Fatalf("account a%d: balance %d, want 6", i, balance)
				}
			}
		})
	}
}
