package statechart_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// The manual's LineItemMachine, a child of a shop order.

type LineRef struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
}

type LineStarted struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
	SKU     string `json:"sku"`
}

type LineStop struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
}

type LineFinished struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
	statechart.Finished
}

type StockReserved struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
}

type PickLine struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
}

type ReserveStock struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
}

type (
	AddedEvent struct {
		LineRef
		statechart.Move
	}
	ReservedEvent struct {
		LineRef
		statechart.Move
	}
	PickedEvent struct {
		LineRef
		statechart.Move
	}
	DroppedEvent struct {
		LineRef
		statechart.Move
	}
)

var (
	Added    = statechart.Declare[AddedEvent]("added")
	Reserved = statechart.Declare[ReservedEvent]("reserved")
	Picked   = statechart.Declare[PickedEvent]("picked")
	Dropped  = statechart.Declare[DroppedEvent]("dropped")
)

type line struct{ SKU string }

var lineItems = statechart.Machine[line]{
	Group:       "line_item_machine",
	PartitionBy: []string{"order_id", "line_id"},
	Lifecycle:   statechart.LifecycleOf[LineStarted, LineStop, LineFinished](),
	Context:     core.Projection[line]{}.With(core.Evolve(func(l line, e LineStarted) line { l.SKU = e.SKU; return l })),
}.Chart(
	statechart.Started(Added,
		statechart.Entry(func(line, statechart.Move) []any { return []any{ReserveStock{}} }),
		statechart.Command[StockReserved](Reserved)),
	statechart.Place(Reserved, statechart.Command[PickLine](Picked)),
	statechart.Final(Picked),
	statechart.Stopped(Dropped),
)

// A payment child started by a state.
type PaymentStarted struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
	Amount    int    `json:"amount"`
}

type PaymentStop struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
}

type PaymentFinished struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
	statechart.Finished
}

var (
	authorizing = statechart.Named("authorizing")
	captured    = statechart.Named("captured")
	declined    = statechart.Named("declined")
)

var payments = statechart.Machine[struct{}]{
	Group: "payment_machine", PartitionBy: []string{"order_id", "payment_id"},
	Lifecycle: statechart.LifecycleOf[PaymentStarted, PaymentStop, PaymentFinished](),
}.Chart(
	statechart.Started(authorizing, statechart.Command[X](captured), statechart.Command[Y](declined)),
	statechart.Final(captured),
	statechart.Final(declined),
)

type AddLine struct {
	OrderID string `json:"order_id"`
	LineID  string `json:"line_id"`
	SKU     string `json:"sku"`
}

type AddLines struct {
	OrderID string   `json:"order_id"`
	LineIDs []string `json:"line_ids"`
}

type CancelShop struct {
	OrderID string `json:"order_id"`
}

type Pay struct {
	OrderID string `json:"order_id"`
}

var (
	open          = statechart.Named("open")
	linesDone     = statechart.Named("lines_done")
	shopCancelled = statechart.Named("shop_cancelled")
	awaiting      = statechart.Named("awaiting_payment")
	shopPaid      = statechart.Named("shop_paid")
	payFailed     = statechart.Named("payment_failed")
)

