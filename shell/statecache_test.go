package shell_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/sqlitetest"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The cache property's domain: a wallet per owner, whose state holds a
// slice (changed with the usual append idiom), and a withdrawal the
// decider refuses past the balance.
type (
	walletDeposit struct {
		Owner  string `json:"owner" sourced:"required"`
		Amount int    `json:"amount"`
	}
	walletWithdraw struct {
		Owner  string `json:"owner" sourced:"required"`
		Amount int    `json:"amount"`
	}
	walletDeposited struct {
		Owner  string `json:"owner"`
		Amount int    `json:"amount"`
	}
	walletWithdrawn struct {
		Owner  string `json:"owner"`
		Amount int    `json:"amount"`
	}
	// walletNoted is a second evolved event of a decision.
	walletNoted struct {
		Owner string `json:"owner"`
		Note  string `json:"note"`
	}
	walletState struct {
		Balance int
		Moves   []int
	}
)

var errOverdrawn = errors.New("overdrawn")

func walletRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[walletDeposit](reg, "wallet.deposit")
	codec.MustRegister[walletWithdraw](reg, "wallet.withdraw")
	codec.MustRegister[walletDeposited](reg, "wallet.deposited")
	codec.MustRegister[walletWithdrawn](reg, "wallet.withdrawn")
	codec.MustRegister[walletNoted](reg, "wallet.noted")
	return reg
}

var wallets = core.Decider[walletState]{Group: "wallets", PartitionBy: []string{"owner"}}.With(
	core.Evolve(func(s walletState, e walletDeposited) walletState {
		s.Balance += e.Amount
		s.Moves = append(s.Moves, e.Amount)
		return s
	}),
	core.Evolve(func(s walletState, e walletWithdrawn) walletState {
		s.Balance -= e.Amount
		s.Moves = append(s.Moves, -e.Amount)
		return s
	}),
	core.Evolve(func(s walletState, e walletNoted) walletState {
		s.Moves = append(s.Moves, 0)
		return s
	}),
	core.Decide(func(s walletState, c walletDeposit) ([]any, error) {
		return []any{walletDeposited(c), walletNoted{Owner: c.Owner, Note: "deposit"}}, nil
	}),
	core.Decide(func(s walletState, c walletWithdraw) ([]any, error) {
		if c.Amount > s.Balance {
			return nil, fmt.Errorf("withdraw %d from %d: %w", c.Amount, s.Balance, errOverdrawn)
		}
		return []any{walletWithdrawn(c)}, nil
	}),
)

// TestStateCacheDecidesAsAFullFold is the cache's property: whatever the
// sequence of commands (accepted and refused), of events appended to the
// partitions behind Handle's back (as other writers and the router do),
// of cache drops, and however small the cache,
// a Handle with a StateCache decides exactly what a full fold of the
// partition decides: the same events or the same refusal, and the same
// state after them, on every store.
func TestStateCacheDecidesAsAFullFold(t *testing.T) {
	t.Parallel()                       // its stores are its own
	install := sqlitetest.Installer(t) // copies of one installed store: the property opens a hundred
	var files atomic.Int64
	stores := map[string]func(t *rapid.T) shell.Store{
		"memstore": func(*rapid.T) shell.Store { return memstore.New(walletRegistry()) },
		"sqlitestore": func(rt *rapid.T) shell.Store {
			s, err := install(context.Background(), filepath.Join(t.TempDir(), "cache-"+strconv.Itoa(int(files.Add(1)))+".db"),
				sqlitestore.Options{Registry: walletRegistry(), Logger: quiet()})
			if err != nil {
				rt.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				ctx := context.Background()
				store := open(rt)
				if c, ok := store.(interface{ Close() error }); ok {
					defer c.Close()
				}
				cache := shell.NewStateCache(rapid.IntRange(1, 3).Draw(rt, "cache size"))
				owners := []string{"ann", "bob", "cyd", "dee"}
				steps := rapid.IntRange(1, 40).Draw(rt, "steps")
				for range steps {
					owner := rapid.SampledFrom(owners).Draw(rt, "owner")
					amount := rapid.IntRange(1, 20).Draw(rt, "amount")
					switch rapid.IntRange(0, 9).Draw(rt, "op") {
					case 0: // an event appended behind Handle's back
						if _, err := store.Append(ctx, []core.Message{core.NewMessage(walletDeposited{Owner: owner, Amount: amount})}, shell.AppendOptions{}); err != nil {
							rt.Fatal(err)
						}
					case 1: // two events behind Handle's back, one of them in another partition
						msgs := []core.Message{core.NewMessage(walletNoted{Owner: owner, Note: "aside"}), core.NewMessage(walletDeposited{Owner: owner + "-other", Amount: amount})}
						if _, err := store.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
							rt.Fatal(err)
						}
					case 2:
						cache.Drop("wallets")
					default:
						var cmd any = walletDeposit{Owner: owner, Amount: amount}
						if rapid.Bool().Draw(rt, "withdraw") {
							cmd = walletWithdraw{Owner: owner, Amount: amount}
						}
						checkCachedHandle(rt, store, cache, owner, cmd)
					}
				}
			})
		})
	}
}

