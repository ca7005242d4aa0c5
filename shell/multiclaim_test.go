package shell_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// Multi-partition claims: an impure id-partitioned reactor (a queue, one
// partition per job) claims several partitions per transaction, and each
// claim still succeeds, fails, is lost or is released on its own.

// manyQueue is an impure delete-on-ack queue of NotifyStudent jobs: each
// job appends a StudentNotified and is deleted with its ack. hook, when
// set, runs before a job is handled, and may fail it.
type manyQueue struct {
	mu    sync.Mutex
	calls map[string]int // by student id
	hook  func(ctx context.Context, job NotifyStudent) error
	// syncFails names a job whose pair's sync work fails (in the commit).
	syncFails string
}

func newManyQueue() *manyQueue { return &manyQueue{calls: map[string]int{}} }

func (q *manyQueue) GroupID() string        { return "shell_test.jobqueue" }
func (q *manyQueue) HandledTypes() []string { return []string{"students.notify"} }
func (q *manyQueue) Exclusive() bool        { return true }
func (q *manyQueue) Pure() bool             { return false }
func (q *manyQueue) HandleClaim(ctx context.Context, c effects.Claim) ([]effects.Pair, error) {
	var pairs []effects.Pair
	for _, m := range c.Messages {
		job := m.Payload.(NotifyStudent)
		q.mu.Lock()
		q.calls[job.StudentID]++
		hook := q.hook
		q.mu.Unlock()
		if hook != nil {
			if err := hook(ctx, job); err != nil {
				return pairs, &core.BatchError{Message: m, Err: err}
			}
		}
		p := effects.Pair{Source: m, Signals: []effects.Signal{
			effects.Append{Messages: []core.Message{core.NewMessage(StudentNotified(job))}},
			effects.Ack{Delete: true},
		}}
		if job.StudentID == q.syncFails {
			p.Signals = append(p.Signals, effects.Sync{Work: func(context.Context, core.SyncTx) error { return errors.New("sync work failed") }})
		}
		pairs = append(pairs, p)
	}
	return pairs, nil
}

func (q *manyQueue) called(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls[id]
}

// txCountingStore counts write transactions (Update and ClaimUpdate), and,
// with hideMany, hands out transactions without driver.ClaimManyTx.
type txCountingStore struct {
	shell.Store
	mu                   sync.Mutex
	updates, claimUpdate int
	hideMany             bool
}

// plainTx is a Tx with no ClaimMany.
type plainTx struct{ shell.Tx }

func (s *txCountingStore) wrap(tx shell.Tx) shell.Tx {
	if s.hideMany {
		return plainTx{tx}
	}
	return tx
}

func (s *txCountingStore) Update(ctx context.Context, fn func(tx shell.Tx) error) error {
	s.mu.Lock()
	s.updates++
	s.mu.Unlock()
	return s.Store.Update(ctx, func(tx shell.Tx) error { return fn(s.wrap(tx)) })
}

func (s *txCountingStore) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx shell.Tx, c *driver.ClaimedPartition) error) (bool, error) {
	s.mu.Lock()
	s.claimUpdate++
	s.mu.Unlock()
	return s.Store.ClaimUpdate(ctx, group, workerID, batchSize, func(tx shell.Tx, c *driver.ClaimedPartition) error { return fn(s.wrap(tx), c) })
}

// queueStores opens a memstore and a SQLite store for a queue test.
var queueStores = []struct {
	name string
	open func(t *testing.T, clk *clock) shell.Store
}{
	{"memstore", func(t *testing.T, clk *clock) shell.Store {
		_, s := newRouter(t, clk, shell.RouterOptions{Logger: quiet()})
		return s
	}},
	{"sqlitestore", func(t *testing.T, clk *clock) shell.Store {
		_, s := sqliteRouter(t, shell.RouterOptions{Logger: quiet(), Now: clk.Now})
		return s
	}},
}

