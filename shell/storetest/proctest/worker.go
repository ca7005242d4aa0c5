package proctest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// EnvWorker is the environment variable that makes the test binary a
// worker process: it holds the location of the store to open (a file, a
// table prefix), as given to Start.
const EnvWorker = "SOURCED_TEST_WORKER"

// ready is what a worker process prints when it handles SIGTERM.
const ready = "ready\n"

// Child reports whether this process is a worker process started by
// Start, and the store location it was given. Call it first in TestMain.
func Child() (where string, ok bool) {
	where = os.Getenv(EnvWorker)
	return where, where != ""
}

// Worker is a worker process started by Start.
type Worker struct {
	cmd  *exec.Cmd
	done chan error
}

// Start runs the test binary again as a worker process on the store at
// where, with env (NAME=value pairs, for example shell.EnvBatchSize+"=5")
// added to this process's environment, and returns once the worker is
// ready: it runs its runtime and handles SIGTERM. The worker's stderr is
// this process's; it is killed when t ends if it still runs.
func Start(t testing.TB, where string, env ...string) *Worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{EnvWorker + "=" + where}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(ready))
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != ready {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("worker did not start: %q %v", buf, err)
	}
	w := &Worker{cmd: cmd, done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return w
}

// Pid is the worker's process id, which JobWorker records in each JobDone
// and the runtime puts in its worker ids.
func (w *Worker) Pid() int { return w.cmd.Process.Pid }

// Kill kills the worker with SIGKILL, wherever it is (mid-batch, mid-step),
// and waits for it to end.
func (w *Worker) Kill() {
	w.cmd.Process.Kill()
	<-w.done
}

// Stop sends SIGTERM and fails t unless the worker exits cleanly (status 0)
// within limit.
func (w *Worker) Stop(t testing.TB, limit time.Duration) {
	t.Helper()
	start := time.Now()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("worker exited with %v", err)
		}
		if d := time.Since(start); d > limit {
			t.Fatalf("worker took %v to stop, limit %v", d, limit)
		}
	case <-time.After(limit + 5*time.Second):
		t.Fatalf("worker did not stop within %v", limit)
	}
}

// Serve is the rest of a worker process's body once it opened its store:
// it builds a runtime of reactors on store with the configuration of the
// environment (shell.Config.FromEnv, so Start's env sets batch sizes,
// intervals, TTLs), tells Start it is ready, and supervises the runtime
// until SIGTERM. It returns the process's exit status: 0 after a clean
// stop, 3 if the runtime could not be built, 4 if supervision failed.
func Serve(store driver.Store, logger *slog.Logger, reactors ...any) int {
	cfg, err := shell.DefaultConfig().FromEnv(nil)
	if err != nil {
		return Fail(err)
	}
	cfg.Logger = logger
	rt, err := shell.NewRuntime(store, cfg, reactors...)
	if err != nil {
		return Fail(err)
	}
	// Catch SIGTERM before telling the test we are ready: Supervise
	// installs its own handler only once it runs.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Print(ready)
	if err := shell.Supervise(ctx, rt, nil); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 4
	}
	return 0
}

// Fail reports a worker process's setup error on stderr and returns its
// exit status, 3.
func Fail(err error) int {
	fmt.Fprintln(os.Stderr, "worker:", err)
	return 3
}