// checkCachedHandle handles cmd with the cache and checks it against the
// decision on a full fold of the partition read just before.
func checkCachedHandle(rt *rapid.T, store shell.Store, cache *shell.StateCache, owner string, cmd any) {
	ctx := context.Background()
	full, _, err := shell.Load(ctx, store, wallets, map[string]string{"owner": owner}, nil)
	if err != nil {
		rt.Fatal(err)
	}
	want, wantErr := wallets.Decide(full, core.NewMessage(cmd))
	wantState := wallets.Evolve(full, want...)
	got, err := shell.Handle(ctx, store, wallets, cmd, &shell.HandleOptions{Cache: cache})
	if (err == nil) != (wantErr == nil) || err != nil && !errors.Is(err, errOverdrawn) {
		rt.Fatalf("%T on %s: Handle returned %v, a full fold decides %v", cmd, owner, err, wantErr)
	}
	if len(got.Events) != len(want) {
		rt.Fatalf("%T on %s: Handle appended %d events, a full fold decides %d", cmd, owner, len(got.Events), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got.Events[i].Payload, want[i].Payload) {
			rt.Fatalf("%T on %s: event %d is %+v, a full fold decides %+v", cmd, owner, i, got.Events[i].Payload, want[i].Payload)
		}
	}
	if !reflect.DeepEqual(normal(got.State), normal(wantState)) {
		rt.Fatalf("%T on %s: state %+v after Handle, %+v after a full fold", cmd, owner, got.State, wantState)
	}
}

// normal makes an empty slice and a nil one compare equal.
func normal(s walletState) walletState {
	if len(s.Moves) == 0 {
		s.Moves = nil
	}
	return s
}

