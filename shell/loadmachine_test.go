package shell_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/statechart"
)

func TestHandleMachineAndLoadMachine(t *testing.T) {
	ctx := context.Background()
	store, _ := doorStore(t)
	keys := map[string]string{"door_id": "d1"}
	in, _, err := shell.LoadMachine(ctx, store, doors, keys, nil)
	if err != nil || len(in.Paths()) != 0 {
		t.Fatalf("nothing stored yet: %v %v", in.Paths(), err)
	}
	res, err := shell.HandleMachine(ctx, store, doors, CloseDoor{DoorID: "d1"}, nil)
	if err != nil || !slices.Equal(res.Instance.Paths(), []string{"closed"}) {
		t.Fatalf("%v %v", res.Instance.Paths(), err)
	}
	by, ok := res.Instance.ActiveStates().EnteredBy(doorClosed)
	if !ok || by.ID != res.Events[0].ID || by.Type != "doors.runtime.closed" || !by.At.Equal(res.Events[0].CreatedAt) {
		t.Fatalf("entered by the stored event: %+v %+v", by, res.Events[0])
	}
	res, err = shell.HandleMachine(ctx, store, doors, OpenDoor{DoorID: "d1"}, nil)
	if err != nil || !slices.Equal(res.Instance.Paths(), []string{"opened"}) {
		t.Fatalf("%v %v", res.Instance.Paths(), err)
	}
	if _, err := shell.HandleMachine(ctx, store, doors, OpenDoor{DoorID: "d1"}, nil); !errors.Is(err, statechart.ErrCommandNotHandled) {
		t.Fatalf("opening an open door: %v", err)
	}
	in, guard, err := shell.LoadMachine(ctx, store, doors, keys, nil)
	if err != nil || !slices.Equal(in.Paths(), []string{"opened"}) || !in.ActiveStates().Visited(doorClosed) {
		t.Fatalf("%v %v", in.Paths(), err)
	}
	// The guard is the read's: a state event appended after it conflicts.
	moved := DoorClosed{DoorRef{"d1"}, statechart.Move{Trigger: "doors.close", Source: "opened", Target: "closed", Exited: []string{"opened"}, Entered: []string{"closed"}}}
	if _, err := store.Append(ctx, core.Messages(moved), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, core.Messages(moved), shell.AppendOptions{Guard: &guard}); !errors.Is(err, shell.ErrConcurrentAppend) {
		t.Fatalf("appending with the load's guard after a conflicting event: %v", err)
	}
	if _, _, err := shell.LoadMachine(ctx, store, doors, map[string]string{}, nil); !errors.Is(err, statechart.ErrMissingPartitionKey) {
		t.Fatalf("a missing key: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := shell.LoadMachine(cctx, store, doors, keys, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
}
