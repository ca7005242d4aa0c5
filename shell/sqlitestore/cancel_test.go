package sqlitestore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// TestCancelledReadsOfTheSQLiteOnlyPaths is storetest's "cancelled reads
// leave every read path working" for the calls only this store has
// (ReadScheduled, Changed, Housekeep) and Stats: cancelled at random moments, then
// hundreds of plain calls, which must see a message scheduled afterwards.
func TestCancelledReadsOfTheSQLiteOnlyPaths(t *testing.T) {
	ctx := t.Context()
	s := install(t, dbPath(t), sqlitestore.Options{PoolSize: 2})
	var due []core.Message
	for i := range 200 {
		due = append(due, core.NewMessage(tick{Counter: "c", Seq: i}).At(time.Now().Add(time.Hour+time.Duration(i)*time.Second)))
	}
	if _, err := s.Append(ctx, due, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(context.Context) error{
		"ReadScheduled": func(ctx context.Context) error { _, err := s.ReadScheduled(ctx, 0); return err },
		"Changed":       func(ctx context.Context) error { _, err := s.Changed(ctx); return err },
		"Housekeep":     s.Housekeep,
		// A snapshot read, which left its connection inside a read
		// transaction when cancelled, and ReadScheduled then answered
		// from that snapshot.
		"Stats": func(ctx context.Context) error { _, err := s.Stats(ctx); return err },
	}
	for name, call := range calls {
		start := time.Now()
		if err := call(ctx); err != nil {
			t.Fatal(err)
		}
		d := 2*time.Since(start) + 50*time.Microsecond
		for i := range 200 {
			cctx, cancel := context.WithCancel(ctx)
			timer := time.AfterFunc(rand.N(d), cancel)
			err := call(cctx)
			timer.Stop()
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s %d, cancelled while it runs: %v, want nil or context.Canceled", name, i, err)
			}
		}
	}
	soon := core.NewMessage(tick{Counter: "soon"}).At(time.Now().Add(time.Minute))
	res, err := s.Append(ctx, []core.Message{soon}, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	soon = res.Messages[0]
	for i := range 300 {
		got, err := s.ReadScheduled(ctx, 1)
		if err != nil || len(got) != 1 || got[0].ID != soon.ID {
			t.Fatalf("plain ReadScheduled %d after cancelled ones: %v, %v; want the message scheduled last (a stale snapshot?)", i+1, got, err)
		}
	}
}

func TestHousekeep(t *testing.T) {
	ctx := t.Context()
	mem := install(t, ":memory:", sqlitestore.Options{})
	if err := mem.Housekeep(ctx); err != nil {
		t.Fatalf("housekeep in memory: %v", err)
	}
	s := install(t, dbPath(t), sqlitestore.Options{})
	appendOK(t, s, courseCreated{"Algebra"})
	if st, err := s.Stats(ctx); err != nil || st.WALBytes == 0 {
		t.Fatalf("stats after a commit: WAL %d bytes, %v; want the WAL's size", st.WALBytes, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Housekeep(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("housekeep with a cancelled context: %v", err)
	}
	// The first call learns the data version, the second finds nothing
	// changed since: idle, the WAL is emptied.
	for range 2 {
		if err := s.Housekeep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := s.Stats(ctx); st.WALBytes != 0 {
		t.Fatalf("WAL %d bytes after idle housekeeping, want 0", st.WALBytes)
	}
	appendOK(t, s, courseCreated{"History"})
	if page, err := s.ReadAll(ctx, driver.ReadAllOptions{}); err != nil || len(page.Messages) != 2 {
		t.Fatalf("after the truncation: %d messages, %v", len(page.Messages), err)
	}
}

// An Optimize cancelled while it runs ends its transaction: the writer goes
// back to the pool outside any transaction, so the next write begins. It
// did not when the context ended between ANALYZE and the ROLLBACK (which
// the ended context interrupted too): every later write failed with
// "cannot start a transaction within a transaction" (seen as a runtime's
// clean stop leaving its heartbeat rows behind: Stop cancels the
// planner-statistics task).
func TestOptimizeCancelledLeavesTheWriterClean(t *testing.T) {
	t.Parallel() // its store is its own
	ctx := t.Context()
	s := install(t, dbPath(t), sqlitestore.Options{})
	var batch []core.Message
	for i := range 2000 {
		batch = append(batch, core.NewMessage(tick{Counter: "c", Seq: i}))
	}
	if _, err := s.Append(ctx, batch, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	d := 2*time.Since(start) + 50*time.Microsecond
	cancelled := 0
	for i := range 200 {
		cctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(rand.N(d), cancel)
		err := s.Optimize(cctx)
		timer.Stop()
		cancel()
		switch {
		case errors.Is(err, context.Canceled):
			cancelled++
		case err != nil:
			t.Fatalf("Optimize %d, cancelled while it runs: %v, want nil or context.Canceled", i, err)
		}
		if _, err := s.Append(ctx, []core.Message{core.NewMessage(tick{Counter: "after", Seq: i})}, driver.AppendOptions{}); err != nil {
			t.Fatalf("append after Optimize %d: %v", i, err)
		}
	}
	if cancelled == 0 {
		t.Fatal("no Optimize was cancelled while it ran: the test tried nothing")
	}
}