// queueRouter is a router of q on store.
func queueRouter(t *testing.T, store shell.Store, clk *clock, opts shell.RouterOptions, q *manyQueue) *shell.Router {
	t.Helper()
	opts.Now = clk.Now
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	rt, err := shell.NewRouter(store, opts, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

func appendManyJobs(t *testing.T, store shell.Store, n int) {
	t.Helper()
	var msgs []core.Message
	for i := range n {
		msgs = append(msgs, core.NewMessage(NotifyStudent{StudentID: fmt.Sprint("s", i+1)}))
	}
	if _, err := store.Append(context.Background(), msgs, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// notified returns the student ids notified, and how many jobs are left.
func notified(t *testing.T, store shell.Store) (map[string]int, int) {
	t.Helper()
	got := map[string]int{}
	left := 0
	for _, m := range readAll(t, store) {
		switch p := m.Payload.(type) {
		case StudentNotified:
			got[p.StudentID]++
		case NotifyStudent:
			left++
		}
	}
	return got, left
}

func noneClaimed(t *testing.T, store shell.Store, group string) {
	t.Helper()
	for _, o := range offsetsOf(t, store, group) {
		if o.Claimed {
			t.Fatalf("offset %+v is still claimed", o)
		}
	}
}

// A queue's worker claims ClaimPartitions partitions per transaction and
// commits them together with the next claims: 10 jobs, 4 per
// transaction, take three write transactions (the first claim, then each
// commit claiming the next), with or without the store's ClaimManyTx.
func TestQueueClaimsManyPartitionsPerTransaction(t *testing.T) {
	for _, st := range queueStores {
		for _, hide := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/without ClaimMany=%v", st.name, hide), func(t *testing.T) {
				ctx := context.Background()
				clk := newClock()
				store := &txCountingStore{Store: st.open(t, clk), hideMany: hide}
				q := newManyQueue()
				rt := queueRouter(t, store, clk, shell.RouterOptions{ClaimPartitions: 4}, q)
				appendManyJobs(t, store, 10)
				store.updates, store.claimUpdate = 0, 0
				if did, err := rt.HandleNext(ctx, q, "w1"); !did || err != nil {
					t.Fatalf("HandleNext: did %v, err %v", did, err)
				}
				if store.claimUpdate != 1 || store.updates != 3 {
					t.Fatalf("%d claim transactions and %d updates for 10 jobs 4 at a time, want 1 and 3", store.claimUpdate, store.updates)
				}
				got, left := notified(t, store)
				if len(got) != 10 || left != 0 {
					t.Fatalf("%d jobs done, %d left; want all 10 done and deleted", len(got), left)
				}
				for id, n := range got {
					if n != 1 || q.called(id) != 1 {
						t.Fatalf("job %s: %d notifications, handled %d times; want once", id, n, q.called(id))
					}
				}
				noneClaimed(t, store, q.GroupID())
			})
		}
	}
}

// A failing job among the claims of one transaction: the jobs before it
// commit, it goes to the error strategy (its group retries), and the jobs
// after it, claimed but not handled, are released; once the retry time
// comes each remaining job is handled once.
func TestQueueFailingJobAmongMany(t *testing.T) {
	for _, st := range queueStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			store := st.open(t, clk)
			q := newManyQueue()
			failing := true
			q.hook = func(_ context.Context, job NotifyStudent) error {
				if job.StudentID == "s3" && failing {
					return errors.New("s3 failed")
				}
				return nil
			}
			rt := queueRouter(t, store, clk, shell.RouterOptions{ClaimPartitions: 5, ErrorStrategy: shell.ErrorStrategy{Retries: 1, After: time.Minute}}, q)
			appendManyJobs(t, store, 5)
			if did, err := rt.HandleNext(ctx, q, "w1"); !did || err != nil {
				t.Fatalf("HandleNext: did %v, err %v", did, err)
			}
			got, left := notified(t, store)
			if len(got) != 2 || got["s1"] != 1 || got["s2"] != 1 || left != 3 {
				t.Fatalf("after the failure: notified %v, %d jobs left; want s1 and s2 done, 3 left", got, left)
			}
			if q.called("s4") != 0 || q.called("s5") != 0 {
				t.Fatal("jobs after the failing one were handled")
			}
			info, err := store.Group(ctx, q.GroupID())
			if err != nil {
				t.Fatal(err)
			}
			if info.Status != shell.StatusRetrying || info.Failure.Position != 3 || info.Failure.RetryCount != 1 {
				t.Fatalf("group after the failure: %s, %+v; want retrying at position 3, retry 1", info.Status, info.Failure)
			}
			noneClaimed(t, store, q.GroupID())
			failing = false
			clk.Advance(time.Minute)
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			got, left = notified(t, store)
			if len(got) != 5 || left != 0 {
				t.Fatalf("after the retry: notified %v, %d left", got, left)
			}
			for _, id := range []string{"s1", "s2", "s4", "s5"} {
				if got[id] != 1 || q.called(id) != 1 {
					t.Fatalf("job %s: %d notifications, handled %d times; want once", id, got[id], q.called(id))
				}
			}
			if q.called("s3") != 2 || got["s3"] != 1 {
				t.Fatalf("job s3 handled %d times with %d notifications, want twice (failed, retried) and once", q.called("s3"), got["s3"])
			}
			if info, _ := store.Group(ctx, q.GroupID()); info.Status != shell.StatusActive {
				t.Fatalf("group after the retry: %s, want active", info.Status)
			}
		})
	}
}

