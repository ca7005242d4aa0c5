package sourcedtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/sourced/sourcedtest"
	"github.com/sourced-go/sourced/statechart"
)

type (
	OpenDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	CloseDoor struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	AutoClose struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	Beep struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	Knocked struct {
		DoorID string `json:"door_id" sourced:"required"`
		Who    string `json:"who"`
	}
	DoorRef struct {
		DoorID string `json:"door_id" sourced:"required"`
	}
	DoorOpened struct {
		DoorRef
		statechart.Move
	}
	DoorClosed struct {
		DoorRef
		statechart.Move
	}
	doorCtx struct{ Knocks int }
)

var (
	opened = statechart.Declare[DoorOpened]("opened")
	closed = statechart.Declare[DoorClosed]("closed")
)

func doorMachine(synced *int) statechart.Machine[doorCtx] {
	m := statechart.Machine[doorCtx]{
		Group: "doors", PartitionBy: []string{"door_id"},
		Context: core.Projection[doorCtx]{}.With(core.Evolve(func(c doorCtx, _ Knocked) doorCtx { c.Knocks++; return c })),
		Reactions: []statechart.Reaction[doorCtx]{
			statechart.React(func(statechart.Instance[doorCtx], DoorOpened) []any { return []any{Beep{}} }),
		},
	}
	if synced != nil {
		m.Sync = []core.SyncFunc[statechart.Instance[doorCtx]]{func(context.Context, core.SyncTx, core.Batch[statechart.Instance[doorCtx]]) error {
			*synced++
			return nil
		}}
	}
	return m.Chart(
		statechart.Initial(statechart.Command[CloseDoor](closed)),
		statechart.Place(closed,
			statechart.CommandFunc(func(c doorCtx, _ OpenDoor, do *statechart.Do) error {
				do.Event(Knocked{Who: "opener"})
				return nil
			}, opened)),
		statechart.Place(opened,
			statechart.Entry(func(doorCtx, statechart.Move) []any { return []any{Beep{}} }),
			statechart.After(time.Minute, AutoClose{}),
			statechart.Command[CloseDoor](closed),
			statechart.Command[AutoClose](closed)),
	)
}

func doorRegistry(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[OpenDoor](reg, "doors.open")
	codec.MustRegister[CloseDoor](reg, "doors.close")
	codec.MustRegister[AutoClose](reg, "doors.auto_close")
	codec.MustRegister[Beep](reg, "doors.beep")
	codec.MustRegister[Knocked](reg, "doors.knocked")
	if err := doorMachine(nil).Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

var closedMove = DoorClosed{DoorRef{"d1"}, statechart.Move{Trigger: "doors.close", Source: "initial", Target: "closed", Exited: []string{}, Entered: []string{"closed"}}}

func TestMachineGivenWhenThen(t *testing.T) {
	reg := doorRegistry(t)
	keys := map[string]string{"door_id": "d1"}
	var synced int
	m := doorMachine(&synced)
	openedMove := DoorOpened{DoorRef{"d1"}, statechart.Move{Trigger: "doors.open", Source: "closed", Target: "opened", Exited: []string{"closed"}, Entered: []string{"opened"}}}
	sourcedtest.Machine(t, m, keys, sourcedtest.WithRegistry(reg)).
		Given(closedMove).
		When(OpenDoor{DoorID: "d1"}).
		Then(Knocked{DoorID: "d1", Who: "opener"}, openedMove, Beep{DoorID: "d1"}, core.After(time.Minute, AutoClose{DoorID: "d1"}), Beep{DoorID: "d1"}).
		ThenStates(openedMove).
		ThenEvents(Knocked{DoorID: "d1", Who: "opener"}).
		ThenDispatched(Beep{DoorID: "d1"}).
		ThenTimers(AutoClose{DoorID: "d1"}).
		ThenPaths("opened").
		ThenDecision(func(t testing.TB, in statechart.Instance[doorCtx], d statechart.Decision) {
			if in.Context.Knocks != 1 || !d.Timers[0].CreatedAt.Equal(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)) {
				t.Fatalf("%+v %v", in.Context, d.Timers[0].CreatedAt)
			}
		}).
		ThenSync(Knocked{DoorID: "d1", Who: "opener"}, openedMove, Beep{DoorID: "d1"}, core.After(time.Minute, AutoClose{DoorID: "d1"}), Beep{DoorID: "d1"})
	if synced != 1 {
		t.Fatalf("sync ran %d times", synced)
	}
	// Another partition's events are not this machine's history: giving
	// one fails the test, saying why, unless the test drops it on purpose.
	other := DoorOpened{DoorRef{"d2"}, statechart.Move{Trigger: "doors.open", Source: "closed", Target: "opened", Exited: []string{"closed"}, Entered: []string{"opened"}}}
	sourcedtest.Machine(t, m, keys, sourcedtest.WithRegistry(reg), sourcedtest.AllowOutsidePartition()).
		Given(closedMove, other).
		When(CloseDoor{DoorID: "d1"}).
		ThenError(statechart.ErrCommandNotHandled)
	if got := failure(func(t testing.TB) {
		sourcedtest.Machine(t, m, keys, sourcedtest.WithRegistry(reg)).
			Given(closedMove, other).
			When(CloseDoor{DoorID: "d1"}).
			ThenError(statechart.ErrCommandNotHandled)
	}); !strings.Contains(got, `its door_id is "d2", not "d1"`) {
		t.Fatalf("a given event of another partition: failure %q", got)
	}
	// From stored paths.
	sourcedtest.Machine(t, m, keys).
		GivenPaths(doorCtx{}, "opened").
		When(CloseDoor{DoorID: "d1"}).
		ThenPaths("closed")
}

