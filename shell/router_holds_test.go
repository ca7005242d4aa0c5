package shell_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
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

// recordingStore is a SQLite store that counts the ClaimUpdate
// transactions that handled a claim and records the claims, reads and
// appends of each (ops).
type recordingStore struct {
	*sqlitestore.Store
	handled atomic.Int64
	ops     []string
	// together gives its transactions driver.PartitionsReader, as
	// pgstore's: the router then reads a claim's histories together.
	together bool
}

func (s *recordingStore) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx shell.Tx, c *driver.ClaimedPartition) error) (bool, error) {
	did, err := s.Store.ClaimUpdate(ctx, group, workerID, batchSize, func(tx shell.Tx, c *driver.ClaimedPartition) error {
		s.ops = append(s.ops, "begin")
		return fn(s.wrap(tx), c)
	})
	if did && err == nil {
		s.handled.Add(1)
	}
	return did, err
}

// wrap is tx recording its reads and appends (and its reads together,
// with together).
func (s *recordingStore) wrap(tx shell.Tx) shell.Tx {
	rtx := &recordingTx{Tx: tx, ops: &s.ops}
	if s.together {
		return &togetherTx{rtx}
	}
	return rtx
}

// skippingStore is a recordingStore that says its positions may skip and
// whether appends wait (as pgstore does).
type skippingStore struct {
	*recordingStore
	waiting bool
}

func (s *skippingStore) PositionsMaySkip() bool { return true }
func (s *skippingStore) AppendsWaiting() bool   { return s.waiting }

// manyStore is a skippingStore whose ClaimUpdate can claim several
// partitions with its first statement (driver.ClaimManyUpdater), as
// pgstore's; the claims are recorded as one "claims" of so many.
type manyStore struct{ *skippingStore }

func (s *manyStore) ClaimManyUpdate(ctx context.Context, group, workerID string, batchSize, partitions int, fn func(tx shell.Tx, claims []*driver.ClaimedPartition) error) (bool, error) {
	var claims []*driver.ClaimedPartition
	err := s.Store.Update(ctx, func(tx shell.Tx) error {
		var err error
		if claims, err = tx.(driver.ClaimManyTx).ClaimMany(group, workerID, batchSize, partitions); err != nil || len(claims) == 0 {
			return err
		}
		s.ops = append(s.ops, "begin", fmt.Sprint("claims(", len(claims), ")"))
		return fn(s.wrap(tx), claims)
	})
	if len(claims) > 0 && err == nil {
		s.handled.Add(1)
	}
	return len(claims) > 0, err
}

// recordingTx records a transaction's partition reads and appends.
type recordingTx struct {
	shell.Tx
	ops *[]string
}

func (t *recordingTx) ReadPartition(p core.Partition, types []string, opts shell.ReadOptions) (shell.ReadResult, error) {
	*t.ops = append(*t.ops, "read")
	return t.Tx.ReadPartition(p, types, opts)
}

// togetherTx is a recordingTx that reads several partitions in one call
// (driver.PartitionsReader), recorded as one "reads" of so many.
type togetherTx struct{ *recordingTx }

