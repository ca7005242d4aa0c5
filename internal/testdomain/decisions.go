package testdomain

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// The fixtures of decisions across several boundaries (core.Reads): each
// decider's query reads two or more boundaries, and its append is guarded
// by their union.
type (
	// LendBook is "library.lend": lend a book to a member.
	LendBook struct {
		MemberID string `json:"member_id" sourced:"required"`
		BookID   string `json:"book_id" sourced:"required"`
	}
	// BookLent is "library.lent": one event per loan, carrying both
	// boundaries.
	BookLent struct {
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
	// BookReturned is "library.returned".
	BookReturned struct {
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
	// RenameAccount is "accounts.rename": a registration (From empty) or a
	// change of username.
	RenameAccount struct {
		AccountID string `json:"account_id" sourced:"required"`
		From      string `json:"from"`
		To        string `json:"to" sourced:"required"`
	}
	// AccountRegistered is "accounts.registered".
	AccountRegistered struct {
		AccountID string `json:"account_id"`
		Username  string `json:"username"`
	}
	// UsernameChanged is "accounts.username_changed": the value of the
	// username boundary sits under two other attribute names.
	UsernameChanged struct {
		AccountID   string `json:"account_id"`
		OldUsername string `json:"old_username"`
		NewUsername string `json:"new_username"`
	}
	// CreateInvoice is "invoices.create".
	CreateInvoice struct {
		InvoiceID string `json:"invoice_id" sourced:"required"`
	}
	// InvoiceCreated is "invoices.created": numbers are gap-free, a
	// type-only boundary.
	InvoiceCreated struct {
		InvoiceID string `json:"invoice_id"`
		Number    int    `json:"number"`
	}
	// OrderCart is "carts.order": its products are a list, one boundary
	// per element.
	OrderCart struct {
		CartID   string   `json:"cart_id" sourced:"required"`
		Products []string `json:"products"`
		Total    int      `json:"total"`
	}
	// PriceSet is "carts.price_set".
	PriceSet struct {
		ProductID string `json:"product_id"`
		Price     int    `json:"price"`
	}
	// CartOrdered is "carts.ordered".
	CartOrdered struct {
		CartID string `json:"cart_id"`
		Total  int    `json:"total"`
	}
	// OrderLine is a line of an OrderPlaced.
	OrderLine struct {
		ProductID string `json:"product_id"`
		Qty       int    `json:"qty"`
	}
	// OrderPlaced is "orders.placed": its lines carry the product
	// boundary inside a list, indexed as product_id.
	OrderPlaced struct {
		OrderID string      `json:"order_id"`
		Lines   []OrderLine `json:"lines" sourced:"index=product_id"`
	}
)

// Type strings of the decision fixtures.
const (
	TypeLendBook          = "library.lend"
	TypeBookLent          = "library.lent"
	TypeBookReturned      = "library.returned"
	TypeRenameAccount     = "accounts.rename"
	TypeAccountRegistered = "accounts.registered"
	TypeUsernameChanged   = "accounts.username_changed"
	TypeCreateInvoice     = "invoices.create"
	TypeInvoiceCreated    = "invoices.created"
	TypeOrderCart         = "carts.order"
	TypePriceSet          = "carts.price_set"
	TypeCartOrdered       = "carts.ordered"
	TypeOrderPlaced       = "orders.placed"
)

// RegisterDecisions registers the decision fixtures under their Type
// strings.
func RegisterDecisions(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[LendBook](reg, TypeLendBook),
		codec.Register[BookLent](reg, TypeBookLent),
		codec.Register[BookReturned](reg, TypeBookReturned),
		codec.Register[RenameAccount](reg, TypeRenameAccount),
		codec.Register[AccountRegistered](reg, TypeAccountRegistered),
		codec.Register[UsernameChanged](reg, TypeUsernameChanged),
		codec.Register[CreateInvoice](reg, TypeCreateInvoice),
		codec.Register[InvoiceCreated](reg, TypeInvoiceCreated),
		codec.Register[OrderCart](reg, TypeOrderCart),
		codec.Register[PriceSet](reg, TypePriceSet),
		codec.Register[CartOrdered](reg, TypeCartOrdered),
		codec.Register[OrderPlaced](reg, TypeOrderPlaced),
	)
}

// MaxLoans is how many books a member may hold at once.
const MaxLoans = 3

// Lending is the state of a loan decision: the member's loans and whether
// the book is out.
type Lending struct {
	MemberLoans int
	BookOut     bool
}

var (
	// memberLoans counts the loans a member holds.
	memberLoans = core.Projection[int]{}.With(
		core.Evolve(func(n int, _ BookLent) int { return n + 1 }),
		core.Evolve(func(n int, _ BookReturned) int { return n - 1 }),
	)
	// bookOut tells whether a book is lent.
	bookOut = core.Projection[bool]{}.With(
		core.Evolve(func(bool, BookLent) bool { return true }),
		core.Evolve(func(bool, BookReturned) bool { return false }),
	)
)

// ErrTooManyLoans and ErrBookOut are the lending decider's refusals.
var (
	ErrTooManyLoans = errors.New("the member holds the maximum number of loans")
	ErrBookOut      = errors.New("the book is lent")
	ErrNameTaken    = errors.New("the username is taken")
)

// LendingDecider enforces both invariants of lending: a member holds at
// most MaxLoans books, and a book is lent once. Its background work is
// ordered by member; its decisions read both the member and the book.
var LendingDecider = core.Decider[Lending]{Group: "storetest.lending", PartitionBy: []string{"member_id"}}.With(
	core.Reads(func(c LendBook) core.Query[Lending] {
		return core.Query[Lending]{
			core.Read(memberLoans, func(s Lending, n int) Lending { s.MemberLoans = n; return s }, core.Where("member_id", c.MemberID)),
			core.Read(bookOut, func(s Lending, out bool) Lending { s.BookOut = out; return s }, core.Where("book_id", c.BookID)),
		}
	}),
	core.Decide(func(s Lending, c LendBook) ([]any, error) {
		switch {
		case s.BookOut:
			return nil, ErrBookOut
		case s.MemberLoans >= MaxLoans:
			return nil, ErrTooManyLoans
		}
		return []any{BookLent(c)}, nil
	}),
)

// usernameTaken tells whether a username is held, whichever event holds
// it under whichever attribute.
func usernameTaken(name string) core.Part[bool] {
	holds := core.Projection[bool]{}.With(
		core.Evolve(func(_ bool, e AccountRegistered) bool { return true }),
		core.Evolve(func(_ bool, e UsernameChanged) bool { return e.NewUsername == name }),
	)
	return core.Read(holds, func(_ bool, taken bool) bool { return taken },
		core.Only[AccountRegistered](core.Where("username", name)),
		core.Only[UsernameChanged](core.Where("old_username", name)),
		core.Only[UsernameChanged](core.Where("new_username", name)),
	)
}

// UsernameDecider keeps usernames unique across registrations and renames.
var UsernameDecider = core.Decider[bool]{Group: "storetest.usernames", PartitionBy: []string{"account_id"}}.With(
	core.Reads(func(c RenameAccount) core.Query[bool] { return core.Query[bool]{usernameTaken(c.To)} }),
	core.Decide(func(taken bool, c RenameAccount) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("%q: %w", c.To, ErrNameTaken)
		}
		if c.From == "" {
			return []any{AccountRegistered{AccountID: c.AccountID, Username: c.To}}, nil
		}
		return []any{UsernameChanged{AccountID: c.AccountID, OldUsername: c.From, NewUsername: c.To}}, nil
	}),
)

