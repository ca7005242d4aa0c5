package peers_test

import (
	"testing"

	"github.com/sourced-go/sourced/bench"
)

// BenchmarkQueueDrain is the Sourced drain of the main module's bench
// package (bench.QueueDrain), run here so both libraries drain side by side.
func BenchmarkQueueDrain(b *testing.B) {
	results.set("sourced", bench.QueueDrain(b, drainJobs))
}
