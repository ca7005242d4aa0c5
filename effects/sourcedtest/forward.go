package sourcedtest

import (
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	kit "github.com/sourced-go/sourced/shell/sourced/sourcedtest"
	"github.com/sourced-go/sourced/statechart"
)

// Option configures a test.
//
// Deprecated: use shell/sourced/sourcedtest.Option.
type Option = kit.Option

// DeciderTest is a Given / When / Then test of a decider.
//
// Deprecated: use shell/sourced/sourcedtest.DeciderTest.
type DeciderTest[S any] = kit.DeciderTest[S]

// ProjectorTest is a Given / Then test of a projector.
//
// Deprecated: use shell/sourced/sourcedtest.ProjectorTest.
type ProjectorTest[S any] = kit.ProjectorTest[S]

// ProjectionTest is a Given / Then test of a projection.
//
// Deprecated: use shell/sourced/sourcedtest.ProjectionTest.
type ProjectionTest[S any] = kit.ProjectionTest[S]

// MachineTest is a Given / When / Then test of a statechart machine.
//
// Deprecated: use shell/sourced/sourcedtest.MachineTest.
type MachineTest[C any] = kit.MachineTest[C]

// Decider starts a test of d.
//
// Deprecated: use shell/sourced/sourcedtest.Decider.
func Decider[S any](t testing.TB, d core.Decider[S], opts ...Option) *DeciderTest[S] {
	return kit.Decider(t, d, opts...)
}

// Projector starts a test of p.
//
// Deprecated: use shell/sourced/sourcedtest.Projector.
func Projector[S any](t testing.TB, p core.Projector[S], opts ...Option) *ProjectorTest[S] {
	return kit.Projector(t, p, opts...)
}

// Projection starts a test of p.
//
// Deprecated: use shell/sourced/sourcedtest.Projection.
func Projection[S any](t testing.TB, p core.Projection[S], opts ...Option) *ProjectionTest[S] {
	return kit.Projection(t, p, opts...)
}

// Machine starts a test of m in partition.
//
// Deprecated: use shell/sourced/sourcedtest.Machine.
func Machine[C any](t testing.TB, m statechart.Machine[C], partition map[string]string, opts ...Option) *MachineTest[C] {
	return kit.Machine(t, m, partition, opts...)
}

// Match reports whether got matches expected (a payload or a message) by Go
// type and payload.
//
// Deprecated: use shell/sourced/sourcedtest.Match.
func Match(expected any, got core.Message) bool { return kit.Match(expected, got) }

// WithRegistry checks the definition against reg and validates payloads.
//
// Deprecated: use shell/sourced/sourcedtest.WithRegistry.
func WithRegistry(reg *codec.Registry) Option { return kit.WithRegistry(reg) }

// WithSyncTx is the transaction handed to sync work by ThenSync.
//
// Deprecated: use shell/sourced/sourcedtest.WithSyncTx.
func WithSyncTx(tx core.SyncTx) Option { return kit.WithSyncTx(tx) }

// WithTime is the creation time of the given messages and the command.
//
// Deprecated: use shell/sourced/sourcedtest.WithTime.
func WithTime(t time.Time) Option { return kit.WithTime(t) }

// WithPartition sets the partition a test decides or projects in.
//
// Deprecated: use shell/sourced/sourcedtest.WithPartition.
func WithPartition(partition map[string]string) Option { return kit.WithPartition(partition) }

// AllowOutsidePartition drops given events outside the partition instead
// of failing the test.
//
// Deprecated: use shell/sourced/sourcedtest.AllowOutsidePartition.
func AllowOutsidePartition() Option { return kit.AllowOutsidePartition() }
