package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// The reliability tests re-execute the test binary as child processes. A
// child finds its role in these environment variables.
const (
	envRole   = "SQLITESTORE_TEST_ROLE"
	envPath   = "SQLITESTORE_TEST_DB"
	envWriter = "SQLITESTORE_TEST_WRITER"
	envCount  = "SQLITESTORE_TEST_COUNT"
	envMarker = "SQLITESTORE_TEST_MARKER"
)

// child starts this test binary running only test name, in role.
func child(t *testing.T, name, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), append(env, envRole+"="+role)...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	return cmd
}

// TestTwoProcessesGuardedAppends runs two OS processes that each append
// writes messages to one counter, read-then-append with a guard on the
// counter and a retry on conflict, as deciders do. The guard makes the
// counter a total order across processes: every sequence number is taken
// exactly once. Afterwards every message is there once, and positions are
// gapless.
func TestTwoProcessesGuardedAppends(t *testing.T) {
	if os.Getenv(envRole) == "counter" {
		counterChild(t)
		return
	}
	t.Parallel() // its files and processes are its own
	writes := 2000
	if raceEnabled { // 10-20 times slower: still hundreds of conflicts
		writes = 800
	}
	if testing.Short() {
		writes = 300
	}
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	start := time.Now()
	var cmds []*exec.Cmd
	for _, w := range []string{"w1", "w2"} {
		cmd := child(t, "TestTwoProcessesGuardedAppends", "counter",
			envPath+"="+path, envWriter+"="+w, envCount+"="+strconv.Itoa(writes))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	t.Logf("2 processes x %d guarded appends in %v", writes, time.Since(start).Round(time.Millisecond))

	total := 2 * writes
	seqs := make(map[int]bool, total)
	seen := make(map[string]bool, total)
	var want int64 = 1
	for m, err := range s.All(t.Context(), driver.ReadAllOptions{Limit: 500}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Position != want {
			t.Fatalf("position %d, want %d: positions have a gap", m.Position, want)
		}
		want++
		p := m.Payload.(tick)
		if seqs[p.Seq] {
			t.Fatalf("sequence number %d taken twice: a guard let a conflict through", p.Seq)
		}
		seqs[p.Seq] = true
		if seen[p.Ref] {
			t.Fatalf("message %s stored twice", p.Ref)
		}
		seen[p.Ref] = true
	}
	if len(seen) != total {
		t.Fatalf("%d messages stored, want %d", len(seen), total)
	}
	for i := range total {
		if !seqs[i] {
			t.Fatalf("sequence number %d missing", i)
		}
	}
}

// counterChild is one writer of TestTwoProcessesGuardedAppends.
func counterChild(t *testing.T) {
	ctx := context.Background()
	writer := os.Getenv(envWriter)
	n, _ := strconv.Atoi(os.Getenv(envCount))
	s, err := sqlitestore.Open(ctx, os.Getenv(envPath), sqlitestore.Options{Registry: registry(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counter := []core.Condition{{Type: "test.tick", Attrs: map[string]string{"counter": "c"}}}
	conflicts := 0
	for i := range n {
		for {
			// The newest tick of the counter, and the guard of that read.
			page, err := s.ReadAll(ctx, driver.ReadAllOptions{Conditions: counter, Order: driver.Descending, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			next := 0
			if len(page.Messages) > 0 {
				next = page.Messages[0].Payload.(tick).Seq + 1
			}
			g := core.Guard{Conditions: counter, LastPosition: page.LastPosition}
			msg := core.NewMessage(tick{Counter: "c", Seq: next, Writer: writer, Ref: writer + "-" + strconv.Itoa(i)})
			_, err = s.Append(ctx, []core.Message{msg}, driver.AppendOptions{Guard: &g})
			if errors.Is(err, driver.ErrConcurrentAppend) {
				conflicts++
				continue
			}
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			break
		}
	}
	t.Logf("%s: %d appends, %d conflicts retried", writer, n, conflicts)
}

// TestKilledDuringLargeAppend kills a process (SIGKILL) in the middle of
// one append of 50,000 messages: the log holds all of them or none, with
// their index.
func TestKilledDuringLargeAppend(t *testing.T) {
	if os.Getenv(envRole) == "bulk" {
		bulkChild(t)
		return
	}
	const n = 50_000
	path := dbPath(t)
	s := install(t, path, sqlitestore.Options{})
	appendOK(t, s, courseCreated{"before"})
	s.Close()

	marker := filepath.Join(t.TempDir(), "started")
	cmd := child(t, "TestKilledDuringLargeAppend", "bulk",
		envPath+"="+path, envCount+"="+strconv.Itoa(n), envMarker+"="+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child never started its append")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // well into the append
	_, statErr := os.Stat(marker + ".committed")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if statErr == nil {
		t.Log("the append committed before the kill: this run checks the all case only")
	}

	s2, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{Registry: registry(t)})
	if err != nil {
		t.Fatalf("reopen after the kill: %v", err)
	}
	defer s2.Close()
	st, err := s2.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	switch st.MaxPosition {
	case 1:
		t.Log("none of the append survived the kill")
	case 1 + n:
		t.Log("all of the append survived the kill")
	default:
		t.Fatalf("after the kill the log ends at %d: neither none (1) nor all (%d)", st.MaxPosition, 1+n)
	}
	// The index agrees with the log.
	r, err := s2.Read(t.Context(), []core.Condition{{Type: "test.tick", Attrs: map[string]string{"counter": "bulk"}}}, driver.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(r.Messages)) != st.MaxPosition-1 {
		t.Fatalf("%d messages indexed under the counter, %d in the log", len(r.Messages), st.MaxPosition-1)
	}
	// A new append continues after what survived.
	if res := appendOK(t, s2, courseCreated{"after"}); res.Last != st.MaxPosition+1 {
		t.Fatalf("append after the kill at %d, want %d", res.Last, st.MaxPosition+1)
	}
}

// bulkChild is the process TestKilledDuringLargeAppend kills.
func bulkChild(t *testing.T) {
	ctx := context.Background()
	n, _ := strconv.Atoi(os.Getenv(envCount))
	marker := os.Getenv(envMarker)
	s, err := sqlitestore.Open(ctx, os.Getenv(envPath), sqlitestore.Options{Registry: registry(t)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]core.Message, n)
	for i := range msgs {
		msgs[i] = core.NewMessage(tick{Counter: "bulk", Seq: i, Writer: "bulk", Ref: fmt.Sprint("bulk-", i)})
	}
	err = s.Update(ctx, func(tx driver.Tx) error {
		// Inside the write transaction: the parent may kill us from now on.
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			return err
		}
		_, err := tx.Append(msgs, driver.AppendOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(marker+".committed", nil, 0o600)
	time.Sleep(time.Minute) // wait for the kill
}
