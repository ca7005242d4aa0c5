package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The scaling benchmarks run the same append and the same partition read
// against logs of scalingLogs messages (accounts of scalingPartition
// messages each, spread over the whole log): the rates should not depend
// on the size of the log.
var scalingLogs = []int{10_000, 1_000_000}

const scalingPartition = 100

// scalingCache holds the log files built in this process, one per size:
// a million-message log takes a minute to build on a loaded 2-core
// machine, so the benchmarks that need one share it (appends copy it).
// With SOURCED_BENCH_LOGS set to a directory, the logs are kept there
// and reused by later runs (delete the directory after a schema change).
var scalingCache struct {
	mu    sync.Mutex
	dir   string
	keep  bool
	paths map[int]string
}

// TestMain removes the scaling logs when the benchmarks are done (unless
// they live in SOURCED_BENCH_LOGS).
func TestMain(m *testing.M) {
	code := m.Run()
	if scalingCache.dir != "" && !scalingCache.keep {
		os.RemoveAll(scalingCache.dir)
	}
	os.Exit(code)
}

// scalingLog returns the path of a closed store file holding a log of n
// storeEvent messages (n/scalingPartition accounts, analyzed), building it
// on first use with the bulk path (storeBulkLog). The file must not be
// changed: copy it (scalingCopy) to write to it.
func scalingLog(b *testing.B, n int) string {
	b.Helper()
	scalingCache.mu.Lock()
	defer scalingCache.mu.Unlock()
	if p, ok := scalingCache.paths[n]; ok {
		return p
	}
	if scalingCache.dir == "" {
		dir, keep := os.Getenv("SOURCED_BENCH_LOGS"), true
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "sourced-bench-scaling-"); err != nil {
				b.Fatal(err)
			}
			keep = false
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		scalingCache.dir, scalingCache.keep, scalingCache.paths = dir, keep, make(map[int]string)
	}
	path := filepath.Join(scalingCache.dir, fmt.Sprintf("log-%d.db", n))
	if _, err := os.Stat(path); err == nil && scalingCache.keep {
		scalingCache.paths[n] = path
		return path
	}
	// Built under another name and renamed when complete, so that an
	// interrupted build is never taken for a log.
	building := path + ".building"
	os.Remove(building)
	ctx := context.Background()
	started := time.Now()
	s, err := sqlitestore.Install(ctx, building, sqlitestore.Options{Registry: storeRegistry(b)})
	if err != nil {
		b.Fatal(err)
	}
	if err := storeBulkLog(ctx, s, n, n/scalingPartition); err != nil {
		s.Close()
		b.Fatal(err)
	}
	if err := s.Optimize(ctx); err != nil {
		s.Close()
		b.Fatal(err)
	}
	if err := s.Close(); err != nil { // checkpoints the WAL into the file
		b.Fatal(err)
	}
	if err := os.Rename(building, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built a log of %d messages in %v", n, time.Since(started).Round(time.Millisecond))
	scalingCache.paths[n] = path
	return path
}

// scalingCopy copies the log of n messages into the benchmark's temporary
// directory and opens it.
func scalingCopy(b *testing.B, n int) *sqlitestore.Store {
	b.Helper()
	src := scalingLog(b, n)
	dst := filepath.Join(b.TempDir(), "log.db")
	if err := copyFile(src, dst); err != nil {
		b.Fatal(err)
	}
	s, err := sqlitestore.Open(context.Background(), dst, sqlitestore.Options{Registry: storeRegistry(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// copyFile copies src to dst and syncs dst before it returns: a copy of
// the million-message log is some 400 MB of dirty page cache, and left to
// the kernel's writeback it was written out during the timed appends that
// follow (their WAL checkpoint's fsync of the database file waited for
// all of it), which made BenchmarkAppend/log=1000000 measure the copy:
// 5 to 15 times slower than log=10000 on a loaded machine, 1.1x once the
// copy is synced before the timer starts.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// appendScaling appends single messages (an existing account, a new ref)
// to a copy of the log of n messages and reports msgs/s: what
// BenchmarkAppend/batch=1 does, on a log of that size.
func appendScaling(b *testing.B, n int) {
	s := scalingCopy(b, n)
	ctx := context.Background()
	msgs := make([]core.Message, 0, 1)
	seq := n // refs of the log are ref-0 ... ref-(n-1): every append a new one
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		msgs = storeBatch(msgs, seq, 1, storeAccounts)
		seq++
		if _, err := s.Append(ctx, msgs, shell.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq-n)/time.Since(start).Seconds(), "msgs/s")
}

// readPartitionScaling reads one partition of scalingPartition messages
// out of the log of n messages and reports msgs/s (messages read).
func readPartitionScaling(b *testing.B, n int) {
	path := scalingLog(b, n)
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: storeRegistry(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	partition := map[string]string{"account": "acct-42"}
	types := []string{storeEventType}
	// One read first, so that the rate is the steady one, not that of the
	// first reads of a file just opened.
	if _, err := s.ReadPartition(ctx, partition, types, shell.ReadOptions{}); err != nil {
		b.Fatal(err)
	}
	read := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		res, err := s.ReadPartition(ctx, partition, types, shell.ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Messages) != scalingPartition {
			b.Fatalf("read %d messages, want %d", len(res.Messages), scalingPartition)
		}
		if ev := res.Messages[scalingPartition-1].Payload.(storeEvent); ev.Account != partition["account"] {
			b.Fatalf("read a message of %s in the partition of %s", ev.Account, partition["account"])
		}
		read += len(res.Messages)
	}
	b.ReportMetric(float64(read)/time.Since(start).Seconds(), "msgs/s")
}

func logName(n int) string { return "log=" + strconv.Itoa(n) }
