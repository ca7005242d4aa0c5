package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/statechart"
)

// ---- doors: a statechart machine with a timer ----

type (
	// OpenDoor opens a closed door.
	OpenDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	// CloseDoor closes an open door.
	CloseDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	// AutoClose is the open door's timer: it closes the door AutoCloseAfter
	// after it opened.
	AutoClose struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	// DoorRef carries the door's partition key in its state events.
	DoorRef struct {
		DoorID string `json:"door_id"`
	}
	// DoorOpened is the state event of the opened state.
	DoorOpened struct {
		DoorRef
		statechart.Move
	}
	// DoorClosed is the state event of the closed state.
	DoorClosed struct {
		DoorRef
		statechart.Move
	}
)

// AutoCloseAfter is the open door's timer.
const AutoCloseAfter = 20 * time.Second

var (
	doorOpened = statechart.Declare[DoorOpened]("opened")
	doorClosed = statechart.Declare[DoorClosed]("closed")
	doorsM     = statechart.Machine[struct{}]{Group: gDoors, PartitionBy: []string{"door_id"}}.Chart(
		statechart.Initial(statechart.Command[CloseDoor](doorClosed)),
		statechart.Place(doorClosed, statechart.Command[OpenDoor](doorOpened)),
		statechart.Place(doorOpened,
			statechart.After(AutoCloseAfter, AutoClose{}),
			statechart.Command[CloseDoor](doorClosed),
			statechart.Command[AutoClose](doorClosed)),
	)
)

const (
	gDoors     = "doors"
	tOpenDoor  = "doors.open"
	tCloseDoor = "doors.close"
	tAutoClose = "doors.auto_close"
)

type doors struct{}

func (*doors) Name() string { return "doors" }
func (*doors) Register(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[OpenDoor](reg, tOpenDoor),
		codec.Register[CloseDoor](reg, tCloseDoor),
		codec.Register[AutoClose](reg, tAutoClose),
		doorsM.Register(reg),
	)
}
func (*doors) Reactors() []any   { return []any{doorsM} }
func (*doors) Ops() int          { return 3 }
func (*doors) Failing() []string { return nil }

// Do: 0 appends an OpenDoor for the workers, 1 a CloseDoor, 2 handles one
// of them synchronously (a command the door's state does not accept is
// refused, storing nothing: expected).
func (*doors) Do(ctx context.Context, c *Client, op int, n int64) error {
	id := "d" + strconv.Itoa(int(n%3))
	var cmd any = OpenDoor{id}
	if n/3%2 == 1 {
		cmd = CloseDoor{id}
	}
	switch op {
	case 0:
		return c.Append(ctx, []core.Message{core.NewMessage(OpenDoor{id})}, driver.AppendOptions{})
	case 1:
		return c.Append(ctx, []core.Message{core.NewMessage(CloseDoor{id})}, driver.AppendOptions{})
	}
	err := c.Handle(ctx, doorsM, cmd)
	if errors.Is(err, core.ErrNotHandled) {
		return nil
	}
	return err
}

// Check: every door's stored configuration loads (shell.LoadMachine);
// every command moved its door at most once; once drained, every door that
// opened has closed (its timer fired, or a CloseDoor came).
func (*doors) Check(v *View, final bool) error {
	moved := map[string]int{}
	doorsSeen := map[string]bool{}
	for _, m := range v.Log {
		switch p := m.Payload.(type) {
		case OpenDoor:
			doorsSeen[p.DoorID] = true
		case CloseDoor:
			doorsSeen[p.DoorID] = true
		}
		if _, ok := statechart.MoveOf(m.Payload); !ok {
			continue
		}
		cause, ok := v.ByID[m.CausationID]
		if !ok || cause.ID == m.ID {
			continue
		}
		if cause.Position > m.Position {
			return fmt.Errorf("state event at position %d before its command at %d", m.Position, cause.Position)
		}
		k := cause.ID.String() + "/" + m.Type
		if moved[k]++; moved[k] > 1 {
			return fmt.Errorf("%s at position %d moved its door twice (%s again at position %d)", cause.Type, cause.Position, m.Type, m.Position)
		}
	}
	for id := range doorsSeen {
		in, _, err := shell.LoadMachine(context.Background(), v.Store, doorsM, map[string]string{"door_id": id}, nil)
		if err != nil {
			return fmt.Errorf("door %s: its stored configuration does not load: %w", id, err)
		}
		if final && in.In(doorOpened) {
			return fmt.Errorf("door %s is still open after the drain: its timer never closed it (paths %v)", id, in.Paths())
		}
	}
	return nil
}
