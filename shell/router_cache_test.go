package shell_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/internal/sqlitetest"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The router cache property's domain: a till per owner. Every event a
// decision appends records the state it was decided on (Before), so that
// the log itself tells whether each decision saw the full fold of its
// partition's history: the events before it.
type (
	tillPay struct {
		Owner  string `json:"owner" sourced:"required"`
		Amount int    `json:"amount"`
	}
	tillTake struct {
		Owner  string `json:"owner" sourced:"required"`
		Amount int    `json:"amount"`
	}
	tillMoved struct {
		Owner  string    `json:"owner"`
		Amount int       `json:"amount"`
		Before tillState `json:"before"`
		// Aside marks an event appended behind the router's back (its
		// Before means nothing).
		Aside bool `json:"aside"`
	}
	tillRefused struct {
		Owner  string    `json:"owner"`
		Amount int       `json:"amount"`
		Before tillState `json:"before"`
	}
	// tillState is a value: the router caches it by default.
	tillState struct {
		Balance int `json:"balance"`
		Moves   int `json:"moves"`
	}
	// tillCount is the projection's state, a value too.
	tillCount struct {
		Events int
		Sum    int
	}
)

func tillRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[tillPay](reg, "till.pay")
	codec.MustRegister[tillTake](reg, "till.take")
	codec.MustRegister[tillMoved](reg, "till.moved")
	codec.MustRegister[tillRefused](reg, "till.refused")
	return reg
}

func tillEvolve(s tillState, e tillMoved) tillState {
	s.Balance += e.Amount
	s.Moves++
	return s
}

func tillRefusedEvolve(s tillState, _ tillRefused) tillState {
	s.Moves++
	return s
}

var tills = core.Decider[tillState]{Group: "tills", PartitionBy: []string{"owner"}}.With(
	core.Evolve(tillEvolve),
	core.Evolve(tillRefusedEvolve),
	core.Decide(func(s tillState, c tillPay) ([]any, error) {
		return []any{tillMoved{Owner: c.Owner, Amount: c.Amount, Before: s}}, nil
	}),
	core.Decide(func(s tillState, c tillTake) ([]any, error) {
		if c.Amount > s.Balance {
			return []any{tillRefused{Owner: c.Owner, Amount: c.Amount, Before: s}}, nil
		}
		return []any{tillMoved{Owner: c.Owner, Amount: -c.Amount, Before: s}}, nil
	}),
)

func tillCounter(record func(partition core.Partition, s tillCount, last int64)) core.Projector[tillCount] {
	return core.Projector[tillCount]{Group: "till-counts", PartitionBy: []string{"owner"}}.With(
		core.Evolve(func(s tillCount, e tillMoved) tillCount { return tillCount{s.Events + 1, s.Sum + e.Amount} }),
		core.Evolve(func(s tillCount, _ tillRefused) tillCount { return tillCount{s.Events + 1, s.Sum} }),
		core.AfterSync(func(_ context.Context, b core.Batch[tillCount]) error {
			record(b.Partition, b.State, b.Messages[len(b.Messages)-1].Position)
			return nil
		}),
	)
}

// faultyStore fails the transactions of the router's pure path (ClaimUpdate)
// at their ack when fail says so, after the batch was read, folded, decided
// and its events appended: the transaction rolls back.
type faultyStore struct {
	shell.Store
	fail func() error
}

func (f *faultyStore) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx shell.Tx, c *driver.ClaimedPartition) error) (bool, error) {
	return f.Store.ClaimUpdate(ctx, group, workerID, batchSize, func(tx shell.Tx, c *driver.ClaimedPartition) error {
		return fn(faultyTx{tx, f.fail}, c)
	})
}

type faultyTx struct {
	shell.Tx
	fail func() error
}

func (t faultyTx) Ack(c *driver.ClaimedPartition, position int64) error {
	if err := t.fail(); err != nil {
		return err
	}
	return t.Tx.Ack(c, position)
}

