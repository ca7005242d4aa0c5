package shell_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/sqlitetest"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// walletsFolding is the wallet decider whose deposits count factor
// times: two factors are two versions of the decider's evolve handlers
// (what a code change does), and plain is it without snapshots, the full
// fold a snapshot must agree with.
func walletsFolding(factor int, version string, every int) (snapshotting, plain core.Decider[walletState]) {
	plain = core.Decider[walletState]{Group: "wallets", PartitionBy: []string{"owner"}}.With(
		core.Evolve(func(s walletState, e walletDeposited) walletState {
			s.Balance += factor * e.Amount
			s.Moves = append(s.Moves, factor*e.Amount)
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
	snapshotting = plain
	snapshotting.Snapshots = core.Snapshots[walletState]{Codec: core.JSONSnapshots[walletState](version), Every: every}
	return snapshotting, plain
}

// snapshotStores are the stores the snapshot property runs on.
func snapshotStores(t *testing.T) map[string]func(rt *rapid.T) shell.Store {
	install := sqlitetest.Installer(t) // copies of one installed store: the property opens a hundred
	var files atomic.Int64
	return map[string]func(rt *rapid.T) shell.Store{
		"memstore": func(*rapid.T) shell.Store { return memstore.New(walletRegistry(), memstore.WithLogger(quiet())) },
		"sqlitestore": func(rt *rapid.T) shell.Store {
			s, err := install(context.Background(), filepath.Join(t.TempDir(), "snap-"+strconv.Itoa(int(files.Add(1)))+".db"),
				sqlitestore.Options{Registry: walletRegistry(), Logger: quiet()})
			if err != nil {
				rt.Fatal(err)
			}
			return s
		},
	}
}

// TestSnapshotsDecideAsAFullFold is the snapshots' property: whatever the
// sequence of commands (accepted and refused, with a StateCache or
// without), of events appended behind Handle's back, of snapshots saved
// at random points (every 1 to 6 events folded), of snapshots deleted,
// corrupted (bytes that do not decode), planted beyond the log's end (a
// log restored from a backup), left behind by an older version of the
// decider's evolve handlers (a changed codec version), and of group
// resets after a change that kept the version, a Handle, a Load and a
// LoadDecision of a decider with snapshots give exactly what a full fold
// of the partition gives: the same events or the same refusal, and the
// same state, on every store that keeps snapshots.
func TestSnapshotsDecideAsAFullFold(t *testing.T) {
	t.Parallel() // its stores are its own
	for name, open := range snapshotStores(t) {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				ctx := context.Background()
				store := open(rt)
				defer store.Close()
				ss := store.(shell.SnapshotStore)
				every := rapid.IntRange(1, 6).Draw(rt, "every")
				factor, versions := 1, 1
				version := func() string { return "wallet/v" + strconv.Itoa(versions) }
				d, plain := walletsFolding(factor, version(), every)
				var cache *shell.StateCache
				if rapid.Bool().Draw(rt, "cached") {
					cache = shell.NewStateCache(rapid.IntRange(1, 3).Draw(rt, "cache size"))
				}
				owners := []string{"ann", "bob", "cyd"}
				router, err := shell.NewRouter(store, shell.RouterOptions{}, d)
				if err != nil {
					rt.Fatal(err)
				}
				if err := router.Setup(ctx); err != nil {
					rt.Fatal(err)
				}
				for range rapid.IntRange(1, 50).Draw(rt, "steps") {
					owner := rapid.SampledFrom(owners).Draw(rt, "owner")
					partition := core.Partition(map[string]string{"owner": owner}).Key()
					amount := rapid.IntRange(1, 20).Draw(rt, "amount")
					last := func() int64 {
						st, err := store.Stats(ctx)
						if err != nil {
							rt.Fatal(err)
						}
						return st.MaxPosition
					}
					switch rapid.IntRange(0, 14).Draw(rt, "op") {
					case 0: // an event behind Handle's back
						if _, err := store.Append(ctx, []core.Message{core.NewMessage(walletDeposited{Owner: owner, Amount: amount})}, shell.AppendOptions{}); err != nil {
							rt.Fatal(err)
						}
					case 1: // two, one of them in another partition
						msgs := []core.Message{core.NewMessage(walletNoted{Owner: owner, Note: "aside"}), core.NewMessage(walletDeposited{Owner: owner + "-other", Amount: amount})}
						if _, err := store.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
							rt.Fatal(err)
						}
					case 2: // snapshots deleted
						if _, err := ss.DeleteSnapshots(ctx, "wallets", partition); err != nil {
							rt.Fatal(err)
						}
					case 3: // corrupt bytes at the log's end, the cache dropped so that they are read
						if err := ss.SaveSnapshot(ctx, shell.Snapshot{Group: "wallets", Partition: partition, Version: version(), Position: last(), State: []byte(`{"Balance": tru`)}); err != nil {
							rt.Fatal(err)
						}
						dropCache(cache)
					case 4: // a snapshot beyond the log's end, read at once
						bogus := []byte(`{"Balance":100000,"Moves":[100000]}`)
						if err := ss.SaveSnapshot(ctx, shell.Snapshot{Group: "wallets", Partition: partition, Version: version(), Position: last() + int64(amount), State: bogus}); err != nil {
							rt.Fatal(err)
						}
						dropCache(cache)
						if rapid.Bool().Draw(rt, "load it") {
							checkSnapshotLoad(rt, store, d, plain, owner)
						} else {
							checkSnapshotHandle(rt, store, d, plain, cache, owner, walletWithdraw{Owner: owner, Amount: amount})
						}
					case 5: // a new version of the evolve handlers, with a new codec version
						factor, versions = 3-factor, versions+1
						d, plain = walletsFolding(factor, version(), every)
						dropCache(cache) // a new process
					case 6: // a change that kept the codec version, with a reset of the group
						factor = 3 - factor
						d, plain = walletsFolding(factor, version(), every)
						for _, op := range []func() error{
							func() error { return store.StopGroup(ctx, "wallets", "redeploy") },
							func() error { return store.ResetGroup(ctx, "wallets") },
							func() error { return store.StartGroup(ctx, "wallets") },
						} {
							if err := op(); err != nil {
								rt.Fatal(err)
							}
						}
						dropCache(cache)
					case 7, 8:
						checkSnapshotLoad(rt, store, d, plain, owner)
					default:
						var cmd any = walletDeposit{Owner: owner, Amount: amount}
						if rapid.Bool().Draw(rt, "withdraw") {
							cmd = walletWithdraw{Owner: owner, Amount: amount}
						}
						checkSnapshotHandle(rt, store, d, plain, cache, owner, cmd)
					}
				}
			})
		})
	}
}

