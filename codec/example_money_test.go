package codec_test

import (
	"fmt"

	"github.com/sourced-go/sourced/codec"
)

// InvoiceIssued keeps its due date as a civil date and its amount as an
// exact decimal.
type InvoiceIssued struct {
	Invoice string        `json:"invoice"`
	Due     codec.Date    `json:"due"`
	Amount  codec.Decimal `json:"amount"`
}

// Dates and decimals are stored, and indexed, as their text.
func ExampleDecimal() {
	reg := codec.NewRegistry()
	codec.MustRegister[InvoiceIssued](reg, "invoices.issued")

	due, _ := codec.ParseDate("2026-01-02")
	price := codec.MustDecimal("19.99")
	total, _ := price.Mul(codec.MustDecimal("3"))
	vat, _ := total.Mul(codec.MustDecimal("0.2"))
	_, data, _ := reg.Encode(InvoiceIssued{Invoice: "i-1", Due: due, Amount: total})
	keys, _ := reg.Keys(InvoiceIssued{Invoice: "i-1", Due: due, Amount: total}, nil)

	fmt.Println(string(data))
	fmt.Println(keys)
	fmt.Println(vat, vat.Round(2), due.AddDays(30))
	// Output:
	// {"invoice":"i-1","due":"2026-01-02","amount":"59.97"}
	// [amount=59.97 due=2026-01-02 invoice=i-1]
	// 11.994 11.99 2026-02-01
}