// TestRouterCacheDecidesAsAFullFold is the router's state cache property:
// whatever the sequence of commands, of events appended behind the
// router's back, of synchronous decisions (Handle sharing the router's
// cache), of failed transactions (a conflict, a busy store, any error:
// rolled back after the batch was folded and decided), of group resets
// and cache drops, and however small the cache (evicting), every decision
// the router makes is made on the full fold of its partition's history,
// and every projection it makes is the fold of a prefix of the
// partition's history reaching at least the batch's last message, ending
// on the fold of the whole history, on every store.
func TestRouterCacheDecidesAsAFullFold(t *testing.T) {
	t.Parallel()                       // its stores are its own
	install := sqlitetest.Installer(t) // copies of one installed store: the property opens a hundred
	var files atomic.Int64
	stores := map[string]func(t *rapid.T) shell.Store{
		"memstore": func(*rapid.T) shell.Store { return memstore.New(tillRegistry()) },
		"sqlitestore": func(rt *rapid.T) shell.Store {
			s, err := install(context.Background(), filepath.Join(t.TempDir(), "till-"+strconv.Itoa(int(files.Add(1)))+".db"),
				sqlitestore.Options{Registry: tillRegistry(), Logger: quiet()})
			if err != nil {
				rt.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			var hits atomic.Int64
			rapid.Check(t, func(rt *rapid.T) { hits.Add(checkRouterCache(rt, open(rt))) })
			if hits.Load() == 0 {
				t.Fatal("no batch started from a cached state: the property tested nothing")
			}
		})
	}
}

// projected is what the projector's batches recorded: the state and the
// position of the batch's last message.
type projected struct {
	state tillCount
	last  int64
}

// checkRouterCache runs one sequence on inner and checks the log; it
// returns how many batches started from a cached state.
func checkRouterCache(rt *rapid.T, inner shell.Store) int64 {
	ctx := context.Background()
	if c, ok := inner.(interface{ Close() error }); ok {
		defer c.Close()
	}
	faults := []error{nil, core.ErrConcurrentAppend, shell.ErrBusy, errors.New("disk full")}
	failRate := rapid.IntRange(0, 3).Draw(rt, "fail rate") // in 8
	var failing bool
	store := &faultyStore{Store: inner, fail: func() error {
		if !failing || rapid.IntRange(0, 7).Draw(rt, "fail") >= failRate {
			return nil
		}
		return fmt.Errorf("injected: %w", rapid.SampledFrom(faults[1:]).Draw(rt, "fault"))
	}}
	var mu sync.Mutex
	counts := map[string][]projected{}
	cache := shell.NewStateCache(rapid.IntRange(1, 3).Draw(rt, "cache size"))
	counter := tillCounter(func(p core.Partition, s tillCount, last int64) {
		mu.Lock()
		defer mu.Unlock()
		counts[p["owner"]] = append(counts[p["owner"]], projected{state: s, last: last})
	})
	router, err := shell.NewRouter(store, shell.RouterOptions{
		Logger: quiet(), StateCache: cache,
		BatchSize:        rapid.IntRange(1, 4).Draw(rt, "batch size"),
		BatchesPerHandle: rapid.IntRange(1, 4).Draw(rt, "batches per handle"),
	}, tills, counter)
	if err != nil {
		rt.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		rt.Fatal(err)
	}
	if router.StateCache() != cache {
		rt.Fatal("the router does not use the cache it was given")
	}
	owners := []string{"ann", "bob", "cyd"}
	steps := rapid.IntRange(1, 40).Draw(rt, "steps")
	for range steps {
		owner := rapid.SampledFrom(owners).Draw(rt, "owner")
		amount := rapid.IntRange(1, 20).Draw(rt, "amount")
		var msgs []core.Message
		switch rapid.IntRange(0, 9).Draw(rt, "op") {
		case 0: // an event behind the router's back
			msgs = []core.Message{core.NewMessage(tillMoved{Owner: owner, Amount: amount, Aside: true})}
		case 1: // a synchronous decision, sharing the router's cache
			if _, err := shell.Handle(ctx, store, tills, tillTake{Owner: owner, Amount: amount}, &shell.HandleOptions{Cache: cache}); err != nil {
				rt.Fatal(err)
			}
		case 2:
			cache.Drop("")
		case 3: // a reset of one of the groups
			group := rapid.SampledFrom([]string{"tills", "till-counts"}).Draw(rt, "group")
			if err := router.Stop(ctx, group, "test"); err != nil {
				rt.Fatal(err)
			}
			if err := router.Reset(ctx, group); err != nil {
				rt.Fatal(err)
			}
			if err := router.Start(ctx, group); err != nil {
				rt.Fatal(err)
			}
		case 4, 5, 6:
			failing = true
			err := router.Drain(ctx, nil)
			failing = false
			if err != nil && !errors.Is(err, shell.ErrBusy) {
				rt.Fatalf("drain: %v", err)
			}
		default:
			var cmd any = tillPay{Owner: owner, Amount: amount}
			if rapid.Bool().Draw(rt, "take") {
				cmd = tillTake{Owner: owner, Amount: amount}
			}
			msgs = []core.Message{core.NewMessage(cmd)}
		}
		if len(msgs) > 0 {
			if _, err := store.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
				rt.Fatal(err)
			}
		}
	}
	if err := router.Drain(ctx, nil); err != nil {
		rt.Fatalf("last drain: %v", err)
	}
	for _, owner := range owners {
		checkTill(rt, inner, owner, counts[owner])
	}
	hits, _ := cache.Stats()
	return hits
}

