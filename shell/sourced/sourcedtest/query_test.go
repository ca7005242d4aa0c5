package sourcedtest_test

import (
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
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
	sourcedtest.Decider(t, testdomain.LendingDecider, reg).
		Given(testdomain.BookLent{MemberID: "m1", BookID: "b1"}, testdomain.BookLent{MemberID: "m1", BookID: "b2"},
			testdomain.BookLent{MemberID: "m2", BookID: "b3"}, testdomain.BookLent{MemberID: "m2", BookID: "b4"}).
		When(testdomain.LendBook{MemberID: "m1", BookID: "b9"}).
		Then(testdomain.BookLent{MemberID: "m1", BookID: "b9"})
	sourcedtest.Decider(t, testdomain.LendingDecider, reg).
		Given(testdomain.BookLent{MemberID: "m1", BookID: "b1"}, testdomain.BookLent{MemberID: "m1", BookID: "b2"}, testdomain.BookLent{MemberID: "m1", BookID: "b3"}).
		When(testdomain.LendBook{MemberID: "m1", BookID: "b9"}).
		ThenError(testdomain.ErrTooManyLoans)
	sourcedtest.Decider(t, testdomain.LendingDecider, reg).
		Given(testdomain.BookLent{MemberID: "m2", BookID: "b9"}).
		When(testdomain.LendBook{MemberID: "m1", BookID: "b9"}).
		ThenError(testdomain.ErrBookOut)
	sourcedtest.Decider(t, testdomain.LendingDecider, reg).
		Given(testdomain.BookLent{MemberID: "m2", BookID: "b9"}, testdomain.BookReturned{MemberID: "m2", BookID: "b9"},
			testdomain.BookLent{MemberID: "m1", BookID: "b1"}, testdomain.BookLent{MemberID: "m2", BookID: "b3"}).
		When(testdomain.LendBook{MemberID: "m1", BookID: "b9"}).
		ThenState(func(t testing.TB, s testdomain.Lending) {
			// After the loan: the member part folded m1's loans only, the
			// book part b9's only.
			if s != (testdomain.Lending{MemberLoans: 2, BookOut: true}) {
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
	sourcedtest.Decider(t, testdomain.UsernameDecider, reg).
		When(testdomain.RenameAccount{AccountID: "a1", To: "al"}).
		ThenRead(
			c(testdomain.TypeAccountRegistered, "username", "al"),
			c(testdomain.TypeUsernameChanged, "old_username", "al"),
			c(testdomain.TypeUsernameChanged, "new_username", "al"),
		)
	sourcedtest.Decider(t, testdomain.UsernameDecider, reg).
		Given(testdomain.AccountRegistered{AccountID: "a1", Username: "al"}, testdomain.UsernameChanged{AccountID: "a1", OldUsername: "al", NewUsername: "ally"}).
		When(testdomain.RenameAccount{AccountID: "a2", To: "al"}).
		Then(testdomain.AccountRegistered{AccountID: "a2", Username: "al"})
	sourcedtest.Decider(t, testdomain.InvoiceDecider, reg).
		When(testdomain.CreateInvoice{InvoiceID: "i1"}).
		ThenRead(c(testdomain.TypeInvoiceCreated))
}

func TestQueryThenReadFailsOnOtherBoundaries(t *testing.T) {
	reg := decisionRegistry(t)
	msg := failure(func(ft testing.TB) {
		sourcedtest.Decider(ft, testdomain.InvoiceDecider, reg).
			When(testdomain.CreateInvoice{InvoiceID: "i1"}).
			ThenRead(core.Condition{Type: testdomain.TypeInvoiceCreated, Attrs: map[string]string{"invoice_id": "i1"}})
	})
	if msg == "" {
		t.Fatal("ThenRead passed for a boundary the decision did not read")
	}
	msg = failure(func(ft testing.TB) {
		sourcedtest.Decider(ft, testdomain.InvoiceDecider).When(testdomain.CreateInvoice{InvoiceID: "i1"}).Then()
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
	d := testdomain.LendingDecider.With(
		core.Evolve(func(s testdomain.Lending, _ testdomain.BookLent) testdomain.Lending { s.MemberLoans++; return s }),
		core.React(func(s testdomain.Lending, e testdomain.BookLent) []any {
			return []any{reminder(e)}
		}),
	)
	sourcedtest.Decider(t, d, sourcedtest.WithRegistry(reg)).
		Given(testdomain.BookLent{MemberID: "m2", BookID: "b1"}, testdomain.BookReturned{MemberID: "m2", BookID: "b1"}).
		When(testdomain.LendBook{MemberID: "m1", BookID: "b1"}).
		Then(testdomain.BookLent{MemberID: "m1", BookID: "b1"}, reminder{MemberID: "m1", BookID: "b1"})
}
