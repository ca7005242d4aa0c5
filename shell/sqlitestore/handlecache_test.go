package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The Handle cache tests' domain: a balance per account.
type (
	cacheDeposit struct {
		Account string `json:"account" sourced:"required"`
		Amount  int    `json:"amount"`
	}
	cacheDeposited struct {
		Account string `json:"account"`
		Amount  int    `json:"amount"`
	}
)

func cacheRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[cacheDeposit](reg, "cache.deposit")
	codec.MustRegister[cacheDeposited](reg, "cache.deposited")
	return reg
}

var cacheBalance = core.Decider[int]{Group: "cache.balance", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(b int, e cacheDeposited) int { return b + e.Amount }),
	core.Decide(func(_ int, c cacheDeposit) ([]any, error) { return []any{cacheDeposited(c)}, nil }),
)

// cacheBalances is cacheBalance with a state that holds a reference (a
// map): not cached unless asked for.
var cacheBalances = core.Decider[map[string]int]{Group: "cache.balances", PartitionBy: []string{"account"}, Init: func() map[string]int { return map[string]int{} }}.With(
	core.Evolve(func(b map[string]int, e cacheDeposited) map[string]int {
		n := map[string]int{"total": b["total"] + e.Amount}
		return n
	}),
	core.Decide(func(_ map[string]int, c cacheDeposit) ([]any, error) { return []any{cacheDeposited(c)}, nil }),
)

// twoHandles installs a store on a file and opens a second Store on the
// same file, as another process would.
func twoHandles(t *testing.T) (*sqlitestore.Store, *sqlitestore.Store) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cache.db")
	a, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: cacheRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: cacheRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

