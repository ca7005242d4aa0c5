package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// testDecideAcross holds the store to decisions across several boundaries
// (core.Reads): shell.Handle and shell.LoadDecision read the union of a
// command's query in one read, each part folds only what its own filters
// match, and the guard covers exactly that union after the last position
// read.
func (s suite) testDecideAcross(t *testing.T) {
	t.Run("both invariants of lending", func(t *testing.T) {
		e := s.env(t)
		for _, b := range []string{"b1", "b2", "b3"} {
			handleAny(e, testdomain.LendingDecider, testdomain.LendBook{MemberID: "m1", BookID: b})
		}
		refusedAny(e, testdomain.LendingDecider, testdomain.LendBook{MemberID: "m1", BookID: "b4"}, testdomain.ErrTooManyLoans)
		refusedAny(e, testdomain.LendingDecider, testdomain.LendBook{MemberID: "m2", BookID: "b1"}, testdomain.ErrBookOut)
		e.append(testdomain.BookReturned{MemberID: "m1", BookID: "b1"})
		res := handleAny(e, testdomain.LendingDecider, testdomain.LendBook{MemberID: "m2", BookID: "b1"})
		if res.State != (testdomain.Lending{MemberLoans: 1, BookOut: true}) {
			t.Fatalf("state after the loan: %+v", res.State)
		}
		want := []core.Condition{
			cond(testdomain.TypeBookLent, "member_id", "m2"), cond(testdomain.TypeBookReturned, "member_id", "m2"),
			cond(testdomain.TypeBookLent, "book_id", "b1"), cond(testdomain.TypeBookReturned, "book_id", "b1"),
		}
		if !sameConds(res.Guard.Conditions, want) || res.Guard.LastPosition != res.Position-1 {
			t.Fatalf("guard %v after %d, want %v after the last position read (%d)", sortedConds(res.Guard.Conditions), res.Guard.LastPosition, sortedConds(want), res.Position-1)
		}
		handleAny(e, testdomain.LendingDecider, testdomain.LendBook{MemberID: "m1", BookID: "b4"}) // m1 holds 2 now
	})

	t.Run("a username under other attribute names", func(t *testing.T) {
		e := s.env(t)
		handleAny(e, testdomain.UsernameDecider, testdomain.RenameAccount{AccountID: "a1", To: "al"})
		refusedAny(e, testdomain.UsernameDecider, testdomain.RenameAccount{AccountID: "a2", To: "al"}, testdomain.ErrNameTaken)
		handleAny(e, testdomain.UsernameDecider, testdomain.RenameAccount{AccountID: "a1", From: "al", To: "ally"})
		refusedAny(e, testdomain.UsernameDecider, testdomain.RenameAccount{AccountID: "a2", To: "ally"}, testdomain.ErrNameTaken)
		handleAny(e, testdomain.UsernameDecider, testdomain.RenameAccount{AccountID: "a2", To: "al"}) // released by the rename
		refusedAny(e, testdomain.UsernameDecider, testdomain.RenameAccount{AccountID: "a3", From: "x", To: "al"}, testdomain.ErrNameTaken)
	})

	t.Run("a type-only boundary numbers without gaps", func(t *testing.T) {
		e := s.env(t)
		e.append(testdomain.PriceSet{ProductID: "p1", Price: 1}) // another type: outside the boundary
		for i := 1; i <= 3; i++ {
			res := handleAny(e, testdomain.InvoiceDecider, testdomain.CreateInvoice{InvoiceID: fmt.Sprint("i", i)})
			if ev := res.Events[0].Payload.(testdomain.InvoiceCreated); ev.Number != i {
				t.Fatalf("invoice %d numbered %d", i, ev.Number)
			}
		}
	})

	t.Run("one boundary per element of a list", func(t *testing.T) {
		e := s.env(t)
		e.append(testdomain.PriceSet{ProductID: "p1", Price: 5}, testdomain.PriceSet{ProductID: "p2", Price: 7}, testdomain.PriceSet{ProductID: "p3", Price: 100}, testdomain.PriceSet{ProductID: "p1", Price: 6})
		refusedAny(e, testdomain.CartDecider, testdomain.OrderCart{CartID: "c1", Products: []string{"p1", "p2"}, Total: 12}, testdomain.ErrPriceChanged)
		res := handleAny(e, testdomain.CartDecider, testdomain.OrderCart{CartID: "c1", Products: []string{"p1", "p2"}, Total: 13})
		if len(res.Guard.Conditions) != 2 {
			t.Fatalf("guard %v: want one condition per product", res.Guard.Conditions)
		}
		many := make([]string, 40)
		total := 0
		for i := range many {
			many[i] = fmt.Sprint("q", i)
			e.append(testdomain.PriceSet{ProductID: many[i], Price: i})
			total += i
		}
		res = handleAny(e, testdomain.CartDecider, testdomain.OrderCart{CartID: "c2", Products: many, Total: total})
		if len(res.Guard.Conditions) != len(many) {
			t.Fatalf("guard has %d conditions, want %d", len(res.Guard.Conditions), len(many))
		}
	})

	// Each pair of commands reads both boundaries and each alone would be
	// accepted: guarded by their queries, at most one of them is.
	skews := []struct {
		name string
		d    func(e *env, cmd any) core.Guard
		a, b any
		ev   func(cmd any) any
		pre  []any
	}{
		{"two loans of one book", loadLending, testdomain.LendBook{MemberID: "m1", BookID: "b1"}, testdomain.LendBook{MemberID: "m2", BookID: "b1"}, lent, nil},
		{"a member's last two loans", loadLending, testdomain.LendBook{MemberID: "m1", BookID: "b1"}, testdomain.LendBook{MemberID: "m1", BookID: "b2"}, lent, []any{testdomain.BookLent{MemberID: "m1", BookID: "b8"}, testdomain.BookLent{MemberID: "m1", BookID: "b9"}}},
		{"one username twice", loadUsername, testdomain.RenameAccount{AccountID: "a1", To: "al"}, testdomain.RenameAccount{AccountID: "a2", From: "bo", To: "al"}, renamed, []any{testdomain.AccountRegistered{AccountID: "a2", Username: "bo"}}},
		{"two invoices", loadInvoice, testdomain.CreateInvoice{InvoiceID: "i1"}, testdomain.CreateInvoice{InvoiceID: "i2"}, invoiced, nil},
	}
	rounds := 4
	if testing.Short() {
		rounds = 1
	}
	for _, p := range skews {
		t.Run("write skew: "+p.name, func(t *testing.T) {
			for round := range rounds {
				e := s.env(t)
				e.append(p.pre...)
				cmds := []any{p.a, p.b}
				ok, conflicts := e.race(2, func(i int) core.Guard { return p.d(e, cmds[i]) }, func(i int) any { return p.ev(cmds[i]) })
				if ok != 1 || conflicts != 1 {
					t.Fatalf("round %d: %d appends succeeded and %d conflicted, want 1 and 1", round, ok, conflicts)
				}
			}
		})
	}

	t.Run("concurrent Handle keeps both invariants", func(t *testing.T) {
		e := s.env(t)
		e.append(testdomain.BookLent{MemberID: "m0", BookID: "b0"}, testdomain.BookLent{MemberID: "m0", BookID: "b00"})
		var wg sync.WaitGroup
		errs := make([]error, 6)
		cmds := []any{testdomain.LendBook{MemberID: "m1", BookID: "b1"}, testdomain.LendBook{MemberID: "m2", BookID: "b1"}, testdomain.LendBook{MemberID: "m3", BookID: "b1"}, testdomain.LendBook{MemberID: "m0", BookID: "b2"}, testdomain.LendBook{MemberID: "m0", BookID: "b3"}, testdomain.LendBook{MemberID: "m0", BookID: "b4"}}
		for i, c := range cmds {
			wg.Go(func() { _, errs[i] = shell.Handle(e.ctx, e.store, testdomain.LendingDecider, c, nil) })
		}
		wg.Wait()
		var bookOK, memberOK int
		for i, err := range errs {
			switch {
			case err == nil && i < 3:
				bookOK++
			case err == nil:
				memberOK++
			case errors.Is(err, testdomain.ErrBookOut) && i < 3, errors.Is(err, testdomain.ErrTooManyLoans) && i >= 3:
			default:
				t.Fatalf("command %d: %v", i, err)
			}
		}
		if bookOK != 1 || memberOK != 1 {
			t.Fatalf("%d loans of the one book and %d of the member with 2 loans, want 1 and 1", bookOK, memberOK)
		}
	})

	t.Run("an event outside every boundary never conflicts", func(t *testing.T) {
		e := s.env(t)
		g := loadLending(e, testdomain.LendBook{MemberID: "m1", BookID: "b1"})
		e.append(testdomain.BookLent{MemberID: "m2", BookID: "b2"}, testdomain.BookReturned{MemberID: "m3", BookID: "b3"}, testdomain.AccountRegistered{AccountID: "m1", Username: "b1"}, testdomain.InvoiceCreated{InvoiceID: "b1", Number: 1})
		if _, err := e.appendGuarded(g, testdomain.BookLent{MemberID: "m1", BookID: "b1"}); err != nil {
			t.Fatalf("guarded append after unrelated events: %v", err)
		}
		e.conflict(e.mustFail(e.appendGuarded(g, testdomain.BookLent{MemberID: "m1", BookID: "b1"})), 5)
	})

	t.Run("the union guard", func(t *testing.T) {
		// Conditions with different attribute sets, a type-only condition
		// and many items: each matching append conflicts, others do not.
		union := []core.Condition{
			cond(testdomain.TypeBookLent, "member_id", "m1"),
			cond(testdomain.TypeBookLent, "book_id", "b1", "member_id", "m2"),
			cond(testdomain.TypeInvoiceCreated),
		}
		for i := range 30 {
			union = append(union, cond(testdomain.TypePriceSet, "product_id", fmt.Sprint("p", i)))
		}
		matching := []any{testdomain.BookLent{MemberID: "m1", BookID: "x"}, testdomain.BookLent{MemberID: "m2", BookID: "b1"}, testdomain.InvoiceCreated{InvoiceID: "any", Number: 9}, testdomain.PriceSet{ProductID: "p0", Price: 1}, testdomain.PriceSet{ProductID: "p29", Price: 1}}
		others := []any{testdomain.BookLent{MemberID: "m2", BookID: "b2"}, testdomain.BookLent{MemberID: "m3", BookID: "b1"}, testdomain.BookReturned{MemberID: "m1", BookID: "b1"}, testdomain.PriceSet{ProductID: "p30", Price: 1}, testdomain.CreateInvoice{InvoiceID: "i"}}
		e := s.env(t)
		res := e.read(union, driver.ReadOptions{})
		e.append(others...)
		if _, err := e.appendGuarded(res.Guard, testdomain.CartOrdered{CartID: "c", Total: 1}); err != nil {
			t.Fatalf("append after messages outside the union: %v", err)
		}
		for _, m := range matching {
			e := s.env(t)
			res := e.read(union, driver.ReadOptions{})
			r := e.append(m)
			e.conflict(e.mustFail(e.appendGuarded(res.Guard, testdomain.CartOrdered{CartID: "c", Total: 1})), r.Last)
		}
	})

	t.Run("a boundary carried inside a list", func(t *testing.T) {
		e := s.env(t)
		e.append(testdomain.OrderPlaced{OrderID: "o1", Lines: []testdomain.OrderLine{{ProductID: "p1", Qty: 1}, {ProductID: "p2", Qty: 2}}}, testdomain.OrderPlaced{OrderID: "o2", Lines: []testdomain.OrderLine{{ProductID: "p3", Qty: 1}}}, testdomain.OrderPlaced{OrderID: "o3", Lines: nil})
		res := e.read([]core.Condition{cond(testdomain.TypeOrderPlaced, "product_id", "p2")}, driver.ReadOptions{})
		e.expectPositions("orders of p2", res.Messages, 1)
		e.expectPositions("orders of p1 or p3", e.read([]core.Condition{cond(testdomain.TypeOrderPlaced, "product_id", "p1"), cond(testdomain.TypeOrderPlaced, "product_id", "p3")}, driver.ReadOptions{}).Messages, 1, 2)
		e.append(testdomain.OrderPlaced{OrderID: "o4", Lines: []testdomain.OrderLine{{ProductID: "p9", Qty: 1}}})
		if _, err := e.appendGuarded(res.Guard, testdomain.CartOrdered{CartID: "c", Total: 1}); err != nil {
			t.Fatalf("an order of another product conflicted: %v", err)
		}
		r := e.append(testdomain.OrderPlaced{OrderID: "o5", Lines: []testdomain.OrderLine{{ProductID: "p9", Qty: 1}, {ProductID: "p2", Qty: 1}}})
		e.conflict(e.mustFail(e.appendGuarded(res.Guard, testdomain.CartOrdered{CartID: "c", Total: 1})), r.Last)
	})

	t.Run("a query naming an attribute no event type has is refused", func(t *testing.T) {
		e := s.env(t)
		bad := core.Decider[int]{Group: "storetest.bad_query", PartitionBy: []string{"invoice_id"}}.With(
			core.Reads(func(c testdomain.CreateInvoice) core.Query[int] {
				return core.Query[int]{core.Read(testdomain.LastInvoice, func(_ int, n int) int { return n }, core.Where("colour", c.InvoiceID))}
			}),
			core.Decide(func(int, testdomain.CreateInvoice) ([]any, error) { return nil, nil }),
		)
		e.notes.take()
		before := e.snapshot()
		if _, err := shell.Handle(e.ctx, e.store, bad, testdomain.CreateInvoice{InvoiceID: "i1"}, nil); !errors.Is(err, core.ErrDefinition) {
			t.Fatalf("Handle with a bad query: %v, want ErrDefinition", err)
		}
		e.unchanged(before)
	})
}