func shop(t *testing.T) statechart.Machine[tctx] {
	lines := lineItems.Child()
	m := statechart.Machine[tctx]{Group: "shop", PartitionBy: []string{"order_id"}}.Chart(
		statechart.Initial(statechart.Command[Go](open)),
		statechart.Place(open,
			statechart.Command[AddLine]().Starts(lines),
			statechart.CommandFunc(func(_ tctx, c AddLines, do *statechart.Do) error {
				for _, id := range c.LineIDs {
					do.Start(LineStarted{LineID: id})
				}
				return nil
			}).MayStart(lines),
			statechart.CommandFunc(func(_ tctx, c X, do *statechart.Do) error { return nil }).Starts(lines),
			statechart.ChildrenDone(lines, linesDone),
			statechart.Command[CancelShop](shopCancelled),
			statechart.Command[Pay](awaiting),
		),
		statechart.Place(awaiting,
			statechart.StartChild(payments.Child(), func(_ tctx, mv statechart.Move) any {
				return PaymentStarted{PaymentID: "p1", Amount: 10}
			},
				statechart.OnDone(captured, shopPaid),
				statechart.OnDone(declined, payFailed)),
			statechart.Command[CancelShop](shopCancelled),
		),
		statechart.Final(linesDone),
		statechart.Final(shopPaid),
		statechart.Final(payFailed),
		statechart.Final(shopCancelled, statechart.Stops(lines)),
	)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChildStartedByAHandlerFromTheCommand(t *testing.T) {
	m := shop(t)
	in, _ := decideAll(t, m, m.New(map[string]string{"order_id": "o1"}), Go{})
	in, d := decideAll(t, m, in, AddLine{OrderID: "o1", LineID: "l1", SKU: "sku-1"})
	if len(d.Messages) != 1 || d.Started[0].Payload != (LineStarted{OrderID: "o1", LineID: "l1", SKU: "sku-1"}) {
		t.Fatalf("%+v", d.Messages)
	}
	refs := in.Children(lineItems.Child())
	if len(refs) != 1 || refs[0].Keys["line_id"] != "l1" || refs[0].Done() {
		t.Fatalf("%+v", refs)
	}
	if _, _, err := m.Decide(in, X{}); !errors.Is(err, statechart.ErrStart) {
		t.Fatalf("Starts without starting one: %v", err)
	}
	if _, d, err := m.Decide(in, AddLines{}); err != nil || len(d.Messages) != 0 {
		t.Fatalf("MayStart allows none: %v", err)
	}
}

func TestChildLifecycle(t *testing.T) {
	keys := map[string]string{"order_id": "o1", "line_id": "l1"}
	child := lineItems.New(keys)
	if len(child.Paths()) != 0 {
		t.Fatal("not started")
	}
	if _, _, err := lineItems.Decide(child, StockReserved{}); !errors.Is(err, statechart.ErrCommandNotHandled) {
		t.Fatalf("a child that is not started accepts nothing: %v", err)
	}
	child, d, err := lineItems.Decide(child, LineStarted{OrderID: "o1", LineID: "l1", SKU: "sku-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := AddedEvent{LineRef{"o1", "l1"}, statechart.Move{Trigger: "start", Source: "", Target: "added", Exited: []string{}, Entered: []string{"added"}}}
	if !reflect.DeepEqual(d.States[0].Payload, want) || d.Dispatched[0].Payload != (ReserveStock{OrderID: "o1", LineID: "l1"}) || child.Context.SKU != "sku-1" {
		t.Fatalf("%+v %+v %+v", d.States[0].Payload, d.Dispatched, child.Context)
	}
	child, d = decideLine(t, child, StockReserved{}, PickLine{})
	if !child.Final() || !slices.Equal(kinds(d.Messages), []string{"PickedEvent", "LineFinished"}) {
		t.Fatalf("%v", kinds(d.Messages))
	}
	if f := d.Events[0].Payload.(LineFinished); f.Final != "picked" || f.LineID != "l1" || f.OrderID != "o1" {
		t.Fatalf("%+v", f)
	}
	// Stop: from any started, non-final position.
	stopped, d := decideLine(t, lineItems.New(keys), LineStarted{OrderID: "o1", LineID: "l1"}, StockReserved{}, LineStop{})
	mv := mustMove(t, d.States[0])
	if mv.Trigger != "stop" || mv.Target != "dropped" || !slices.Equal(mv.Exited, []string{"reserved"}) || !stopped.Final() {
		t.Fatalf("%+v", mv)
	}
	if d.Events[0].Payload.(LineFinished).Final != "dropped" {
		t.Fatal("a stopped child finishes too")
	}
	if _, d, err := lineItems.Decide(stopped, LineStop{}); err != nil || !d.Ignored {
		t.Fatalf("a finished child ignores Stop: %v", err)
	}
}

func decideLine(t *testing.T, in statechart.Instance[line], payloads ...any) (statechart.Instance[line], statechart.Decision) {
	t.Helper()
	var d statechart.Decision
	for _, p := range payloads {
		var err error
		if in, d, err = lineItems.Decide(in, p); err != nil {
			t.Fatal(err)
		}
	}
	return in, d
}

func TestChildrenDoneJoin(t *testing.T) {
	m := shop(t)
	in, _ := decideAll(t, m, m.New(map[string]string{"order_id": "o1"}), Go{}, AddLines{LineIDs: []string{"l1", "l2"}})
	if len(in.Children(statechart.Child{})) != 2 {
		t.Fatal("two lines")
	}
	in, d := decideAll(t, m, in, LineFinished{OrderID: "o1", LineID: "l1", Finished: statechart.Finished{Final: "picked"}})
	if !d.Ignored || !in.In(open) {
		t.Fatalf("one line of two: nothing moves: %+v", d)
	}
	in, d = decideAll(t, m, in, LineFinished{OrderID: "o1", LineID: "l2", Finished: statechart.Finished{Final: "picked"}})
	if mv := moves(d.Messages); len(mv) != 1 || mv[0].Trigger != "children_done line_item_machine" || !in.In(linesDone) {
		t.Fatalf("%+v", mv)
	}
}

func TestStopsSendsStopToRunningChildren(t *testing.T) {
	m := shop(t)
	in, _ := decideAll(t, m, m.New(map[string]string{"order_id": "o1"}), Go{}, AddLines{LineIDs: []string{"l1", "l2"}},
		LineFinished{OrderID: "o1", LineID: "l1", Finished: statechart.Finished{Final: "picked"}})
	_, d := decideAll(t, m, in, CancelShop{})
	if !slices.Equal(kinds(d.Messages), []string{"Move", "LineStop"}) || d.Stopped[0].Payload != (LineStop{OrderID: "o1", LineID: "l2"}) {
		t.Fatalf("%v %+v", kinds(d.Messages), d.Stopped)
	}
}

func TestChildStartedByAState(t *testing.T) {
	m := shop(t)
	in, d := decideAll(t, m, m.New(map[string]string{"order_id": "o1"}), Go{}, Pay{})
	if !slices.Equal(kinds(d.Messages), []string{"Move", "PaymentStarted"}) || d.Started[0].Payload != (PaymentStarted{OrderID: "o1", PaymentID: "p1", Amount: 10}) ||
		d.Started[0].Metadata[statechart.OwnerMetadata] != "awaiting_payment#1" {
		t.Fatalf("%v %+v", kinds(d.Messages), d.Started)
	}
	finished := PaymentFinished{OrderID: "o1", PaymentID: "p1", Finished: statechart.Finished{Final: "declined"}}
	paid, d := decideAll(t, m, in, finished)
	if mv := moves(d.Messages); len(mv) != 1 || mv[0].Trigger != "PaymentFinished" || !paid.In(payFailed) {
		t.Fatalf("on_done maps the child's final: %+v", mv)
	}
	// Leaving the state stops its child.
	_, d = decideAll(t, m, in, CancelShop{})
	if !slices.Equal(kinds(d.Messages), []string{"PaymentStop", "Move"}) || d.Stopped[0].Payload != (PaymentStop{OrderID: "o1", PaymentID: "p1"}) {
		t.Fatalf("%v", kinds(d.Messages))
	}
	// Replayed history knows the children and their owners.
	var log []core.Message
	in2 := m.New(map[string]string{"order_id": "o1"})
	for _, p := range []any{Go{}, Pay{}} {
		var d statechart.Decision
		in2, d = decideAll(t, m, in2, p)
		log = append(log, d.Messages...)
	}
	loaded, err := m.Load(map[string]string{"order_id": "o1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	if refs := loaded.Children(payments.Child()); len(refs) != 1 || refs[0].Owner != "awaiting_payment#1" {
		t.Fatalf("%+v", refs)
	}
	if next, _ := decideAll(t, m, loaded, finished); !next.In(payFailed) {
		t.Fatal("on_done after a reload")
	}
}

func TestRegisterRegistersChildren(t *testing.T) {
	reg := codec.NewRegistry()
	m := shop(t)
	m.Group = "shop"
	if err := lineItems.Register(reg); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"line_item_machine.runtime.added":          reflect.TypeFor[AddedEvent](),
		"line_item_machine.runtime.child.started":  reflect.TypeFor[LineStarted](),
		"line_item_machine.runtime.child.finished": reflect.TypeFor[LineFinished](),
		"line_item_machine.runtime.child.stop":     reflect.TypeFor[LineStop](),
	} {
		if ct, err := reg.ByName(name); err != nil || ct.GoType != typ {
			t.Errorf("%s: %v", name, err)
		}
	}
	spec := m.Spec()
	if !slices.Contains(spec.Handled, reflect.TypeFor[LineFinished]()) || !slices.Contains(spec.Evolved, reflect.TypeFor[LineStarted]()) {
		t.Fatalf("%+v", spec)
	}
	if s := lineItems.Spec(); !slices.Contains(s.Handled, reflect.TypeFor[LineStarted]()) || !slices.Contains(s.Handled, reflect.TypeFor[LineStop]()) {
		t.Fatalf("%+v", s)
	}
	if err := lineItems.Err(); err != nil {
		t.Fatal(err)
	}
}

// Registering a machine registers the children it starts: Reactors lists
// the machine and each child machine once.
func TestReactorsListsChildMachines(t *testing.T) {
	m := shop(t)
	var groups []string
	for _, d := range m.Reactors() {
		groups = append(groups, d.Spec().Group)
	}
	want := []string{m.Spec().Group, "line_item_machine", "payment_machine"}
	if !slices.Equal(groups, want) {
		t.Fatalf("reactors %v, want %v", groups, want)
	}
	if got := lineItems.Reactors(); len(got) != 1 {
		t.Fatalf("a machine without children is its only reactor: %v", got)
	}
}

// The manual's rules for the roles of a child machine, checked when the
// chart is built: "A machine is a child in one role: started by handlers
// (any number of them), or by one state."; for stops, "some handler must
// declare starts: Child"; and children_done, a handler that may declare
// starts: in the manual, has no handler here to start children with.
func TestChildRolesAreCheckedWhenBuilt(t *testing.T) {
	lines := lineItems.Child()
	pay := payments.Child()
	payFn := func(_ tctx, _ statechart.Move) any { return PaymentStarted{PaymentID: "p1"} }
	retrying := statechart.Named("retrying")
	paying, paid, halted := statechart.Named("paying"), statechart.Named("paid"), statechart.Named("halted")
	startsPayment := statechart.NewPart("checkout", statechart.State{},
		statechart.Started(paying, statechart.StartChild(pay, payFn), statechart.Command[Y](paid)),
		statechart.Final(paid),
	)
	startsLine := statechart.NewPart("picking", statechart.State{},
		statechart.Started(statechart.Named("picking_line"), statechart.StartChild(lines, func(_ tctx, _ statechart.Move) any { return LineStarted{LineID: "l1"} })),
	)
	stopsLines := statechart.NewPart("halting", statechart.State{},
		statechart.Initial(statechart.Command[Y](halted)),
		statechart.Final(halted, statechart.Stops(lines)),
	)
	cases := []struct {
		name  string
		elems []statechart.Elem
		want  []string // each in the error; none: the chart is valid
	}{
		// One role: started by handlers, or by one state.
		{"started by a handler and by a state", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](open)),
			statechart.Place(open, statechart.Command[AddLine]().Starts(lines), statechart.Command[Pay](awaiting)),
			statechart.Place(awaiting, statechart.StartChild(lines, func(_ tctx, _ statechart.Move) any { return LineStarted{LineID: "l1"} })),
		}, []string{`child machine "line_item_machine"`, `Command[AddLine] in state "open"`, `state "awaiting_payment"`, "a machine is a child in one role"}},
		{"started by a MayStart handler in an initial position and by a state", []statechart.Elem{
			statechart.Initial(statechart.CommandFunc(func(tctx, Go, *statechart.Do) error { return nil }, awaiting).MayStart(pay)),
			statechart.Place(awaiting, statechart.StartChild(pay, payFn)),
		}, []string{`child machine "payment_machine"`, `Command[Go] in the initial position "initial"`, `state "awaiting_payment"`, "one role"}},
		{"started by two states", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](awaiting)),
			statechart.Place(awaiting, statechart.StartChild(pay, payFn), statechart.Command[Y](retrying)),
			statechart.Place(retrying, statechart.StartChild(pay, payFn)),
		}, []string{`child machine "payment_machine"`, `states "awaiting_payment" and "retrying"`, "by one state"}},
		{"started twice by one state", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](awaiting)),
			statechart.Place(awaiting, statechart.StartChild(pay, payFn), statechart.StartChild(pay, payFn)),
		}, []string{`state "awaiting_payment" starts child machine "payment_machine" twice`, "one child per entry"}},
		{"started by the owner's handler and by a part's state", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](open)),
			statechart.Place(open, statechart.Command[AddLine]().Starts(lines), statechart.Region("pick", statechart.Initial(statechart.Command[Pay](sP))), statechart.RegionPart("picking", startsLine)),
			statechart.Place(sP),
		}, []string{`child machine "line_item_machine"`, `Command[AddLine] in state "open"`, `state "open.picking.picking_line"`, "one role"}},
		{"a part mounted twice is one state", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](sP)),
			statechart.Place(sP, statechart.RegionPart("card", startsPayment), statechart.RegionPart("cash", startsPayment)),
		}, nil},
		{"started by handlers of several states", []statechart.Elem{
			statechart.Initial(statechart.Command[AddLine](open).Starts(lines)),
			statechart.Place(open, statechart.Command[AddLine]().Starts(lines), statechart.Command[Pay](awaiting)),
			statechart.Place(awaiting, statechart.OnFunc(func(_ tctx, _ X, do *statechart.Do) error { return nil }).MayStart(lines, pay)),
		}, nil},

		// stops needs a starts.
		{"stops a child nothing starts", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](open)),
			statechart.Place(open, statechart.Command[CancelShop](shopCancelled)),
			statechart.Final(shopCancelled, statechart.Stops(lines)),
		}, []string{`state "shop_cancelled"`, "Stops(line_item_machine)", "no handler declares Starts or MayStart(line_item_machine)"}},
		{"stops a child a state starts", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](awaiting)),
			statechart.Place(awaiting, statechart.StartChild(pay, payFn), statechart.Command[CancelShop](shopCancelled)),
			statechart.Final(shopCancelled, statechart.Stops(pay)),
		}, []string{`state "shop_cancelled"`, "Stops(payment_machine)", "no handler declares Starts or MayStart(payment_machine)", `started by state "awaiting_payment"`}},
		{"stops a zero child", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](shopCancelled)),
			statechart.Final(shopCancelled, statechart.Stops(statechart.Child{})),
		}, []string{`state "shop_cancelled": Stops needs a child (Machine.Child)`}},
		{"starts a zero child", []statechart.Elem{
			statechart.Initial(statechart.Command[AddLine]().Starts(statechart.Child{})),
		}, []string{`the initial position "initial": Command[AddLine]: Starts and MayStart take children from Machine.Child, not a zero Child`}},
		{"a part stops children its owner's handler starts", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](open)),
			statechart.Place(open, statechart.CommandFunc(func(tctx, AddLines, *statechart.Do) error { return nil }).MayStart(lines), statechart.Region("halt", statechart.Initial(statechart.Command[Pay](sP))), statechart.RegionPart("halting", stopsLines)),
			statechart.Place(sP),
		}, nil},

		// children_done cannot start children.
		{"children_done that starts children", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](open)),
			statechart.Place(open, statechart.Command[AddLine]().Starts(lines), statechart.ChildrenDone(lines, linesDone).Starts(lines)),
			statechart.Final(linesDone),
		}, []string{`state "open"`, "ChildrenDone(line_item_machine) cannot start children (Starts(line_item_machine))", "no handler"}},
		{"children_done that may start children", []statechart.Elem{
			statechart.Initial(statechart.Command[Go](open)),
			statechart.Place(open, statechart.Command[AddLine]().Starts(lines), statechart.ChildrenDone(lines, linesDone).MayStart(pay)),
			statechart.Final(linesDone),
		}, []string{`state "open"`, "ChildrenDone(line_item_machine) cannot start children (MayStart(payment_machine))"}},
	}
	for _, c := range cases {
		m := statechart.Machine[tctx]{Group: "shop", PartitionBy: []string{"order_id"}}.Chart(c.elems...)
		err := m.Err()
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, core.ErrDefinition) {
			t.Errorf("%s: want a definition error, got %v", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q not in %v", c.name, w, err)
			}
		}
		if !strings.Contains(err.Error(), `definition of "shop"`) {
			t.Errorf("%s: the error names the machine: %v", c.name, err)
		}
	}
}

