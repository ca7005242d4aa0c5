package shell_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/statechart"
)

type (
	OpenDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	CloseDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	LockDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	DoorRef struct {
		DoorID string `json:"door_id"`
	}
	DoorOpened struct {
		DoorRef
		statechart.Move
	}
	DoorClosed struct {
		DoorRef
		statechart.Move
	}
	DoorLocked struct {
		DoorRef
		statechart.Move
	}
)

var (
	doorOpened = statechart.Declare[DoorOpened]("opened")
	doorClosed = statechart.Declare[DoorClosed]("closed")
	doorLocked = statechart.Declare[DoorLocked]("locked")
	doors      = statechart.Machine[struct{}]{Group: "doors", PartitionBy: []string{"door_id"}}.Chart(
		statechart.Initial(statechart.Command[CloseDoor](doorClosed)),
		statechart.Place(doorOpened, statechart.Command[CloseDoor](doorClosed)),
		statechart.Place(doorClosed, statechart.Command[OpenDoor](doorOpened), statechart.Command[LockDoor](doorLocked)),
		statechart.Final(doorLocked),
	)
)

func doorStore(t *testing.T) (*memstore.Store, *shell.Router) {
	t.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[OpenDoor](reg, "doors.open")
	codec.MustRegister[CloseDoor](reg, "doors.close")
	codec.MustRegister[LockDoor](reg, "doors.lock")
	if err := doors.Register(reg); err != nil {
		t.Fatal(err)
	}
	store := memstore.New(reg)
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, doors)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store, rt
}

func statePaths(t *testing.T, store shell.Store) []string {
	t.Helper()
	var out []string
	for _, m := range readAll(t, store) {
		if mv, ok := statechart.MoveOf(m.Payload); ok {
			out = append(out, mv.Target)
		}
	}
	return out
}

// A machine is a reactor: workers decide its commands one at a time, and a
// command no active state accepts is acknowledged with no events.
func TestMachineAsReactor(t *testing.T) {
	ctx := context.Background()
	store, rt := doorStore(t)
	cmds := []any{CloseDoor{DoorID: "d1"}, OpenDoor{DoorID: "d1"}, LockDoor{DoorID: "d1"}, CloseDoor{DoorID: "d1"}, LockDoor{DoorID: "d1"}}
	if _, err := store.Append(ctx, core.Messages(cmds...), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Lock while opened is not accepted: acknowledged, no event.
	if got := statePaths(t, store); !slices.Equal(got, []string{"closed", "opened", "closed", "locked"}) {
		t.Fatalf("state events %v", got)
	}
	info, _ := store.Group(ctx, "doors")
	if info.Status != shell.StatusActive || info.NewestProcessed < 5 {
		t.Fatalf("group %+v", info)
	}
}

func TestMachineHandleCommand(t *testing.T) {
	ctx := context.Background()
	store, rt := doorStore(t)
	res, err := shell.HandleCommand(ctx, store, doors, CloseDoor{DoorID: "d1"}, nil)
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = shell.HandleCommand(ctx, store, doors, CloseDoor{DoorID: "d1"}, nil)
	if !errors.Is(err, statechart.ErrCommandNotHandled) || !errors.Is(err, core.ErrNotHandled) {
		t.Fatalf("closing a closed door: %v", err)
	}
	before := len(readAll(t, store))
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if after := len(readAll(t, store)); after != before || before != 2 {
		t.Fatalf("%d messages, then %d after draining (the command is decided once, the rejected one not stored)", before, after)
	}
}

// A command handled synchronously while an earlier command of its
// partition waits for the workers: AdvanceOffset cannot skip the earlier
// one, so the workers claim both, and the handled one (marked
// core.DecidedByKey) must be acknowledged, not decided a second time.
// Found by the simulator (props/sim, the doors domain).
func TestMachineHandledCommandIsNotDecidedAgainByWorkers(t *testing.T) {
	ctx := context.Background()
	store, rt := doorStore(t)
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(OpenDoor{DoorID: "d1"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := shell.HandleMachine(ctx, store, doors, CloseDoor{DoorID: "d1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	closes := 0
	for _, m := range readAll(t, store) {
		if _, ok := m.Payload.(DoorClosed); ok {
			closes++
		}
	}
	if closes != 1 {
		t.Errorf("the handled CloseDoor moved the door %d times, want once; states %v", closes, statePaths(t, store))
	}
}

// A machine registers its own state events as a workflow does, when it is
// given to a router (or a runtime) and when a command is handled with it:
// the application registers its commands, not the machine's types. Before,
// both failed ("unknown message type") without an explicit Register.
func TestMachineRegistersItsOwnTypes(t *testing.T) {
	ctx := context.Background()
	newReg := func() *codec.Registry {
		reg := codec.NewRegistry()
		codec.MustRegister[OpenDoor](reg, "doors.open")
		codec.MustRegister[CloseDoor](reg, "doors.close")
		codec.MustRegister[LockDoor](reg, "doors.lock")
		return reg
	}
	store := memstore.New(newReg())
	if _, err := shell.HandleMachine(ctx, store, doors, CloseDoor{DoorID: "d1"}, nil); err != nil {
		t.Fatalf("HandleMachine without Register: %v", err)
	}
	store = memstore.New(newReg())
	rt, err := shell.NewRouter(store, shell.RouterOptions{}, doors)
	if err != nil {
		t.Fatalf("NewRouter without Register: %v", err)
	}
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, core.Messages(CloseDoor{DoorID: "d1"}, OpenDoor{DoorID: "d1"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := statePaths(t, store); !slices.Equal(got, []string{"closed", "opened"}) {
		t.Fatalf("state events %v", got)
	}
}
