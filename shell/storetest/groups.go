package storetest

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// RunGroups runs the consumer-group part of the conformance suite against
// the stores open makes: registration, claims, acks, advancing offsets, the
// claim-scan latch, the group lifecycle, housekeeping, monitoring,
// delete-on-ack queues, transactions, a concurrent run and a model-based
// test. Run runs it too; RunGroups runs this part alone. Every subtest
// opens its own store. With -short, the concurrency and model-based parts
// do less work.
func RunGroups(t *testing.T, open Factory) {
	s := suite{open: open}
	t.Run("Register", s.testRegister)
	t.Run("Claim", s.testClaim)
	t.Run("Ack", s.testAck)
	t.Run("AdvanceOffset", s.testAdvance)
	t.Run("Latch", s.testLatch)
	t.Run("Lifecycle", s.testLifecycle)
	t.Run("Hooks", s.testHooks)
	t.Run("Housekeeping", s.testHousekeeping)
	t.Run("Offsets", s.testOffsets)
	t.Run("Queue", s.testQueue)
	t.Run("QueueIndex", s.testQueueIndex)
	t.Run("GroupRefusals", s.testGroupRefusals)
	t.Run("EmptyPartitionValues", s.testEmptyPartitionValues)
	t.Run("GroupTx", s.testGroupTx)
	t.Run("ClaimUpdate", s.testClaimUpdate)
	t.Run("ClaimMany", s.testClaimMany)
	t.Run("ChangeGroup", s.testChangeGroup)
	t.Run("Parking", s.testParking)
	t.Run("Lag", s.testLag)
	t.Run("ReadParked", s.testReadParked)
	t.Run("ResumeWakes", s.testResumeWakes)
	t.Run("ClaimAge", s.testClaimAge)
	t.Run("Warm", s.testWarm)
	t.Run("GroupConcurrency", s.testGroupConcurrency)
	t.Run("GroupModel", s.testGroupModel)
}

// The fixture consumer groups.
const (
	// enrolments is partitioned by (course_name, user_id): its partitions
	// are discovered from userJoinedCourse, the only handled type carrying
	// both, and hold the course and user messages under conditional AND.
	enrolments = "storetest.enrolments"
	// devices decides deviceRegistered commands per device; processing a
	// command emits a DeviceBound event, which it does not handle.
	devices = "storetest.devices"
	// bindings projects the DeviceBound events per device.
	bindings = "storetest.bindings"
	// accounts handles transfers per account: a transfer between two
	// accounts belongs to both partitions.
	accounts = "storetest.accounts"
	// jobs is a delete-on-ack queue of deposits: exclusive, partitioned by
	// message id.
	jobs = "storetest.jobs"
)

func groupSpec(id string) driver.GroupSpec {
	switch id {
	case enrolments:
		return driver.GroupSpec{ID: id, PartitionBy: []string{"user_id", "course_name"}, Handled: []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse, typeCourseClosed}}
	case devices:
		return driver.GroupSpec{ID: id, Label: "Devices", PartitionBy: []string{"device_id"}, Handled: []string{typeDeviceRegistered}}
	case bindings:
		return driver.GroupSpec{ID: id, PartitionBy: []string{"device_id"}, Handled: []string{typeDeviceBound}}
	case accounts:
		return driver.GroupSpec{ID: id, PartitionBy: []string{"accounts"}, Handled: []string{typeTransfer}}
	case jobs:
		return driver.GroupSpec{ID: id, Exclusive: true, Handled: []string{typeDeposit}}
	}
	panic("storetest: no fixture group " + id)
}

// genv is an env whose store has consumer groups.
type genv struct {
	*env
	gs driver.Store
}

func (s suite) genv(t *testing.T, groups ...string) *genv {
	t.Helper()
	e := s.env(t)
	ge := &genv{env: e, gs: e.store}
	for _, id := range groups {
		ge.register(groupSpec(id))
	}
	return ge
}

func (e *genv) with(t tb) *genv {
	return &genv{env: e.env.with(t), gs: e.gs}
}

func (e *genv) register(spec driver.GroupSpec) {
	e.t.Helper()
	if err := e.gs.RegisterGroup(e.ctx, spec); err != nil {
		e.t.Fatalf("register %s: %v", spec.ID, err)
	}
}

