package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

type (
	RegisterAccount struct {
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
	OrderItems struct {
		OrderID  string   `json:"order_id" sourced:"required"`
		Products []string `json:"products" sourced:"noindex"`
	}
)

func accountsRegistry(t *testing.T) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry()
	codec.MustRegister[RegisterAccount](reg, "acc.register")
	codec.MustRegister[AccountRegistered](reg, "acc.registered")
	codec.MustRegister[UsernameChanged](reg, "acc.username_changed")
	codec.MustRegister[OrderItems](reg, "acc.order_items")
	return reg
}

var usernameTaken = core.Projection[bool]{}.With(
	core.Evolve(func(bool, AccountRegistered) bool { return true }),
	core.Evolve(func(bool, UsernameChanged) bool { return false }),
)

// A part whose projection evolves a type none of its filters selects
// would leave that type out of the read and the guard without a word:
// Where("username") does not select UsernameChanged (its attributes are
// old_username and new_username), so a rename would be invisible and a
// name taken twice. Check refuses the query, naming the type.
func TestQueryRefusesAnEvolvedTypeNoFilterSelects(t *testing.T) {
	reg := accountsRegistry(t)
	d := core.Decider[bool]{Group: "acc.usernames", PartitionBy: []string{"account_id"}}.With(
		core.Reads(func(c RegisterAccount) core.Query[bool] {
			return core.Query[bool]{core.Read(usernameTaken, func(_ bool, v bool) bool { return v }, core.Where("username", c.Username))}
		}),
		core.Decide(func(taken bool, c RegisterAccount) ([]any, error) { return []any{AccountRegistered(c)}, nil }),
	)
	err := d.Check(reg)
	if !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("Check: %v, want ErrDefinition", err)
	}
	if !strings.Contains(err.Error(), "UsernameChanged") || !strings.Contains(err.Error(), "acc.username_changed") {
		t.Fatalf("Check's error does not name the type left out: %v", err)
	}
	if _, _, err := d.QueryPlan(reg, core.NewMessage(RegisterAccount{"a1", "ada"})); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("QueryPlan: %v, want ErrDefinition", err)
	}

	// With a filter for each type (Only), every evolved type is read.
	fixed := core.Query[bool]{core.Read(usernameTaken, func(_ bool, v bool) bool { return v },
		core.Only[AccountRegistered](core.Where("username", "ada")),
		core.Only[UsernameChanged](core.Where("old_username", "ada")),
	)}
	if _, err := fixed.Plan(reg); err != nil {
		t.Fatalf("a filter per type: %v", err)
	}
	// AllEvents selects every type.
	all := core.Query[bool]{core.Read(usernameTaken, func(_ bool, v bool) bool { return v }, core.AllEvents())}
	if _, err := all.Plan(reg); err != nil {
		t.Fatalf("AllEvents: %v", err)
	}
}

// A query with no parts reads nothing and guards nothing: it is refused
// when planned (so Handle and LoadDecision refuse the command), though
// Check accepts a query that has no parts for the zero command only (a
// ReadEach over a list the zero command leaves empty).
func TestQueryWithNoPartsIsRefused(t *testing.T) {
	reg := accountsRegistry(t)
	if _, err := (core.Query[bool]{}).Plan(reg); !errors.Is(err, core.ErrDefinition) || !strings.Contains(err.Error(), "no parts") {
		t.Fatalf("an empty query planned: %v", err)
	}
	registered := core.Projection[bool]{}.With(core.Evolve(func(bool, AccountRegistered) bool { return true }))
	d := core.Decider[int]{Group: "acc.orders", PartitionBy: []string{"order_id"}}.With(
		core.Reads(func(c OrderItems) core.Query[int] {
			return core.ReadEach(c.Products, registered, func(n int, _ string, taken bool) int {
				if taken {
					n++
				}
				return n
			}, func(p string) core.Filter { return core.Where("username", p) })
		}),
		core.Decide(func(int, OrderItems) ([]any, error) { return nil, nil }),
	)
	if err := d.Check(reg); err != nil {
		t.Fatalf("Check of a ReadEach query: %v", err)
	}
	if _, _, err := d.QueryPlan(reg, core.NewMessage(OrderItems{OrderID: "o1"})); !errors.Is(err, core.ErrDefinition) {
		t.Fatalf("a command whose query has no parts: %v, want ErrDefinition", err)
	}
	if _, _, err := d.QueryPlan(reg, core.NewMessage(OrderItems{OrderID: "o1", Products: []string{"p1"}})); err != nil {
		t.Fatalf("a command whose query has a part: %v", err)
	}
}
