package sim

import (
	"fmt"
	"strings"
)

// Kind is what an action does.
type Kind int

// The actions. To add one: a Kind here (with its name in kindNames), what
// it does in World.doCtx, and its weight in Plan's draw (gen).
const (
	// ClientOp runs a domain's client operation (Target: the domain, Op,
	// N: its parameter): an append, a synchronous Handle, a guarded
	// decision.
	ClientOp Kind = iota
	// Work runs one worker round: Router.HandleNext of reactor Target by
	// worker Worker of process Proc (up to BatchesPerHandle batches).
	Work
	// Reap runs process Proc's stale-claim reaper once (heartbeats,
	// stale and old claims released, drained offsets, housekeeping).
	Reap
	// Promote runs process Proc's scheduler once (scheduled messages due
	// are promoted).
	Promote
	// CatchUp runs process Proc's catch-up poll once.
	CatchUp
	// ClockStep moves the clock by N milliseconds (negative: back).
	ClockStep
	// Kill kills process Proc: a new one takes its slot, the old one's
	// claims are left to the reaper.
	Kill
	// CrashAll crashes everything: every process dies and the store is
	// reopened from what was committed.
	CrashAll
)

var kindNames = []string{"ClientOp", "Work", "Reap", "Promote", "CatchUp", "ClockStep", "Kill", "CrashAll"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// FaultKind is a fault injected into an action.
type FaultKind int

// The faults. To add one: a FaultKind here (named in faultNames) and what
// it does at a store call in World.point (or, like Cancel, through the
// action's context).
const (
	NoFault FaultKind = iota
	// Busy makes the At-th store call (the first write from there)
	// fail with driver.ErrBusy, writing nothing.
	Busy
	// Cancel cancels the action's context at the At-th time anything
	// looks at it (Done or Err): mid-call, at the same moment every run.
	Cancel
	// Crash crashes the system at the At-th store call: that call and
	// every later one fail, a transaction under way never commits, then
	// everything restarts (see CrashAll).
	Crash
	// CrashAfter crashes the system just after the At-th store call (the
	// first outside a transaction from there) returned: done, but its
	// answer lost.
	CrashAfter
	// Interleave runs the actions Then at the At-th store call (the first
	// outside a transaction from there): what other processes do while
	// this one waits for the store.
	Interleave
)

var faultNames = []string{"NoFault", "Busy", "Cancel", "Crash", "CrashAfter", "Interleave"}

func (k FaultKind) String() string {
	if int(k) < len(faultNames) {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is the fault of an action.
type Fault struct {
	Kind FaultKind
	At   int
	Then []Action
}

// Action is one step of a run. Every choice it needs is in it, so a
// trace replays without the random source, and an action removed from a
// trace changes no other.
type Action struct {
	Kind   Kind
	Proc   int
	Worker int
	Target int
	Op     int
	N      int64
	Fault  Fault
}

func (a Action) String() string {
	var s string
	switch a.Kind {
	case ClientOp:
		s = fmt.Sprintf("client domain=%d op=%d n=%d", a.Target, a.Op, a.N)
	case Work:
		s = fmt.Sprintf("work proc=%d worker=%d reactor=%d", a.Proc, a.Worker, a.Target)
	case ClockStep:
		s = fmt.Sprintf("clock %+dms", a.N)
	default:
		s = fmt.Sprintf("%s proc=%d", a.Kind, a.Proc)
	}
	if a.Fault.Kind != NoFault {
		s += fmt.Sprintf(" [%s at %d", a.Fault.Kind, a.Fault.At)
		if len(a.Fault.Then) > 0 {
			var in []string
			for _, b := range a.Fault.Then {
				in = append(in, b.String())
			}
			s += ": " + strings.Join(in, "; ")
		}
		s += "]"
	}
	return s
}

// GoString renders the action as a Go literal, for a regression test.
func (a Action) GoString() string {
	var parts []string
	parts = append(parts, "Kind: sim."+a.Kind.String())
	if a.Proc != 0 {
		parts = append(parts, fmt.Sprintf("Proc: %d", a.Proc))
	}
	if a.Worker != 0 {
		parts = append(parts, fmt.Sprintf("Worker: %d", a.Worker))
	}
	if a.Target != 0 {
		parts = append(parts, fmt.Sprintf("Target: %d", a.Target))
	}
	if a.Op != 0 {
		parts = append(parts, fmt.Sprintf("Op: %d", a.Op))
	}
	if a.N != 0 {
		parts = append(parts, fmt.Sprintf("N: %d", a.N))
	}
	if a.Fault.Kind != NoFault {
		f := fmt.Sprintf("Fault: sim.Fault{Kind: sim.%s, At: %d", a.Fault.Kind, a.Fault.At)
		if len(a.Fault.Then) > 0 {
			var in []string
			for _, b := range a.Fault.Then {
				in = append(in, b.GoString())
			}
			f += ", Then: []sim.Action{" + strings.Join(in, ", ") + "}"
		}
		parts = append(parts, f+"}")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
