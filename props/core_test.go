package props_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

type Deposit struct {
	Account string `json:"account" sourced:"required"`
	Amount  int    `json:"amount"`
}

type Withdraw struct {
	Account string `json:"account" sourced:"required"`
	Amount  int    `json:"amount"`
}

type Deposited struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

type Withdrawn struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

type Transferred struct {
	Accounts []string `json:"accounts"`
	Amount   int      `json:"amount"`
}

type Alert struct {
	Account string `json:"account"`
}

func bankRegistry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[Deposit](reg, "bank.deposit")
	codec.MustRegister[Withdraw](reg, "bank.withdraw")
	codec.MustRegister[Deposited](reg, "bank.deposited")
	codec.MustRegister[Withdrawn](reg, "bank.withdrawn")
	codec.MustRegister[Transferred](reg, "bank.transferred")
	codec.MustRegister[Alert](reg, "bank.alert")
	return reg
}

type account struct {
	Balance int
	Ops     int
}

var bank = core.Decider[account]{Group: "bank.accounts", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(s account, e Deposited) account { s.Balance += e.Amount; s.Ops++; return s }),
	core.Evolve(func(s account, e Withdrawn) account { s.Balance -= e.Amount; s.Ops++; return s }),
	core.Decide(func(s account, c Deposit) ([]any, error) {
		if c.Amount <= 0 {
			return nil, fmt.Errorf("deposit must be positive")
		}
		return []any{Deposited(c)}, nil
	}),
	core.Decide(func(s account, c Withdraw) ([]any, error) {
		if c.Amount > s.Balance {
			return nil, fmt.Errorf("insufficient funds")
		}
		return []any{Withdrawn(c)}, nil
	}),
	core.React(func(s account, e Withdrawn) []any {
		if s.Balance < 10 {
			return []any{core.After(time.Hour, Alert{Account: e.Account})}
		}
		return nil
	}),
)

var accounts = []string{"a", "b", "c"}

func genEvent(t *rapid.T, label string) core.Message {
	acct := rapid.SampledFrom(accounts).Draw(t, label+"-account")
	amount := rapid.IntRange(1, 50).Draw(t, label+"-amount")
	var p any
	switch rapid.IntRange(0, 2).Draw(t, label+"-kind") {
	case 0:
		p = Deposited{Account: acct, Amount: amount}
	case 1:
		p = Withdrawn{Account: acct, Amount: amount}
	default:
		p = Transferred{Accounts: []string{acct, rapid.SampledFrom(accounts).Draw(t, label+"-to")}, Amount: amount}
	}
	return core.NewMessage(p).Stamp(uuid.New(), time.Unix(int64(rapid.IntRange(0, 1e6).Draw(t, label+"-at")), 0))
}

func genCommand(t *rapid.T) core.Message {
	acct := rapid.SampledFrom(accounts).Draw(t, "cmd-account")
	amount := rapid.IntRange(-5, 80).Draw(t, "cmd-amount")
	if rapid.Bool().Draw(t, "deposit") {
		return core.NewMessage(Deposit{Account: acct, Amount: amount})
	}
	return core.NewMessage(Withdraw{Account: acct, Amount: amount})
}

// The same history and command always give the same decision, and folding
// a history in two parts gives the state of folding it whole.
func TestDeciderReplayIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		history := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) core.Message { return genEvent(t, "h") }), 0, 30).Draw(t, "history")
		cmd := genCommand(t)
		d1, err1 := bank.Run(history, cmd)
		d2, err2 := bank.Run(slices.Clone(history), cmd)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(d1, d2) {
			t.Fatalf("two runs differ: %+v %v / %+v %v", d1, err1, d2, err2)
		}
		cut := rapid.IntRange(0, len(history)).Draw(t, "cut")
		whole := bank.Evolve(bank.Initial(), history...)
		split := bank.Evolve(bank.Evolve(bank.Initial(), history[:cut]...), history[cut:]...)
		if whole != split {
			t.Fatalf("fold is not a left fold: %+v vs %+v", whole, split)
		}
	})
}

// keysByHand extracts key pairs without the codec, as a model.
func keysByHand(p any) []codec.KeyPair {
	switch v := p.(type) {
	case Deposited:
		return []codec.KeyPair{{Name: "account", Value: v.Account}, {Name: "amount", Value: fmt.Sprint(v.Amount)}}
	case Withdrawn:
		return []codec.KeyPair{{Name: "account", Value: v.Account}, {Name: "amount", Value: fmt.Sprint(v.Amount)}}
	case Transferred:
		out := []codec.KeyPair{{Name: "amount", Value: fmt.Sprint(v.Amount)}}
		for _, a := range v.Accounts {
			out = append(out, codec.KeyPair{Name: "accounts", Value: a})
		}
		return out
	}
	return nil
}

var typeNames = map[reflect.Type]string{
	reflect.TypeFor[Deposited]():   "bank.deposited",
	reflect.TypeFor[Withdrawn]():   "bank.withdrawn",
	reflect.TypeFor[Transferred](): "bank.transferred",
}

