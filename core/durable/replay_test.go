package durable_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
)

// The replay is tested here with no store: a model runner (sim) drives a
// random program of steps, sleeps and receives through Fold and Cursor,
// appending the events the shell's runner would append.

type opSpec struct {
	kind  durable.Kind
	name  string
	args  []any // steps only; nil: keyed by position
	fails int   // failed attempts before success (> retries: fails for good)
}

const retries = 2

type sim struct {
	prog     []opSpec
	history  []core.PositionedMessage
	pending  []core.Message // scheduled: enter the log on the next tick
	executed map[string]json.RawMessage
	// boundaries are the history lengths at the start of each handling,
	// with the key the handling acted on ("" when it only suspended).
	boundaries []int
	acted      []string
}

func (s *sim) add(msgs ...core.Message) {
	for _, m := range msgs {
		m.ID = uuid.New()
		m.CreatedAt = time.Unix(int64(len(s.history)), 0)
		s.history = append(s.history, core.PositionedMessage{Message: m, Position: int64(len(s.history) + 1)})
	}
}

func msg(p any) core.Message { return core.Message{Type: "w.x", Payload: p} }

func result(key string, attempt int) json.RawMessage {
	data, _ := json.Marshal(fmt.Sprintf("%s@%d", key, attempt))
	return data
}

// handle is one handling of the run: the model of the shell's runner.
func (s *sim) handle() (acted string, done bool) {
	run := durable.Fold(s.history)
	if run.Status.Terminal() {
		return "", true
	}
	c := durable.NewCursor("w", run)
	var out []core.Message
	emit := func(p any) { m := msg(p); out = append(out, m); c.Record(core.PositionedMessage{Message: m}) }
	defer func() { s.add(out...) }()
	for _, spec := range s.prog {
		key, err := c.Key(spec.kind, spec.name, spec.args)
		if err != nil {
			panic(err)
		}
		op, action, sig, err := c.Next(durable.Call{Kind: spec.kind, Name: spec.name, Key: key})
		if err != nil {
			emit(durable.WorkflowFailed{WorkflowID: "r", ErrorType: "nondeterminism", Error: err.Error()})
			return key, true
		}
		switch action {
		case durable.Replay:
			continue
		case durable.Suspend:
			return "", false
		case durable.Begin:
			switch spec.kind {
			case durable.KindStep:
				emit(durable.StepStarted{WorkflowID: "r", Seq: op.Seq, Name: spec.name, Key: key, Attempt: 1})
				return key, false
			case durable.KindSleep:
				emit(durable.WaitStarted{WorkflowID: "r", Seq: op.Seq, Name: spec.name, Key: key})
				s.pending = append(s.pending, msg(durable.WaitEnded{WorkflowID: "r", Seq: op.Seq, Key: key, TimedOut: true}))
				return key, false
			}
			emit(durable.WaitStarted{WorkflowID: "r", Seq: op.Seq, Name: spec.name, Key: key, Signal: spec.name})
			sg, ok := c.Run().Available(spec.name)
			if !ok {
				return key, false
			}
			emit(durable.WaitEnded{WorkflowID: "r", Seq: op.Seq, Key: key, SignalID: sg.ID, Payload: sg.Payload})
		case durable.Deliver:
			emit(durable.WaitEnded{WorkflowID: "r", Seq: op.Seq, Key: key, SignalID: sig.ID, Payload: sig.Payload})
			acted = key
		case durable.Execute:
			attempt := op.Attempts
			if attempt <= spec.fails {
				f := durable.StepFailed{WorkflowID: "r", Seq: op.Seq, Name: spec.name, Key: key, Attempt: attempt, ErrorType: "e", Error: "failed"}
				if attempt <= retries {
					at := time.Unix(0, 0)
					f.RetryAt = &at
					emit(f)
					s.pending = append(s.pending, msg(durable.StepStarted{WorkflowID: "r", Seq: op.Seq, Name: spec.name, Key: key, Attempt: attempt + 1}))
					return key, false
				}
				emit(f)
				acted = key
				continue
			}
			res := result(key, attempt)
			s.executed[key] = res
			emit(durable.StepComplete{WorkflowID: "r", Seq: op.Seq, Name: spec.name, Key: key, Attempt: attempt, Result: res})
			acted = key
		}
	}
	if err := c.Done(); err != nil {
		emit(durable.WorkflowFailed{WorkflowID: "r", ErrorType: "nondeterminism", Error: err.Error()})
		return "", true
	}
	emit(durable.WorkflowComplete{WorkflowID: "r"})
	return acted, true
}

// drive runs the program to its end: handlings, the scheduler promoting
// what is pending, and signals sent to receives that wait.
func (s *sim) drive(t *rapid.T) {
	s.executed = map[string]json.RawMessage{}
	s.add(msg(durable.WorkflowStarted{WorkflowID: "r"}))
	for range 1000 {
		s.boundaries = append(s.boundaries, len(s.history))
		acted, done := s.handle()
		s.acted = append(s.acted, acted)
		if done {
			return
		}
		if len(s.pending) > 0 {
			s.add(s.pending...)
			s.pending = nil
			continue
		}
		run := durable.Fold(s.history)
		if cur := run.Current(); cur != nil && cur.Kind == durable.KindReceive && cur.Status == durable.OpWaiting {
			s.add(msg(durable.SignalSent{WorkflowID: "r", Name: cur.Signal, Payload: json.RawMessage(`1`)}))
		}
	}
	t.Fatal("the run did not end in 1000 handlings")
}

