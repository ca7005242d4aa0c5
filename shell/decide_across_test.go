package shell_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/testdomain"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// Background deciders claim commands by PartitionBy (here: the member) and
// decide each against its own query (the member and the book), on both
// stores.
func TestBackgroundDecisionsReadTheirQuery(t *testing.T) {
	stores := map[string]func(t *testing.T) shell.Store{
		"memstore": func(t *testing.T) shell.Store {
			reg, err := storetest.NewRegistry()
			if err != nil {
				t.Fatal(err)
			}
			return memstore.New(reg)
		},
		"sqlitestore": func(t *testing.T) shell.Store {
			reg, err := storetest.NewRegistry()
			if err != nil {
				t.Fatal(err)
			}
			s, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "db"), sqlitestore.Options{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		run := func(t *testing.T, first []any, then []any, want error) []testdomain.BookLent {
			t.Helper()
			ctx := context.Background()
			store := open(t)
			rt, err := shell.NewRouter(store, shell.RouterOptions{}, testdomain.LendingDecider)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			var last core.Message
			for _, cmds := range [][]any{first, then} {
				res, err := store.Append(ctx, core.Messages(cmds...), shell.AppendOptions{})
				if err != nil {
					t.Fatal(err)
				}
				msgs := res.Messages
				if err := rt.Drain(ctx, nil); err != nil {
					t.Fatalf("drain: %v (a business refusal is recorded, not a failure)", err)
				}
				last = msgs[len(msgs)-1]
			}
			// The refusal is the last command's outcome, matched by the
			// decider's sentinel.
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := shell.AwaitCommand(actx, store, last.ID, nil); !errors.Is(err, want) || !errors.Is(err, core.ErrRefused) {
				t.Fatalf("outcome of the last command: %v, want refused with %v", err, want)
			}
			var lent []testdomain.BookLent
			for _, m := range readAll(t, store) {
				if e, ok := m.Payload.(testdomain.BookLent); ok {
					lent = append(lent, e)
				}
			}
			return lent
		}
		t.Run(name, func(t *testing.T) {
			// m1's loans land in one batch: each decision sees the ones
			// before it, so the fourth is over the limit; the three before
			// it are kept.
			lent := run(t, []any{testdomain.LendBook{MemberID: "m2", BookID: "b9"}},
				[]any{testdomain.LendBook{MemberID: "m1", BookID: "b1"}, testdomain.LendBook{MemberID: "m1", BookID: "b2"},
					testdomain.LendBook{MemberID: "m1", BookID: "b3"}, testdomain.LendBook{MemberID: "m1", BookID: "b4"}},
				testdomain.ErrTooManyLoans)
			if len(lent) != 4 {
				t.Fatalf("loans %v: want m2's and m1's first three", lent)
			}
			// m2's loan of b1 is claimed in m2's partition, yet its
			// decision reads the book, lent in m1's partition.
			lent = run(t, []any{testdomain.LendBook{MemberID: "m1", BookID: "b1"}},
				[]any{testdomain.LendBook{MemberID: "m2", BookID: "b1"}}, testdomain.ErrBookOut)
			if len(lent) != 1 {
				t.Fatalf("loans %v: want m1's only", lent)
			}
		})
	}
}

// A decider whose commands have no query behaves as before: the same
// history, the same guard (ReadPartition's).
func TestHandleWithoutQueryReadsThePartition(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	res, err := shell.Handle(ctx, store, courseNames, CreateCourse{CourseID: "c1", CourseName: "Algebra"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := core.ConditionsFor(map[string]string{"course_name": "Algebra"}, mustType(t, store, "courses.created"))
	if len(res.Guard.Conditions) != len(want) || res.Guard.Conditions[0].String() != want[0].String() {
		t.Fatalf("guard %v, want the partition's %v", res.Guard.Conditions, want)
	}
}

func mustType(t *testing.T, store shell.Store, name string) *codec.Type {
	t.Helper()
	ct, err := store.Registry().ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}
