package statechart_test

import (
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// The manual's OrderMachine.

type OrderRef struct {
	OrderID string `json:"order_id"`
}

type PlaceOrder struct {
	OrderID string `json:"order_id" sourced:"required"`
	Total   int    `json:"total"`
	Items   int    `json:"items"`
}

type StartPayment struct {
	OrderID string `json:"order_id" sourced:"required"`
	Card    string `json:"card"`
}

type PackItem struct {
	OrderID string `json:"order_id" sourced:"required"`
	SKU     string `json:"sku"`
}

type DispatchShipment struct {
	OrderID string `json:"order_id" sourced:"required"`
}

type CancelOrder struct {
	OrderID string `json:"order_id" sourced:"required"`
}

type ExpirePayment struct {
	OrderID string `json:"order_id" sourced:"required"`
}

type ChargeCard struct {
	OrderID string `json:"order_id"`
	Card    string `json:"card"`
}

type OrderPlaced struct {
	OrderID string `json:"order_id"`
	Total   int    `json:"total"`
	Items   int    `json:"items"`
}

type PaymentInfoAdded struct {
	OrderID string `json:"order_id"`
	Card    string `json:"card"`
}

type ItemPacked struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
}

type PaymentCaptured struct {
	OrderID string `json:"order_id" sourced:"required"`
}

type (
	PlacedEvent struct {
		OrderRef
		statechart.Move
	}
	PayingEvent struct {
		OrderRef
		statechart.Move
	}
	RejectedEvent struct {
		OrderRef
		statechart.Move
	}
	PaidEvent struct {
		OrderRef
		statechart.Move
	}
	PackedEvent struct {
		OrderRef
		statechart.Move
	}
	ShippedEvent struct {
		OrderRef
		statechart.Move
	}
	CompletedEvent struct {
		OrderRef
		statechart.Move
	}
	CancelledEvent struct {
		OrderRef
		statechart.Move
	}
)

var (
	Placed    = statechart.Declare[PlacedEvent]("placed")
	Paying    = statechart.Declare[PayingEvent]("paying")
	Rejected  = statechart.Declare[RejectedEvent]("rejected")
	Paid      = statechart.Declare[PaidEvent]("paid")
	Packed    = statechart.Declare[PackedEvent]("packed")
	Shipped   = statechart.Declare[ShippedEvent]("shipped")
	Completed = statechart.Declare[CompletedEvent]("completed")
	Cancelled = statechart.Declare[CancelledEvent]("cancelled")
)

type order struct {
	Total  int
	Items  int
	Card   string
	Packed []string
}

var orderContext = core.Projection[order]{}.With(
	core.Evolve(func(o order, e OrderPlaced) order { o.Total, o.Items = e.Total, e.Items; return o }),
	core.Evolve(func(o order, e PaymentInfoAdded) order { o.Card = e.Card; return o }),
	core.Evolve(func(o order, e ItemPacked) order {
		o.Packed = append(o.Packed[:len(o.Packed):len(o.Packed)], e.SKU)
		return o
	}),
)

func orderMachine(reg *codec.Registry) statechart.Machine[order] {
	return statechart.Machine[order]{
		Group:       "order_machine",
		PartitionBy: []string{"order_id"},
		Context:     orderContext,
		Registry:    reg,
	}.Chart(
		statechart.Initial(
			statechart.CommandFunc(func(_ order, c PlaceOrder, do *statechart.Do) error {
				do.Event(OrderPlaced{Total: c.Total, Items: c.Items})
				return nil
			}, Placed),
		),
		statechart.Place(Placed,
			statechart.Command[CancelOrder](Cancelled),
			statechart.Region("payment",
				statechart.Initial(
					statechart.CommandFunc(func(o order, c StartPayment, do *statechart.Do) error {
						if o.Total > 0 {
							do.Event(PaymentInfoAdded{Card: c.Card})
							do.To(Paying)
						} else {
							do.To(Rejected)
						}
						return nil
					}, Paying, Rejected),
				),
				statechart.Place(Paying,
					statechart.Entry(func(o order, _ statechart.Move) []any { return []any{ChargeCard{Card: o.Card}} }),
					statechart.After(time.Hour, ExpirePayment{}),
					statechart.On[PaymentCaptured](Paid),
					statechart.Command[ExpirePayment](Cancelled),
				),
				statechart.Place(Rejected),
				statechart.Final(Paid),
			),
			statechart.Region("shipping",
				statechart.Initial(
					statechart.CommandFunc(func(o order, c PackItem, do *statechart.Do) error {
						do.Event(ItemPacked{SKU: c.SKU})
						if len(o.Packed)+1 >= o.Items {
							do.To(Packed)
						}
						return nil
					}, Packed, statechart.Stay),
				),
				statechart.Place(Packed, statechart.Command[DispatchShipment](Shipped)),
				statechart.Final(Shipped),
			),
			statechart.Done(Completed),
		),
		statechart.Final(Completed),
		statechart.Final(Cancelled),
	)
}

func orderRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[PlaceOrder](reg, "orders.place_order")
	codec.MustRegister[StartPayment](reg, "orders.start_payment")
	codec.MustRegister[PackItem](reg, "orders.pack_item")
	codec.MustRegister[DispatchShipment](reg, "orders.dispatch_shipment")
	codec.MustRegister[CancelOrder](reg, "orders.cancel_order")
	codec.MustRegister[ExpirePayment](reg, "orders.expire_payment")
	codec.MustRegister[ChargeCard](reg, "payments.charge_card")
	codec.MustRegister[OrderPlaced](reg, "orders.order_placed")
	codec.MustRegister[PaymentInfoAdded](reg, "orders.payment_info_added")
	codec.MustRegister[ItemPacked](reg, "orders.item_packed")
	codec.MustRegister[PaymentCaptured](reg, "payments.payment_captured")
	return reg
}
