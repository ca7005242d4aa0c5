package readme

import (
	"fmt"

	"github.com/sourced-go/sourced/statechart"
)

type (
	Open struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	Close struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	Lock struct {
		DoorID string `json:"door_id" sourced:"required"`
		Code   string `json:"code"`
	}
	Unlock struct {
		DoorID string `json:"door_id" sourced:"required"`
		Code   string `json:"code"`
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
	door struct{ Code string }
)

// The README's machine and its diagram.
func Example_machine() {
	opened := statechart.Declare[DoorOpened]("opened") // a state is an event type; stored as doors.runtime.opened
	closed := statechart.Declare[DoorClosed]("closed")
	locked := statechart.Declare[DoorLocked]("locked")

	doors := statechart.Machine[door]{Group: "doors", PartitionBy: []string{"door_id"}}.Chart(
		statechart.Initial(statechart.Command[Close](closed)),
		statechart.Place(opened, statechart.Command[Close](closed)),
		statechart.Place(closed, statechart.Command[Open](opened), statechart.Command[Lock](locked)),
		statechart.Place(locked, statechart.CommandFunc(func(d door, u Unlock, do *statechart.Do) error {
			if u.Code != d.Code {
				return fmt.Errorf("wrong code")
			}
			return nil
		}, closed)),
	)
	fmt.Print(doors.Mermaid())
	// Output:
	// stateDiagram-v2
	//   [*] --> closed : Close
	//   opened --> closed : Close
	//   closed --> opened : Open
	//   closed --> locked : Lock
	//   locked --> closed : Unlock
}
