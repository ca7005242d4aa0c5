package props_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// Decisions across boundaries against a naive model that scans the whole
// log: for random histories and commands, the state a query decision
// loads and the decision Handle makes equal the model's, and the guard of
// the load conflicts exactly when an event the model says the decision
// depends on was appended after the read.

var (
	members = []string{"m1", "m2", "m3"}
	books   = []string{"b1", "b2", "b3", "b4"}
	names   = []string{"al", "bo", "cy"}
)

// libraryEvent draws an event of the lending or username domain, or one
// outside both.
func libraryEvent(t *rapid.T, label string) any {
	m := rapid.SampledFrom(members).Draw(t, label+" member")
	b := rapid.SampledFrom(books).Draw(t, label+" book")
	n := rapid.SampledFrom(names).Draw(t, label+" name")
	o := rapid.SampledFrom(names).Draw(t, label+" other name")
	switch rapid.IntRange(0, 5).Draw(t, label+" kind") {
	case 0, 1:
		return testdomain.BookLent{MemberID: m, BookID: b}
	case 2:
		return testdomain.BookReturned{MemberID: m, BookID: b}
	case 3:
		return testdomain.AccountRegistered{AccountID: m, Username: n}
	case 4:
		return testdomain.UsernameChanged{AccountID: m, OldUsername: o, NewUsername: n}
	}
	return testdomain.PriceSet{ProductID: b, Price: 1}
}

// naiveLending folds the whole log as the lending decision's rules say.
func naiveLending(log []any, c testdomain.LendBook) testdomain.Lending {
	var s testdomain.Lending
	for _, e := range log {
		switch e := e.(type) {
		case testdomain.BookLent:
			if e.MemberID == c.MemberID {
				s.MemberLoans++
			}
			if e.BookID == c.BookID {
				s.BookOut = true
			}
		case testdomain.BookReturned:
			if e.MemberID == c.MemberID {
				s.MemberLoans--
			}
			if e.BookID == c.BookID {
				s.BookOut = false
			}
		}
	}
	return s
}

func lendingDependsOn(e any, c testdomain.LendBook) bool {
	switch e := e.(type) {
	case testdomain.BookLent:
		return e.MemberID == c.MemberID || e.BookID == c.BookID
	case testdomain.BookReturned:
		return e.MemberID == c.MemberID || e.BookID == c.BookID
	}
	return false
}

// naiveTaken scans the whole log for the holder of a username.
func naiveTaken(log []any, name string) bool {
	taken := false
	for _, e := range log {
		switch e := e.(type) {
		case testdomain.AccountRegistered:
			if e.Username == name {
				taken = true
			}
		case testdomain.UsernameChanged:
			if e.NewUsername == name {
				taken = true
			} else if e.OldUsername == name {
				taken = false
			}
		}
	}
	return taken
}

func usernameDependsOn(e any, name string) bool {
	switch e := e.(type) {
	case testdomain.AccountRegistered:
		return e.Username == name
	case testdomain.UsernameChanged:
		return e.OldUsername == name || e.NewUsername == name
	}
	return false
}

func checkDecisions(t *rapid.T, store shell.Store) {
	ctx := context.Background()
	var log []any
	for i := range rapid.IntRange(0, 25).Draw(t, "history") {
		e := libraryEvent(t, fmt.Sprint("event ", i))
		if _, err := store.Append(ctx, core.Messages(e), shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		log = append(log, e)
	}
	later := libraryEvent(t, "later")
	if rapid.Bool().Draw(t, "lending") {
		c := testdomain.LendBook{MemberID: rapid.SampledFrom(members).Draw(t, "cmd member"), BookID: rapid.SampledFrom(books).Draw(t, "cmd book")}
		want := naiveLending(log, c)
		got, guard, err := shell.LoadDecision(ctx, store, testdomain.LendingDecider, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("LoadDecision %+v: %+v, the whole log says %+v", c, got, want)
		}
		checkGuard(t, store, guard, later, lendingDependsOn(later, c))
		log = append(log, later)
		want = naiveLending(log, c)
		_, err = shell.Handle(ctx, store, testdomain.LendingDecider, c, nil)
		switch {
		case want.BookOut:
			if !errors.Is(err, testdomain.ErrBookOut) {
				t.Fatalf("Handle %+v on %+v: %v, want ErrBookOut", c, want, err)
			}
		case want.MemberLoans >= testdomain.MaxLoans:
			if !errors.Is(err, testdomain.ErrTooManyLoans) {
				t.Fatalf("Handle %+v on %+v: %v, want ErrTooManyLoans", c, want, err)
			}
		case err != nil:
			t.Fatalf("Handle %+v on %+v: %v, want it accepted", c, want, err)
		}
		return
	}
	c := testdomain.RenameAccount{AccountID: "a9", To: rapid.SampledFrom(names).Draw(t, "cmd name")}
	_, guard, err := shell.LoadDecision(ctx, store, testdomain.UsernameDecider, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGuard(t, store, guard, later, usernameDependsOn(later, c.To))
	log = append(log, later)
	_, err = shell.Handle(ctx, store, testdomain.UsernameDecider, c, nil)
	if taken := naiveTaken(log, c.To); taken != errors.Is(err, testdomain.ErrNameTaken) || (!taken && err != nil) {
		t.Fatalf("Handle %+v: %v; the whole log says taken=%v", c, err, taken)
	}
}

// checkGuard appends later, then an unrelated message under guard: it must
// conflict exactly when the decision depends on later.
func checkGuard(t *rapid.T, store shell.Store, guard core.Guard, later any, depends bool) {
	ctx := context.Background()
	if _, err := store.Append(ctx, core.Messages(later), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := store.Append(ctx, core.Messages(testdomain.CartOrdered{CartID: "probe", Total: 1}), shell.AppendOptions{Guard: &guard})
	if conflicted := errors.Is(err, shell.ErrConcurrentAppend); conflicted != depends || (err != nil && !conflicted) {
		t.Fatalf("after %T%+v the guard %v gave %v; the decision depends on it: %v", later, later, guard.Conditions, err, depends)
	}
}

func TestDecisionsAcrossBoundariesMatchTheWholeLog(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			reg, err := storetest.NewRegistry()
			if err != nil {
				t.Fatal(err)
			}
			checkDecisions(t, memstore.New(reg))
		})
	})
	t.Run("sqlitestore", func(t *testing.T) {
		dir := t.TempDir()
		n := 0
		rapid.Check(t, func(rt *rapid.T) {
			reg, err := storetest.NewRegistry()
			if err != nil {
				rt.Fatal(err)
			}
			n++
			s, err := sqlitestore.Install(context.Background(), filepath.Join(dir, fmt.Sprint(n, ".db")), sqlitestore.Options{Registry: reg})
			if err != nil {
				rt.Fatal(err)
			}
			defer s.Close()
			checkDecisions(rt, s)
		})
	})
}
