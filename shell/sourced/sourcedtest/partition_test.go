package sourcedtest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/sourced/sourcedtest"
)

// The library of issue 11: at most three loans per member, a book lent
// once. A boundary of the pair (member, book) enforces neither.
type (
	LendBook struct {
		MemberID string `json:"member_id" sourced:"required"`
		BookID   string `json:"book_id" sourced:"required"`
	}
	BookLent struct {
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
	LibraryOpened struct {
		Branch string `json:"branch"`
	}
	RemindMember struct {
		MemberID string `json:"member_id" sourced:"required"`
		BookID   string `json:"book_id"`
	}
)

func libraryRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[LendBook](reg, "library.lend_book")
	codec.MustRegister[BookLent](reg, "library.book_lent")
	codec.MustRegister[LibraryOpened](reg, "library.opened")
	codec.MustRegister[RemindMember](reg, "library.remind_member")
	return reg
}

var errTooMany = errors.New("at most 3 loans")

func lending(by ...string) core.Decider[int] {
	return core.Decider[int]{Group: "library.lending", PartitionBy: by}.With(
		core.Evolve(func(n int, _ BookLent) int { return n + 1 }),
		core.Decide(func(n int, c LendBook) ([]any, error) {
			if n >= 3 {
				return nil, errTooMany
			}
			return []any{BookLent(c)}, nil
		}),
		core.React(func(_ int, e BookLent) []any {
			return []any{core.After(14*24*time.Hour, RemindMember(e))}
		}),
	)
}

var threeLoans = []any{BookLent{MemberID: "m1", BookID: "b1"}, BookLent{MemberID: "m1", BookID: "b2"}, BookLent{MemberID: "m1", BookID: "b3"}}

func TestGivenEventsAreFilteredToTheCommandsPartition(t *testing.T) {
	for _, withReg := range []bool{true, false} {
		var opts []sourcedtest.Option
		if withReg {
			opts = append(opts, sourcedtest.WithRegistry(libraryRegistry()))
		}
		// The right boundary: the member's loans.
		sourcedtest.Decider(t, lending("member_id"), opts...).
			Given(threeLoans...).
			When(LendBook{MemberID: "m1", BookID: "b4"}).
			ThenError(errTooMany)
		// The pair boundary: a store would show the decider none of the
		// member's other loans, so the test that looks right must fail.
		got := failure(func(t testing.TB) {
			sourcedtest.Decider(t, lending("member_id", "book_id"), opts...).
				Given(threeLoans...).
				When(LendBook{MemberID: "m1", BookID: "b4"}).
				ThenError(errTooMany)
		})
		for _, want := range []string{"is not in the partition {book_id=b4, member_id=m1}", `its book_id is "b1", not "b4"`, "PartitionBy", "AllowOutsidePartition"} {
			if !strings.Contains(got, want) {
				t.Fatalf("registry %v: failure %q, want it to say %q", withReg, got, want)
			}
		}
		// Opting out drops them, as a store would: the decider accepts.
		sourcedtest.Decider(t, lending("member_id", "book_id"), append(opts, sourcedtest.AllowOutsidePartition())...).
			Given(threeLoans...).
			When(LendBook{MemberID: "m1", BookID: "b4"}).
			ThenState(func(t testing.TB, n int) {
				if n != 1 {
					t.Fatalf("state %d: the given events outside the partition must be dropped", n)
				}
			})
		// An event with none of the keys is never in any partition.
		got = failure(func(t testing.TB) {
			sourcedtest.Decider(t, lending("member_id"), opts...).
				Given(LibraryOpened{Branch: "north"}).
				When(LendBook{MemberID: "m1", BookID: "b4"}).
				ThenError(errTooMany)
		})
		if !strings.Contains(got, "carries none of the partition keys [member_id]") {
			t.Fatalf("registry %v: failure %q", withReg, got)
		}
	}
}