// A claim lost among the claims of one transaction (the reaper gave it to
// another worker while this one handled the others): the combined commit
// fails on its ack, and each claim is committed on its own, so the lost
// one alone is abandoned and the others' work stands.
func TestQueueLostClaimAmongMany(t *testing.T) {
	for _, st := range queueStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			store := st.open(t, clk)
			q := newManyQueue()
			logs := &records{}
			var stolen *driver.ClaimedPartition
			q.hook = func(ctx context.Context, job NotifyStudent) error {
				if job.StudentID != "s2" || stolen != nil {
					return nil
				}
				// s2's claim is lost: released (the reaper) and claimed by
				// w2, the only free partition.
				for _, o := range offsetsOf(t, store, q.GroupID()) {
					if !o.Claimed || o.ClaimedBy != "w1" {
						t.Errorf("offset %+v not held by w1 while it handles its claims", o)
					}
				}
				for _, m := range readAll(t, store) {
					if n, ok := m.Payload.(NotifyStudent); ok && n.StudentID == "s2" {
						for _, o := range offsetsOf(t, store, q.GroupID()) {
							if o.Partition[core.IDKey] == m.ID.String() {
								if err := store.Release(ctx, &driver.ClaimedPartition{Group: q.GroupID(), WorkerID: "w1", OffsetID: o.ID, Partition: o.Partition}); err != nil {
									t.Errorf("releasing s2's claim: %v", err)
								}
							}
						}
					}
				}
				c, err := store.ClaimNext(ctx, q.GroupID(), "w2", 10)
				if err != nil || c == nil {
					t.Errorf("w2 claims the lost partition: %v, %v", c, err)
				}
				stolen = c
				return nil
			}
			rt := queueRouter(t, store, clk, shell.RouterOptions{ClaimPartitions: 3, BatchesPerHandle: 1, Logger: slog.New(logs)}, q)
			appendManyJobs(t, store, 3)
			if did, err := rt.HandleNext(ctx, q, "w1"); !did || err != nil {
				t.Fatalf("HandleNext: did %v, err %v", did, err)
			}
			if stolen == nil || stolen.Messages[0].Payload.(NotifyStudent).StudentID != "s2" {
				t.Fatalf("w2 claimed %v, want s2's job", stolen)
			}
			got, left := notified(t, store)
			if len(got) != 2 || got["s1"] != 1 || got["s3"] != 1 || left != 1 {
				t.Fatalf("notified %v, %d jobs left; want s1 and s3 done, s2 left to w2", got, left)
			}
			info, _ := store.Group(ctx, q.GroupID())
			if info.Status != shell.StatusActive || !info.Failure.IsZero() {
				t.Fatalf("group after a lost claim: %+v, want active with no failure", info)
			}
			if warns := logs.find("claim lost"); len(warns) != 1 || warns[0].Level != slog.LevelWarn {
				t.Fatalf("the lost claim was logged %d times, want once at WARN", len(warns))
			}
			for _, o := range offsetsOf(t, store, q.GroupID()) {
				if o.Claimed && (o.ID != stolen.OffsetID || o.ClaimedBy != "w2") {
					t.Fatalf("offset %+v is claimed, want only s2's, by w2", o)
				}
			}
			// w2 finishes the job it holds.
			if err := store.Update(ctx, func(tx shell.Tx) error {
				if err := tx.Delete(stolen.Last()); err != nil {
					return err
				}
				return tx.Ack(stolen, stolen.Last())
			}); err != nil {
				t.Fatal(err)
			}
			if did, err := rt.HandleNext(ctx, q, "w1"); did || err != nil {
				t.Fatalf("HandleNext after w2's ack: did %v, err %v; want nothing left", did, err)
			}
		})
	}
}

