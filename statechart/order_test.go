package statechart_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/statechart"
)

const orderMermaid = `stateDiagram-v2
  state "placed" as placed {
    state "paying" as placed_payment_paying
    state "rejected" as placed_payment_rejected
    state "paid" as placed_payment_paid
    [*] --> placed_payment_paying : StartPayment
    [*] --> placed_payment_rejected : StartPayment
    placed_payment_paying --> placed_payment_paid : on PaymentCaptured
    placed_payment_paid --> [*]
    --
    state "packed" as placed_shipping_packed
    state "shipped" as placed_shipping_shipped
    [*] --> placed_shipping_packed : PackItem
    placed_shipping_packed --> placed_shipping_shipped : DispatchShipment
    placed_shipping_shipped --> [*]
  }
  state "completed" as completed
  state "cancelled" as cancelled
  [*] --> placed : PlaceOrder
  placed --> cancelled : CancelOrder
  placed --> completed : done
  placed_payment_paying --> cancelled : ExpirePayment
  completed --> [*]
  cancelled --> [*]
`

// fixture is the order machine with its registry, and a clock for the
// messages it decides.
type fixture struct {
	t   *testing.T
	reg *codec.Registry
	m   statechart.Machine[order]
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg := orderRegistry()
	m := orderMachine(reg)
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(reg); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, reg: reg, m: m, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// msg builds a stored-like message: typed, stamped.
func (f *fixture) msg(payload any) core.Message {
	ct, err := f.reg.TypeOf(payload)
	if err != nil {
		f.t.Fatal(err)
	}
	f.now = f.now.Add(time.Minute)
	m := core.NewMessage(payload).Stamp(uuid.New(), f.now)
	m.Type = ct.Name
	return m
}

// decide decides payloads in turn and returns the instance and the last
// decision.
func (f *fixture) decide(in statechart.Instance[order], payloads ...any) (statechart.Instance[order], statechart.Decision) {
	f.t.Helper()
	var d statechart.Decision
	for _, p := range payloads {
		var err error
		m, ok := p.(core.Message)
		if !ok {
			m = f.msg(p)
		}
		in, d, err = f.m.Decide(in, m)
		if err != nil {
			f.t.Fatalf("deciding %T: %v", p, err)
		}
	}
	return in, d
}

func (f *fixture) placed() statechart.Instance[order] {
	in := f.m.New(map[string]string{"order_id": "o1"})
	in, _ = f.decide(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 1})
	return in
}

// kinds lists the messages' Go type names.
func kinds(ms []core.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, reflect.TypeOf(m.Payload).Name())
	}
	return out
}

func mustMove(t *testing.T, m core.Message) statechart.Move {
	t.Helper()
	mv, ok := statechart.MoveOf(m.Payload)
	if !ok {
		t.Fatalf("%T is not a state event", m.Payload)
	}
	return mv
}

func TestOrderMermaidIsTheManuals(t *testing.T) {
	f := newFixture(t)
	if got := f.m.Mermaid(); got != orderMermaid {
		t.Fatalf("got\n%s\nwant\n%s", got, orderMermaid)
	}
}

func TestOrderRegistersStatesUnderTheGroup(t *testing.T) {
	f := newFixture(t)
	ct, err := f.reg.ByGoType(reflect.TypeFor[PayingEvent]())
	if err != nil || ct.Name != "order_machine.runtime.paying" {
		t.Fatalf("%v %v", ct, err)
	}
	if err := f.m.Register(f.reg); err != nil {
		t.Fatalf("registering twice is fine: %v", err)
	}
}

func TestOrderPlaceOrderAppendsDataThenTheMove(t *testing.T) {
	f := newFixture(t)
	in := f.m.New(map[string]string{"order_id": "o1"})
	if len(in.Paths()) != 0 || in.ActiveStates().Value() != "initial" {
		t.Fatalf("a new machine is at its initial position: %v %v", in.Paths(), in.ActiveStates().Value())
	}
	in, d := f.decide(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 1})
	if !slices.Equal(kinds(d.Messages), []string{"OrderPlaced", "PlacedEvent"}) {
		t.Fatalf("%v", kinds(d.Messages))
	}
	if d.Events[0].Payload != (OrderPlaced{OrderID: "o1", Total: 10, Items: 1}) {
		t.Fatalf("the order id is filled in: %+v", d.Events[0].Payload)
	}
	want := PlacedEvent{OrderRef{"o1"}, statechart.Move{Trigger: "orders.place_order", Source: "initial", Target: "placed", Exited: []string{}, Entered: []string{"placed"}}}
	if !reflect.DeepEqual(d.States[0].Payload, want) {
		t.Fatalf("%+v", d.States[0].Payload)
	}
	if in.Context.Total != 10 {
		t.Fatalf("the context evolved the data event: %+v", in.Context)
	}
	wantValue := map[string]any{"placed": map[string]any{"payment": "initial", "shipping": "initial"}}
	if !reflect.DeepEqual(in.ActiveStates().Value(), wantValue) {
		t.Fatalf("%v", in.ActiveStates().Value())
	}
}