func TestACommandWithAnEmptyKeyIsRejectedAsHandleRejectsIt(t *testing.T) {
	sourcedtest.Decider(t, lending("member_id"), sourcedtest.AllowOutsidePartition()).
		When(LendBook{BookID: "b1"}).
		ThenError(codec.ErrInvalid)
	var ve *codec.ValidationError
	sourcedtest.Decider(t, lending("member_id")).
		When(LendBook{BookID: "b1"}).
		ThenError(&ve)
	if len(ve.Fields) != 1 || ve.Fields[0].Field != "member_id" {
		t.Fatalf("error %v, want it to name member_id", ve)
	}
}

func TestProjectorGivenEventsAreFilteredToOnePartition(t *testing.T) {
	loans := core.Projector[[]string]{Group: "library.loans", PartitionBy: []string{"member_id"}}.With(
		core.Evolve(func(s []string, e BookLent) []string { return append(s, e.BookID) }),
	)
	mixed := []any{BookLent{MemberID: "m1", BookID: "b1"}, BookLent{MemberID: "m2", BookID: "b2"}}
	got := failure(func(t testing.TB) {
		sourcedtest.Projector(t, loans, sourcedtest.WithRegistry(libraryRegistry())).Given(mixed...).Then(func(testing.TB, []string) {})
	})
	if !strings.Contains(got, `its member_id is "m2", not "m1"`) {
		t.Fatalf("failure %q", got)
	}
	sourcedtest.Projector(t, loans, sourcedtest.WithPartition(map[string]string{"member_id": "m2"}), sourcedtest.AllowOutsidePartition()).
		Given(mixed...).
		Then(func(t testing.TB, s []string) {
			if len(s) != 1 || s[0] != "b2" {
				t.Fatalf("projected %v, want only m2's loans", s)
			}
		})
	got = failure(func(t testing.TB) {
		sourcedtest.Projector(t, loans).Given(BookLent{BookID: "b1"}).Then(func(testing.TB, []string) {})
	})
	if !strings.Contains(got, "no given event carries every partition key") {
		t.Fatalf("failure %q", got)
	}
}

func TestThenMatchesDelayedMessagesOnTheirDueTime(t *testing.T) {
	reg := sourcedtest.WithRegistry(libraryRegistry())
	lend := LendBook{MemberID: "m1", BookID: "b1"}
	remind := RemindMember{MemberID: "m1", BookID: "b1"}
	fortnight := 14 * 24 * time.Hour
	at := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC) // WithTime's default plus 14 days
	sourcedtest.Decider(t, lending("member_id"), reg).When(lend).Then(BookLent(lend), core.After(fortnight, remind))
	sourcedtest.Decider(t, lending("member_id"), reg).When(lend).Then(BookLent(lend), core.At(at, remind))
	sourcedtest.Decider(t, lending("member_id"), reg).When(lend).ThenScheduled(core.After(fortnight, remind))
	sourcedtest.Decider(t, lending("member_id"), reg, sourcedtest.WithTime(at)).When(lend).ThenScheduled(core.At(at.Add(fortnight), remind))
	cases := map[string]struct {
		fn   func(t testing.TB)
		want string
	}{
		"wrong delay": {func(t testing.TB) {
			sourcedtest.Decider(t, lending("member_id"), reg).When(lend).Then(BookLent(lend), core.After(time.Nanosecond, remind))
		}, "336h0m0s after the command"},
		"delay expected as immediate": {func(t testing.TB) {
			sourcedtest.Decider(t, lending("member_id"), reg).When(lend).Then(BookLent(lend), remind)
		}, "messages differ"},
		"nothing scheduled": {func(t testing.TB) {
			sourcedtest.Decider(t, lending("member_id"), reg).When(lend).ThenScheduled()
		}, "messages differ"},
		"scheduled at another time": {func(t testing.TB) {
			sourcedtest.Decider(t, lending("member_id"), reg).When(lend).ThenScheduled(core.After(time.Hour, remind))
		}, "1h0m0s after the command"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := failure(tc.fn)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "codec.Register") {
				t.Fatalf("failure %q, want it to mention %q (and no registration advice)", got, tc.want)
			}
		})
	}
}
