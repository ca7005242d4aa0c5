package shell_test

import (
	"context"
	"fmt"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// A machine handled synchronously, then loaded back from the store.
func ExampleLoadMachine() {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[OpenDoor](reg, "doors.open")
	codec.MustRegister[CloseDoor](reg, "doors.close")
	codec.MustRegister[LockDoor](reg, "doors.lock")
	if err := doors.Register(reg); err != nil {
		panic(err)
	}
	store := memstore.New(reg)
	router, err := shell.NewRouter(store, shell.RouterOptions{}, doors)
	if err != nil {
		panic(err)
	}
	if err := router.Setup(ctx); err != nil {
		panic(err)
	}
	res, err := shell.HandleMachine(ctx, store, doors, CloseDoor{DoorID: "d1"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Instance.Paths())
	if _, err := shell.HandleMachine(ctx, store, doors, LockDoor{DoorID: "d1"}, nil); err != nil {
		panic(err)
	}
	in, _, err := shell.LoadMachine(ctx, store, doors, map[string]string{"door_id": "d1"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(in.Paths(), in.Final(), in.ActiveStates().Visited(doorClosed))
	// Output:
	// [closed]
	// [locked] true true
}
