package core_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

type (
	Lend struct {
		MemberID string `json:"member_id" sourced:"required"`
		BookID   string `json:"book_id" sourced:"required"`
	}
	Lent struct {
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
	Returned struct {
		MemberID string `json:"member_id"`
		BookID   string `json:"book_id"`
	}
)

func lendingRegistry(t *testing.T) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[Lend](reg, "lib.lend")
	codec.MustRegister[Lent](reg, "lib.lent")
	codec.MustRegister[Returned](reg, "lib.returned")
	return reg
}

type lending struct {
	Loans   int
	BookOut bool
}

var errLimit = errors.New("limit")
var errOut = errors.New("out")

var (
	loans = core.Projection[int]{}.With(
		core.Evolve(func(n int, _ Lent) int { return n + 1 }),
		core.Evolve(func(n int, _ Returned) int { return n - 1 }),
	)
	out = core.Projection[bool]{}.With(
		core.Evolve(func(bool, Lent) bool { return true }),
		core.Evolve(func(bool, Returned) bool { return false }),
	)
	lendingDecider = core.Decider[lending]{Group: "lib.lending", PartitionBy: []string{"member_id"}}.With(
		core.Reads(func(c Lend) core.Query[lending] {
			return core.Query[lending]{
				core.Read(loans, func(s lending, n int) lending { s.Loans = n; return s }, core.Where("member_id", c.MemberID)),
				core.Read(out, func(s lending, o bool) lending { s.BookOut = o; return s }, core.Where("book_id", c.BookID)),
			}
		}),
		core.Decide(func(s lending, c Lend) ([]any, error) {
			if s.BookOut {
				return nil, errOut
			}
			if s.Loans >= 2 {
				return nil, errLimit
			}
			return []any{Lent(c)}, nil
		}),
	)
)

func TestQueryPlanIsTheUnionOfItsParts(t *testing.T) {
	reg := lendingRegistry(t)
	plan, ok, err := lendingDecider.QueryPlan(reg, core.NewMessage(Lend{"m1", "b1"}))
	if err != nil || !ok {
		t.Fatalf("plan: %v %v", ok, err)
	}
	want := [][]string{{"lib.lent(member_id=m1)", "lib.returned(member_id=m1)"}, {"lib.lent(book_id=b1)", "lib.returned(book_id=b1)"}}
	for i, p := range plan.Parts {
		if got := condStrings(p); !slices.Equal(got, want[i]) {
			t.Fatalf("part %d: %v, want %v", i, got, want[i])
		}
	}
	if len(plan.Union) != 4 {
		t.Fatalf("union %v", condStrings(plan.Union))
	}
	// The same boundary read by two parts is read (and guarded) once.
	twice := core.Query[lending]{
		core.Read(loans, func(s lending, n int) lending { return s }, core.Where("member_id", "m1")),
		core.Read(out, func(s lending, o bool) lending { return s }, core.Where("member_id", "m1")),
	}
	plan, err = twice.Plan(reg)
	if err != nil || len(plan.Union) != 2 {
		t.Fatalf("union of a boundary read twice: %v %v", condStrings(plan.Union), err)
	}
	if _, ok, _ := lendingDecider.QueryPlan(reg, core.NewMessage(CreateCourse{})); ok {
		t.Fatal("a command without Reads has a plan")
	}
}

func TestQueryFoldsEachPartOverItsOwnEvents(t *testing.T) {
	reg := lendingRegistry(t)
	cmd := core.NewMessage(Lend{"m1", "b1"})
	q, _ := lendingDecider.Query(cmd)
	plan, err := q.Plan(reg)
	if err != nil {
		t.Fatal(err)
	}
	// Read as the store would: the union. m1 holds b7; b1 is out with m2.
	read := core.Messages(Lent{"m1", "b7"}, Lent{"m2", "b1"}, Lent{"m1", "b8"}, Returned{"m1", "b8"})
	s := q.Fold(lending{}, plan, read, core.IndexWith(reg))
	if s != (lending{Loans: 1, BookOut: true}) {
		t.Fatalf("state %+v: the member part folds m1's loans only, the book part b1's only", s)
	}
	// Events outside every part (as a wider read may return) are ignored.
	s = q.Fold(lending{}, plan, core.Messages(Lent{"m3", "b3"}), core.IndexWith(reg))
	if s != (lending{}) {
		t.Fatalf("state %+v from events outside the query", s)
	}
}

