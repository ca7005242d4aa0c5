package statechart_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/statechart"
)

// The manual's OrderMachine with its LineItemMachine children (shop):
// every transition that starts children says so, data-only handlers that
// start children and the children a state stops are notes.
const shopMermaid = `stateDiagram-v2
  [*] --> open : Go
  note right of open : AddLine / starts line_item_machine
  note right of open : AddLines / starts line_item_machine
  note right of open : X / starts line_item_machine
  open --> lines_done : children_done line_item_machine
  open --> shop_cancelled : CancelShop
  open --> awaiting_payment : Pay
  awaiting_payment --> shop_paid : on_done captured
  awaiting_payment --> payment_failed : on_done declined
  awaiting_payment --> shop_cancelled : CancelShop
  note right of shop_cancelled : stops line_item_machine
  lines_done --> [*]
  shop_paid --> [*]
  payment_failed --> [*]
  shop_cancelled --> [*]
`

const shopJSON = `{"id":"shop","initial":"initial","states":{"initial":{"id":"initial","type":"atomic","on":{"Go":[{"target":["#open"],"kind":"command"}]}},"open":{"id":"open","type":"atomic","on":{"AddLine":[{"target":null,"kind":"command","starts":["line_item_machine"]}],"AddLines":[{"target":null,"kind":"command","starts":["line_item_machine"],"starts_optional":true}],"X":[{"target":null,"kind":"command","starts":["line_item_machine"]}],"CancelShop":[{"target":["#shop_cancelled"],"kind":"command"}],"Pay":[{"target":["#awaiting_payment"],"kind":"command"}]},"children_done":[{"child":"line_item_machine","target":["#lines_done"]}]},"awaiting_payment":{"id":"awaiting_payment","type":"atomic","on":{"CancelShop":[{"target":["#shop_cancelled"],"kind":"command"}]},"invoke":[{"id":"payment_machine","src":"payment_machine","onDone":[{"final":"captured","target":["#shop_paid"]},{"final":"declined","target":["#payment_failed"]}]}]},"lines_done":{"id":"lines_done","type":"final"},"shop_paid":{"id":"shop_paid","type":"final"},"payment_failed":{"id":"payment_failed","type":"final"},"shop_cancelled":{"id":"shop_cancelled","type":"final","stops":["line_item_machine"]}},"children":[{"id":"line_item_machine","kind":"spawn"},{"id":"payment_machine","kind":"invoke"}]}`

func TestShopMermaidAndJSON(t *testing.T) {
	m := shop(t)
	if got := m.Mermaid(); got != shopMermaid {
		t.Errorf("got\n%s\nwant\n%s", got, shopMermaid)
	}
	data, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != shopJSON {
		t.Errorf("got\n%s\nwant\n%s", data, shopJSON)
	}
}

// Predicate labels on always, done and guarded handlers; "/ starts" on a
// handler with a target; history pseudo-states and a StartsAt edge.
func TestMermaidGuardsStartsAndHistory(t *testing.T) {
	due := statechart.If(func(c tctx) bool { return c.Flag }).Named("payment_due")
	m := tm(t,
		statechart.Initial(statechart.Command[Go](kS)),
		statechart.Place(kS,
			statechart.StartsAt(statechart.DeepHistory(kS, kS22)),
			statechart.Command[X](kO).When(due),
			statechart.Command[X](kO).Starts(lineItems.Child()),
			statechart.Place(kS1, statechart.Always(kS2, statechart.In(kS1).Named("ready"))),
			statechart.Place(kS2, statechart.Started(kS21), statechart.Final(kS22), statechart.Done(kS1, due)),
		),
		statechart.Place(kO, statechart.Command[Back](statechart.History(kS))),
	)
	got := m.Mermaid()
	for _, want := range []string{
		"    [*] --> ks_history_deep\n",
		"  ks --> ko : X [payment_due]\n",
		"  ks --> ko : X / starts line_item_machine\n",
		"    ks_ks1 --> ks_ks2 : always [ready]\n",
		"    ks_ks2 --> ks_ks1 : done [payment_due]\n",
		"    state \"(H)\" as ks_history\n    state \"(H*)\" as ks_history_deep\n  }\n",
		"  ko --> ks_history : Back\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "[*] --> ks_ks1") {
		t.Errorf("a state with StartsAt draws its own start only:\n%s", got)
	}
	data, _ := m.JSON()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	ks := doc["states"].(map[string]any)["ks"].(map[string]any)
	if fmt.Sprint(ks["initial"]) != "[#ks.deep_history]" || fmt.Sprint(ks["on"]) != "map[X:[map[guard:payment_due kind:command target:[#ko]] map[kind:command starts:[line_item_machine] target:[#ko]]]]" {
		t.Fatalf("%s", data)
	}
}