// Failing expectations are reported.
func TestMachineFailuresAreReported(t *testing.T) {
	keys := map[string]string{"door_id": "d1"}
	cases := map[string]struct {
		fn   func(t testing.TB)
		want string
	}{
		"wrong configuration": {func(t testing.TB) {
			sourcedtest.Machine(t, doorMachine(nil), keys).Given(closedMove).When(OpenDoor{DoorID: "d1"}).ThenPaths("closed")
		}, "the machine is at [opened], want [closed]"},
		"missing reaction": {func(t testing.TB) {
			sourcedtest.Machine(t, doorMachine(nil), keys).Given(closedMove).When(OpenDoor{DoorID: "d1"}).ThenDispatched()
		}, "messages differ"},
		"not handled": {func(t testing.TB) {
			sourcedtest.Machine(t, doorMachine(nil), keys).Given(closedMove).When(CloseDoor{DoorID: "d1"}).Then()
		}, "was rejected"},
		"both givens": {func(t testing.TB) {
			sourcedtest.Machine(t, doorMachine(nil), keys).Given(closedMove).GivenPaths(doorCtx{}, "closed").When(CloseDoor{DoorID: "d1"}).Then()
		}, "not both"},
		"no When": {func(t testing.TB) { sourcedtest.Machine(t, doorMachine(nil), keys).Then() }, "needs When"},
		"given outside the partition": {func(t testing.TB) {
			other := DoorClosed{DoorRef{"d2"}, closedMove.Move}
			sourcedtest.Machine(t, doorMachine(nil), keys).Given(closedMove, other).When(OpenDoor{DoorID: "d1"}).Then()
		}, "is not in the partition"},
		"when in another partition": {func(t testing.TB) {
			sourcedtest.Machine(t, doorMachine(nil), keys).Given(closedMove).When(OpenDoor{DoorID: "d2"}).Then()
		}, "is in the partition {door_id=d2}, not the test's {door_id=d1}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := failure(tc.fn); !strings.Contains(got, tc.want) {
				t.Fatalf("failure %q, want it to mention %q", got, tc.want)
			}
		})
	}
}

// Given a machine's history, When a command, Then its messages and the
// configuration it reaches.
func ExampleMachine() {
	t := &testing.T{} // in a real test, the test's own t
	sourcedtest.Machine(t, doorMachine(nil), map[string]string{"door_id": "d1"}).
		Given(closedMove).
		When(OpenDoor{DoorID: "d1"}).
		ThenEvents(Knocked{DoorID: "d1", Who: "opener"}).
		ThenTimers(AutoClose{DoorID: "d1"}).
		ThenPaths("opened")
	// Output:
}

// Chained Whens accumulate on a machine: the second goes on from the
// configuration and context the first reached (before, it started again
// from the Given history, where the door is closed and CloseDoor is not
// handled).
func TestMachineChainedWhensAccumulate(t *testing.T) {
	reg := doorRegistry(t)
	keys := map[string]string{"door_id": "d1"}
	m := doorMachine(nil)
	sourcedtest.Machine(t, m, keys, sourcedtest.WithRegistry(reg)).
		Given(closedMove).
		When(OpenDoor{DoorID: "d1"}).
		ThenPaths("opened").
		When(CloseDoor{DoorID: "d1"}).
		ThenPaths("closed").
		When(OpenDoor{DoorID: "d1"}).
		ThenDecision(func(t testing.TB, in statechart.Instance[doorCtx], _ statechart.Decision) {
			if in.Context.Knocks != 2 {
				t.Fatalf("%d knocks after opening twice, want 2 (the first When's event in the history)", in.Context.Knocks)
			}
		})
	// From stored paths too.
	sourcedtest.Machine(t, m, keys).
		GivenPaths(doorCtx{}, "opened").
		When(CloseDoor{DoorID: "d1"}).
		When(OpenDoor{DoorID: "d1"}).
		ThenPaths("opened")
	// An invalid message is a rejection, as for a decider.
	sourcedtest.Machine(t, m, keys, sourcedtest.WithRegistry(reg)).
		Given(closedMove).
		When(OpenDoor{}).
		ThenError(codec.ErrInvalid)
}
