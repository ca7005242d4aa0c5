package shell_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// lockedBuffer is a buffer a logger writes from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The library logs nothing above DEBUG while all goes well: installing a
// store, opening it again, running workers on commands and reactions,
// stopping. (Installing logged its migrations at INFO.)
func TestNormalOperationLogsNothingAboveDebug(t *testing.T) {
	ctx := context.Background()
	var out lockedBuffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	path := filepath.Join(t.TempDir(), "quiet.db")
	store, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: courseRegistry(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := shell.NewRuntime(store, shell.Config{Workers: 2, Logger: logger}, enrolments, notifications)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ada", "alan"} {
		if _, err := shell.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: s}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Append(ctx, core.Messages(EnrolStudent{CourseID: "c2", StudentID: "grace"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := rt.WaitIdle(wctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Registry: courseRegistry(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	_ = again.Close()
	if s := out.String(); s != "" {
		t.Errorf("normal operation logged above DEBUG:\n%s", s)
	}
}
