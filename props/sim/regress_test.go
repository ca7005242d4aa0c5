package sim_test

import (
	"testing"

	"github.com/sourced-go/sourced/props/sim"
)

// Traces the simulator printed, pasted as regression tests. Each failed
// with a known bug of this wave re-introduced (see the test's comment).

// A worker's claim is released by the reaper while the worker is between
// its claim and its ack (the clock jumped past the claim TTL): the ack
// fails with ErrNotClaimant, which must abandon the batch, never fail or
// retry the group.
func TestSimLostClaimAbandonsTheBatch(t *testing.T) {
	sim.Replay(t, sim.Setup{Store: "memory", Processes: 3, Workers: 2, BatchSize: 1, BatchesPerHandle: 3}, []sim.Action{
		{Kind: sim.Reap, Proc: 1},
		{Kind: sim.ClientOp, Worker: 1, Target: 1, Op: 1, N: 736},
		{Kind: sim.Work, Worker: 1, Target: 1, Fault: sim.Fault{Kind: sim.Interleave, At: 1, Then: []sim.Action{{Kind: sim.Reap}, {Kind: sim.ClockStep, N: 30707}}}},
		{Kind: sim.Work, Proc: 1, Target: 3, Fault: sim.Fault{Kind: sim.Interleave, At: 2, Then: []sim.Action{{Kind: sim.Work, Proc: 1, Target: 3}, {Kind: sim.Reap}, {Kind: sim.ClockStep, N: 23506}}}},
	})
}

// Two workers of one group fail at once on two poisoned partitions: the
// second failure must count (the error strategy reads and writes the
// retry count in one transaction, Groups.ChangeGroup), so the count the
// strategy reports goes 1, 2, 3, never twice the same.
func TestSimConcurrentFailuresEachCount(t *testing.T) {
	sim.Replay(t, sim.Setup{Store: "memory", Processes: 2, Workers: 1, BatchSize: 1, BatchesPerHandle: 3}, []sim.Action{
		{Kind: sim.ClientOp, Proc: 1, Target: 2, Op: 1, N: 579},
		{Kind: sim.ClientOp, Target: 2, Op: 1, N: 874},
		{Kind: sim.Work, Target: 4, Fault: sim.Fault{Kind: sim.Interleave, At: 3, Then: []sim.Action{{Kind: sim.Work, Proc: 1, Target: 4}, {Kind: sim.ClockStep, N: 3065}, {Kind: sim.ClockStep, N: 1981}}}},
	})
}

// The clock steps back while Handle waits for the write lock: the command
// must still be appended now, before its events, never scheduled behind
// them (Handle dates it inside its transaction, with the append's one
// clock reading).
func TestSimHandleUnderAClockStepBack(t *testing.T) {
	sim.Replay(t, sim.Setup{Store: "memory", Processes: 3, Workers: 2, BatchSize: 3, BatchesPerHandle: 1}, []sim.Action{
		{Kind: sim.ClientOp, Proc: 2, Worker: 1, Op: 1, N: 794, Fault: sim.Fault{Kind: sim.Interleave, At: 1, Then: []sim.Action{{Kind: sim.ClockStep, N: -3153}, {Kind: sim.ClockStep, N: -8191}, {Kind: sim.Reap, Proc: 2}}}},
	})
}

// Found in main by the simulator: an OpenDoor waits for the workers when
// a CloseDoor of the same door is handled synchronously; the workers claim
// both, and decided the handled CloseDoor a second time (a machine's Step
// ignored core.DecidedByKey). Fixed in statechart.Machine.Step.
func TestSimHandledMachineCommandDecidedOnce(t *testing.T) {
	sim.Replay(t, sim.Setup{Store: "memory", Processes: 2, Workers: 2, BatchSize: 2, BatchesPerHandle: 1}, []sim.Action{
		{Kind: sim.ClientOp, Worker: 1, Target: 3, N: 852},
		{Kind: sim.ClientOp, Worker: 1, Target: 3, Op: 2, N: 939},
	})
}