func genProgram(t *rapid.T) []opSpec {
	n := rapid.IntRange(1, 8).Draw(t, "ops")
	var prog []opSpec
	for i := range n {
		switch rapid.IntRange(0, 5).Draw(t, fmt.Sprint("kind", i)) {
		case 0:
			prog = append(prog, opSpec{kind: durable.KindSleep, name: "sleep"})
		case 1:
			prog = append(prog, opSpec{kind: durable.KindReceive, name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "signal")})
		default:
			spec := opSpec{kind: durable.KindStep, name: rapid.SampledFrom([]string{"fetch", "charge", "mail"}).Draw(t, "name"), fails: rapid.IntRange(0, retries+1).Draw(t, "fails")}
			if rapid.Bool().Draw(t, "args") {
				spec.args = []any{rapid.IntRange(0, 2).Draw(t, "arg")}
			}
			prog = append(prog, spec)
		}
	}
	return prog
}

// keys returns the program's operations' keys in first-reached order.
func keys(prog []opSpec) []string {
	c := durable.NewCursor("w", durable.Fold(nil))
	var out []string
	for _, s := range prog {
		k, _ := c.Key(s.kind, s.name, s.args)
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Replaying any recorded history gives the same next operation as the
// run took from there, and every memoised result is the one recorded
// when the step ran; a step is executed only while its attempt is due.
func TestReplayProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &sim{prog: genProgram(t)}
		s.drive(t)
		final := durable.Fold(s.history)
		if final.Status != durable.Complete {
			t.Fatalf("status %s: %+v", final.Status, final.Failure)
		}
		if got := lo(final.Ops); !slices.Equal(got, keys(s.prog)) {
			t.Fatalf("recorded ops %v, program's %v", got, keys(s.prog))
		}
		for _, op := range final.Ops {
			if op.Kind == durable.KindStep && op.Status == durable.OpComplete && string(op.Result) != string(s.executed[op.Key]) {
				t.Fatalf("op %s memoised %s, executed %s", op.Key, op.Result, s.executed[op.Key])
			}
		}
		// Re-handling any recorded prefix decides what was decided then.
		for i, b := range s.boundaries {
			replay := &sim{prog: s.prog, history: slices.Clone(s.history[:b]), executed: map[string]json.RawMessage{}}
			acted, _ := replay.handle()
			if acted != s.acted[i] {
				t.Fatalf("handling %d (history of %d events): replay acted on %q, the run on %q", i, b, acted, s.acted[i])
			}
			// The events a handling appends are a function of the history.
			got := replay.history[b:]
			want := s.history[b:min(len(s.history), b+len(got))]
			if fmt.Sprint(payloads(got)) != fmt.Sprint(payloads(want)) {
				t.Fatalf("handling %d appended %v, the run %v", i, payloads(got), payloads(want))
			}
		}
		// Executed steps never run again on a complete history.
		again := &sim{prog: s.prog, history: slices.Clone(s.history), executed: map[string]json.RawMessage{}}
		again.handle()
		if len(again.executed) != 0 || len(again.history) != len(s.history) {
			t.Fatalf("replaying the complete run executed %v", again.executed)
		}
	})
}

func lo(ops []durable.Op) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.Key
	}
	return out
}

func payloads(ms []core.PositionedMessage) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m.Payload
	}
	return out
}

// Any change of a program that changes the operations it reaches within
// its recorded history (a step renamed, reordered, removed, given other
// arguments) is detected, at the first position that differs.
func TestDeterminismViolationsAreDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &sim{prog: genProgram(t)}
		s.drive(t)
		recorded := lo(durable.Fold(s.history).Ops)
		changed := slices.Clone(s.prog)
		i := rapid.IntRange(0, len(changed)-1).Draw(t, "at")
		switch rapid.IntRange(0, 3).Draw(t, "change") {
		case 0:
			changed[i].name += "_renamed"
		case 1:
			j := rapid.IntRange(0, len(changed)-1).Draw(t, "with")
			changed[i], changed[j] = changed[j], changed[i]
		case 2:
			changed = slices.Delete(changed, i, i+1)
		case 3:
			changed[i].args = []any{"other"}
			changed[i].kind = durable.KindStep
		}
		want := keys(changed)
		diverge := -1
		for k := range recorded {
			if k >= len(want) || want[k] != recorded[k] {
				diverge = k
				break
			}
		}
		run := durable.Fold(s.history)
		c := durable.NewCursor("w", run)
		var got error
		for _, spec := range changed {
			key, _ := c.Key(spec.kind, spec.name, spec.args)
			if _, _, _, err := c.Next(durable.Call{Kind: spec.kind, Name: spec.name, Key: key}); err != nil {
				got = err
				break
			}
		}
		if got == nil {
			got = c.Done()
		}
		if diverge < 0 {
			if got != nil && len(want) <= len(recorded) {
				t.Fatalf("an unchanged sequence %v was reported: %v", want, got)
			}
			return
		}
		var nd *durable.NonDeterminismError
		if !errors.As(got, &nd) || nd.Seq != diverge || nd.Recorded.Key != recorded[diverge] {
			t.Fatalf("recorded %v, changed program %v: error %v, want one at position %d", recorded, want, got, diverge)
		}
	})
}