// A worker stopping (its context cancelled) in the middle of its claims
// releases every claim it holds, the ones it handled included (nothing of
// them committed), and the group stays active: the next drain handles
// every job.
func TestQueueCancelMidBatchReleasesTheRest(t *testing.T) {
	for _, st := range queueStores {
		t.Run(st.name, func(t *testing.T) {
			clk := newClock()
			store := st.open(t, clk)
			q := newManyQueue()
			ctx, cancel := context.WithCancel(context.Background())
			q.hook = func(_ context.Context, job NotifyStudent) error {
				if job.StudentID == "s2" {
					cancel()
				}
				return nil
			}
			rt := queueRouter(t, store, clk, shell.RouterOptions{ClaimPartitions: 4}, q)
			appendManyJobs(t, store, 4)
			if _, err := rt.HandleNext(ctx, q, "w1"); !errors.Is(err, context.Canceled) {
				t.Fatalf("HandleNext: %v, want context.Canceled", err)
			}
			if q.called("s3") != 0 || q.called("s4") != 0 {
				t.Fatal("jobs handled after the cancellation")
			}
			noneClaimed(t, store, q.GroupID())
			if got, left := notified(t, store); len(got) != 0 || left != 4 {
				t.Fatalf("after the cancellation: notified %v, %d left; want nothing committed", got, left)
			}
			info, _ := store.Group(context.Background(), q.GroupID())
			if info.Status != shell.StatusActive || !info.Failure.IsZero() {
				t.Fatalf("group after a cancellation: %+v, want active with no failure", info)
			}
			q.hook = nil
			if err := rt.Drain(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if got, left := notified(t, store); len(got) != 4 || left != 0 {
				t.Fatalf("after the drain: notified %v, %d left", got, left)
			}
		})
	}
}

// Three workers draining one queue, several partitions per transaction:
// every job is handled, committed and deleted exactly once.
func TestQueueNoJobHandledTwiceUnderThreeWorkers(t *testing.T) {
	const jobs = 300
	for _, st := range queueStores {
		t.Run(st.name, func(t *testing.T) {
			clk := newClock()
			store := st.open(t, clk)
			q := newManyQueue()
			rt := queueRouter(t, store, clk, shell.RouterOptions{ClaimPartitions: 7, BatchesPerHandle: 3}, q)
			appendManyJobs(t, store, jobs)
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						did, err := rt.HandleNext(context.Background(), q, fmt.Sprint("w", w+1))
						if err != nil {
							if errors.Is(err, shell.ErrBusy) {
								continue
							}
							t.Error(err)
							return
						}
						if !did {
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := rt.Drain(context.Background(), nil); err != nil { // what a worker left held by another
				t.Fatal(err)
			}
			got, left := notified(t, store)
			if len(got) != jobs || left != 0 {
				t.Fatalf("%d jobs done, %d left; want %d done and deleted", len(got), left, jobs)
			}
			for id, n := range got {
				if n != 1 || q.called(id) != 1 {
					t.Fatalf("job %s: %d notifications, handled %d times; want once", id, n, q.called(id))
				}
			}
			noneClaimed(t, store, q.GroupID())
		})
	}
}

// A claim whose signals fail in the combined commit (its sync work) rolls
// that transaction back; each claim is then committed on its own, so the
// failing one alone goes to the error strategy and the others' work
// stands (none is handled again).
func TestQueueFailingCommitAmongMany(t *testing.T) {
	for _, st := range queueStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			store := st.open(t, clk)
			q := newManyQueue()
			q.syncFails = "s2"
			rt := queueRouter(t, store, clk, shell.RouterOptions{ClaimPartitions: 3, ErrorStrategy: shell.ErrorStrategy{Retries: 1, After: time.Minute}}, q)
			appendManyJobs(t, store, 3)
			if did, err := rt.HandleNext(ctx, q, "w1"); !did || err != nil {
				t.Fatalf("HandleNext: did %v, err %v", did, err)
			}
			got, left := notified(t, store)
			if len(got) != 2 || got["s1"] != 1 || got["s3"] != 1 || left != 1 {
				t.Fatalf("notified %v, %d jobs left; want s1 and s3 committed, s2 left", got, left)
			}
			info, _ := store.Group(ctx, q.GroupID())
			if info.Status != shell.StatusRetrying || info.Failure.RetryCount != 1 {
				t.Fatalf("group after s2's failed commit: %s, %+v; want retrying", info.Status, info.Failure)
			}
			noneClaimed(t, store, q.GroupID())
			q.syncFails = ""
			clk.Advance(time.Minute)
			if err := rt.Drain(ctx, nil); err != nil {
				t.Fatal(err)
			}
			got, left = notified(t, store)
			if len(got) != 3 || left != 0 || q.called("s1") != 1 || q.called("s3") != 1 || q.called("s2") != 2 {
				t.Fatalf("after the retry: notified %v, %d left, calls %v; want each done once, s2 handled twice", got, left, q.calls)
			}
		})
	}
}
