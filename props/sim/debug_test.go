package sim_test

import (
	"os"
	"testing"

	"github.com/sourced-go/sourced/props/sim"
)

func TestDebugDiff(t *testing.T) {
	if os.Getenv("SIMDEBUG") == "" {
		t.Skip()
	}
	var logs [][]string
	for range 2 {
		setup, actions := sim.Plan(7, "sqlite", 120)
		setup.Dir = t.TempDir()
		res, _ := sim.Run(setup, actions)
		logs = append(logs, res.Log)
	}
	for i := range min(len(logs[0]), len(logs[1])) {
		if logs[0][i] != logs[1][i] {
			for j := max(0, i-5); j < min(i+5, len(logs[0]), len(logs[1])); j++ {
				t.Logf("A %s\nB %s", logs[0][j], logs[1][j])
			}
			return
		}
	}
}