func (t *togetherTx) ReadPartitions(reads []driver.PartitionRead) ([]shell.ReadResult, error) {
	*t.ops = append(*t.ops, fmt.Sprint("reads(", len(reads), ")"))
	var out []shell.ReadResult
	for _, r := range reads {
		res, err := t.Tx.ReadPartition(r.Partition, r.Types, r.Opts)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func (t *recordingTx) Append(msgs []core.Message, opts shell.AppendOptions) (shell.AppendResult, error) {
	*t.ops = append(*t.ops, "append")
	return t.Tx.Append(msgs, opts)
}

func (t *recordingTx) ClaimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	*t.ops = append(*t.ops, "claim")
	return t.Tx.(driver.ClaimManyTx).ClaimMany(group, workerID, batchSize, partitions)
}

// TestRouterCommitsAppendsThatHoldOthersBack: on a store whose positions
// may skip, a router transaction claims up to ClaimPartitions partitions
// at once and reads every history before its first append (so that the
// positions it draws, holes to every reader, wait for no further round
// trip); when it appended and an append waits for positions in flight it
// then commits (four partitions two at a time: two transactions), and
// else claims and handles more in the same transaction (one). With one
// partition a claim, each transaction that appended ends with its batch
// (four). A decider's guards are checked once per batch either way: every
// account ends with its three deposits. (The inline budget is set out of
// reach: the transactions counted are the structure's, not a slow run's.)
func TestRouterCommitsAppendsThatHoldOthersBack(t *testing.T) {
	for _, tc := range []struct {
		waiting  bool
		ahead    int
		want     int64
		together bool // histories read in one call (driver.PartitionsReader)
		many     bool // the first claim takes them all (driver.ClaimManyUpdater)
	}{{true, 2, 2, false, false}, {false, 2, 1, false, false}, {true, 1, 4, false, false}, {true, 2, 2, true, false}, {false, 2, 1, true, false},
		{true, 2, 2, false, true}, {false, 2, 1, false, true}, {true, 1, 4, false, true}} {
		t.Run(fmt.Sprintf("waiting=%v/partitions=%d/together=%v/many=%v", tc.waiting, tc.ahead, tc.together, tc.many), func(t *testing.T) {
			ctx := context.Background()
			reg := codec.NewRegistry()
			codec.MustRegister[holdDeposit](reg, "hold.deposit")
			codec.MustRegister[holdDeposited](reg, "hold.deposited")
			sq, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "hold.db"), sqlitestore.Options{Registry: reg, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			s := &skippingStore{recordingStore: &recordingStore{Store: sq, together: tc.together}, waiting: tc.waiting}
			var store shell.Store = s
			if tc.many {
				store = &manyStore{s}
			}
			rt, err := shell.NewRouter(store, shell.RouterOptions{Logger: quiet(), ClaimPartitions: tc.ahead, InlineBudget: time.Hour}, holdAccounts)
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
			if tc.ahead > 1 {
				// Each claim of two partitions (the first by ClaimUpdate,
				// the second by ClaimMany): both histories read (in one
				// call, where the transaction reads partitions together),
				// then the three deposits of each decided.
				got := strings.Join(s.ops, " ")
				reads := "read read "
				if tc.together {
					reads = "reads(2) "
				}
				group := "claim " + reads + strings.Repeat("append ", 6)
				first := group // the first claim (ClaimUpdate's) is not recorded: its ClaimMany is
				if tc.many {
					first = "claims(2) " + reads + strings.Repeat("append ", 6)
				}
				want := "begin " + first + "begin " + first
				if !tc.waiting {
					want = "begin " + first + group
				}
				if !strings.HasPrefix(got+" ", want) {
					t.Fatalf("operations %q, want %q first", got, want)
				}
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

type (
	xferSeed struct {
		Account string `json:"account" sourced:"required"`
		Amount  int    `json:"amount"`
	}
	xferSend struct {
		Account string `json:"account" sourced:"required"` // the sender
		To      string `json:"to"`
		Amount  int    `json:"amount"`
	}
	xferMoved struct {
		Account string `json:"account"`
		Amount  int    `json:"amount"` // negative: sent
	}
)

// xferAccounts decides transfers on the sender's balance; a transfer's
// credit is an event of the receiver's partition.
var xferAccounts = core.Decider[int]{Group: "xfer.accounts", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(b int, e xferMoved) int { return b + e.Amount }),
	core.Decide(func(_ int, c xferSeed) ([]any, error) { return []any{xferMoved(c)}, nil }),
	core.Decide(func(b int, c xferSend) ([]any, error) {
		if b < c.Amount {
			return nil, fmt.Errorf("%s: balance %d, cannot send %d", c.Account, b, c.Amount)
		}
		return []any{xferMoved{Account: c.Account, Amount: -c.Amount}, xferMoved{Account: c.To, Amount: c.Amount}}, nil
	}),
)

// TestRouterClaimsAheadSeeEachOthersEvents: on a store whose positions
// may skip, the partitions one transaction claims together are read
// before any is decided; when deciding one appends to another's history
// (a transfer's credit), the other is not decided without it: a refusal
// or a conflict rolls the transaction back and the first partition is
// handled on its own, as one transaction after another would. b can send
// what a sends it (a's command first), and the group never fails.
func TestRouterClaimsAheadSeeEachOthersEvents(t *testing.T) {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[xferSeed](reg, "xfer.seed")
	codec.MustRegister[xferSend](reg, "xfer.send")
	codec.MustRegister[xferMoved](reg, "xfer.moved")
	sq, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "xfer.db"), sqlitestore.Options{Registry: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	for _, c := range []struct{ waiting, together, many bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false}, {false, true, true}, {true, true, true}} {
		waiting := c.waiting
		s := &skippingStore{recordingStore: &recordingStore{Store: sq, together: c.together}, waiting: waiting}
		var store shell.Store = s
		if c.many {
			store = &manyStore{s}
		}
		rt, err := shell.NewRouter(store, shell.RouterOptions{Logger: quiet(), ClaimPartitions: 4}, xferAccounts)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		a, b := fmt.Sprint("a", waiting, c.together, c.many), fmt.Sprint("b", waiting, c.together, c.many)
		cmds := []core.Message{
			core.NewMessage(xferSeed{Account: a, Amount: 100}),
			core.NewMessage(xferSend{Account: a, To: b, Amount: 30}),
			core.NewMessage(xferSend{Account: b, To: a, Amount: 20}), // only with a's 30
		}
		if _, err := s.Append(ctx, cmds, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx, nil); err != nil {
			t.Fatalf("waiting=%v: %v", waiting, err)
		}
		if c.together && !strings.Contains(strings.Join(s.ops, " "), "reads(") {
			t.Fatalf("operations %v: the histories were not read together", s.ops)
		}
		if c.many && !strings.Contains(strings.Join(s.ops, " "), "claims(") {
			t.Fatalf("operations %v: no first claim took several partitions", s.ops)
		}
		for acct, want := range map[string]int{a: 90, b: 10} {
			got, _, err := shell.Load(ctx, s, xferAccounts, map[string]string{"account": acct}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("waiting=%v: %s's balance %d, want %d", waiting, acct, got, want)
			}
		}
	}
}

// TestRouterClaimsAheadSeeEachOthersQueries: the same for decisions that
// read a query of their own (the username boundary): a1 renames from x,
// then a2 renames to x in the same claim of partitions. a2's query read
// before a1's event said x was taken; decided again after it, a2 takes x,
// as one transaction after the other allows.
func TestRouterClaimsAheadSeeEachOthersQueries(t *testing.T) {
	ctx := context.Background()
	reg := codec.NewRegistry()
	if err := testdomain.RegisterDecisions(reg); err != nil {
		t.Fatal(err)
	}
	sq, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "names.db"), sqlitestore.Options{Registry: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	s := &skippingStore{recordingStore: &recordingStore{Store: sq}}
	rt, err := shell.NewRouter(s, shell.RouterOptions{Logger: quiet(), ClaimPartitions: 4}, testdomain.UsernameDecider)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, []core.Message{
		core.NewMessage(testdomain.AccountRegistered{AccountID: "a1", Username: "x"}),
		core.NewMessage(testdomain.AccountRegistered{AccountID: "a2", Username: "z"}),
		core.NewMessage(testdomain.RenameAccount{AccountID: "a1", From: "x", To: "y"}),
		core.NewMessage(testdomain.RenameAccount{AccountID: "a2", From: "z", To: "x"}),
	}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.Read(ctx, []core.Condition{{Type: testdomain.TypeUsernameChanged}}, shell.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Messages {
		e := m.Payload.(testdomain.UsernameChanged)
		got = append(got, e.AccountID+":"+e.OldUsername+"->"+e.NewUsername)
	}
	if strings.Join(got, " ") != "a1:x->y a2:z->x" {
		t.Fatalf("renames %v, want a1:x->y then a2:z->x", got)
	}
}
