package sqlitestore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// TestWALStaysBounded appends 40,000 messages, 20 per append, while
// readers read without pause, calling Housekeep every 2,000 messages as a
// runtime's heartbeat would; once the readers pause, the WAL is back under
// sqlitestore.JournalSizeLimit at the next Housekeep, and empty at the one
// after (idle). With -short, or under the race detector (which makes this
// SQLite tens of times slower), it appends 2,000 messages with one reader,
// a Housekeep every 250: the same sequence, on a smaller WAL.
func TestWALStaysBounded(t *testing.T) {
	n, every, nreaders := 40_000, 2000, 2
	if testing.Short() || raceEnabled {
		n, every, nreaders = 2000, 250, 1
	}
	ctx := t.Context()
	s := install(t, dbPath(t), sqlitestore.Options{PoolSize: 4})
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var reads atomic.Int64
	for r := range nreaders {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if r == 0 {
					_, err = s.ReadAll(ctx, driver.ReadAllOptions{Order: driver.Descending, Limit: 50})
				} else {
					_, err = s.Read(ctx, []core.Condition{{Type: "test.tick", Attrs: map[string]string{"counter": fmt.Sprint("c", r)}}}, driver.ReadOptions{Limit: 20})
				}
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				reads.Add(1)
			}
		})
	}
	var maxWAL int64
	const batch = 20
	for i := 0; i < n; i += batch {
		ms := make([]core.Message, batch)
		for j := range ms {
			ms[j] = core.NewMessage(tick{Counter: fmt.Sprint("c", (i+j)%7), Seq: i + j, Writer: "w", Ref: fmt.Sprintf("ref-%08d-with-some-padding-to-make-pages", i+j)})
		}
		if _, err := s.Append(ctx, ms, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if (i+batch)%every == 0 {
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			maxWAL = max(maxWAL, st.WALBytes)
			if err := s.Housekeep(ctx); err != nil {
				t.Fatalf("housekeep: %v", err)
			}
		}
	}
	close(stop)
	readers.Wait()
	wal := func() int64 {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.WALBytes
	}
	atPause := wal()
	if err := s.Housekeep(ctx); err != nil {
		t.Fatal(err)
	}
	after := wal()
	t.Logf("%d messages appended, %d reads: WAL at most %d bytes while reading (sampled), %d when readers paused, %d after one Housekeep", n, reads.Load(), maxWAL, atPause, after)
	if after > sqlitestore.JournalSizeLimit {
		t.Fatalf("WAL is %d bytes after readers paused and Housekeep ran, want at most JournalSizeLimit = %d", after, sqlitestore.JournalSizeLimit)
	}
	if err := s.Housekeep(ctx); err != nil {
		t.Fatal(err)
	}
	if idle := wal(); idle != 0 {
		t.Fatalf("WAL is %d bytes after an idle Housekeep, want 0 (truncated)", idle)
	}
	// Writes go on after the truncation.
	appendOK(t, s, tick{Counter: "after"})
	if err := s.Housekeep(context.Background()); err != nil {
		t.Fatal(err)
	}
}
