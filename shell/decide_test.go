package shell_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

type (
	ClaimName struct {
		Username  string `json:"username" sourced:"required"`
		AccountID string `json:"account_id" sourced:"required"`
	}
	NameClaimed struct {
		Username  string `json:"username"`
		AccountID string `json:"account_id"`
	}
	NameReleased struct {
		Username string `json:"username"`
	}
)

// settable is a clock a test sets.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settable) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settable) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

var errReserved = errors.New("username released less than 3 days ago: still reserved")

type nameState struct {
	Taken      bool
	ReleasedAt time.Time
}

// names decides a claim on the name's history with an age rule: a name
// released less than 3 days before the command is still reserved.
var names = core.Decider[nameState]{Group: "names", PartitionBy: []string{"account_id"}}.With(
	core.Reads(func(c ClaimName) core.Query[nameState] {
		return core.Query[nameState]{core.Read(nameHistory, func(_ nameState, s nameState) nameState { return s }, core.Where("username", c.Username))}
	}),
	core.DecideEnvelope(func(s nameState, c ClaimName, env core.Envelope) ([]any, error) {
		if s.Taken {
			return nil, errors.New("taken")
		}
		if !s.ReleasedAt.IsZero() && env.CreatedAt.Sub(s.ReleasedAt) < 72*time.Hour {
			return nil, errReserved
		}
		return []any{NameClaimed(c)}, nil
	}),
)

var nameHistory = core.Projection[nameState]{}.With(
	core.Evolve(func(s nameState, _ NameClaimed) nameState { s.Taken = true; return s }),
	core.EvolveEnvelope(func(s nameState, _ NameReleased, env core.Envelope) nameState {
		return nameState{ReleasedAt: env.CreatedAt}
	}),
)

func namesRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[ClaimName](reg, "names.claim")
	codec.MustRegister[NameClaimed](reg, "names.claimed")
	codec.MustRegister[NameReleased](reg, "names.released")
	return reg
}

// Decide decides outside Handle on a dated command: an age rule
// (DecideEnvelope) compares with the command's real time, as under
// Handle, where LoadDecision followed by the decider's Decide compared with
// a zero time. The decision is returned, not appended; appended with its
// guard it is stored, or refused when a fact it read changed.
func TestDecideDatesTheCommandAndReturnsTheDecisionUnappended(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := &settable{t: t0}
	store := memstore.New(namesRegistry(), memstore.WithClock(clk.Now))
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(NameReleased{Username: "ada"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	cmd := ClaimName{Username: "ada", AccountID: "a1"}

	clk.Set(t0.Add(24 * time.Hour)) // one day later: still reserved
	if _, err := shell.Decide(ctx, store, names, cmd, nil); !errors.Is(err, errReserved) {
		t.Fatalf("a day after the release: %v, want errReserved", err)
	}

	clk.Set(t0.Add(4 * 24 * time.Hour)) // four days later: free
	dec, err := shell.Decide(ctx, store, names, cmd, nil)
	if err != nil {
		t.Fatalf("four days after the release: %v", err)
	}
	if !dec.Command.CreatedAt.Equal(clk.Now()) || dec.Command.ID.String() == "00000000-0000-0000-0000-000000000000" {
		t.Fatalf("the command is not dated and stamped: %+v", dec.Command)
	}
	if len(dec.Events) != 1 || !dec.State.Taken || dec.Events[0].CorrelationID != dec.Command.ID {
		t.Fatalf("decision %+v", dec)
	}
	if st, _ := store.Stats(ctx); st.MaxPosition != 1 {
		t.Fatalf("Decide appended: %d messages in the log", st.MaxPosition)
	}
	// A fact the decision read changes: its append is refused.
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(NameClaimed{Username: "ada", AccountID: "a2"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, dec.Messages(), shell.AppendOptions{Guard: &dec.Guard}); !errors.Is(err, core.ErrConcurrentAppend) {
		t.Fatalf("append after a conflicting fact: %v, want ErrConcurrentAppend", err)
	}
	// Decided again, and appended with its guard: stored, the command
	// first, marked as decided by the group (its workers skip it).
	if _, err := shell.Decide(ctx, store, names, cmd, nil); err == nil {
		t.Fatal("the name is taken now")
	}
	other := ClaimName{Username: "bob", AccountID: "a3"}
	dec, err = shell.Decide(ctx, store, names, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Append(ctx, dec.Messages(), shell.AppendOptions{Guard: &dec.Guard})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 || res.Messages[0].Metadata[core.DecidedByKey] != "names" || !res.Messages[0].CreatedAt.Equal(clk.Now()) {
		t.Fatalf("appended %+v", res.Messages)
	}

	// A command dated after the store's clock is refused.
	later := func() time.Time { return clk.Now().Add(time.Hour) }
	if _, err := shell.Decide(ctx, store, names, ClaimName{Username: "cy", AccountID: "a4"}, &shell.DecideOptions{Now: later}); !errors.Is(err, shell.ErrFutureCommand) {
		t.Fatalf("a future command: %v, want ErrFutureCommand", err)
	}
}

// Decide on a command without a query decides on its partition, as Load
// reads it.
func TestDecideOnAPartition(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	if _, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	dec, err := shell.Decide(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dec.State, []string{"s1", "s2"}) || len(dec.Events) != 1 || dec.Guard.LastPosition == 0 {
		t.Fatalf("decision %+v", dec)
	}
	if _, err := shell.Decide(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: "s1"}, nil); err == nil {
		t.Fatal("s1 enrolled twice")
	}
}
