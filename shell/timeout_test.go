package shell_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// overdue is an impure reactor whose batches block until their context
// ends, with a batch timeout of its own.
type overdue struct {
	timeout time.Duration
	calls   atomic.Int64
}

func (s *overdue) GroupID() string             { return "shell_test.overdue" }
func (s *overdue) HandledTypes() []string      { return []string{"students.notify"} }
func (s *overdue) PartitionKeys() []string     { return []string{"student_id"} }
func (s *overdue) BatchTimeout() time.Duration { return s.timeout }
func (s *overdue) HandleClaim(ctx context.Context, _ effects.Claim) ([]effects.Pair, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A batch that outlives its reactor's timeout is cancelled and fails: the
// failure (a *BatchTimeoutError) goes to the group's error strategy, and
// no other worker runs the batch again (issue 28, item 2). Its claim is
// kept meanwhile, though the runtime's MaxClaimAge is shorter.
func TestBatchPastItsTimeoutFails(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(courseRegistry())
	s := &overdue{timeout: 400 * time.Millisecond}
	cfg := shell.DefaultConfig()
	cfg.Logger = quiet()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.ClaimTTL = time.Second
	cfg.MaxClaimAge = 150 * time.Millisecond
	cfg.Workers = 2
	rt := startRuntime(t, store, cfg, s)
	if _, err := store.Append(ctx, []core.Message{core.NewMessage(NotifyStudent{StudentID: "s1"})}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := rt.WaitIdle(wctx, 0)
	var te *shell.BatchTimeoutError
	var failed *shell.GroupFailedError
	if !errors.As(err, &failed) || !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIdle = %v, want a *GroupFailedError for a *BatchTimeoutError", err)
	}
	if te.Group != s.GroupID() || te.Timeout != s.timeout {
		t.Fatalf("timeout error %+v", te)
	}
	info, err := store.Group(ctx, s.GroupID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != shell.StatusFailed || info.Failure.MessageType != "students.notify" || !strings.Contains(info.Failure.Error, "ran longer than its timeout (400ms)") {
		t.Fatalf("group %s with failure %+v, want failed by the timeout", info.Status, info.Failure)
	}
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("the batch ran %d times, want once (its claim kept past MaxClaimAge, then failed)", n)
	}
}
