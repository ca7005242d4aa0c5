package shell_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// notifyQueue is an Exclusive decider with no PartitionBy: a queue of
// commands, each decided in its own partition ({core.IDKey: its id}).
var notifyQueue = core.Decider[int]{Group: "students.notify_queue", Exclusive: true}.With(
	core.Decide(func(_ int, c NotifyStudent) ([]any, error) { return []any{StudentNotified(c)}, nil }),
)

// Handle on an id-partitioned decider decides the command and moves the
// group's offset past it (it failed in AdvanceOffset with the partition {}),
// so that the router's workers decide only the commands appended without
// Handle, each once.
func TestHandleOnAQueueDecider(t *testing.T) {
	stores := map[string]func(t *testing.T) shell.Store{
		"memstore": func(*testing.T) shell.Store { return memstore.New(courseRegistry()) },
		"sqlitestore": func(t *testing.T) shell.Store {
			s, err := sqlitestore.Install(t.Context(), filepath.Join(t.TempDir(), "queue.db"), sqlitestore.Options{Registry: courseRegistry(), Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := open(t)
			rt, err := shell.NewRouter(store, shell.RouterOptions{}, notifyQueue)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"s1", "s1", "s2"} {
				res, err := shell.Handle(ctx, store, notifyQueue, NotifyStudent{StudentID: s, CourseID: "c1"}, nil)
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				if len(res.Events) != 1 {
					t.Fatalf("Handle: events %v, want one", res.Events)
				}
			}
			if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s3"})}, shell.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			log := readAll(t, store)
			if n := len(byType(log, "students.notified")); n != 4 {
				t.Fatalf("%d commands decided, want 4 (3 by Handle, 1 by a worker), each once", n)
			}
		})
	}
}
