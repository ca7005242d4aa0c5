package readme

import (
	"context"
	"errors"
	"fmt"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

type (
	LendBook struct {
		MemberID string `json:"member_id" sourced:"required"`
		BookID   string `json:"book_id" sourced:"required"`
	}
	BookLent struct { // one event per loan, carrying both boundaries
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
	BookReturned struct {
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
)

type lending struct {
	Loans   int  // the member's
	BookOut bool // the book's
}

// Projections are small, shared values; a decision composes them.
var (
	memberLoans = core.Projection[int]{}.With(
		core.Evolve(func(n int, _ BookLent) int { return n + 1 }),
		core.Evolve(func(n int, _ BookReturned) int { return n - 1 }),
	)
	bookOut = core.Projection[bool]{}.With(
		core.Evolve(func(bool, BookLent) bool { return true }),
		core.Evolve(func(bool, BookReturned) bool { return false }),
	)
)

var Lending = core.Decider[lending]{Group: "library.lending", PartitionBy: []string{"member_id"}}.With(
	core.Reads(func(c LendBook) core.Query[lending] {
		return core.Query[lending]{
			core.Read(memberLoans, func(s lending, n int) lending { s.Loans = n; return s }, core.Where("member_id", c.MemberID)),
			core.Read(bookOut, func(s lending, out bool) lending { s.BookOut = out; return s }, core.Where("book_id", c.BookID)),
		}
	}),
	core.Decide(func(s lending, c LendBook) ([]any, error) {
		switch {
		case s.BookOut:
			return nil, fmt.Errorf("book %s is lent", c.BookID)
		case s.Loans >= 3:
			return nil, fmt.Errorf("member %s holds 3 books", c.MemberID)
		}
		return []any{BookLent(c)}, nil
	}),
)

// The README's loans: a member holds at most 3 books, and a book is lent
// once, both enforced by one decision that reads the member and the book.
func Example_decideAcross() {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[LendBook](reg, "library.lend")
	codec.MustRegister[BookLent](reg, "library.lent")
	codec.MustRegister[BookReturned](reg, "library.returned")
	store := memstore.New(reg)

	for _, cmd := range []LendBook{{"ann", "b1"}, {"ann", "b2"}, {"ann", "b3"}, {"ann", "b4"}, {"bob", "b1"}} {
		res, err := shell.Handle(ctx, store, Lending, cmd, nil)
		if err != nil {
			fmt.Println("refused:", err)
			continue
		}
		fmt.Printf("%s lends %s (read %d boundaries)\n", cmd.MemberID, cmd.BookID, len(res.Guard.Conditions))
	}

	// Outside Handle: load the decision's state and guard, append with it.
	s, guard, err := shell.LoadDecision(ctx, store, Lending, LendBook{"bob", "b2"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("bob/b2: %+v\n", s)
	if _, err := store.Append(ctx, core.Messages(BookReturned{"ann", "b2"}), shell.AppendOptions{}); err != nil {
		panic(err)
	}
	_, err = store.Append(ctx, core.Messages(BookLent{"bob", "b2"}), shell.AppendOptions{Guard: &guard})
	fmt.Println("stale guard conflicts:", errors.Is(err, shell.ErrConcurrentAppend))
	// Output:
	// ann lends b1 (read 4 boundaries)
	// ann lends b2 (read 4 boundaries)
	// ann lends b3 (read 4 boundaries)
	// refused: member ann holds 3 books
	// refused: book b1 is lent
	// bob/b2: {Loans:0 BookOut:true}
	// stale guard conflicts: true
}

type (
	SubscribeStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	CourseDefined struct {
		CourseID string `json:"course_id"`
		Capacity int    `json:"capacity"`
	}
	StudentSubscribed struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
)

type course struct{ Capacity, Subscribed int }

type subscription struct {
	Course         course
	StudentCourses int
}

var (
	courseSeats = core.Projection[course]{}.With(
		core.Evolve(func(c course, e CourseDefined) course { c.Capacity = e.Capacity; return c }),
		core.Evolve(func(c course, _ StudentSubscribed) course { c.Subscribed++; return c }),
	)
	studentCourses = core.Projection[int]{}.With(
		core.Evolve(func(n int, _ StudentSubscribed) int { return n + 1 }),
	)
)

// Subscriptions reads the course (its capacity and subscriptions) and the
// student (how many courses they follow): an OR of two boundaries, one
// guard.
var Subscriptions = core.Decider[subscription]{Group: "courses.subscriptions", PartitionBy: []string{"course_id"}}.With(
	core.Reads(func(c SubscribeStudent) core.Query[subscription] {
		return core.Query[subscription]{
			core.Read(courseSeats, func(s subscription, c course) subscription { s.Course = c; return s }, core.Where("course_id", c.CourseID)),
			core.Read(studentCourses, func(s subscription, n int) subscription { s.StudentCourses = n; return s }, core.Where("student_id", c.StudentID)),
		}
	}),
	core.Decide(func(s subscription, c SubscribeStudent) ([]any, error) {
		switch {
		case s.Course.Capacity == 0:
			return nil, fmt.Errorf("no course %s", c.CourseID)
		case s.Course.Subscribed >= s.Course.Capacity:
			return nil, fmt.Errorf("course %s is full", c.CourseID)
		case s.StudentCourses >= 2:
			return nil, fmt.Errorf("student %s follows 2 courses", c.StudentID)
		}
		return []any{StudentSubscribed(c)}, nil
	}),
)

// A course and a student at once.
func Example_courseSubscription() {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[SubscribeStudent](reg, "courses.subscribe")
	codec.MustRegister[CourseDefined](reg, "courses.defined")
	codec.MustRegister[StudentSubscribed](reg, "courses.subscribed")
	store := memstore.New(reg)
	if _, err := store.Append(ctx, core.Messages(CourseDefined{"algebra", 1}, CourseDefined{"chess", 5}, CourseDefined{"latin", 5}), shell.AppendOptions{}); err != nil {
		panic(err)
	}
	for _, cmd := range []SubscribeStudent{{"algebra", "ann"}, {"algebra", "bob"}, {"chess", "ann"}, {"latin", "ann"}, {"latin", "bob"}} {
		if _, err := shell.Handle(ctx, store, Subscriptions, cmd, nil); err != nil {
			fmt.Println("refused:", err)
			continue
		}
		fmt.Println(cmd.StudentID, "follows", cmd.CourseID)
	}
	// Output:
	// ann follows algebra
	// refused: course algebra is full
	// ann follows chess
	// refused: student ann follows 2 courses
	// bob follows latin
}

type (
	ChooseUsername struct {
		AccountID string `json:"account_id" sourced:"required"`
		Username  string `json:"username" sourced:"required"`
	}
	AccountRegistered struct {
		AccountID string `json:"account_id"`
		Username  string `json:"username"`
	}
	UsernameChanged struct {
		AccountID   string `json:"account_id"`
		OldUsername string `json:"old_username"`
		NewUsername string `json:"new_username"`
	}
)

// account is what a choice of username reads: the account's current name,
// and who holds the name wanted.
type account struct {
	Current string
	Holder  string
}

var accountName = core.Projection[string]{}.With(
	core.Evolve(func(_ string, e AccountRegistered) string { return e.Username }),
	core.Evolve(func(_ string, e UsernameChanged) string { return e.NewUsername }),
)

// holder is who holds username: the value sits under a different
// attribute name per event type.
func holder(username string) core.Part[account] {
	holds := core.Projection[string]{}.With(
		core.Evolve(func(_ string, e AccountRegistered) string { return e.AccountID }),
		core.Evolve(func(h string, e UsernameChanged) string {
			if e.NewUsername == username {
				return e.AccountID
			}
			return "" // renamed away: released
		}),
	)
	return core.Read(holds, func(s account, h string) account { s.Holder = h; return s },
		core.Only[AccountRegistered](core.Where("username", username)),
		core.Only[UsernameChanged](core.Where("old_username", username)),
		core.Only[UsernameChanged](core.Where("new_username", username)),
	)
}

var Usernames = core.Decider[account]{Group: "accounts.usernames", PartitionBy: []string{"account_id"}}.With(
	core.Reads(func(c ChooseUsername) core.Query[account] {
		return core.Query[account]{
			core.Read(accountName, func(s account, n string) account { s.Current = n; return s },
				core.Only[AccountRegistered](core.Where("account_id", c.AccountID)),
				core.Only[UsernameChanged](core.Where("account_id", c.AccountID))),
			holder(c.Username),
		}
	}),
	core.Decide(func(s account, c ChooseUsername) ([]any, error) {
		switch {
		case s.Holder != "":
			return nil, fmt.Errorf("%q is taken", c.Username)
		case s.Current == "":
			return []any{AccountRegistered(c)}, nil
		}
		return []any{UsernameChanged{AccountID: c.AccountID, OldUsername: s.Current, NewUsername: c.Username}}, nil
	}),
)

// A unique username, across registrations and renames.
func Example_uniqueUsername() {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[ChooseUsername](reg, "accounts.choose_username")
	codec.MustRegister[AccountRegistered](reg, "accounts.registered")
	codec.MustRegister[UsernameChanged](reg, "accounts.username_changed")
	store := memstore.New(reg)
	for _, cmd := range []ChooseUsername{{"a1", "al"}, {"a2", "al"}, {"a1", "ally"}, {"a2", "al"}, {"a3", "ally"}} {
		if _, err := shell.Handle(ctx, store, Usernames, cmd, nil); err != nil {
			fmt.Println("refused:", err)
			continue
		}
		fmt.Println(cmd.AccountID, "is", cmd.Username)
	}
	// Output:
	// a1 is al
	// refused: "al" is taken
	// a1 is ally
	// a2 is al
	// refused: "ally" is taken
}