func TestQueryDefinitionErrors(t *testing.T) {
	reg := lendingRegistry(t)
	cases := map[string]core.Query[int]{
		"an attribute no type has":                   {core.Read(loans, func(_ int, n int) int { return n }, core.Where("colour", "red"))},
		"Only a type the projection does not evolve": {core.Read(loans, func(_ int, n int) int { return n }, core.Only[Lend](core.Where("member_id", "m")))},
		"Only a type without the attribute":          {core.Read(loans, func(_ int, n int) int { return n }, core.Only[Lent](core.Where("colour", "m")))},
		"no filter":                                  {core.Read(loans, func(_ int, n int) int { return n })},
		"a bad value":                                {core.Read(loans, func(_ int, n int) int { return n }, core.Where("member_id", []int{1}))},
		"a zero part":                                {core.Part[int]{}},
	}
	for name, q := range cases {
		if _, err := q.Plan(reg); !errors.Is(err, core.ErrDefinition) {
			t.Errorf("%s: %v, want ErrDefinition", name, err)
		}
	}
	bad := core.Decider[int]{Group: "lib.bad", PartitionBy: []string{"member_id"}}.With(
		core.Reads(func(c Lend) core.Query[int] {
			return core.Query[int]{core.Read(loans, func(_ int, n int) int { return n }, core.Where("colour", c.BookID))}
		}),
		core.Decide(func(int, Lend) ([]any, error) { return nil, nil }),
	)
	var de *core.DefinitionError
	if err := bad.Check(reg); !errors.As(err, &de) || de.Message == "" {
		t.Fatalf("Check of a decider whose query names no attribute: %v, want a DefinitionError naming the command", err)
	}
	orphan := core.Decider[int]{Group: "lib.orphan", PartitionBy: []string{"member_id"}}.With(
		core.Reads(func(c Lend) core.Query[int] { return nil }),
	)
	if err := orphan.Err(); err == nil {
		t.Fatal("Reads without a Decide for the command is not an error")
	}
}

func TestStepDecidesEachQueryOnWhatItReadAndTheBatchBefore(t *testing.T) {
	reg := lendingRegistry(t)
	batch := []core.PositionedMessage{
		{Message: core.NewMessage(Lend{"m1", "b1"}), Position: 5},
		{Message: core.NewMessage(Lend{"m1", "b1"}), Position: 6},
	}
	var reads []*core.QueryRead
	for _, m := range batch {
		plan, _, err := lendingDecider.QueryPlan(reg, m.Message)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, &core.QueryRead{Plan: plan, Guard: core.Guard{Conditions: plan.Union, LastPosition: 6}})
	}
	outs, err := lendingDecider.Step(core.StepInput{Partition: map[string]string{"member_id": "m1"}, Batch: batch, Queries: reads, Index: core.IndexWith(reg)})
	var be *core.BatchError
	if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, errOut) || len(outs) != 1 {
		t.Fatalf("the second loan of one book in a batch: %d outcomes, %v; want it refused (the first lent it)", len(outs), err)
	}
	if outs[0].Guard == nil || outs[0].Guard.LastPosition != 6 || len(outs[0].Guard.Conditions) != 4 {
		t.Fatalf("outcome guard %+v: want the query's read guard", outs[0].Guard)
	}
	if _, err := lendingDecider.Step(core.StepInput{Batch: batch[:1]}); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("a queried command without its read: %v, want ErrDefinition", err)
	}
}

func TestComposedDecidersKeepTheirQueries(t *testing.T) {
	reg := lendingRegistry(t)
	type big struct {
		L lending
		N int
	}
	mapped := core.MapState(lendingDecider, nil, func(b big) lending { return b.L }, func(b big, l lending) big { b.L = l; return b })
	cmd := core.NewMessage(Lend{"m1", "b1"})
	plan, ok, err := mapped.QueryPlan(reg, cmd)
	if err != nil || !ok || len(plan.Union) != 4 {
		t.Fatalf("MapState lost the query: %v %v %v", ok, err, plan.Union)
	}
	o, err := mapped.DecideQuery(plan, core.IndexWith(reg), nil, []core.PositionedMessage{{Message: core.NewMessage(Lent{"m2", "b1"}), Position: 1}}, core.PositionedMessage{Message: cmd, Position: 2})
	if !errors.Is(err, errOut) {
		t.Fatalf("mapped decision on a lent book: %v %+v", err, o)
	}
	type LendOther struct {
		MemberID string `json:"member_id" sourced:"required"`
		BookID   string `json:"book_id" sourced:"required"`
	}
	other := core.MapCommand(lendingDecider, func(c LendOther) Lend { return Lend(c) })
	if q, ok := other.Query(core.NewMessage(LendOther{"m1", "b1"})); !ok || len(q) != 2 {
		t.Fatal("MapCommand lost the query")
	}
	both := core.Combine(lendingDecider, core.Decider[int]{Group: "x", PartitionBy: []string{"member_id"}})
	if _, ok := both.Query(cmd); !ok {
		t.Fatal("Combine lost the query")
	}
}