// The manual's state event for StartPayment, exactly, as stored JSON.
func TestOrderStartPaymentStateEvent(t *testing.T) {
	f := newFixture(t)
	in := f.placed()
	start := f.msg(StartPayment{OrderID: "o1", Card: "4242"})
	in, d := f.decide(in, start)
	if !slices.Equal(kinds(d.Messages), []string{"PaymentInfoAdded", "PayingEvent", "ChargeCard", "ExpirePayment"}) {
		t.Fatalf("data, state event, entry dispatch, timer: %v", kinds(d.Messages))
	}
	ct, data, err := f.reg.Encode(d.States[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	if ct.Name != "order_machine.runtime.paying" {
		t.Fatal(ct.Name)
	}
	var got, want map[string]any
	_ = json.Unmarshal(data, &got)
	_ = json.Unmarshal([]byte(`{"order_id": "o1", "trigger": "orders.start_payment", "source": "placed.payment.initial",
		"target": "placed.payment.paying", "exited": [], "entered": ["placed.payment.paying"]}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s", data)
	}
	if d.Dispatched[0].Payload != (ChargeCard{OrderID: "o1", Card: "4242"}) {
		t.Fatalf("entry sees the context with the decision's data: %+v", d.Dispatched[0].Payload)
	}
	tm := d.Timers[0]
	if tm.Payload != (ExpirePayment{OrderID: "o1"}) || !tm.CreatedAt.Equal(start.CreatedAt.Add(time.Hour)) ||
		tm.Metadata[statechart.TimerMetadata] != "placed.payment.paying#1" {
		t.Fatalf("timer %+v", tm)
	}
	for _, m := range d.Messages {
		if m.CausationID != start.ID || m.CorrelationID != start.ID {
			t.Fatal("every message is correlated with the decided command")
		}
	}
	if !slices.Equal(in.Paths(), []string{"placed", "placed.payment.paying"}) {
		t.Fatalf("%v", in.Paths())
	}
	wantValue := map[string]any{"placed": map[string]any{"payment": "paying", "shipping": "initial"}}
	if !reflect.DeepEqual(in.ActiveStates().Value(), wantValue) {
		t.Fatalf("%v", in.ActiveStates().Value())
	}
	if !in.In(Paying) || !in.In(Placed) || in.In(Paid) {
		t.Fatal("In")
	}
}

func TestOrderStartPaymentRejectsANullTotal(t *testing.T) {
	f := newFixture(t)
	in := f.m.New(map[string]string{"order_id": "o1"})
	in, _ = f.decide(in, PlaceOrder{OrderID: "o1", Total: 0})
	in, d := f.decide(in, StartPayment{OrderID: "o1", Card: "4242"})
	if !slices.Equal(kinds(d.Messages), []string{"RejectedEvent"}) || !in.In(Rejected) {
		t.Fatalf("%v %v", kinds(d.Messages), in.Paths())
	}
}

func TestOrderAvailableCommandsFromStoredPaths(t *testing.T) {
	f := newFixture(t)
	c, err := f.m.ActiveStates([]string{"placed", "placed.payment.paying"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, t := range c.AvailableCommands() {
		names = append(names, t.Name())
	}
	if !slices.Equal(names, []string{"CancelOrder", "ExpirePayment", "PackItem"}) {
		t.Fatalf("%v", names)
	}
	if len(c.HandledCommands()) != 6 || !c.Accepts(CancelOrder{}) || c.Accepts(DispatchShipment{}) || !c.Accepts(reflect.TypeFor[PackItem]()) {
		t.Fatalf("handled %v", c.HandledCommands())
	}
	if !c.In(Paying) || c.Final() || !slices.Equal(c.Current(), []statechart.State{Paying}) {
		t.Fatal("in / final / current")
	}
	if !c.InPath("placed.payment.paying") || c.InPath("placed.shipping.packed") {
		t.Fatal("InPath")
	}
}

func TestConfigurationErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		paths []string
		want  error
	}{
		{[]string{"placed", "placed.payment.charging"}, statechart.ErrUnresolvablePath},
		{[]string{"placed", "placed.payment.initial"}, statechart.ErrInvalidActiveStates},
		{[]string{"placed.payment.paying"}, statechart.ErrInvalidActiveStates},
		{[]string{"placed", "placed.payment.paying", "placed.payment.paid"}, statechart.ErrInvalidActiveStates},
		{[]string{"completed", "cancelled"}, statechart.ErrInvalidActiveStates},
	}
	for _, c := range cases {
		if _, err := f.m.ActiveStates(c.paths); !errors.Is(err, c.want) {
			t.Errorf("%v: %v, want %v", c.paths, err, c.want)
		}
	}
	var up *statechart.UnresolvablePathError
	if _, err := f.m.ActiveStates([]string{"shipped"}); !errors.As(err, &up) || up.Path != "shipped" {
		t.Fatalf("%v", err)
	}
}

func TestOrderPackItemMayStayPut(t *testing.T) {
	f := newFixture(t)
	in := f.m.New(map[string]string{"order_id": "o1"})
	in, _ = f.decide(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 2})
	in, d := f.decide(in, PackItem{OrderID: "o1", SKU: "a"})
	if !slices.Equal(kinds(d.Messages), []string{"ItemPacked"}) || in.In(Packed) {
		t.Fatalf("first item: data only, %v %v", kinds(d.Messages), in.Paths())
	}
	in, d = f.decide(in, PackItem{OrderID: "o1", SKU: "b"})
	if !slices.Equal(kinds(d.Messages), []string{"ItemPacked", "PackedEvent"}) || !in.In(Packed) {
		t.Fatalf("last item moves: %v %v", kinds(d.Messages), in.Paths())
	}
	if !slices.Equal(in.Context.Packed, []string{"a", "b"}) {
		t.Fatalf("%v", in.Context.Packed)
	}
}

// ExpirePayment targets an ancestor region's state: both regions are exited,
// innermost first, parallel siblings in reverse document order.
func TestOrderExpirePaymentExitsBothRegions(t *testing.T) {
	f := newFixture(t)
	in, _ := f.decide(f.placed(), StartPayment{OrderID: "o1", Card: "4242"}, PackItem{OrderID: "o1", SKU: "a"})
	in, d := f.decide(in, ExpirePayment{OrderID: "o1"})
	mv := mustMove(t, d.States[0])
	want := statechart.Move{Trigger: "orders.expire_payment", Source: "placed.payment.paying", Target: "cancelled",
		Exited: []string{"placed.shipping.packed", "placed.payment.paying", "placed"}, Entered: []string{"cancelled"}}
	if !reflect.DeepEqual(mv, want) || !in.Final() {
		t.Fatalf("%+v", mv)
	}
	if _, _, err := f.m.Decide(in, f.msg(CancelOrder{OrderID: "o1"})); !errors.Is(err, statechart.ErrCommandNotHandled) || !errors.Is(err, core.ErrNotHandled) {
		t.Fatalf("a finished order accepts nothing: %v", err)
	}
}

func TestOrderCancelFromPlaced(t *testing.T) {
	f := newFixture(t)
	in, _ := f.decide(f.placed(), StartPayment{OrderID: "o1", Card: "4242"})
	in, d := f.decide(in, CancelOrder{OrderID: "o1"})
	want := statechart.Move{Trigger: "orders.cancel_order", Source: "placed", Target: "cancelled",
		Exited: []string{"placed.payment.paying", "placed"}, Entered: []string{"cancelled"}}
	if mv := mustMove(t, d.States[0]); !reflect.DeepEqual(mv, want) || !in.In(Cancelled) {
		t.Fatalf("%+v", mv)
	}
	if reflect.TypeOf(d.States[0].Payload) != reflect.TypeFor[CancelledEvent]() {
		t.Fatal("recorded as the target state's event")
	}
}

// The done join moves the machine in the same decision that completes the
// last region.
func TestOrderDoneJoin(t *testing.T) {
	f := newFixture(t)
	in, _ := f.decide(f.placed(), StartPayment{OrderID: "o1", Card: "4242"}, PaymentCaptured{OrderID: "o1"}, PackItem{OrderID: "o1", SKU: "a"})
	if !slices.Equal(in.Paths(), []string{"placed", "placed.payment.paid", "placed.shipping.packed"}) {
		t.Fatalf("%v", in.Paths())
	}
	in, d := f.decide(in, DispatchShipment{OrderID: "o1"})
	if !slices.Equal(kinds(d.Messages), []string{"ShippedEvent", "CompletedEvent"}) {
		t.Fatalf("%v", kinds(d.Messages))
	}
	done := mustMove(t, d.States[1])
	want := statechart.Move{Trigger: "done", Source: "placed", Target: "completed",
		Exited: []string{"placed.shipping.shipped", "placed.payment.paid", "placed"}, Entered: []string{"completed"}}
	if !reflect.DeepEqual(done, want) || !in.Final() || !slices.Equal(in.Paths(), []string{"completed"}) {
		t.Fatalf("%+v %v", done, in.Paths())
	}
}

func TestOrderOnEventOnlyWhileActive(t *testing.T) {
	f := newFixture(t)
	in := f.placed()
	next, d, err := f.m.Decide(in, f.msg(PaymentCaptured{OrderID: "o1"}))
	if err != nil || !d.Ignored || len(d.Messages) != 0 || !slices.Equal(next.Paths(), in.Paths()) {
		t.Fatalf("an event no active state reacts to is ignored: %v %+v", err, d)
	}
	_, d = f.decide(in, StartPayment{OrderID: "o1", Card: "4242"}, PaymentCaptured{OrderID: "o1"})
	if mv := mustMove(t, d.States[0]); mv.Trigger != "payments.payment_captured" || mv.Target != "placed.payment.paid" {
		t.Fatalf("%+v", mv)
	}
}

// A timer from an entry that is over is ignored; the same command sent by
// hand is decided as any command.
func TestOrderExpiryTimer(t *testing.T) {
	f := newFixture(t)
	in, d := f.decide(f.placed(), StartPayment{OrderID: "o1", Card: "4242"})
	timer := d.Timers[0]
	timer.Type = "orders.expire_payment"
	paid, _ := f.decide(in, PaymentCaptured{OrderID: "o1"})
	next, d, err := f.m.Decide(paid, timer)
	if err != nil || !d.Ignored || !slices.Equal(next.Paths(), paid.Paths()) {
		t.Fatalf("the timer fires after paying was left: %v %+v", err, d)
	}
	if _, _, err := f.m.Decide(paid, f.msg(ExpirePayment{OrderID: "o1"})); !errors.Is(err, statechart.ErrCommandNotHandled) {
		t.Fatalf("by hand: %v", err)
	}
	in, d = f.decide(in, timer)
	if !in.In(Cancelled) || mustMove(t, d.States[0]).Trigger != "orders.expire_payment" {
		t.Fatalf("the timer of the current entry fires: %v", in.Paths())
	}
}

func TestOrderRejectionsAndTransitionErrors(t *testing.T) {
	reg := orderRegistry()
	boom := errors.New("card declined")
	m := statechart.Machine[order]{Group: "order_machine", PartitionBy: []string{"order_id"}, Context: orderContext, Registry: reg}.Chart(
		statechart.Initial(statechart.CommandFunc(func(_ order, c PlaceOrder, do *statechart.Do) error {
			switch c.Total {
			case 1:
				return boom
			case 2:
				do.To(Cancelled) // not declared
			case 3:
				do.To(Placed)
				do.To(Placed)
			case 4:
				do.Event(PlacedEvent{})
			}
			return nil
		}, Placed)),
		statechart.Place(Placed),
		statechart.Final(Cancelled),
	)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	in := m.New(map[string]string{"order_id": "o1"})
	if _, _, err := m.Decide(in, PlaceOrder{Total: 1}); err != boom {
		t.Fatalf("a handler's error is returned as is: %v", err)
	}
	for total := 2; total <= 4; total++ {
		next, d, err := m.Decide(in, PlaceOrder{Total: total})
		var te *statechart.TransitionError
		if !errors.As(err, &te) || !errors.Is(err, statechart.ErrTransition) || te.Source != "initial" || te.Trigger != "orders.place_order" {
			t.Fatalf("total %d: %v", total, err)
		}
		if len(d.Messages) != 0 || len(next.Paths()) != 0 {
			t.Fatal("nothing of a failed decision is kept")
		}
	}
	if _, d, err := m.Decide(in, PlaceOrder{Total: 5}); err != nil || len(d.States) != 1 {
		t.Fatalf("single target, no To: moves there: %v", err)
	}
}

// history returns the messages a sequence of decisions appended, as a
// store would return them.
func (f *fixture) run(in statechart.Instance[order], payloads ...any) (statechart.Instance[order], []core.Message) {
	f.t.Helper()
	var all []core.Message
	for _, p := range payloads {
		next, d, err := f.m.Decide(in, f.msg(p))
		if err != nil {
			f.t.Fatal(err)
		}
		in = next
		all = append(all, d.Messages...)
	}
	return in, all
}

func TestOrderLoadReplaysStateEvents(t *testing.T) {
	f := newFixture(t)
	in := f.m.New(map[string]string{"order_id": "o1"})
	live, history := f.run(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 1}, StartPayment{OrderID: "o1", Card: "4242"}, PackItem{OrderID: "o1", SKU: "a"})
	loaded, err := f.m.Load(map[string]string{"order_id": "o1"}, history)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(loaded.Paths(), live.Paths()) || !reflect.DeepEqual(loaded.Context, live.Context) {
		t.Fatalf("%v %+v / %v %+v", loaded.Paths(), loaded.Context, live.Paths(), live.Context)
	}
	// The timer identity survives the reload.
	i := slices.IndexFunc(history, func(m core.Message) bool { return m.Metadata[statechart.TimerMetadata] != nil })
	history[i].Type = "orders.expire_payment"
	_, d, err := f.m.Decide(loaded, history[i])
	if err != nil || d.Ignored || len(d.States) != 1 {
		t.Fatalf("the armed timer of the loaded entry: %v %+v", err, d)
	}
	// A renamed state is an UnresolvablePathError naming the event.
	bad := slices.Clone(history)
	bad[1].Payload = PlacedEvent{OrderRef{"o1"}, statechart.Move{Trigger: "x", Entered: []string{"ordered"}}}
	bad[1].Type = "order_machine.runtime.placed"
	var up *statechart.UnresolvablePathError
	if _, err := f.m.Load(map[string]string{"order_id": "o1"}, bad); !errors.As(err, &up) || up.Path != "ordered" || up.Type != "order_machine.runtime.placed" || up.ID != bad[1].ID {
		t.Fatalf("%v", err)
	}
}

func TestOrderAtDecidesFromStoredPaths(t *testing.T) {
	f := newFixture(t)
	in, err := f.m.At([]string{"placed", "placed.payment.paying"}, order{Total: 10, Items: 1}, map[string]string{"order_id": "o1"})
	if err != nil {
		t.Fatal(err)
	}
	in, d := f.decide(in, CancelOrder{OrderID: "o1"})
	if !slices.Equal(in.Paths(), []string{"cancelled"}) || len(d.States) != 1 {
		t.Fatalf("%v", in.Paths())
	}
	if _, err := f.m.At(nil, order{}, nil); !errors.Is(err, statechart.ErrMissingPartitionKey) {
		t.Fatalf("%v", err)
	}
	if _, err := f.m.At([]string{"nowhere"}, order{}, map[string]string{"order_id": "o1"}); !errors.Is(err, statechart.ErrUnresolvablePath) {
		t.Fatalf("%v", err)
	}
}

func MessagesOf(ms []core.Message, from int64) []core.PositionedMessage {
	out := make([]core.PositionedMessage, len(ms))
	for i, m := range ms {
		out[i] = core.PositionedMessage{Message: m, Position: from + int64(i)}
	}
	return out
}

func TestOrderStepAsADefinition(t *testing.T) {
	f := newFixture(t)
	spec := f.m.Spec()
	if spec.Group != "order_machine" || !spec.History || !slices.Equal(spec.PartitionBy, []string{"order_id"}) {
		t.Fatalf("%+v", spec)
	}
	if !slices.Contains(spec.Handled, reflect.TypeFor[PaymentCaptured]()) || !slices.Contains(spec.Evolved, reflect.TypeFor[PayingEvent]()) || !slices.Contains(spec.Evolved, reflect.TypeFor[ItemPacked]()) {
		t.Fatalf("%+v", spec)
	}
	in := f.m.New(map[string]string{"order_id": "o1"})
	_, history := f.run(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 1})
	hist := MessagesOf(history, 2) // the PlaceOrder command was at 1
	batch := []core.PositionedMessage{
		{Message: f.msg(StartPayment{OrderID: "o1", Card: "4242"}), Position: 4},
		{Message: f.msg(DispatchShipment{OrderID: "o1"}), Position: 5}, // not accepted: acked with no events
		{Message: f.msg(PaymentCaptured{OrderID: "o1"}), Position: 6},
	}
	r, err := effects.FromDefinition(f.reg, f.m)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := effects.Describe(r)
	if !slices.Contains(info.History, "order_machine.runtime.paying") || !slices.Contains(info.Handled, "orders.start_payment") {
		t.Fatalf("%+v", info)
	}
	pairs, err := effects.Step(f.m, effects.Claim{Partition: map[string]string{"order_id": "o1"}, Messages: batch, History: hist})
	if err != nil || len(pairs) != 3 {
		t.Fatalf("%v %d", err, len(pairs))
	}
	msgs := effects.Messages(pairs[:1])
	if !slices.Equal(kinds(msgs), []string{"PaymentInfoAdded", "PayingEvent", "ChargeCard", "ExpirePayment"}) {
		t.Fatalf("%v", kinds(msgs))
	}
	if len(pairs[1].Signals) != 1 {
		t.Fatalf("an unhandled command is only acked: %+v", pairs[1].Signals)
	}
	if msgs := effects.Messages(pairs[2:]); !slices.Equal(kinds(msgs), []string{"PaidEvent"}) {
		t.Fatalf("the batch's earlier decisions are seen by later ones: %v", kinds(msgs))
	}
	// Replaying: acks only.
	pairs, err = effects.Step(f.m, effects.Claim{Partition: map[string]string{"order_id": "o1"}, Messages: batch, History: hist, Replaying: true})
	if err != nil || len(effects.Messages(pairs)) != 0 || len(pairs) != 3 {
		t.Fatalf("replay: %v %v", err, pairs)
	}
	// A history that no longer loads is a BatchError naming the message.
	badHist := slices.Clone(hist)
	badHist[1].Payload = PlacedEvent{OrderRef{"o1"}, statechart.Move{Entered: []string{"ordered"}}}
	_, err = f.m.Step(core.StepInput{Partition: map[string]string{"order_id": "o1"}, Batch: batch, History: badHist})
	var be *core.BatchError
	if !errors.As(err, &be) || be.Message.Position != 4 || !errors.Is(err, statechart.ErrUnresolvablePath) {
		t.Fatalf("%v", err)
	}
}

func TestOrderJSON(t *testing.T) {
	f := newFixture(t)
	data, err := f.m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	placed := doc["states"].(map[string]any)["placed"].(map[string]any)
	if doc["initial"] != "initial" || placed["type"] != "parallel" || fmt.Sprint(placed["onDone"]) != "[map[target:[#completed]]]" {
		t.Fatalf("%s", data)
	}
	paying := placed["states"].(map[string]any)["payment"].(map[string]any)["states"].(map[string]any)["paying"].(map[string]any)
	if fmt.Sprint(paying["after"]) != "map[3600000:map[actions:[map[command:orders.expire_payment type:dispatch]]]]" ||
		fmt.Sprint(paying["on"]) != "map[orders.expire_payment:[map[kind:command target:[#cancelled]]] payments.payment_captured:[map[kind:event target:[#placed.payment.paid]]]]" {
		t.Fatalf("%v", paying)
	}
	in, _ := f.decide(f.placed(), StartPayment{OrderID: "o1", Card: "4242"})
	data, err = in.JSON(f.m)
	if err != nil {
		t.Fatal(err)
	}
	doc = map[string]any{}
	_ = json.Unmarshal(data, &doc)
	placed = doc["states"].(map[string]any)["placed"].(map[string]any)
	if doc["status"] != "active" || fmt.Sprint(doc["paths"]) != "[placed placed.payment.paying]" || placed["active"] != true ||
		fmt.Sprint(doc["value"]) != "map[placed:map[payment:paying shipping:initial]]" {
		t.Fatalf("%s", data)
	}
}
