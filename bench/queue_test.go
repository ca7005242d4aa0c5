package bench_test

import (
	"testing"

	"github.com/sourced-go/sourced/bench"
)

// BenchmarkQueueDrain drains 100,000 no-op jobs pre-inserted into a
// delete-on-ack queue (an exclusive reactor with no partition keys: one
// partition per job) with 2 workers, on a file database in WAL with
// synchronous = NORMAL, and reports jobs/s counted on commit. See
// bench.QueueDrain; bench/peers runs the same drain beside River's.
//
//	go test ./bench -run '^$' -bench QueueDrain -benchtime 1x
func BenchmarkQueueDrain(b *testing.B) {
	bench.QueueDrain(b, 100_000)
}