// claim claims a batch of up to n messages, failing the test when there
// is nothing to claim.
func (e *genv) claim(group, worker string, n int) *driver.ClaimedPartition {
	e.t.Helper()
	c, err := e.gs.ClaimNext(e.ctx, group, worker, n)
	if err != nil {
		e.t.Fatalf("claim %s as %s: %v", group, worker, err)
	}
	if c == nil {
		e.t.Fatalf("claim %s as %s: nothing to claim", group, worker)
	}
	if c.Group != group || c.WorkerID != worker {
		e.t.Fatalf("claim %s as %s: the claim names %s and %s", group, worker, c.Group, c.WorkerID)
	}
	if len(c.Messages) == 0 || len(c.Messages) > n {
		e.t.Fatalf("claim %s as %s: %d messages, want 1 to %d", group, worker, len(c.Messages), n)
	}
	return c
}

// noClaim fails the test unless group has nothing to claim for worker.
func (e *genv) noClaim(group, worker string) {
	e.t.Helper()
	c, err := e.gs.ClaimNext(e.ctx, group, worker, 10)
	if err != nil {
		e.t.Fatalf("claim %s as %s: %v", group, worker, err)
	}
	if c != nil {
		e.t.Fatalf("claim %s as %s: claimed %v with %s, want nothing", group, worker, c.Partition, describe(c.Messages))
	}
}

func (e *genv) ack(c *driver.ClaimedPartition, position int64) {
	e.t.Helper()
	if err := e.gs.Ack(e.ctx, c, position); err != nil {
		e.t.Fatalf("ack %s %v at %d: %v", c.Group, c.Partition, position, err)
	}
}

func (e *genv) release(c *driver.ClaimedPartition) {
	e.t.Helper()
	if err := e.gs.Release(e.ctx, c); err != nil {
		e.t.Fatalf("release %s %v: %v", c.Group, c.Partition, err)
	}
}

// drain claims and acks every batch of group as worker, and returns the
// positions each partition (by display key) received.
func (e *genv) drain(group, worker string) map[string][]int64 {
	e.t.Helper()
	got := map[string][]int64{}
	for range 10_000 {
		c, err := e.gs.ClaimNext(e.ctx, group, worker, 10)
		if err != nil {
			e.t.Fatalf("claim %s: %v", group, err)
		}
		if c == nil {
			return got
		}
		key := core.Partition(c.Partition).String()
		got[key] = append(got[key], positionsOf(c.Messages)...)
		e.ack(c, c.Last())
	}
	e.t.Fatalf("draining %s does not end", group)
	return nil
}

// update runs fn in an Update with the transaction as a GroupTx.
func (e *genv) update(fn func(tx driver.Tx, gtx driver.GroupTx) error) error {
	e.t.Helper()
	return e.store.Update(e.ctx, func(tx driver.Tx) error {
		gtx, ok := tx.(driver.GroupTx)
		if !ok {
			e.t.Fatalf("the transaction %T is not a driver.GroupTx", tx)
		}
		return fn(tx, gtx)
	})
}

func (e *genv) info(group string) driver.GroupInfo {
	e.t.Helper()
	info, err := e.gs.Group(e.ctx, group)
	if err != nil {
		e.t.Fatalf("group %s: %v", group, err)
	}
	return info
}

// offsets returns every offset of group ("" for all), page by page.
func (e *genv) offsets(group string) []driver.Offset {
	e.t.Helper()
	var out []driver.Offset
	q := driver.OffsetQuery{Group: group, Limit: 100}
	for range 10_000 {
		page, err := e.gs.ReadOffsets(e.ctx, q)
		if err != nil {
			e.t.Fatalf("read offsets of %q: %v", group, err)
		}
		out = append(out, page.Offsets...)
		if len(page.Offsets) < q.Limit {
			return out
		}
		q.From = page.Offsets[len(page.Offsets)-1].ID + 1
	}
	e.t.Fatal("ReadOffsets paging does not end")
	return nil
}

// offset returns the offset of a partition of group, and false when there
// is none.
func (e *genv) offset(group string, partition core.Partition) (driver.Offset, bool) {
	e.t.Helper()
	for _, o := range e.offsets(group) {
		if maps.Equal(o.Partition, partition) {
			return o, true
		}
	}
	return driver.Offset{}, false
}

