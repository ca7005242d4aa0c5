package bench

import (
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// The manual's OrderMachine, as the statechart tests define it.

type orderRef struct {
	OrderID string `json:"order_id"`
}

type placeOrder struct {
	OrderID string `json:"order_id"`
	Total   int    `json:"total"`
}

type startPayment struct {
	OrderID string `json:"order_id"`
	Card    string `json:"card"`
}

type packItem struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
}

type dispatchShipment struct {
	OrderID string `json:"order_id"`
}

type cancelOrder struct {
	OrderID string `json:"order_id"`
}

type expirePayment struct {
	OrderID string `json:"order_id"`
}

type chargeCard struct {
	OrderID string `json:"order_id"`
	Card    string `json:"card"`
}

type orderPlaced struct {
	OrderID string `json:"order_id"`
	Total   int    `json:"total"`
}

type paymentInfoAdded struct {
	OrderID string `json:"order_id"`
	Card    string `json:"card"`
}

type itemPacked struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
}

type paymentCaptured struct {
	OrderID string `json:"order_id"`
}

type (
	placedEvent struct {
		orderRef
		statechart.Move
	}
	payingEvent struct {
		orderRef
		statechart.Move
	}
	rejectedEvent struct {
		orderRef
		statechart.Move
	}
	paidEvent struct {
		orderRef
		statechart.Move
	}
	packedEvent struct {
		orderRef
		statechart.Move
	}
	shippedEvent struct {
		orderRef
		statechart.Move
	}
	completedEvent struct {
		orderRef
		statechart.Move
	}
	cancelledEvent struct {
		orderRef
		statechart.Move
	}
)

type orderCtx struct {
	Total  int
	Card   string
	Packed []string
}

func benchOrderMachine() statechart.Machine[orderCtx] {
	placed := statechart.Declare[placedEvent]("placed")
	paying := statechart.Declare[payingEvent]("paying")
	rejected := statechart.Declare[rejectedEvent]("rejected")
	paid := statechart.Declare[paidEvent]("paid")
	packed := statechart.Declare[packedEvent]("packed")
	shipped := statechart.Declare[shippedEvent]("shipped")
	completed := statechart.Declare[completedEvent]("completed")
	cancelled := statechart.Declare[cancelledEvent]("cancelled")
	ctx := core.Projection[orderCtx]{}.With(
		core.Evolve(func(o orderCtx, e orderPlaced) orderCtx { o.Total = e.Total; return o }),
		core.Evolve(func(o orderCtx, e paymentInfoAdded) orderCtx { o.Card = e.Card; return o }),
		core.Evolve(func(o orderCtx, e itemPacked) orderCtx {
			o.Packed = append(o.Packed[:len(o.Packed):len(o.Packed)], e.SKU)
			return o
		}),
	)
	return statechart.Machine[orderCtx]{Group: "order_machine", PartitionBy: []string{"order_id"}, Context: ctx}.Chart(
		statechart.Initial(statechart.CommandFunc(func(_ orderCtx, c placeOrder, do *statechart.Do) error {
			do.Event(orderPlaced{Total: c.Total})
			return nil
		}, placed)),
		statechart.Place(placed,
			statechart.Command[cancelOrder](cancelled),
			statechart.Region("payment",
				statechart.Initial(statechart.CommandFunc(func(o orderCtx, c startPayment, do *statechart.Do) error {
					if o.Total > 0 {
						do.Event(paymentInfoAdded{Card: c.Card})
						do.To(paying)
					} else {
						do.To(rejected)
					}
					return nil
				}, paying, rejected)),
				statechart.Place(paying,
					statechart.Entry(func(o orderCtx, _ statechart.Move) []any { return []any{chargeCard{Card: o.Card}} }),
					statechart.After(time.Hour, expirePayment{}),
					statechart.On[paymentCaptured](paid),
					statechart.Command[expirePayment](cancelled),
				),
				statechart.Place(rejected),
				statechart.Final(paid),
			),
			statechart.Region("shipping",
				statechart.Initial(statechart.CommandFunc(func(o orderCtx, c packItem, do *statechart.Do) error {
					do.Event(itemPacked{SKU: c.SKU})
					do.To(packed)
					return nil
				}, packed, statechart.Stay)),
				statechart.Place(packed, statechart.Command[dispatchShipment](shipped)),
				statechart.Final(shipped),
			),
			statechart.Done(completed),
		),
		statechart.Final(completed),
		statechart.Final(cancelled),
	)
}