// Guard.Conflicting agrees with a naive reading of the rules: a later
// message conflicts when its position is after the guard's and some
// condition has its type and finds every one of its attribute values among
// the message's.
func TestGuardConflictsMatchNaiveModel(t *testing.T) {
	reg := bankRegistry()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 25).Draw(t, "n")
		log := make([]core.PositionedMessage, n)
		for i := range log {
			m := genEvent(t, "log")
			m.Type = typeNames[core.PayloadType(m.Payload)]
			log[i] = core.PositionedMessage{Message: m, Position: int64(i + 1)}
		}
		conds := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) core.Condition {
			c := core.Condition{Type: rapid.SampledFrom([]string{"bank.deposited", "bank.withdrawn", "bank.transferred"}).Draw(t, "type"), Attrs: map[string]string{}}
			if rapid.Bool().Draw(t, "by-account") {
				name := "account"
				if c.Type == "bank.transferred" {
					name = "accounts"
				}
				c.Attrs[name] = rapid.SampledFrom(accounts).Draw(t, "value")
			}
			return c
		}), 0, 3).Draw(t, "conditions")
		g := core.Guard{Conditions: conds, LastPosition: int64(rapid.IntRange(0, n).Draw(t, "last"))}

		var want []int64
		for _, m := range log {
			if m.Position <= g.LastPosition {
				continue
			}
			keys := keysByHand(m.Payload)
			for _, c := range conds {
				if c.Type != m.Type {
					continue
				}
				all := true
				for k, v := range c.Attrs {
					if !slices.Contains(keys, codec.KeyPair{Name: k, Value: v}) {
						all = false
					}
				}
				if all {
					want = append(want, m.Position)
					break
				}
			}
		}
		var got []int64
		for _, m := range g.Conflicting(log, core.KeysFrom(reg)) {
			got = append(got, m.Position)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("conflicts %v, model says %v", got, want)
		}
	})
}

// Along any chain command -> event -> reaction, each message is caused by
// the one before it and correlated with the command that started it.
func TestCorrelationChains(t *testing.T) {
	reg := bankRegistry()
	r, err := effects.FromDefinition(reg, bank)
	if err != nil {
		t.Fatal(err)
	}
	_ = r
	rapid.Check(t, func(t *rapid.T) {
		root := core.NewMessage(Withdraw{Account: "a", Amount: rapid.IntRange(0, 20).Draw(t, "amount")}).Stamp(uuid.New(), time.Unix(0, 0))
		history := []core.PositionedMessage{{Message: core.NewMessage(Deposited{Account: "a", Amount: 20}).Stamp(uuid.New(), time.Unix(0, 0)), Position: 1}}
		cmd := core.PositionedMessage{Message: root, Position: 2}
		pairs, err := effects.Step(bank, effects.Claim{Partition: map[string]string{"account": "a"}, Messages: []core.PositionedMessage{cmd}, History: history})
		if err != nil {
			t.Fatal(err)
		}
		evs := effects.Messages(pairs)
		if len(evs) != 1 {
			t.Fatalf("events %+v", evs)
		}
		ev := core.PositionedMessage{Message: evs[0].Stamp(uuid.New(), time.Unix(10, 0)), Position: 3}
		if ev.CausationID != root.ID || ev.CorrelationID != root.ID {
			t.Fatalf("event link: %+v", ev.Message)
		}
		pairs, err = effects.Step(bank, effects.Claim{Partition: map[string]string{"account": "a"}, Messages: []core.PositionedMessage{ev}, History: append(history, ev)})
		if err != nil {
			t.Fatal(err)
		}
		for _, rm := range effects.Messages(pairs) {
			if rm.CausationID != ev.ID || rm.CorrelationID != root.ID {
				t.Fatalf("reaction link: causation %v (event %v), correlation %v (root %v)", rm.CausationID, ev.ID, rm.CorrelationID, root.ID)
			}
			if !rm.CreatedAt.Equal(ev.CreatedAt.Add(time.Hour)) {
				t.Fatalf("reaction delay relative to the event: %v", rm.CreatedAt)
			}
		}
	})
}

type tally struct{ N int }

var counter = core.Decider[tally]{Group: "bank.tally", PartitionBy: []string{"account"}}.With(
	core.Evolve(func(s tally, e Deposited) tally { s.N++; return s }),
)

// A combined decider decides exactly as its parts do, and its state is the
// pair of their states.
func TestCombineAgreesWithItsParts(t *testing.T) {
	both := core.Combine(bank, counter)
	rapid.Check(t, func(t *rapid.T) {
		history := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) core.Message { return genEvent(t, "h") }), 0, 20).Draw(t, "history")
		cmd := genCommand(t)
		want, werr := bank.Run(history, cmd)
		got, gerr := both.Run(history, cmd)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("errors differ: %v vs %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		if got.State.First != want.State || !reflect.DeepEqual(got.Events, want.Events) || !reflect.DeepEqual(got.Reactions, want.Reactions) {
			t.Fatalf("combined %+v, alone %+v", got, want)
		}
		if got.State.Second != counter.Evolve(counter.Initial(), append(history, got.Events...)...) {
			t.Fatalf("second part state %+v", got.State.Second)
		}
	})
}
