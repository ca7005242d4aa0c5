package storetest

import (
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// invoice is "invoice.issued": a civil date and exact decimals, registered
// only by the tests that need it (see envWith).
type invoice struct {
	Invoice string          `json:"invoice"`
	Due     codec.Date      `json:"due"`
	Amount  codec.Decimal   `json:"amount"`
	Lines   []codec.Decimal `json:"lines"`
}

// typeInvoice is the type string of Invoice.
const typeInvoice = "invoice.issued"

func withInvoice(reg *codec.Registry) error { return codec.Register[invoice](reg, typeInvoice) }

// testValueTypes checks that codec.Date and codec.Decimal values come back
// exactly (the decimal's scale included) and are indexed under their text.
func (s suite) testValueTypes(t *testing.T) {
	e := s.envWith(t, withInvoice)
	due := codec.Date{Year: 2026, Month: time.January, Day: 2}
	a := invoice{Invoice: "i-1", Due: due, Amount: codec.MustDecimal("19.90"), Lines: []codec.Decimal{codec.MustDecimal("0.1"), codec.MustDecimal("19.80")}}
	b := invoice{Invoice: "i-2", Due: due.AddDays(1), Amount: codec.MustDecimal("19.9"), Lines: []codec.Decimal{codec.MustDecimal("-0.000000000000000001")}}
	res := e.append(a, b)
	got := e.log()
	if len(got) != 2 || !equalPayload(got[0].Payload, a) || !equalPayload(got[1].Payload, b) {
		t.Fatalf("read back %s, want %+v and %+v", describe(got), a, b)
	}
	e.sameMessages("log", got, []core.PositionedMessage{{Message: res.Messages[0], Position: 1}, {Message: res.Messages[1], Position: 2}})
	byKey := func(attr string, v any, want ...int64) {
		t.Helper()
		r := e.read([]core.Condition{cond(typeInvoice, attr, e.canonical(v))}, driver.ReadOptions{})
		e.expectPositions(attr+" = "+e.canonical(v), r.Messages, want...)
	}
	byKey("due", due, 1)
	byKey("due", "2026-01-03", 2)
	byKey("amount", codec.MustDecimal("19.90"), 1) // the scale is part of the key
	byKey("amount", codec.MustDecimal("19.9"), 2)
	byKey("lines", codec.MustDecimal("19.80"), 1)
	byKey("lines", codec.MustDecimal("-0.000000000000000001"), 2)
	p := e.readPartition(part("due", e.canonical(due)), []string{typeInvoice}, driver.ReadOptions{})
	e.expectPositions("due partition", p.Messages, 1)
}