// lastAt fails the test unless the partition's offset is at want (a
// missing offset is at 0).
func (e *genv) lastAt(group string, partition core.Partition, want int64) {
	e.t.Helper()
	o, _ := e.offset(group, partition)
	if o.LastPosition != want {
		e.t.Fatalf("offset of %s %v at %d, want %d", group, partition, o.LastPosition, want)
	}
}

// types returns the codec types of names.
func (e *genv) types(names ...string) []*codec.Type {
	e.t.Helper()
	out := make([]*codec.Type, len(names))
	for i, n := range names {
		typ, err := e.reg.ByName(n)
		if err != nil {
			e.t.Fatal(err)
		}
		out[i] = typ
	}
	return out
}

// expectClaim checks a claim's partition, positions and replay flag, and
// that its guard is the partition's conditions over the handled types up
// to its last message.
func (e *genv) expectClaim(c *driver.ClaimedPartition, partition core.Partition, replaying bool, positions ...int64) {
	e.t.Helper()
	if !maps.Equal(c.Partition, partition) {
		e.t.Fatalf("claimed partition %v (messages %s), want %v", c.Partition, describe(c.Messages), partition)
	}
	e.expectPositions("claimed messages of "+core.Partition(partition).String(), c.Messages, positions...)
	if c.Replaying != replaying {
		e.t.Fatalf("claim of %v at %v: replaying %v, want %v", partition, positions, c.Replaying, replaying)
	}
	if c.Guard.LastPosition != c.Last() {
		e.t.Fatalf("claim guard at %d, want the last claimed position %d", c.Guard.LastPosition, c.Last())
	}
	if _, ok := partition[core.IDKey]; ok {
		if len(c.Guard.Conditions) != 0 {
			e.t.Fatalf("claim guard of an id partition: conditions %v, want none", c.Guard.Conditions)
		}
		return
	}
	want := core.ConditionsFor(partition, e.types(groupSpec(c.Group).Handled...)...)
	if !sameConds(c.Guard.Conditions, want) {
		e.t.Fatalf("claim guard conditions %v, want %v", sortedConds(c.Guard.Conditions), sortedConds(want))
	}
}

// unknownGroup fails the test unless err reports the unknown group id and
// names the registered groups.
func unknownGroup(t tb, err error, id string, known ...string) {
	t.Helper()
	var ue *driver.UnknownGroupError
	if !errors.As(err, &ue) || !errors.Is(err, driver.ErrGroupNotRegistered) {
		t.Fatalf("error %v (%T), want an *UnknownGroupError matching ErrGroupNotRegistered", err, err)
	}
	if ue.Group != id || !slices.Equal(ue.Known, known) {
		t.Fatalf("unknown group error names %q and registered %v, want %q and %v", ue.Group, ue.Known, id, known)
	}
}

// notClaimant fails the test unless err matches driver.ErrNotClaimant.
func notClaimant(t tb, err error, what string) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotClaimant) {
		t.Fatalf("%s: error %v, want ErrNotClaimant", what, err)
	}
}

// sameFailure compares failures, times as instants.
func sameFailure(got, want driver.Failure) bool {
	ga, wa := got.RetryAt, want.RetryAt
	got.RetryAt, want.RetryAt = nil, nil
	if !reflect.DeepEqual(got, want) || (ga == nil) != (wa == nil) {
		return false
	}
	return ga == nil || ga.Equal(*wa)
}

// sameInfo compares group infos, times as instants and empty slices as
// nil.
func sameInfo(got, want driver.GroupInfo) bool {
	if !sameFailure(got.Failure, want.Failure) || !got.RetryAt.Equal(want.RetryAt) || !slices.Equal(got.PartitionBy, want.PartitionBy) {
		return false
	}
	got.Failure, want.Failure = driver.Failure{}, driver.Failure{}
	got.RetryAt, want.RetryAt = time.Time{}, time.Time{}
	got.PartitionBy, want.PartitionBy = nil, nil
	return reflect.DeepEqual(got, want)
}

// sameOffsets compares offsets, claim times as instants.
func sameOffsets(got, want []driver.Offset) bool {
	return slices.EqualFunc(got, want, func(a, b driver.Offset) bool {
		if !a.ClaimedAt.Equal(b.ClaimedAt) {
			return false
		}
		a.ClaimedAt, b.ClaimedAt = time.Time{}, time.Time{}
		return reflect.DeepEqual(a, b)
	})
}
