package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// TestQueueClaimFollowsARepartitionElsewhere: a store claims a queue (a
// group partitioned by message id) with a statement of its own, chosen by
// the group configuration it caches. When another process re-registers
// the group partitioned by an attribute, the cache is stale: the claim
// must still find the keyed partitions, not answer "nothing to do".
func TestQueueClaimFollowsARepartitionElsewhere(t *testing.T) {
	ss := peers(t, 2)
	ctx := t.Context()
	handled := []string{fixtures.TypeDeviceRegistered}
	if err := ss[0].RegisterGroup(ctx, driver.GroupSpec{ID: "q", Exclusive: true, Handled: handled}); err != nil {
		t.Fatal(err)
	}
	appendDevices := func(s driver.Store, ids ...string) {
		t.Helper()
		var ms []core.Message
		for _, id := range ids {
			ms = append(ms, core.NewMessage(fixtures.DeviceRegistered{DeviceID: id, Name: id}))
		}
		if _, err := s.Append(ctx, ms, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	appendDevices(ss[0], "d1")
	c, err := ss[0].ClaimNext(ctx, "q", "w", 10)
	if err != nil || c == nil {
		t.Fatalf("claim the queued job: %v, %v", c, err)
	}
	if _, ok := c.Partition[core.IDKey]; !ok || len(c.Messages) != 1 {
		t.Fatalf("the queue's claim: partition %v with %d messages, want one job by id", c.Partition, len(c.Messages))
	}
	if err := ss[0].Ack(ctx, c, c.Last()); err != nil {
		t.Fatal(err)
	}
	// Another process partitions the group by device now.
	if err := ss[1].RegisterGroup(ctx, driver.GroupSpec{ID: "q", Exclusive: true, PartitionBy: []string{"device_id"}, Handled: handled}); err != nil {
		t.Fatal(err)
	}
	appendDevices(ss[1], "d2", "d2")
	var got []map[string]string
	for range 3 {
		c, err := ss[0].ClaimNext(ctx, "q", "w", 10)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		got = append(got, c.Partition)
		if c.Partition["device_id"] == "d2" && len(c.Messages) != 2 {
			t.Fatalf("d2's claim holds %d messages, want both", len(c.Messages))
		}
		if err := ss[0].Ack(ctx, c, c.Last()); err != nil {
			t.Fatal(err)
		}
	}
	found := false
	for _, p := range got {
		if p["device_id"] == "d2" {
			found = true
		}
	}
	if !found {
		t.Fatalf("claims after the repartition by the other store: %v, want d2's keyed partition", got)
	}
}

// TestQueueOnPostgres runs an effects.Queue on two processes' runtimes:
// every job done once and deleted, a failing job retried through the
// schedule at its next attempt while the others are done.
func TestQueueOnPostgres(t *testing.T) {
	ss := peers(t, 2)
	ctx := t.Context()
	var (
		mu   sync.Mutex
		done = map[string][]int{}
	)
	q := effects.NewQueue("devices.jobs", func(_ context.Context, job effects.Job[fixtures.DeviceRegistered]) error {
		mu.Lock()
		defer mu.Unlock()
		done[job.Payload.DeviceID] = append(done[job.Payload.DeviceID], job.Attempt)
		if job.Payload.DeviceID == "flaky" && job.Attempt == 1 {
			return errors.New("device offline")
		}
		return nil
	})
	q.Backoff = func(int) time.Duration { return 10 * time.Millisecond }
	for _, s := range ss {
		rt, err := shell.NewRuntime(s, shell.Config{Workers: 2, Logger: slog.New(slog.DiscardHandler)}, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Stop(context.Background()) })
	}
	const jobs = 200
	var ms []core.Message
	for i := range jobs {
		ms = append(ms, core.NewMessage(fixtures.DeviceRegistered{DeviceID: fmt.Sprint("d", i), Name: "n"}))
	}
	ms = append(ms, core.NewMessage(fixtures.DeviceRegistered{DeviceID: "flaky", Name: "n"}))
	for i := 0; i < len(ms); i += 20 {
		if _, err := ss[i/20%2].Append(ctx, ms[i:min(i+20, len(ms))], driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n, flaky := len(done), slices.Clone(done["flaky"])
		mu.Unlock()
		if n == jobs+1 && len(flaky) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done, flaky's attempts %v (want [1 2])", n, jobs+1, flaky)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a job done twice would show by now
	mu.Lock()
	defer mu.Unlock()
	for id, attempts := range done {
		want := []int{1}
		if id == "flaky" {
			want = []int{1, 2}
		}
		if !slices.Equal(attempts, want) {
			t.Fatalf("job %s ran at attempts %v, want %v", id, attempts, want)
		}
	}
	for m, err := range ss[0].All(ctx, driver.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("job %v left in the log, want every job deleted", m.Payload)
	}
}
