package shell_test

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// stuck is a reactor whose batches block: until release is closed
// (ignoring their context) when honour is false, else until their
// context is cancelled. Later batches, once done is set, ack at once.
type stuck struct {
	entered chan struct{}
	release chan struct{}
	honour  bool
	calls   atomic.Int64
	acked   atomic.Int64
}

func newStuck(honour bool) *stuck {
	return &stuck{entered: make(chan struct{}, 16), release: make(chan struct{}), honour: honour}
}

func (s *stuck) HandledTypes() []string  { return []string{"students.notify"} }
func (s *stuck) PartitionKeys() []string { return []string{"student_id"} }
func (s *stuck) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	if s.calls.Add(1) == 1 {
		s.entered <- struct{}{}
		if s.honour {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		<-s.release
	}
	var pairs []effects.Pair
	for _, m := range c.Messages {
		pairs = append(pairs, effects.Pair{Source: m, Signals: []effects.Signal{effects.Ack{}}})
	}
	s.acked.Add(int64(len(pairs)))
	return pairs, nil
}

func stopConfig() shell.Config {
	cfg := testConfig(shell.SystemClock{})
	cfg.Workers = 1
	cfg.StopTimeout = 100 * time.Millisecond
	cfg.CatchUpInterval = time.Hour
	return cfg
}

// TestStartAfterATimedOutStop: a Stop that timed out leaves its stuck
// worker running; Start refuses (ErrStillRunning) until it exited, so
// that the old worker never runs beside the new run's. Before, Start
// started a second run at once, and the old worker read the new run's
// quit channel.
func TestStartAfterATimedOutStop(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	s := newStuck(false)
	rt, err := shell.NewRuntime(store, stopConfig(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	notify(t, store, "s1", "c1")
	<-s.entered
	if err := rt.Stop(ctx); !errors.Is(err, shell.ErrStopTimeout) {
		t.Fatalf("stop with a stuck batch: %v, want ErrStopTimeout", err)
	}
	if err := rt.Start(ctx); !errors.Is(err, shell.ErrStillRunning) {
		t.Fatalf("start while the stuck worker runs: %v, want ErrStillRunning", err)
	}
	close(s.release)
	eventually(t, "the stuck batch acknowledged", func() bool { return s.acked.Load() == 1 })
	var err2 error
	eventually(t, "a start once the old worker exited", func() bool {
		err2 = rt.Start(ctx)
		return !errors.Is(err2, shell.ErrStillRunning)
	})
	if err2 != nil {
		t.Fatal(err2)
	}
	notify(t, store, "s2", "c1")
	eventually(t, "the new run processes", func() bool { return s.acked.Load() == 2 })
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStopAndCancel: a hard stop cancels the contexts of the batches
// still running after the grace period; the cancelled batch is no
// failure (the group stays active) and is handled again by the next run.
func TestStopAndCancel(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	s := newStuck(true)
	rt, err := shell.NewRuntime(store, stopConfig(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	notify(t, store, "s1", "c1")
	<-s.entered
	start := time.Now()
	if err := rt.StopAndCancel(ctx, 10*time.Millisecond); err != nil {
		t.Fatalf("hard stop: %v", err)
	}
	if took := time.Since(start); took >= 100*time.Millisecond {
		t.Fatalf("the hard stop took %v, as long as the stop timeout", took)
	}
	if info, _ := store.Group(ctx, "shell_test.stuck"); info.Status != shell.StatusActive || s.acked.Load() != 0 {
		t.Fatalf("after the hard stop: group %s, %d acked; want active and nothing acked", info.Status, s.acked.Load())
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cancelled batch handled again", func() bool { return s.acked.Load() == 1 })
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStartingAGroupWakesItsWorkers: a group started again (Router.Start)
// is processed at once, not at the next catch-up poll (an hour away
// here): the manual's reactor_resumed.
func TestStartingAGroupWakesItsWorkers(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	rt := startRuntime(t, store, stopConfig(), notifications)
	if err := rt.Router().Stop(ctx, notifications, "maintenance"); err != nil {
		t.Fatal(err)
	}
	notify(t, store, "s1", "c1")
	time.Sleep(20 * time.Millisecond)
	if n := len(byType(readAll(t, store), "students.notified")); n != 0 {
		t.Fatalf("a stopped group processed %d messages", n)
	}
	if err := rt.Router().Start(ctx, notifications); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the started group processes its message", func() bool {
		return len(byType(readAll(t, store), "students.notified")) == 1
	})
}

// TestSuperviseWithoutSignals: with NoSignals, Supervise leaves the
// process's signals to the host and runs until its context ends; with
// Signals, it stops on those.
func TestSuperviseWithoutSignals(t *testing.T) {
	// The host's own handler, so that SIGUSR1 never kills the test.
	host := make(chan os.Signal, 4)
	signal.Notify(host, syscall.SIGUSR1)
	defer signal.Stop(host)
	run := func(opts *shell.SuperviseOptions) (context.CancelFunc, chan error) {
		rt, err := shell.NewRuntime(memstore.New(courseRegistry()), stopConfig(), notifications)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- shell.Supervise(ctx, rt, opts) }()
		time.Sleep(20 * time.Millisecond) // let it start
		return cancel, done
	}

	cancel, done := run(&shell.SuperviseOptions{NoSignals: true, Signals: []os.Signal{syscall.SIGUSR1}})
	defer cancel()
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	<-host
	select {
	case err := <-done:
		t.Fatalf("Supervise with NoSignals stopped on a signal: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Supervise: %v", err)
	}

	cancel, done = run(&shell.SuperviseOptions{Signals: []os.Signal{syscall.SIGUSR1}})
	defer cancel()
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Supervise: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Supervise did not stop on its signal")
	}
}
