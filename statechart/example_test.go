package statechart_test

import (
	"fmt"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// A door that can be opened, closed and locked, as a machine: one command
// per transition, a guard on the context, and its diagram.
func ExampleMachine() {
	type (
		Open struct {
			DoorID string `json:"door_id"`
		}
		Close struct {
			DoorID string `json:"door_id"`
		}
		Lock struct {
			DoorID string `json:"door_id"`
		}
		Unlock struct {
			DoorID string `json:"door_id"`
			Code   string `json:"code"`
		}
		DoorRef struct {
			DoorID string `json:"door_id"`
		}
		OpenedEvent struct {
			DoorRef
			statechart.Move
		}
		ClosedEvent struct {
			DoorRef
			statechart.Move
		}
		LockedEvent struct {
			DoorRef
			statechart.Move
		}
		door struct{ Code string }
	)
	opened := statechart.Declare[OpenedEvent]("opened")
	closed := statechart.Declare[ClosedEvent]("closed")
	locked := statechart.Declare[LockedEvent]("locked")

	doors := statechart.Machine[door]{
		Group: "doors", PartitionBy: []string{"door_id"},
		Context: core.Projection[door]{Init: func() door { return door{Code: "1234"} }},
	}.Chart(
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
	if err := doors.Err(); err != nil {
		panic(err)
	}
	fmt.Print(doors.Mermaid())

	in := doors.New(map[string]string{"door_id": "d1"})
	in, _, _ = doors.Decide(in, Close{})
	in, d, _ := doors.Decide(in, Lock{})
	fmt.Printf("%+v\n", d.States[0].Payload)
	_, _, err := doors.Decide(in, Unlock{Code: "0000"})
	fmt.Println(err)
	_, _, err = doors.Decide(in, Open{})
	fmt.Println(err)
	in, _, _ = doors.Decide(in, Unlock{Code: "1234"})
	fmt.Println(in.Paths())
	// Output:
	// stateDiagram-v2
	//   [*] --> closed : Close
	//   opened --> closed : Close
	//   closed --> opened : Open
	//   closed --> locked : Lock
	//   locked --> closed : Unlock
	// {DoorRef:{DoorID:d1} Move:{Trigger:Lock Source:closed Target:locked Exited:[closed] Entered:[locked]}}
	// wrong code
	// statechart: command Open not handled: no active state accepts it (the machine is in locked)
	// [closed]
}

// The manual's OrderMachine drawn as a Mermaid state diagram.
func ExampleMachine_Mermaid() {
	fmt.Print(orderMachine(nil).Mermaid())
	// Output:
	// stateDiagram-v2
	//   state "placed" as placed {
	//     state "paying" as placed_payment_paying
	//     state "rejected" as placed_payment_rejected
	//     state "paid" as placed_payment_paid
	//     [*] --> placed_payment_paying : StartPayment
	//     [*] --> placed_payment_rejected : StartPayment
	//     placed_payment_paying --> placed_payment_paid : on PaymentCaptured
	//     placed_payment_paid --> [*]
	//     --
	//     state "packed" as placed_shipping_packed
	//     state "shipped" as placed_shipping_shipped
	//     [*] --> placed_shipping_packed : PackItem
	//     placed_shipping_packed --> placed_shipping_shipped : DispatchShipment
	//     placed_shipping_shipped --> [*]
	//   }
	//   state "completed" as completed
	//   state "cancelled" as cancelled
	//   [*] --> placed : PlaceOrder
	//   placed --> cancelled : CancelOrder
	//   placed --> completed : done
	//   placed_payment_paying --> cancelled : ExpirePayment
	//   completed --> [*]
	//   cancelled --> [*]
}

// A configuration stored as paths is read back to tell which commands the
// machine accepts now.
func ExampleMachine_ActiveStates() {
	c, err := orderMachine(nil).ActiveStates([]string{"placed", "placed.payment.paying"})
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Value())
	fmt.Println(c.AvailableCommands())
	fmt.Println(c.In(Paying), c.In(Paid))
	// Output:
	// map[placed:map[payment:paying shipping:initial]]
	// [statechart_test.CancelOrder statechart_test.ExpirePayment statechart_test.PackItem]
	// true false
}
