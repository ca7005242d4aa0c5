package shell_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// outcomeOf is what a decision came to, without the ids a store makes up:
// the command's position and time, the events' payloads, and the guard.
func outcomeOf(res shell.CommandResult) string {
	payloads := make([]any, len(res.Events))
	for i, e := range res.Events {
		payloads[i] = e.Payload
	}
	return fmt.Sprintf("at %d %s: %+v guarded by %+v", res.Position, res.Command.CreatedAt.Format(time.RFC3339Nano), payloads, res.Guard)
}

// The options style: a function taking options takes a pointer to its
// options struct last, nil meaning every default, and a zero struct (every
// field zero) is the same as nil. Handle, Load, LoadDecision and Decide
// decide and read alike with nil and with &XOptions{}, and what they
// decide is the defaults' (the store's clock dates the command).
func TestNilOptionsAreTheDefaults(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	open := func() shell.Store {
		return memstore.New(walletRegistry(), memstore.WithClock(func() time.Time { return at }))
	}
	withNil, withZero := open(), open()
	for _, cmd := range []any{walletDeposit{Owner: "ann", Amount: 5}, walletWithdraw{Owner: "ann", Amount: 3}, walletWithdraw{Owner: "ann", Amount: 30}} {
		got, gotErr := shell.Handle(ctx, withNil, wallets, cmd, nil)
		want, wantErr := shell.Handle(ctx, withZero, wallets, cmd, &shell.HandleOptions{})
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%T: Handle with nil options: %v; with zero options: %v", cmd, gotErr, wantErr)
		}
		if g, w := outcomeOf(got.CommandResult), outcomeOf(want.CommandResult); g != w || !reflect.DeepEqual(got.State, want.State) {
			t.Fatalf("%T: Handle with nil options decided %s, state %+v; with zero options %s, state %+v", cmd, g, got.State, w, want.State)
		}
		if gotErr == nil && !got.Command.CreatedAt.Equal(at) {
			t.Fatalf("%T: the command is dated %v, want the store's clock %v (the default)", cmd, got.Command.CreatedAt, at)
		}
	}
	ann := map[string]string{"owner": "ann"}
	wantState := walletState{Balance: 2, Moves: []int{5, 0, -3}}

	s, g, err := shell.Load(ctx, withNil, wallets, ann, nil)
	if err != nil || !reflect.DeepEqual(s, wantState) {
		t.Fatalf("Load with nil options: %+v, %v; want %+v", s, err, wantState)
	}
	zs, zg, err := shell.Load(ctx, withNil, wallets, ann, &shell.ReadOptions{})
	if err != nil || !reflect.DeepEqual(zs, s) || !reflect.DeepEqual(zg, g) {
		t.Fatalf("Load with zero options: %+v guarded by %+v, %v; with nil options %+v guarded by %+v", zs, zg, err, s, g)
	}

	withdraw := walletWithdraw{Owner: "ann", Amount: 1}
	ds, dg, err := shell.LoadDecision(ctx, withNil, wallets, withdraw, nil)
	if err != nil || !reflect.DeepEqual(ds, wantState) || !reflect.DeepEqual(dg, g) {
		t.Fatalf("LoadDecision with nil options: %+v guarded by %+v, %v; want Load's %+v guarded by %+v", ds, dg, err, wantState, g)
	}
	if zs, zg, err := shell.LoadDecision(ctx, withNil, wallets, withdraw, &shell.ReadOptions{}); err != nil || !reflect.DeepEqual(zs, ds) || !reflect.DeepEqual(zg, dg) {
		t.Fatalf("LoadDecision with zero options: %+v guarded by %+v, %v; with nil options %+v guarded by %+v", zs, zg, err, ds, dg)
	}

	dec, err := shell.Decide(ctx, withNil, wallets, withdraw, nil)
	if err != nil || dec.State.Balance != 1 || !dec.Command.CreatedAt.Equal(at) {
		t.Fatalf("Decide with nil options: %+v, %v; want balance 1 and the command dated by the store's clock", dec, err)
	}
	zdec, err := shell.Decide(ctx, withNil, wallets, withdraw, &shell.DecideOptions{})
	if err != nil || !reflect.DeepEqual(zdec.State, dec.State) || !reflect.DeepEqual(zdec.Guard, dec.Guard) ||
		!zdec.Command.CreatedAt.Equal(dec.Command.CreatedAt) || len(zdec.Events) != 1 || zdec.Events[0].Payload != dec.Events[0].Payload {
		t.Fatalf("Decide with zero options: %+v, %v; with nil options %+v", zdec, err, dec)
	}
}

// Drain with nil options drains every reactor (a command, its decider's
// event, the reaction's command and its event), and, like a zero
// DrainOptions, does not tolerate a failure. AwaitCommand with nil options
// waits with the default poll, and fills the default in on its own copy:
// the options the caller gave are left as they were.
func TestNilOptionsDrainAndAwait(t *testing.T) {
	ctx := context.Background()
	rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, enrolments, notifications)
	appended, err := store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: "s1"}), shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := appended.Messages[0]
	if err := rt.Drain(ctx, nil); err != nil {
		t.Fatalf("Drain with nil options: %v", err)
	}
	var types []any
	for _, m := range readAll(t, store) {
		types = append(types, m.Payload)
	}
	want := []any{EnrolStudent{CourseID: "c1", StudentID: "s1"}, StudentEnrolled{CourseID: "c1", StudentID: "s1"},
		NotifyStudent{StudentID: "s1", CourseID: "c1"}, StudentNotified{StudentID: "s1", CourseID: "c1"}}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("after Drain with nil options the log holds %+v, want %+v", types, want)
	}

	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := shell.AwaitCommand(actx, store, cmd.ID, nil)
	if err != nil || !out.Decided || len(out.Events) != 1 || out.Events[0].Payload != (StudentEnrolled{CourseID: "c1", StudentID: "s1"}) {
		t.Fatalf("AwaitCommand with nil options: %+v, %v; want the command's one event", out, err)
	}
	opts := &shell.AwaitOptions{}
	if _, err := shell.AwaitCommand(actx, store, cmd.ID, opts); err != nil {
		t.Fatal(err)
	}
	if *opts != (shell.AwaitOptions{}) {
		t.Fatalf("AwaitCommand changed the caller's options to %+v", *opts)
	}

	for _, opts := range []*shell.DrainOptions{nil, {}} {
		rt, store := newRouter(t, newClock(), shell.RouterOptions{Logger: quiet()}, strictEnrolments)
		for _, s := range []string{"s1", "s2", "s3"} { // the capacity is 2
			if _, err := store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c1", StudentID: s}), shell.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var failed *shell.GroupFailedError
		if err := rt.Drain(ctx, opts); !errors.As(err, &failed) || !errors.Is(err, errFull) {
			t.Fatalf("Drain with options %v after a failed batch: %v, want its *GroupFailedError (TolerateFailures is off by default)", opts, err)
		}
	}
}
