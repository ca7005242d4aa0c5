package shell

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// SuperviseOptions tune Supervise. The zero value is the default: stop on
// SIGINT or SIGTERM, gracefully.
type SuperviseOptions struct {
	// NoSignals installs no signal handler (the host program owns the
	// process's signals): Supervise then runs until ctx ends.
	NoSignals bool
	// Signals are the signals that stop the runtime (default: SIGINT and
	// SIGTERM).
	Signals []os.Signal
	// CancelAfter, when positive, makes the stop hard: the batches still
	// running CancelAfter after the stop began have their contexts
	// cancelled (see Runtime.StopAndCancel). Zero waits for them, up to
	// the configured StopTimeout.
	CancelAfter time.Duration
}

// Supervise runs the runtime until ctx is cancelled or the process receives
// SIGINT or SIGTERM (see SuperviseOptions), then stops it: the workers
// finish their current batch (up to the configured StopTimeout, or up to
// CancelAfter before their batches are cancelled) and every finished
// batch is acknowledged. It is what a standalone worker process's main
// calls.
//
// opts may be nil: the defaults.
func Supervise(ctx context.Context, rt *Runtime, opts *SuperviseOptions) error {
	o := orDefaults(opts)
	if !o.NoSignals {
		sigs := o.Signals
		if len(sigs) == 0 {
			sigs = []os.Signal{os.Interrupt, syscall.SIGTERM}
		}
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, sigs...)
		defer stop()
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	if o.CancelAfter > 0 {
		return rt.StopAndCancel(context.WithoutCancel(ctx), o.CancelAfter)
	}
	return rt.Stop(context.WithoutCancel(ctx))
}