// An instance's JSON fills every status: regions {active, current, done},
// states {active, visited, entered_by}, the root's value, children's
// instances {keys, state, final}.
func TestInstanceJSONStatus(t *testing.T) {
	f := newFixture(t)
	in := f.m.New(map[string]string{"order_id": "o1"})
	_, history := f.run(in, PlaceOrder{OrderID: "o1", Total: 10, Items: 1}, StartPayment{OrderID: "o1", Card: "4242"})
	stored := f.stamp(history)
	loaded, err := f.m.Load(map[string]string{"order_id": "o1"}, stored)
	if err != nil {
		t.Fatal(err)
	}
	data, err := loaded.JSON(f.m)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	placed := doc["states"].(map[string]any)["placed"].(map[string]any)
	regions := placed["states"].(map[string]any)
	payment, shipping := regions["payment"].(map[string]any), regions["shipping"].(map[string]any)
	if payment["active"] != true || payment["current"] != "paying" || payment["done"] != false || shipping["current"] != "initial" {
		t.Fatalf("regions: %v / %v", payment, shipping)
	}
	var payingID string
	for _, m := range stored {
		if m.Type == "order_machine.runtime.paying" {
			payingID = m.ID.String()
		}
	}
	paying := payment["states"].(map[string]any)["paying"].(map[string]any)
	by := paying["entered_by"].(map[string]any)
	if paying["active"] != true || paying["visited"] != true || by["type"] != "order_machine.runtime.paying" || by["id"] != payingID {
		t.Fatalf("paying: %v", paying)
	}
	paid := payment["states"].(map[string]any)["paid"].(map[string]any)
	if paid["active"] != false || paid["visited"] != false || paid["entered_by"] != nil {
		t.Fatalf("paid: %v", paid)
	}
	if fmt.Sprint(doc["value"]) != "map[placed:map[payment:paying shipping:initial]]" {
		t.Fatalf("value %v", doc["value"])
	}

	// Children's instances.
	m := shop(t)
	var log []core.Message
	sh := m.New(map[string]string{"order_id": "o1"})
	for _, p := range []any{Go{}, AddLine{OrderID: "o1", LineID: "l1", SKU: "sku-1"}} {
		var d statechart.Decision
		sh, d = decideAll(t, m, sh, p)
		log = append(log, d.Messages...)
	}
	child := lineItems.New(map[string]string{"order_id": "o1", "line_id": "l1"})
	for _, p := range []any{LineStarted{OrderID: "o1", LineID: "l1"}, StockReserved{}} {
		var d statechart.Decision
		child, d, err = lineItems.Decide(child, p)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, d.Messages...)
	}
	sh, err = m.Load(map[string]string{"order_id": "o1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = sh.JSON(m)
	doc = map[string]any{}
	_ = json.Unmarshal(data, &doc)
	if fmt.Sprint(doc["children"]) != "[map[id:line_item_machine instances:[map[final: keys:map[line_id:l1 order_id:o1] state:reserved]] kind:spawn] map[id:payment_machine instances:[] kind:invoke]]" {
		t.Fatalf("children: %v", doc["children"])
	}
}