// checkTill checks the owner's partition: each decided event's Before is
// the fold of the events before it; each projection the fold of a prefix,
// the last one of all of them.
func checkTill(rt *rapid.T, store shell.Store, owner string, projections []projected) {
	res, err := store.ReadPartition(context.Background(), map[string]string{"owner": owner}, []string{"till.moved", "till.refused"}, shell.ReadOptions{})
	if err != nil {
		rt.Fatal(err)
	}
	var s tillState
	prefixes := []tillCount{{}}
	upto := func(position int64) int { // the events at or before position
		n := 0
		for _, m := range res.Messages {
			if m.Position <= position {
				n++
			}
		}
		return n
	}
	for _, m := range res.Messages {
		c := prefixes[len(prefixes)-1]
		switch e := m.Payload.(type) {
		case tillMoved:
			if !e.Aside && e.Before != s {
				rt.Fatalf("%s: event at %d decided on %+v, the full fold is %+v", owner, m.Position, e.Before, s)
			}
			s = tillEvolve(s, e)
			c = tillCount{c.Events + 1, c.Sum + e.Amount}
		case tillRefused:
			if e.Before != s {
				rt.Fatalf("%s: refusal at %d decided on %+v, the full fold is %+v", owner, m.Position, e.Before, s)
			}
			s = tillRefusedEvolve(s, e)
			c = tillCount{c.Events + 1, c.Sum}
		}
		prefixes = append(prefixes, c)
	}
	for _, p := range projections {
		if p.state.Events >= len(prefixes) || prefixes[p.state.Events] != p.state {
			rt.Fatalf("%s: projected %+v, which folds no prefix of the partition's history %v", owner, p.state, prefixes)
		}
		if n := upto(p.last); p.state.Events < n {
			rt.Fatalf("%s: a batch up to position %d projected %d events, the history holds %d by then", owner, p.last, p.state.Events, n)
		}
	}
	if len(projections) > 0 {
		if last := projections[len(projections)-1].state; last != prefixes[len(prefixes)-1] {
			rt.Fatalf("%s: last projection %+v, the full fold is %+v", owner, last, prefixes[len(prefixes)-1])
		}
	}
}

// tillAside is a hand-written reactor handling the tills' events: it may
// delete them on ack, so the router must not cache the tills' states.
type tillAside struct{}

