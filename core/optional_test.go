package core_test

import (
	"testing"

	"github.com/sourced-go/sourced/core"
)

// The optional interfaces core probes for, implemented where their docs
// say: a method renamed would make the probe miss it silently.
var (
	_ core.SpecProvider = core.Decider[int]{}
	_ core.SpecProvider = core.Projector[int]{}
	_ core.SpecProvider = core.Definition(nil)
)

// TestJSONSnapshotsCheck pins that the JSON codec is a
// SnapshotCodecChecker, so a decider whose state JSON cannot keep is
// refused when it is checked.
func TestJSONSnapshotsCheck(t *testing.T) {
	if _, ok := core.JSONSnapshots[int]("v1").(core.SnapshotCodecChecker); !ok {
		t.Fatal("JSONSnapshots is not a SnapshotCodecChecker: Decider.Check would not ask it")
	}
}
