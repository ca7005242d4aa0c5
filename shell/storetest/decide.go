package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
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
			handleAny(e, LendingDecider, LendBook{"m1", b})
		}
		refusedAny(e, LendingDecider, LendBook{"m1", "b4"}, ErrTooManyLoans)
		refusedAny(e, LendingDecider, LendBook{"m2", "b1"}, ErrBookOut)
		e.append(BookReturned{"m1", "b1"})
		res := handleAny(e, LendingDecider, LendBook{"m2", "b1"})
		if res.State != (Lending{MemberLoans: 1, BookOut: true}) {
			t.Fatalf("state after the loan: %+v", res.State)
		}
		want := []core.Condition{
			cond(TypeBookLent, "member_id", "m2"), cond(TypeBookReturned, "member_id", "m2"),
			cond(TypeBookLent, "book_id", "b1"), cond(TypeBookReturned, "book_id", "b1"),
		}
		if !sameConds(res.Guard.Conditions, want) || res.Guard.LastPosition != res.Position-1 {
			t.Fatalf("guard %v after %d, want %v after the last position read (%d)", sortedConds(res.Guard.Conditions), res.Guard.LastPosition, sortedConds(want), res.Position-1)
		}
		handleAny(e, LendingDecider, LendBook{"m1", "b4"}) // m1 holds 2 now
	})

	t.Run("a username under other attribute names", func(t *testing.T) {
		e := s.env(t)
		handleAny(e, UsernameDecider, RenameAccount{AccountID: "a1", To: "al"})
		refusedAny(e, UsernameDecider, RenameAccount{AccountID: "a2", To: "al"}, ErrNameTaken)
		handleAny(e, UsernameDecider, RenameAccount{AccountID: "a1", From: "al", To: "ally"})
		refusedAny(e, UsernameDecider, RenameAccount{AccountID: "a2", To: "ally"}, ErrNameTaken)
		handleAny(e, UsernameDecider, RenameAccount{AccountID: "a2", To: "al"}) // released by the rename
		refusedAny(e, UsernameDecider, RenameAccount{AccountID: "a3", From: "x", To: "al"}, ErrNameTaken)
	})

	t.Run("a type-only boundary numbers without gaps", func(t *testing.T) {
		e := s.env(t)
		e.append(PriceSet{"p1", 1}) // another type: outside the boundary
		for i := 1; i <= 3; i++ {
			res := handleAny(e, InvoiceDecider, CreateInvoice{fmt.Sprint("i", i)})
			if ev := res.Events[0].Payload.(InvoiceCreated); ev.Number != i {
				t.Fatalf("invoice %d numbered %d", i, ev.Number)
			}
		}
	})

	t.Run("one boundary per element of a list", func(t *testing.T) {
		e := s.env(t)
		e.append(PriceSet{"p1", 5}, PriceSet{"p2", 7}, PriceSet{"p3", 100}, PriceSet{"p1", 6})
		refusedAny(e, CartDecider, OrderCart{CartID: "c1", Products: []string{"p1", "p2"}, Total: 12}, ErrPriceChanged)
		res := handleAny(e, CartDecider, OrderCart{CartID: "c1", Products: []string{"p1", "p2"}, Total: 13})
		if len(res.Guard.Conditions) != 2 {
			t.Fatalf("guard %v: want one condition per product", res.Guard.Conditions)
		}
		many := make([]string, 40)
		total := 0
		for i := range many {
			many[i] = fmt.Sprint("q", i)
			e.append(PriceSet{many[i], i})
			total += i
		}
		res = handleAny(e, CartDecider, OrderCart{CartID: "c2", Products: many, Total: total})
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
		{"two loans of one book", loadLending, LendBook{"m1", "b1"}, LendBook{"m2", "b1"}, lent, nil},
		{"a member's last two loans", loadLending, LendBook{"m1", "b1"}, LendBook{"m1", "b2"}, lent, []any{BookLent{"m1", "b8"}, BookLent{"m1", "b9"}}},
		{"one username twice", loadUsername, RenameAccount{AccountID: "a1", To: "al"}, RenameAccount{AccountID: "a2", From: "bo", To: "al"}, renamed, []any{AccountRegistered{"a2", "bo"}}},
		{"two invoices", loadInvoice, CreateInvoice{"i1"}, CreateInvoice{"i2"}, invoiced, nil},
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
		e.append(BookLent{"m0", "b0"}, BookLent{"m0", "b00"})
		var wg sync.WaitGroup
		errs := make([]error, 6)
		cmds := []any{LendBook{"m1", "b1"}, LendBook{"m2", "b1"}, LendBook{"m3", "b1"}, LendBook{"m0", "b2"}, LendBook{"m0", "b3"}, LendBook{"m0", "b4"}}
		for i, c := range cmds {
			wg.Go(func() { _, errs[i] = shell.Handle(e.ctx, e.store, LendingDecider, c) })
		}
		wg.Wait()
		var bookOK, memberOK int
		for i, err := range errs {
			switch {
			case err == nil && i < 3:
				bookOK++
			case err == nil:
				memberOK++
			case errors.Is(err, ErrBookOut) && i < 3, errors.Is(err, ErrTooManyLoans) && i >= 3:
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
		g := loadLending(e, LendBook{"m1", "b1"})
		e.append(BookLent{"m2", "b2"}, BookReturned{"m3", "b3"}, AccountRegistered{"m1", "b1"}, InvoiceCreated{"b1", 1})
		if _, err := e.appendGuarded(g, BookLent{"m1", "b1"}); err != nil {
			t.Fatalf("guarded append after unrelated events: %v", err)
		}
		e.conflict(e.mustFail(e.appendGuarded(g, BookLent{"m1", "b1"})), 5)
	})

	t.Run("the union guard", func(t *testing.T) {
		// Conditions with different attribute sets, a type-only condition
		// and many items: each matching append conflicts, others do not.
		union := []core.Condition{
			cond(TypeBookLent, "member_id", "m1"),
			cond(TypeBookLent, "book_id", "b1", "member_id", "m2"),
			cond(TypeInvoiceCreated),
		}
		for i := range 30 {
			union = append(union, cond(TypePriceSet, "product_id", fmt.Sprint("p", i)))
		}
		matching := []any{BookLent{"m1", "x"}, BookLent{"m2", "b1"}, InvoiceCreated{"any", 9}, PriceSet{"p0", 1}, PriceSet{"p29", 1}}
		others := []any{BookLent{"m2", "b2"}, BookLent{"m3", "b1"}, BookReturned{"m1", "b1"}, PriceSet{"p30", 1}, CreateInvoice{"i"}}
		e := s.env(t)
		res := e.read(union, shell.ReadOptions{})
		e.append(others...)
		if _, err := e.appendGuarded(res.Guard, CartOrdered{"c", 1}); err != nil {
			t.Fatalf("append after messages outside the union: %v", err)
		}
		for _, m := range matching {
			e := s.env(t)
			res := e.read(union, shell.ReadOptions{})
			r := e.append(m)
			e.conflict(e.mustFail(e.appendGuarded(res.Guard, CartOrdered{"c", 1})), r.Last)
		}
	})

	t.Run("a boundary carried inside a list", func(t *testing.T) {
		e := s.env(t)
		e.append(OrderPlaced{"o1", []OrderLine{{"p1", 1}, {"p2", 2}}}, OrderPlaced{"o2", []OrderLine{{"p3", 1}}}, OrderPlaced{"o3", nil})
		res := e.read([]core.Condition{cond(TypeOrderPlaced, "product_id", "p2")}, shell.ReadOptions{})
		e.expectPositions("orders of p2", res.Messages, 1)
		e.expectPositions("orders of p1 or p3", e.read([]core.Condition{cond(TypeOrderPlaced, "product_id", "p1"), cond(TypeOrderPlaced, "product_id", "p3")}, shell.ReadOptions{}).Messages, 1, 2)
		e.append(OrderPlaced{"o4", []OrderLine{{"p9", 1}}})
		if _, err := e.appendGuarded(res.Guard, CartOrdered{"c", 1}); err != nil {
			t.Fatalf("an order of another product conflicted: %v", err)
		}
		r := e.append(OrderPlaced{"o5", []OrderLine{{"p9", 1}, {"p2", 1}}})
		e.conflict(e.mustFail(e.appendGuarded(res.Guard, CartOrdered{"c", 1})), r.Last)
	})

	t.Run("a query naming an attribute no event type has is refused", func(t *testing.T) {
		e := s.env(t)
		bad := core.Decider[int]{Group: "storetest.bad_query", PartitionBy: []string{"invoice_id"}}.With(
			core.Reads(func(c CreateInvoice) core.Query[int] {
				return core.Query[int]{core.Read(lastInvoice, func(_ int, n int) int { return n }, core.Where("colour", c.InvoiceID))}
			}),
			core.Decide(func(int, CreateInvoice) ([]any, error) { return nil, nil }),
		)
		e.notes.take()
		before := e.snapshot()
		if _, err := shell.Handle(e.ctx, e.store, bad, CreateInvoice{"i1"}); !errors.Is(err, core.ErrDefinition) {
			t.Fatalf("Handle with a bad query: %v, want ErrDefinition", err)
		}
		e.unchanged(before)
	})
}

func handleAny[S any](e *env, d core.Decider[S], cmd any) shell.HandleResult[S] {
	e.t.Helper()
	res, err := shell.Handle(e.ctx, e.store, d, cmd)
	if err != nil {
		e.t.Fatalf("Handle %T%+v: %v", cmd, cmd, err)
	}
	return res
}

func refusedAny[S any](e *env, d core.Decider[S], cmd any, want error) {
	e.t.Helper()
	e.notes.take()
	before := e.snapshot()
	if _, err := shell.Handle(e.ctx, e.store, d, cmd); !errors.Is(err, want) {
		e.t.Fatalf("Handle %T%+v: %v, want %v", cmd, cmd, err, want)
	}
	e.unchanged(before)
}

func loadAny[S any](e *env, d core.Decider[S], cmd any) core.Guard {
	e.t.Helper()
	_, g, err := shell.LoadDecision(e.ctx, e.store, d, cmd)
	if err != nil {
		e.t.Fatalf("LoadDecision %T%+v: %v", cmd, cmd, err)
	}
	return g
}

func loadLending(e *env, cmd any) core.Guard  { return loadAny(e, LendingDecider, cmd) }
func loadUsername(e *env, cmd any) core.Guard { return loadAny(e, UsernameDecider, cmd) }
func loadInvoice(e *env, cmd any) core.Guard  { return loadAny(e, InvoiceDecider, cmd) }

func lent(cmd any) any { return BookLent(cmd.(LendBook)) }
func renamed(cmd any) any {
	c := cmd.(RenameAccount)
	if c.From == "" {
		return AccountRegistered{c.AccountID, c.To}
	}
	return UsernameChanged{c.AccountID, c.From, c.To}
}
func invoiced(cmd any) any { return InvoiceCreated{cmd.(CreateInvoice).InvoiceID, 1} }