// LastInvoice is the number of the last invoice created.
var LastInvoice = core.Projection[int]{}.With(
	core.Evolve(func(_ int, e InvoiceCreated) int { return e.Number }),
)

// InvoiceDecider numbers invoices without gaps: a type-only boundary.
var InvoiceDecider = core.Decider[int]{Group: "storetest.invoices", PartitionBy: []string{"invoice_id"}}.With(
	core.Reads(func(CreateInvoice) core.Query[int] {
		return core.Query[int]{core.Read(LastInvoice, func(_ int, n int) int { return n }, core.AllEvents())}
	}),
	core.Decide(func(last int, c CreateInvoice) ([]any, error) {
		return []any{InvoiceCreated{InvoiceID: c.InvoiceID, Number: last + 1}}, nil
	}),
)

// ErrPriceChanged is the cart decider's refusal of a stale total.
var ErrPriceChanged = errors.New("a price changed: the total is stale")

var price = core.Projection[int]{}.With(core.Evolve(func(_ int, e PriceSet) int { return e.Price }))

// CartDecider orders a cart at the current price of each of its products:
// one boundary per product of the command.
var CartDecider = core.Decider[map[string]int]{Group: "storetest.carts", PartitionBy: []string{"cart_id"}}.With(
	core.Reads(func(c OrderCart) core.Query[map[string]int] {
		return core.ReadEach(c.Products, price, func(s map[string]int, product string, p int) map[string]int {
			s = maps.Clone(s)
			if s == nil {
				s = map[string]int{}
			}
			s[product] = p
			return s
		}, func(product string) core.Filter { return core.Where("product_id", product) })
	}),
	core.Decide(func(prices map[string]int, c OrderCart) ([]any, error) {
		total := 0
		for _, p := range slices.Compact(slices.Sorted(slices.Values(c.Products))) {
			total += prices[p]
		}
		if total != c.Total {
			return nil, fmt.Errorf("%w: %d, not %d", ErrPriceChanged, total, c.Total)
		}
		return []any{CartOrdered{CartID: c.CartID, Total: total}}, nil
	}),
)
