package shell_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// blockingSync is a pure reactor whose sync work blocks until its context
// ends (or release closes), reporting when it starts and how it ended.
type blockingSync struct {
	entered chan struct{}
	ended   chan error
	release chan struct{}
}

func (b *blockingSync) GroupID() string        { return "shell_test.blocking_sync" }
func (b *blockingSync) HandledTypes() []string { return []string{"students.notify"} }
func (b *blockingSync) Exclusive() bool        { return true }
func (b *blockingSync) Pure() bool             { return true }
func (b *blockingSync) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Sync{Work: func(ctx context.Context, _ core.SyncTx) error {
			report(b.entered, struct{}{})
			select {
			case <-ctx.Done():
				report(b.ended, ctx.Err())
				return ctx.Err()
			case <-b.release:
				report(b.ended, nil)
				return nil
			}
		}}}})
	}
	return pairs, nil
}

// report sends v on c unless c is full (the router may run a failed
// batch's sync work again, committing its claim on its own).
func report[T any](c chan T, v T) {
	select {
	case c <- v:
	default:
	}
}

// TestBlockedSyncDoesNotWedgeWrites (issue 30 item 10): sync work that
// blocks holds the write transaction, and with it SQLite's one writer
// connection. Another goroutine's Append with no deadline fails with
// shell.ErrBusy after the store's busy timeout instead of waiting for it
// (before: for ever; the busy timeout bounded only waits across
// processes), and the sync work's context is cancelled once the batch
// outlives its limit (RouterOptions.SyncTimeout), failing the batch with
// a *shell.BatchTimeoutError; the writer is then free and clean.
func TestBlockedSyncDoesNotWedgeWrites(t *testing.T) {
	store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "sync.db"), sqlitestore.Options{Registry: courseRegistry(), Logger: quiet(), BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := &blockingSync{entered: make(chan struct{}, 1), ended: make(chan error, 1), release: make(chan struct{})}
	failed := make(chan error, 10)
	obs := shell.ObserverFunc(func(_ context.Context, o shell.Observation) {
		if f, ok := o.(shell.BatchFailed); ok {
			report(failed, f.Err)
		}
	})
	rt, err := shell.NewRouter(store, shell.RouterOptions{Logger: quiet(), SyncTimeout: time.Second, Observer: obs}, b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rt.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	handled := make(chan error, 1)
	go func() {
		_, err := rt.HandleNext(ctx, b, "w1")
		handled <- err
	}()
	<-b.entered
	appended := make(chan error, 1)
	go func() {
		_, err := store.Append(context.Background(), []core.Message{core.NewMessage(CourseCreated{CourseID: "c1"})}, shell.AppendOptions{})
		appended <- err
	}()
	select {
	case err := <-appended:
		if !errors.Is(err, shell.ErrBusy) {
			t.Fatalf("append behind a blocked sync: %v, want shell.ErrBusy", err)
		}
	case <-time.After(30 * time.Second):
		close(b.release)
		t.Fatal("an append with no deadline still waits for a blocked sync after 30 s, with a 200 ms busy timeout")
	}
	select {
	case err := <-b.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the sync work ended with %v, want its context past its deadline", err)
		}
	case <-time.After(30 * time.Second):
		close(b.release)
		t.Fatal("the sync work's context is not cancelled 30 s into a batch limited to 1 s")
	}
	if err := <-handled; err != nil {
		t.Fatalf("handle: %v", err)
	}
	var te *shell.BatchTimeoutError
	if err := <-failed; !errors.As(err, &te) || te.Timeout != time.Second {
		t.Fatalf("the batch failed with %v, want a *shell.BatchTimeoutError of 1s", err)
	}
	// The writer is free, outside any transaction.
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(CourseCreated{CourseID: "c2"})}, shell.AppendOptions{}); err != nil {
		t.Fatalf("append after: %v", err)
	}
}
