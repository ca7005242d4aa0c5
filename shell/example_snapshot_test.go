package shell_test

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// A decider whose partitions grow long opts in to persisted snapshots:
// its state is plain data, encoded as JSON under a version that names
// its shape, and a decision saves one every 100 events folded. A process
// that starts cold (no StateCache, or a partition it never saw) then
// decides from the latest snapshot and reads only the events after it.
func Example_snapshots() {
	ctx := context.Background()
	store := memstore.New(walletRegistry()) // sqlitestore and pgstore keep snapshots too

	accounts := wallets // the wallet decider, opting in:
	accounts.Snapshots = core.Snapshots[walletState]{
		Codec: core.JSONSnapshots[walletState]("wallet/v1"), // change the version when the state or its evolve handlers change
		Every: 100,
	}

	for range 60 { // 60 deposits: 120 events in ann's partition
		if _, err := shell.Handle(ctx, store, accounts, walletDeposit{Owner: "ann", Amount: 1}, nil); err != nil {
			fmt.Println(err)
		}
	}
	ann := map[string]string{"owner": "ann"}
	snap, _, _ := store.LoadSnapshot(ctx, "wallets", core.Partition(ann).Key(), "wallet/v1")
	fmt.Println("snapshot folded up to position", snap.Position)

	// A cold decision and a Load start from it: the same state a full
	// fold gives.
	res, err := shell.Handle(ctx, store, accounts, walletWithdraw{Owner: "ann", Amount: 60}, nil)
	fmt.Println(res.State.Balance, len(res.State.Moves), err)
	state, _, _ := shell.Load(ctx, store, accounts, ann, nil)
	fmt.Println(state.Balance, len(state.Moves))
	// Output:
	// snapshot folded up to position 150
	// 0 121 <nil>
	// 0 121
}
