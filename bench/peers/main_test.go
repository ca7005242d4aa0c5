package peers_test

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
)

// The drain both libraries run: drainJobs no-op jobs (100,000; the
// environment variable DRAIN_JOBS overrides it for quick runs),
// drainWorkers workers.
var drainJobs = envInt("DRAIN_JOBS", 100_000)

const drainWorkers = 2

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// results holds the last jobs/s of each library's drain, for the ratio.
var results = &rates{m: map[string]float64{}}

type rates struct {
	mu sync.Mutex
	m  map[string]float64
}

func (r *rates) set(name string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = v
}

func (r *rates) get(name string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[name]
	return v, ok
}

// TestMain prints the ratio of the two drains after the benchmarks ran, when
// both did.
func TestMain(m *testing.M) {
	code := m.Run()
	if s, ok := results.get("sourced"); ok {
		for _, e := range riverEngines {
			if r, ok := results.get("river " + e.name); ok && r > 0 {
				fmt.Printf("QueueDrain ratio: Sourced %.0f jobs/s / River (%s) %.0f jobs/s = %.2fx\n", s, e.name, r, s/r)
			}
		}
	}
	if s, ok := results.get("sourced postgres"); ok {
		if r, ok := results.get("river postgres"); ok && r > 0 {
			fmt.Printf("QueueDrain ratio on PostgreSQL: Sourced %.0f jobs/s / River %.0f jobs/s = %.2fx\n", s, r, s/r)
		}
	}
	os.Exit(code)
}