func (tillAside) HandledTypes() []string  { return []string{"till.moved"} }
func (tillAside) GroupID() string         { return "till-aside" }
func (tillAside) PartitionKeys() []string { return []string{"owner"} }
func (tillAside) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	pairs := make([]effects.Pair, len(c.Messages))
	for i, m := range c.Messages {
		pairs[i] = effects.Pair{Signals: []effects.Signal{effects.Ack{}}, Source: m}
	}
	return pairs, nil
}

// TestRouterCachePolicy pins which reactors' states a router caches: by
// default the deciders and projectors whose state is a value (tills),
// not those whose state holds a slice (wallets) unless CacheAllStates,
// none with CacheNoStates, none whose history a hand-written reactor
// handles; a partition's next batch starts from its cached state (a hit),
// and a reset drops the group's states.
func TestRouterCachePolicy(t *testing.T) {
	ctx := context.Background()
	reg := tillRegistry()
	codec.MustRegister[walletDeposit](reg, "wallet.deposit")
	codec.MustRegister[walletWithdraw](reg, "wallet.withdraw")
	codec.MustRegister[walletDeposited](reg, "wallet.deposited")
	codec.MustRegister[walletWithdrawn](reg, "wallet.withdrawn")
	codec.MustRegister[walletNoted](reg, "wallet.noted")
	run := func(opts shell.RouterOptions, reactors ...any) *shell.Router {
		t.Helper()
		store := memstore.New(reg)
		opts.Logger = quiet()
		router, err := shell.NewRouter(store, opts, reactors...)
		if err != nil {
			t.Fatal(err)
		}
		if err := router.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []any{tillPay{Owner: "ann", Amount: 1}, tillPay{Owner: "bob", Amount: 1}, walletDeposit{Owner: "ann", Amount: 1}} {
			if _, err := store.Append(ctx, []core.Message{core.NewMessage(cmd)}, shell.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := router.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		return router
	}
	router := run(shell.RouterOptions{}, tills, wallets)
	cache := router.StateCache()
	if cache == nil || cache.Len() != 2 {
		t.Fatalf("default policy: %v, want the 2 tills' states cached and no wallet's", cache)
	}
	if hits, misses := cache.Stats(); hits != 0 || misses != 2 {
		t.Fatalf("default policy: %d hits, %d misses; want 0 and 2 (each till decided once)", hits, misses)
	}
	if err := router.Stop(ctx, "tills", "test"); err != nil {
		t.Fatal(err)
	}
	if err := router.Reset(ctx, "tills"); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 0 {
		t.Fatalf("a reset left %d states cached", cache.Len())
	}
	if c := run(shell.RouterOptions{CacheStates: shell.CacheAllStates}, tills, wallets).StateCache(); c.Len() != 3 {
		t.Fatalf("CacheAllStates: %d states cached, want 3", c.Len())
	}
	if c := run(shell.RouterOptions{CacheStates: shell.CacheNoStates}, tills, wallets).StateCache(); c != nil {
		t.Fatalf("CacheNoStates: the router has a cache")
	}
	if c := run(shell.RouterOptions{}, tills, tillAside{}).StateCache(); c.Len() != 0 {
		t.Fatalf("a hand-written reactor handles the tills' history: %d states cached, want none", c.Len())
	}
	if _, err := shell.NewRouter(memstore.New(reg), shell.RouterOptions{CacheStates: 7}, tills); err == nil {
		t.Fatal("NewRouter accepted CacheStates 7")
	}
	if err := (shell.Config{CacheStates: 7}).Validate(); err == nil || !strings.Contains(err.Error(), "CacheStates") {
		t.Fatalf("Validate of CacheStates 7: %v, want an error naming CacheStates", err)
	}
	// A partition's second batch folds from its cached state.
	store := memstore.New(reg)
	router, err := shell.NewRouter(store, shell.RouterOptions{Logger: quiet()}, tills)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := store.Append(ctx, []core.Message{core.NewMessage(tillPay{Owner: "ann", Amount: 1})}, shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := router.Drain(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if hits, misses := router.StateCache().Stats(); hits != 1 || misses != 1 {
		t.Fatalf("two batches of one partition: %d hits, %d misses; want 1 and 1", hits, misses)
	}
}