// A parent reads its children's state events as history: each ChildRef
// knows the child's current state (the manual's ChildRef state), and its
// final once the child finished.
func TestChildRefFollowsTheChildsMoves(t *testing.T) {
	m := shop(t)
	var log []core.Message
	in := m.New(map[string]string{"order_id": "o1"})
	for _, p := range []any{Go{}, AddLine{OrderID: "o1", LineID: "l1", SKU: "sku-1"}} {
		var d statechart.Decision
		in, d = decideAll(t, m, in, p)
		log = append(log, d.Messages...)
	}
	if !slices.Contains(m.Spec().Evolved, reflect.TypeFor[ReservedEvent]()) {
		t.Fatalf("the parent reads its children's state events: %v", m.Spec().Evolved)
	}
	child := lineItems.New(map[string]string{"order_id": "o1", "line_id": "l1"})
	check := func(want []string, final string) {
		t.Helper()
		loaded, err := m.Load(map[string]string{"order_id": "o1"}, log)
		if err != nil {
			t.Fatal(err)
		}
		refs := loaded.Children(lineItems.Child())
		if len(refs) != 1 || !slices.Equal(refs[0].Paths, want) || refs[0].Final != final {
			t.Fatalf("%+v, want paths %v final %q", refs, want, final)
		}
	}
	check(nil, "")
	for _, p := range []any{LineStarted{OrderID: "o1", LineID: "l1", SKU: "sku-1"}, StockReserved{}, PickLine{}} {
		var d statechart.Decision
		var err error
		child, d, err = lineItems.Decide(child, p)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, d.Messages...)
		switch p.(type) {
		case LineStarted:
			check([]string{"added"}, "")
		case StockReserved:
			check([]string{"reserved"}, "")
		case PickLine:
			check([]string{"picked"}, "picked")
		}
	}
}
