package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sourced-go/sourced/effects"
)

// BenchmarkQueueWork is BenchmarkQueueDrain with the queue an application
// writes, effects.Queue (sourced.NewQueue), instead of the hand-written
// reactor: the same 100,000 no-op jobs, file database, 2 workers and
// default configuration. A job is counted when its Work returns, and the
// timer stops once every job was done and the log is empty (every delete
// committed; looked at every millisecond once the last job ran). Compare
// it with BenchmarkQueueDrain in the same run: what the concept costs.
//
//	go test ./bench -run '^$' -bench 'Queue(Work|Drain)$' -benchtime 1x
func BenchmarkQueueWork(b *testing.B) {
	queueDrain(b, 100_000, sqliteQueueStore(b), func(jobs int64) drainReactor {
		var done atomic.Int64
		all := make(chan struct{})
		q := effects.NewQueue("bench.queue", func(context.Context, effects.Job[queueJob]) error {
			if done.Add(1) == jobs {
				close(all)
			}
			return nil
		})
		return drainReactor{reactor: q, all: all, done: done.Load}
	})
}