// TestStateCacheSkipsTheHistory pins what the cache is for: a partition's
// second decision reads only what was appended since its first (a hit),
// and a refused decision leaves nothing cached.
func TestStateCacheSkipsTheHistory(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(walletRegistry())
	cache := shell.NewStateCache(10)
	opts := &shell.HandleOptions{Cache: cache}
	if _, err := shell.Handle(ctx, store, wallets, walletDeposit{Owner: "ann", Amount: 5}, opts); err != nil {
		t.Fatal(err)
	}
	if hits, misses := cache.Stats(); hits != 0 || misses != 1 || cache.Len() != 1 {
		t.Fatalf("after the first decision: %d hits, %d misses, %d entries; want 0, 1, 1", hits, misses, cache.Len())
	}
	res, err := shell.Handle(ctx, store, wallets, walletWithdraw{Owner: "ann", Amount: 3}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if hits, _ := cache.Stats(); hits != 1 || res.State.Balance != 2 {
		t.Fatalf("second decision: %d hits, balance %d; want 1 hit, balance 2", hits, res.State.Balance)
	}
	if _, err := shell.Handle(ctx, store, wallets, walletWithdraw{Owner: "ann", Amount: 30}, opts); !errors.Is(err, errOverdrawn) {
		t.Fatalf("overdrawing: %v, want errOverdrawn", err)
	}
	if cache.Len() != 0 {
		t.Fatalf("a refused decision left %d entries cached, want none", cache.Len())
	}
	// Bounded: three partitions in a cache of two keep the two last used.
	small := shell.NewStateCache(2)
	for _, owner := range []string{"ann", "bob", "cyd"} {
		if _, err := shell.Handle(ctx, store, wallets, walletDeposit{Owner: owner, Amount: 1}, &shell.HandleOptions{Cache: small}); err != nil {
			t.Fatal(err)
		}
	}
	if small.Len() != 2 {
		t.Fatalf("a cache of 2 holds %d entries", small.Len())
	}
	small.Drop("wallets")
	if small.Len() != 0 {
		t.Fatalf("Drop left %d entries", small.Len())
	}
}

// A StateCache shared by the handlers of a web server keeps each
// partition's folded state between commands: a partition's next decision
// reads and folds only what was appended since its last one.
func ExampleStateCache() {
	ctx := context.Background()
	store := memstore.New(courseRegistry()) // sqlitestore.Open in production
	router, _ := shell.NewRouter(store, shell.RouterOptions{}, enrolments)
	_ = router.Setup(ctx)
	cache := shell.NewStateCache(10_000) // at most 10,000 partitions' states
	opts := &shell.HandleOptions{Cache: cache}

	for _, student := range []string{"s1", "s2", "s3"} {
		res, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: student}, opts)
		fmt.Println(res.State, err)
	}
	hits, misses := cache.Stats()
	fmt.Println("folded from the log:", misses, "from the cache:", hits)
	// Output:
	// [s1] <nil>
	// [s1 s2] <nil>
	// [s1 s2] course is full
	// folded from the log: 1 from the cache: 2
}

type (
	pairTally struct {
		A string `json:"a" sourced:"required"`
		B string `json:"b" sourced:"required"`
	}
	pairTallied struct {
		A string `json:"a"`
		B string `json:"b"`
	}
)

// TestStateCacheKeepsPartitionsApart: two partitions whose values joined
// naively would read alike ("a:x|b:y|b:z" for both) have separate entries,
// so neither decides on the other's state.
func TestStateCacheKeepsPartitionsApart(t *testing.T) {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[pairTally](reg, "pair.tally")
	codec.MustRegister[pairTallied](reg, "pair.tallied")
	tallies := core.Decider[int]{Group: "tallies", PartitionBy: []string{"a", "b"}}.With(
		core.Evolve(func(n int, _ pairTallied) int { return n + 1 }),
		core.Decide(func(n int, c pairTally) ([]any, error) { return []any{pairTallied(c)}, nil }),
	)
	store := memstore.New(reg)
	cache := shell.NewStateCache(10)
	first, second := pairTally{A: "x|b:y", B: "z"}, pairTally{A: "x", B: "y|b:z"}
	if "a:"+first.A+"|b:"+first.B != "a:"+second.A+"|b:"+second.B {
		t.Fatal("the fixture's partitions no longer read alike joined naively")
	}
	for _, c := range []pairTally{first, second, first} {
		if _, err := shell.Handle(ctx, store, tallies, c, &shell.HandleOptions{Cache: cache}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := shell.Handle(ctx, store, tallies, second, &shell.HandleOptions{Cache: cache})
	if err != nil || res.State != 2 {
		t.Fatalf("the second partition's second tally: state %d, %v; want 2 (its own two)", res.State, err)
	}
}