func dropCache(c *shell.StateCache) {
	if c != nil {
		c.Drop("wallets")
	}
}

// checkSnapshotHandle handles cmd with d (and cache, when not nil) and
// checks it against the decision of plain on a full fold read just
// before.
func checkSnapshotHandle(rt *rapid.T, store shell.Store, d, plain core.Decider[walletState], cache *shell.StateCache, owner string, cmd any) {
	ctx := context.Background()
	full, _, err := shell.Load(ctx, store, plain, map[string]string{"owner": owner}, nil)
	if err != nil {
		rt.Fatal(err)
	}
	want, wantErr := plain.Decide(full, core.NewMessage(cmd))
	wantState := plain.Evolve(full, want...)
	got, err := shell.Handle(ctx, store, d, cmd, &shell.HandleOptions{Cache: cache})
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

// checkSnapshotLoad checks Load and LoadDecision of d against a full fold
// by plain: the same state and the same guard.
func checkSnapshotLoad(rt *rapid.T, store shell.Store, d, plain core.Decider[walletState], owner string) {
	ctx := context.Background()
	partition := map[string]string{"owner": owner}
	want, wantGuard, err := shell.Load(ctx, store, plain, partition, nil)
	if err != nil {
		rt.Fatal(err)
	}
	got, guard, err := shell.Load(ctx, store, d, partition, nil)
	if err != nil {
		rt.Fatal(err)
	}
	if !reflect.DeepEqual(normal(got), normal(want)) || !reflect.DeepEqual(guard, wantGuard) {
		rt.Fatalf("Load of %s: %+v guarded by %+v; a full fold gives %+v guarded by %+v", owner, got, guard, want, wantGuard)
	}
	got, guard, err = shell.LoadDecision(ctx, store, d, walletWithdraw{Owner: owner, Amount: 1}, nil)
	if err != nil {
		rt.Fatal(err)
	}
	if !reflect.DeepEqual(normal(got), normal(want)) || !reflect.DeepEqual(guard, wantGuard) {
		rt.Fatalf("LoadDecision of %s: %+v guarded by %+v; a full fold gives %+v guarded by %+v", owner, got, guard, want, wantGuard)
	}
}

// TestSnapshotsSkipTheHistory pins what snapshots are for: a cold
// decision (no StateCache: a restarted process) on a partition with a
// snapshot reads only the events after it, and a decision saves a new one
// once it folded Every events.
func TestSnapshotsSkipTheHistory(t *testing.T) {
	ctx := context.Background()
	store := &readCountingStore{Store: memstore.New(walletRegistry(), memstore.WithLogger(quiet()))}
	d, _ := walletsFolding(1, "wallet/v1", 10)
	for i := range 12 { // 24 events folded, 12 commands: snapshots saved on the way
		if _, err := shell.Handle(ctx, store, d, walletDeposit{Owner: "ann", Amount: i + 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	snap, found, err := store.LoadSnapshot(ctx, "wallets", core.Partition(map[string]string{"owner": "ann"}).Key(), "wallet/v1")
	if err != nil || !found {
		t.Fatalf("no snapshot after 24 events folded with Every 10: %v", err)
	}
	res, err := shell.Handle(ctx, store, d, walletWithdraw{Owner: "ann", Amount: 78}, nil)
	if err != nil || res.State.Balance != 0 || len(res.State.Moves) != 25 {
		t.Fatalf("withdraw all from a snapshot: %+v, %v; want balance 0 after 25 moves", res.State, err)
	}
	if n := store.lastRead; n > 10 {
		t.Fatalf("the decision from the snapshot at %d read %d events, want at most 10", snap.Position, n)
	}
}

// readCountingStore counts the messages of the last partition read inside a
// transaction.
type readCountingStore struct {
	*memstore.Store
	lastRead int
}

func (s *readCountingStore) Update(ctx context.Context, fn func(tx shell.Tx) error) error {
	return s.Store.Update(ctx, func(tx shell.Tx) error { return fn(readCountingTx{tx, s}) })
}

type readCountingTx struct {
	shell.Tx
	s *readCountingStore
}

func (t readCountingTx) ReadPartition(partition core.Partition, types []string, opts shell.ReadOptions) (shell.ReadResult, error) {
	res, err := t.Tx.ReadPartition(partition, types, opts)
	t.s.lastRead = len(res.Messages)
	return res, err
}

func (t readCountingTx) LoadSnapshot(group, partition, version string) (shell.Snapshot, bool, error) {
	return t.Tx.(driver.SnapshotTx).LoadSnapshot(group, partition, version)
}

// TestSnapshotThatDoesNotDecode: a codec that fails to decode a snapshot
// never makes a wrong decision: the decision folds the log, a WARN says
// so, and the snapshot is replaced.
func TestSnapshotThatDoesNotDecode(t *testing.T) {
	ctx := context.Background()
	logs := &records{}
	store := memstore.New(walletRegistry(), memstore.WithLogger(slog.New(logs)))
	d, _ := walletsFolding(1, "wallet/v1", 1)
	if _, err := shell.Handle(ctx, store, d, walletDeposit{Owner: "ann", Amount: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveSnapshot(ctx, shell.Snapshot{Group: "wallets", Partition: core.Partition(map[string]string{"owner": "ann"}).Key(), Version: "wallet/v1", Position: 3, State: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	res, err := shell.Handle(ctx, store, d, walletWithdraw{Owner: "ann", Amount: 5}, nil)
	if err != nil || res.State.Balance != 0 {
		t.Fatalf("withdraw on a corrupt snapshot: %+v, %v; want balance 0", res.State, err)
	}
	warns := logs.find("does not decode")
	if len(warns) != 1 || warns[0].Level != slog.LevelWarn {
		t.Fatalf("want one WARN about the snapshot that does not decode, got %v", warns)
	}
	snap, _, err := store.LoadSnapshot(ctx, "wallets", core.Partition(map[string]string{"owner": "ann"}).Key(), "wallet/v1")
	if err != nil || string(snap.State) == "not json" {
		t.Fatalf("the corrupt snapshot was not replaced: %q, %v", snap.State, err)
	}
}

// TestSnapshotDefinitionErrors: an option the shell could not honour
// faithfully is refused when the decider is built (Err) and checked.
func TestSnapshotDefinitionErrors(t *testing.T) {
	type withFunc struct{ F func() }
	type hidden struct{ n int } //lint:ignore U1000 an unexported field is what the test refuses
	type skipped struct {
		N int `json:"-"`
	}
	type anyField struct{ V any }
	base := core.Decider[walletState]{Group: "wallets", PartitionBy: []string{"owner"}}
	cases := map[string]struct {
		err  error
		want string
	}{
		"func field":  {core.Decider[withFunc]{Group: "g", PartitionBy: []string{"owner"}, Snapshots: core.Snapshots[withFunc]{Codec: core.JSONSnapshots[withFunc]("v1")}}.Err(), "state.F has type func()"},
		"unexported":  {core.Decider[hidden]{Group: "g", PartitionBy: []string{"owner"}, Snapshots: core.Snapshots[hidden]{Codec: core.JSONSnapshots[hidden]("v1")}}.Err(), "state.n is unexported"},
		"json:\"-\"":  {core.Decider[skipped]{Group: "g", PartitionBy: []string{"owner"}, Snapshots: core.Snapshots[skipped]{Codec: core.JSONSnapshots[skipped]("v1")}}.Err(), "tagged `json:\"-\"`"},
		"interface":   {core.Decider[anyField]{Group: "g", PartitionBy: []string{"owner"}, Snapshots: core.Snapshots[anyField]{Codec: core.JSONSnapshots[anyField]("v1")}}.Err(), "state.V has type interface {}"},
		"no version":  {withSnapshots(base, core.Snapshots[walletState]{Codec: core.JSONSnapshots[walletState]("")}).Err(), "no Version"},
		"negative":    {withSnapshots(base, core.Snapshots[walletState]{Codec: core.JSONSnapshots[walletState]("v1"), Every: -1}).Err(), "Every is -1"},
		"no codec":    {withSnapshots(base, core.Snapshots[walletState]{Every: 5}).Err(), "Codec is nil"},
		"queue":       {core.Decider[walletState]{Group: "q", Exclusive: true, Snapshots: core.Snapshots[walletState]{Codec: core.JSONSnapshots[walletState]("v1")}}.Err(), "delete-on-ack queue"},
		"check, too":  {withSnapshots(wallets, core.Snapshots[walletState]{Codec: core.JSONSnapshots[walletState]("")}).Check(walletRegistry()), "no Version"},
		"handle, too": {handleErr(withSnapshots(wallets, core.Snapshots[walletState]{Codec: core.JSONSnapshots[walletState]("")})), "no Version"},
	}
	for name, c := range cases {
		if !errors.Is(c.err, core.ErrDefinition) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want a definition error saying %q", name, c.err, c.want)
		}
	}
	// States JSON round-trips are accepted, and so is no option at all.
	type fine struct {
		N     int
		Names map[string][]int
		ByID  map[int]string
		At    struct{ T int }
		Ptr   *fine
	}
	if err := (core.Decider[fine]{Group: "g", PartitionBy: []string{"owner"}, Snapshots: core.Snapshots[fine]{Codec: core.JSONSnapshots[fine]("v1")}}).Err(); err != nil {
		t.Errorf("a plain-data state: %v", err)
	}
	if err := wallets.Err(); err != nil {
		t.Errorf("no snapshots: %v", err)
	}
}

func withSnapshots(d core.Decider[walletState], o core.Snapshots[walletState]) core.Decider[walletState] {
	d.Snapshots = o
	return d
}

func handleErr(d core.Decider[walletState]) error {
	_, err := shell.Handle(context.Background(), memstore.New(walletRegistry()), d, walletDeposit{Owner: "ann", Amount: 1}, nil)
	return err
}
