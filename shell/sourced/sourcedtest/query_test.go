package sourcedtest_test

import (
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/sourced/sourcedtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

func decisionRegistry(t *testing.T) sourcedtest.Option {
	t.Helper()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return sourcedtest.WithRegistry(reg)
}

func TestQueryFiltersEachPartByItsOwnQuery(t *testing.T) {
	reg := decisionRegistry(t)
	// Other members' loans and other books are given too: the store never
	// reads them for this command, so they change nothing.
	sourcedtest.Decider(t, storetest.LendingDecider, reg).
		Given(storetest.BookLent{MemberID: "m1", BookID: "b1"}, storetest.BookLent{MemberID: "m1", BookID: "b2"},
			storetest.BookLent{MemberID: "m2", BookID: "b3"}, storetest.BookLent{MemberID: "m2", BookID: "b4"}).
		When(storetest.LendBook{MemberID: "m1", BookID: "b9"}).
		Then(storetest.BookLent{MemberID: "m1", BookID: "b9"})
	sourcedtest.Decider(t, storetest.LendingDecider, reg).
		Given(storetest.BookLent{MemberID: "m1", BookID: "b1"}, storetest.BookLent{MemberID: "m1", BookID: "b2"}, storetest.BookLent{MemberID: "m1", BookID: "b3"}).
		When(storetest.LendBook{MemberID: "m1", BookID: "b9"}).
		ThenError(storetest.ErrTooManyLoans)
	sourcedtest.Decider(t, storetest.LendingDecider, reg).
		Given(storetest.BookLent{MemberID: "m2", BookID: "b9"}).
		When(storetest.LendBook{MemberID: "m1", BookID: "b9"}).
		ThenError(storetest.ErrBookOut)
	sourcedtest.Decider(t, storetest.LendingDecider, reg).
		Given(storetest.BookLent{MemberID: "m2", BookID: "b9"}, storetest.BookReturned{MemberID: "m2", BookID: "b9"},
			storetest.BookLent{MemberID: "m1", BookID: "b1"}, storetest.BookLent{MemberID: "m2", BookID: "b3"}).
		When(storetest.LendBook{MemberID: "m1", BookID: "b9"}).
		ThenState(func(t testing.TB, s storetest.Lending) {
			// After the loan: the member part folded m1's loans only, the
			// book part b9's only.
			if s != (storetest.Lending{MemberLoans: 2, BookOut: true}) {
				t.Fatalf("state %+v", s)
			}
		})
}

func TestQueryThenRead(t *testing.T) {
	reg := decisionRegistry(t)
	c := func(typ string, kv ...string) core.Condition {
		attrs := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			attrs[kv[i]] = kv[i+1]
		}
		return core.Condition{Type: typ, Attrs: attrs}
	}
	sourcedtest.Decider(t, storetest.UsernameDecider, reg).
		When(storetest.RenameAccount{AccountID: "a1", To: "al"}).
		ThenRead(
			c(storetest.TypeAccountRegistered, "username", "al"),
			c(storetest.TypeUsernameChanged, "old_username", "al"),
			c(storetest.TypeUsernameChanged, "new_username", "al"),
		)
	sourcedtest.Decider(t, storetest.UsernameDecider, reg).
		Given(storetest.AccountRegistered{AccountID: "a1", Username: "al"}, storetest.UsernameChanged{AccountID: "a1", OldUsername: "al", NewUsername: "ally"}).
		When(storetest.RenameAccount{AccountID: "a2", To: "al"}).
		Then(storetest.AccountRegistered{AccountID: "a2", Username: "al"})
	sourcedtest.Decider(t, storetest.InvoiceDecider, reg).
		When(storetest.CreateInvoice{InvoiceID: "i1"}).
		ThenRead(c(storetest.TypeInvoiceCreated))
}

func TestQueryThenReadFailsOnOtherBoundaries(t *testing.T) {
	reg := decisionRegistry(t)
	msg := failure(func(ft testing.TB) {
		sourcedtest.Decider(ft, storetest.InvoiceDecider, reg).
			When(storetest.CreateInvoice{InvoiceID: "i1"}).
			ThenRead(core.Condition{Type: storetest.TypeInvoiceCreated, Attrs: map[string]string{"invoice_id": "i1"}})
	})
	if msg == "" {
		t.Fatal("ThenRead passed for a boundary the decision did not read")
	}
	msg = failure(func(ft testing.TB) {
		sourcedtest.Decider(ft, storetest.InvoiceDecider).When(storetest.CreateInvoice{InvoiceID: "i1"}).Then()
	})
	if msg == "" {
		t.Fatal("a query decision without WithRegistry did not fail")
	}
}

type reminder struct {
	MemberID string `json:"member_id"`
	BookID   string `json:"book_id"`
}

func TestQueryDecisionReactions(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := codec.Register[reminder](reg, "library.reminder"); err != nil {
		t.Fatal(err)
	}
	d := storetest.LendingDecider.With(
		core.Evolve(func(s storetest.Lending, _ storetest.BookLent) storetest.Lending { s.MemberLoans++; return s }),
		core.React(func(s storetest.Lending, e storetest.BookLent) []any {
			return []any{reminder(e)}
		}),
	)
	sourcedtest.Decider(t, d, sourcedtest.WithRegistry(reg)).
		Given(storetest.BookLent{MemberID: "m2", BookID: "b1"}, storetest.BookReturned{MemberID: "m2", BookID: "b1"}).
		When(storetest.LendBook{MemberID: "m1", BookID: "b1"}).
		Then(storetest.BookLent{MemberID: "m1", BookID: "b1"}, reminder{MemberID: "m1", BookID: "b1"})
}