func handleAny[S any](e *env, d core.Decider[S], cmd any) shell.HandleResult[S] {
	e.t.Helper()
	res, err := shell.Handle(e.ctx, e.store, d, cmd, nil)
	if err != nil {
		e.t.Fatalf("Handle %T%+v: %v", cmd, cmd, err)
	}
	return res
}

func refusedAny[S any](e *env, d core.Decider[S], cmd any, want error) {
	e.t.Helper()
	e.notes.take()
	before := e.snapshot()
	if _, err := shell.Handle(e.ctx, e.store, d, cmd, nil); !errors.Is(err, want) {
		e.t.Fatalf("Handle %T%+v: %v, want %v", cmd, cmd, err, want)
	}
	e.unchanged(before)
}

func loadAny[S any](e *env, d core.Decider[S], cmd any) core.Guard {
	e.t.Helper()
	_, g, err := shell.LoadDecision(e.ctx, e.store, d, cmd, nil)
	if err != nil {
		e.t.Fatalf("LoadDecision %T%+v: %v", cmd, cmd, err)
	}
	return g
}

func loadLending(e *env, cmd any) core.Guard  { return loadAny(e, testdomain.LendingDecider, cmd) }
func loadUsername(e *env, cmd any) core.Guard { return loadAny(e, testdomain.UsernameDecider, cmd) }
func loadInvoice(e *env, cmd any) core.Guard  { return loadAny(e, testdomain.InvoiceDecider, cmd) }

func lent(cmd any) any { return testdomain.BookLent(cmd.(testdomain.LendBook)) }
func renamed(cmd any) any {
	c := cmd.(testdomain.RenameAccount)
	if c.From == "" {
		return testdomain.AccountRegistered{AccountID: c.AccountID, Username: c.To}
	}
	return testdomain.UsernameChanged{AccountID: c.AccountID, OldUsername: c.From, NewUsername: c.To}
}
func invoiced(cmd any) any {
	return testdomain.InvoiceCreated{InvoiceID: cmd.(testdomain.CreateInvoice).InvoiceID, Number: 1}
}