func TestEnvelopeHandlers(t *testing.T) {
	type Release struct {
		Name string `json:"name"`
	}
	type Claim struct {
		Name string `json:"name"`
	}
	d := core.Decider[time.Time]{Group: "names", PartitionBy: []string{"name"}}.With(
		core.EvolveEnvelope(func(_ time.Time, _ Release, env core.Envelope) time.Time { return env.CreatedAt }),
		core.DecideEnvelope(func(released time.Time, c Claim, env core.Envelope) ([]any, error) {
			if !released.IsZero() && env.CreatedAt.Sub(released) < 72*time.Hour {
				return nil, errors.New("reserved for 3 days")
			}
			return []any{c}, nil
		}),
	)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	history := []core.Message{core.NewMessage(Release{"al"}).At(t0)}
	if _, err := d.Run(history, core.NewMessage(Claim{"al"}).At(t0.Add(71*time.Hour))); err == nil {
		t.Fatal("claimed within 3 days of the release")
	}
	if _, err := d.Run(history, core.NewMessage(Claim{"al"}).At(t0.Add(73*time.Hour))); err != nil {
		t.Fatalf("claim after 3 days: %v", err)
	}
	if got := d.EvolvedTypes(); !slices.Equal(got, []reflect.Type{reflect.TypeFor[Release]()}) {
		t.Fatalf("evolved types %v", got)
	}
}

func condStrings(cs []core.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// The envelope variants are handlers like the others: DecideEnvelope takes
// Emits (it was refused as "Emits on other handlers"), and ReactEnvelope
// gives a reaction its event's time (React alone has none).
func TestEnvelopeHandlersEmitAndReact(t *testing.T) {
	type Book struct {
		Room    string    `json:"room"`
		CheckIn time.Time `json:"check_in"`
	}
	type Booked struct {
		Room    string    `json:"room"`
		CheckIn time.Time `json:"check_in"`
	}
	type Remind struct {
		Room string `json:"room"`
	}
	var seen time.Time
	d := core.Decider[int]{Group: "bookings", PartitionBy: []string{"room"}}.With(
		core.Evolve(func(n int, _ Booked) int { return n + 1 }),
		core.DecideEnvelope(func(_ int, c Book, _ core.Envelope) ([]any, error) {
			return []any{Booked(c)}, nil
		}).Emits(Booked{}),
		core.ReactEnvelope(func(_ int, e Booked, env core.Envelope) []any {
			seen = env.CreatedAt
			return []any{core.At(e.CheckIn.Add(-24*time.Hour), Remind{Room: e.Room})}
		}).Emits(Remind{}),
	)
	if err := d.Err(); err != nil {
		t.Fatalf("a decider with DecideEnvelope(...).Emits: %v", err)
	}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		checkIn time.Time
		due     time.Time
	}{{t0.Add(72 * time.Hour), t0.Add(48 * time.Hour)}, {t0.Add(2 * time.Hour), t0}} {
		event := core.NewMessage(Booked{Room: "r1", CheckIn: tc.checkIn}).Stamp(uuid.New(), t0)
		out, err := d.React(0, event)
		if err != nil || len(out) != 1 || !out[0].CreatedAt.Equal(tc.due) || !seen.Equal(t0) {
			t.Fatalf("check-in %v: reminder %v %v (envelope time %v), want one due %v", tc.checkIn, out, err, seen, tc.due)
		}
	}
	if _, err := d.Run(nil, core.NewMessage(Book{Room: "r1", CheckIn: t0})); err != nil {
		t.Fatalf("deciding with the declared event: %v", err)
	}
}