// BenchmarkMachineDecide: the OrderMachine deciding a command (the
// shipping region's DispatchShipment) in a configuration with both regions
// active (payment at paying, shipping at packed).
func BenchmarkMachineDecide(b *testing.B) {
	m := benchOrderMachine()
	if err := m.Err(); err != nil {
		b.Fatal(err)
	}
	reg := codec.NewRegistry()
	if err := m.Register(reg); err != nil {
		b.Fatal(err)
	}
	in := m.New(map[string]string{"order_id": "o1"})
	for _, c := range []any{placeOrder{OrderID: "o1", Total: 10}, startPayment{OrderID: "o1", Card: "4242"}, packItem{OrderID: "o1", SKU: "a"}} {
		var err error
		if in, _, err = m.Decide(in, c); err != nil {
			b.Fatal(err)
		}
	}
	if len(in.Paths()) != 3 {
		b.Fatalf("both regions active: %v", in.Paths())
	}
	cmd := core.NewMessage(dispatchShipment{OrderID: "o1"})
	cmd.Type = "orders.dispatch_shipment"
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, d, err := m.Decide(in, cmd)
		if err != nil || len(d.States) != 1 {
			b.Fatal(err)
		}
	}
}

type (
	hpGo     struct{ ID string }
	hpNext   struct{ ID string }
	hpAbort  struct{ ID string }
	hpResume struct{ ID string }
)

// historyParallelMachine: a parallel state with three regions, each of two
// states (the third compound), left for a halt state and resumed through
// its deep history.
func historyParallelMachine() statechart.Machine[struct{}] {
	work, halt := statechart.Named("work"), statechart.Named("halt")
	region := func(name string, compound bool) statechart.Elem {
		one, two := statechart.Named(name+"1"), statechart.Named(name+"2")
		var inner []statechart.Elem
		if compound {
			in1, in2 := statechart.Named(name+"21"), statechart.Named(name+"22")
			inner = []statechart.Elem{statechart.Started(in1, statechart.Command[hpNext](in2)), statechart.Place(in2)}
		}
		return statechart.Region(name,
			statechart.Started(one, statechart.Command[hpNext](two)),
			statechart.Place(two, inner...),
		)
	}
	return statechart.Machine[struct{}]{Group: "history_parallel", PartitionBy: []string{"id"}}.Chart(
		statechart.Initial(statechart.Command[hpGo](work)),
		statechart.Place(work,
			statechart.Command[hpAbort](halt),
			region("a", false), region("b", false), region("c", true),
		),
		statechart.Place(halt, statechart.Command[hpResume](statechart.DeepHistory(work))),
	)
}

// BenchmarkMachineDecideHistoryParallel: a command resuming a parallel
// state of three regions through its deep history (one move re-entering
// five states, the memory recorded when it was left).
func BenchmarkMachineDecideHistoryParallel(b *testing.B) {
	m := historyParallelMachine()
	if err := m.Err(); err != nil {
		b.Fatal(err)
	}
	in := m.New(map[string]string{"id": "1"})
	for _, c := range []any{hpGo{}, hpNext{}, hpNext{}, hpAbort{}} {
		var err error
		if in, _, err = m.Decide(in, c); err != nil {
			b.Fatal(err)
		}
	}
	cmd := core.NewMessage(hpResume{ID: "1"})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		next, d, err := m.Decide(in, cmd)
		if err != nil || len(d.States) != 1 || len(next.Paths()) != 5 {
			b.Fatal(err, next.Paths())
		}
	}
}
