package shell_test

import (
	"context"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// Replay is decided per message: after a reset, a batch that reaches past
// the partition's pre-reset mark (a new command appended meanwhile) decides
// only the new command and reacts only to the new event; the commands and
// events processed before the reset are replayed without side effects.
func TestReactionsDoNotRefireAfterReset(t *testing.T) {
	for _, name := range []string{"memstore", "sqlitestore"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rt, store := routerStores[name](t, shell.RouterOptions{Logger: quiet(), BatchSize: 50}, enrolments)
			notifyEnrol(t, store, "c1", "s1")
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			count := func(typ string) int { return len(byType(readAll(t, store), typ)) }
			if n := count("students.notify"); n != 1 {
				t.Fatalf("%d notifications before the reset, want 1", n)
			}
			if err := rt.Stop(ctx, enrolments, "replay"); err != nil {
				t.Fatal(err)
			}
			if err := rt.Reset(ctx, enrolments); err != nil {
				t.Fatal(err)
			}
			notifyEnrol(t, store, "c1", "s2") // the replayed batch reaches past the mark
			if err := rt.Start(ctx, enrolments); err != nil {
				t.Fatal(err)
			}
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if n := count("students.notify"); n != 2 {
				t.Fatalf("%d notifications after the replay, want 2 (s1's once, s2's)", n)
			}
			if n := count("courses.enrolled"); n != 2 {
				t.Fatalf("%d enrolments after the replay, want 2", n)
			}
			if n := count(core.CommandRejectedType); n != 0 {
				t.Fatalf("%d rejections after the replay, want none (s1's command is not decided again)", n)
			}
		})
	}
}
