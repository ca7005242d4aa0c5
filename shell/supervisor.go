package shell

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Supervise runs the runtime until ctx is cancelled or the process receives
// SIGINT or SIGTERM, then stops it gracefully: the workers finish their
// current batch (up to the configured StopTimeout) and every finished batch
// is acknowledged. It is what a standalone worker process's main calls.
func Supervise(ctx context.Context, rt *Runtime) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return rt.Run(ctx)
}