func deposit(t *testing.T, s driver.Store, amount int, opts *shell.HandleOptions) int {
	t.Helper()
	res, err := shell.Handle(context.Background(), s, cacheBalance, cacheDeposit{Account: "a1", Amount: amount}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.State
}

// TestHandleCachesByDefault: Handle keeps a value state in the store's own
// cache without being given one, and decides the next command on the
// cached state (a hit), folding what was appended since.
func TestHandleCachesByDefault(t *testing.T) {
	a, _ := twoHandles(t)
	if got := deposit(t, a, 1, nil); got != 1 {
		t.Fatalf("balance %d, want 1", got)
	}
	if n := a.StateCache().Len(); n != 1 {
		t.Fatalf("%d states cached after a Handle, want 1", n)
	}
	if got := deposit(t, a, 2, nil); got != 3 {
		t.Fatalf("balance %d, want 3", got)
	}
	if hits, misses := a.StateCache().Stats(); hits != 1 || misses != 1 {
		t.Fatalf("hits %d, misses %d; want 1 and 1", hits, misses)
	}
}

// TestHandleCacheSeesOtherWriters: a second Store on the same file (another
// process) appends to the partition between two Handles of the first; the
// second Handle, on the cached state, decides on the other writer's event
// too.
func TestHandleCacheSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	a, b := twoHandles(t)
	deposit(t, a, 1, nil)
	if _, err := b.Append(ctx, []core.Message{core.NewMessage(cacheDeposited{Account: "a1", Amount: 10})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := deposit(t, a, 2, nil); got != 13 {
		t.Fatalf("balance %d after another writer's deposit of 10, want 13", got)
	}
	if hits, _ := a.StateCache().Stats(); hits != 1 {
		t.Fatalf("%d hits, want 1 (the second Handle started from the cache)", hits)
	}
	// And the other writer's Handles see the first one's.
	if got := deposit(t, b, 4, nil); got != 17 {
		t.Fatalf("balance %d on the second Store, want 17", got)
	}
	if got := deposit(t, a, 8, nil); got != 25 {
		t.Fatalf("balance %d, want 25", got)
	}
}

// deleteFirst deletes the partition's first deposit through s (a
// delete-on-ack queue's Delete) and returns its amount.
func deleteFirst(t *testing.T, s *sqlitestore.Store) int {
	t.Helper()
	ctx := context.Background()
	res, err := s.ReadPartition(ctx, map[string]string{"account": "a1"}, []string{"cache.deposited"}, driver.ReadOptions{})
	if err != nil || len(res.Messages) == 0 {
		t.Fatal("nothing to delete", err)
	}
	first := res.Messages[0]
	err = s.Update(ctx, func(tx driver.Tx) error { return tx.Delete(first.Position) })
	if err != nil {
		t.Fatal(err)
	}
	return first.Message.Payload.(cacheDeposited).Amount
}

// TestHandleCacheDroppedByDeletes: messages deleted from the log, by
// another Store on the file or by this one, are not in the state the next
// Handle decides on (the cached one is dropped).
func TestHandleCacheDroppedByDeletes(t *testing.T) {
	a, b := twoHandles(t)
	deposit(t, a, 1, nil)
	deposit(t, a, 2, nil)
	gone := deleteFirst(t, b) // another process
	if got := deposit(t, a, 4, nil); got != 7-gone {
		t.Fatalf("balance %d after another process deleted a deposit of %d, want %d", got, gone, 7-gone)
	}
	gone += deleteFirst(t, a) // this one
	if got := deposit(t, a, 8, nil); got != 15-gone {
		t.Fatalf("balance %d after this process deleted a deposit, want %d", got, 15-gone)
	}
	if got := deposit(t, b, 16, nil); got != 31-gone {
		t.Fatalf("balance %d on the other Store, want %d", got, 31-gone)
	}
	// A Clear by another process: the log starts again.
	if err := b.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := deposit(t, a, 32, nil); got != 32 {
		t.Fatalf("balance %d after another process cleared the log, want 32", got)
	}
}

// TestHandleNoCache: with HandleOptions.NoCache, Handle neither takes nor
// keeps a cached state: a message deleted behind the cache's back (SQL of
// one's own, which the cache cannot notice) is not folded by a decision
// without the cache, and nothing is cached.
func TestHandleNoCache(t *testing.T) {
	ctx := context.Background()
	a, _ := twoHandles(t)
	deposit(t, a, 1, nil)
	deposit(t, a, 2, nil)
	// Delete the first deposit by hand.
	err := a.Update(ctx, func(tx driver.Tx) error {
		conn := tx.Context().(*sqlitestore.TxContext).Conn()
		return sqlitex.Execute(conn, `DELETE FROM sourced_messages WHERE position = (SELECT min(position) FROM sourced_messages WHERE message_type = 'cache.deposited')`, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	hits, misses := a.StateCache().Stats()
	if got := deposit(t, a, 4, &shell.HandleOptions{NoCache: true}); got != 6 {
		t.Fatalf("balance %d without the cache, want 6 (the deleted deposit of 1 not folded)", got)
	}
	if h, m := a.StateCache().Stats(); h != hits || m != misses {
		t.Fatalf("Handle with NoCache used the cache: hits %d->%d, misses %d->%d", hits, h, misses, m)
	}
	// The cached state (3, before the deletion) was not replaced: the
	// default still decides on it, as documented.
	if got := deposit(t, a, 8, nil); got != 15 {
		t.Fatalf("balance %d on the cached state, want 15 (3 cached, 4 and 8 read)", got)
	}
	// Drop is the way out.
	a.StateCache().Drop("")
	if got := deposit(t, a, 16, nil); got != 30 {
		t.Fatalf("balance %d after Drop, want 30", got)
	}
}

// TestHandleCachesValueStatesOnly: by default a state holding a reference
// is folded in full on every command, not cached (its decider may change
// it in place); given a cache explicitly, Handle caches it.
func TestHandleCachesValueStatesOnly(t *testing.T) {
	ctx := context.Background()
	a, _ := twoHandles(t)
	res, err := shell.Handle(ctx, a, cacheBalances, cacheDeposit{Account: "a1", Amount: 1}, nil)
	if err != nil || res.State["total"] != 1 {
		t.Fatal(res.State, err)
	}
	if n := a.StateCache().Len(); n != 0 {
		t.Fatalf("%d states cached for a map state, want 0", n)
	}
	res, err = shell.Handle(ctx, a, cacheBalances, cacheDeposit{Account: "a1", Amount: 2}, &shell.HandleOptions{Cache: a.StateCache()})
	if err != nil || res.State["total"] != 3 {
		t.Fatal(res.State, err)
	}
	if n := a.StateCache().Len(); n != 1 {
		t.Fatalf("%d states cached with HandleOptions.Cache, want 1", n)
	}
}

// The query decisions' domain: a transfer reads the balances of two
// accounts (two parts, one projection).
type (
	cacheTransfer struct {
		From   string `json:"from" sourced:"required"`
		To     string `json:"to" sourced:"required"`
		Amount int    `json:"amount"`
	}
	cacheTransferred struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Amount int    `json:"amount"`
	}
	cachePair struct{ From, To int }
)

// cacheAccount is an account's balance: its deposits, plus what it
// received, minus what it sent.
var cacheAccount = core.Projection[int]{}.With(
	core.Evolve(func(b int, e cacheDeposited) int { return b + e.Amount }),
)

var cacheTransfers = core.Decider[cachePair]{Group: "cache.transfers", PartitionBy: []string{"from"}}.With(
	core.Reads(func(c cacheTransfer) core.Query[cachePair] {
		return core.Query[cachePair]{
			core.Read(cacheAccount, func(s cachePair, n int) cachePair { s.From = n; return s }, core.Where("account", c.From)),
			core.Read(cacheAccount, func(s cachePair, n int) cachePair { s.To = n; return s }, core.Where("account", c.To)),
		}
	}),
	core.Decide(func(s cachePair, c cacheTransfer) ([]any, error) {
		return []any{cacheTransferred(c), cacheDeposited{Account: c.To, Amount: c.Amount}, cacheDeposited{Account: c.From, Amount: -c.Amount}}, nil
	}),
)

func queryRegistry() *codec.Registry {
	reg := cacheRegistry()
	codec.MustRegister[cacheTransfer](reg, "cache.transfer")
	codec.MustRegister[cacheTransferred](reg, "cache.transferred")
	return reg
}

func transfer(t *testing.T, s driver.Store, from, to string, amount int, opts *shell.HandleOptions) cachePair {
	t.Helper()
	res, err := shell.Handle(context.Background(), s, cacheTransfers, cacheTransfer{From: from, To: to, Amount: amount}, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The state is the full fold's.
	full, _, err := shell.LoadDecision(context.Background(), s, cacheTransfers, cacheTransfer{From: from, To: to, Amount: amount}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != full {
		t.Fatalf("Handle's state %+v, the full fold's %+v", res.State, full)
	}
	return res.State
}

// TestHandleQueryPartsCached: a decision with a query keeps each part's
// state in the store's cache, and the next decisions reading those parts
// (in any role: an account read as From, then as To) start from them, fold
// what other processes appended since, and forget them when another
// process deletes messages.
func TestHandleQueryPartsCached(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "query.db")
	a, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: queryRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: queryRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seed := []core.Message{
		core.NewMessage(cacheDeposited{Account: "x", Amount: 100}),
		core.NewMessage(cacheDeposited{Account: "y", Amount: 10}),
	}
	if _, err := a.Append(ctx, seed, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := transfer(t, a, "x", "y", 5, nil); got != (cachePair{95, 15}) {
		t.Fatalf("state %+v, want {95 15}", got)
	}
	if n := a.StateCache().Len(); n != 2 {
		t.Fatalf("%d states cached, want the 2 parts", n)
	}
	// y moves on alone: its part is now cached further than x's.
	if got := transfer(t, a, "y", "z", 1, nil); got != (cachePair{14, 1}) {
		t.Fatalf("state %+v, want {14 1}", got)
	}
	// Another process deposits into y.
	if _, err := b.Append(ctx, []core.Message{core.NewMessage(cacheDeposited{Account: "y", Amount: 1000})}, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// y as From, x as To: both parts from the cache, each folding only
	// what its own position has not seen (the read starts at x's).
	if got := transfer(t, a, "y", "x", 15, nil); got != (cachePair{999, 110}) {
		t.Fatalf("state %+v, want {999 110}", got)
	}
	if hits, _ := a.StateCache().Stats(); hits != 3 {
		t.Fatalf("%d hits, want 3 (y, then y and x)", hits)
	}
	// Another process deletes x's first deposit.
	deleted := false
	err = b.Update(ctx, func(tx driver.Tx) error {
		res, err := tx.ReadPartition(map[string]string{"account": "x"}, []string{"cache.deposited"}, driver.ReadOptions{})
		if err != nil || len(res.Messages) == 0 {
			return err
		}
		deleted = true
		return tx.Delete(res.Messages[0].Position)
	})
	if err != nil || !deleted {
		t.Fatal("no delete", err)
	}
	if got := transfer(t, a, "x", "y", 1, nil); got != (cachePair{9, 1000}) {
		t.Fatalf("state %+v after another process deleted x's deposit of 100, want {9 1000}", got)
	}
	// Without the cache: the same decisions.
	if got := transfer(t, a, "x", "y", 1, &shell.HandleOptions{NoCache: true}); got != (cachePair{8, 1001}) {
		t.Fatalf("state %+v without the cache, want {8 1001}", got)
	}
}

// TestRouterResetDropsHandleStates: a router's Reset of a group drops the
// states Handle cached for it in the store's cache (a reset usually comes
// with a changed definition), and only those.
func TestRouterResetDropsHandleStates(t *testing.T) {
	ctx := context.Background()
	a, _ := twoHandles(t)
	deposit(t, a, 1, nil)
	if _, err := shell.Handle(ctx, a, cacheBalances, cacheDeposit{Account: "a1", Amount: 1}, &shell.HandleOptions{Cache: a.StateCache()}); err != nil {
		t.Fatal(err)
	}
	if n := a.StateCache().Len(); n != 2 {
		t.Fatalf("%d states cached, want 2", n)
	}
	rt, err := shell.NewRouter(a, shell.RouterOptions{}, cacheBalance, cacheBalances)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx, cacheBalance, "reset"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Reset(ctx, cacheBalance); err != nil {
		t.Fatal(err)
	}
	if n := a.StateCache().Len(); n != 1 {
		t.Fatalf("%d states cached after the reset of one group, want the other's 1", n)
	}
}
