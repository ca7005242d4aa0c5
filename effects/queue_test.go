package effects_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
)

// The signals a queue returns for each outcome of a job, without a store.
func TestQueueSignals(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var ran []int
	q := effects.NewQueue("jobs", func(_ context.Context, job effects.Job[RunJob]) error {
		ran = append(ran, job.Payload.N)
		switch job.Payload.N {
		case 1:
			return errors.New("flaky")
		case 2:
			return core.Permanent(errors.New("bad job"))
		}
		return nil
	})
	q.Attempts = 3
	q.Backoff = func(attempt int) time.Duration { return time.Duration(attempt) * time.Minute }
	if err := q.Register(registry()); err != nil {
		t.Fatal(err)
	}
	info, err := effects.Describe(q)
	if err != nil || !info.Exclusive || !info.IDPartitioned() || info.Group != "jobs" {
		t.Fatalf("Describe = %+v, %v: want the exclusive, id-partitioned group jobs", info, err)
	}

	t.Run("done", func(t *testing.T) {
		pairs, err := q.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{positioned(5, RunJob{N: 0})}})
		if err != nil || len(pairs) != 1 || len(pairs[0].Signals) != 1 || pairs[0].Signals[0] != (effects.Ack{Delete: true}) {
			t.Fatalf("pairs %+v, %v: want the job deleted", pairs, err)
		}
	})
	t.Run("failed with attempts left", func(t *testing.T) {
		job := positioned(6, RunJob{N: 1})
		job.Metadata = map[string]any{effects.AttemptKey: float64(1), "tenant": "t1"} // as read back from the log
		pairs, err := q.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{job}})
		if err != nil || len(pairs) != 1 || len(pairs[0].Signals) != 2 {
			t.Fatalf("pairs %+v, %v: want a delete and a retry", pairs, err)
		}
		retry := pairs[0].Signals[1].(effects.Append).Messages[0]
		if !retry.CreatedAt.Equal(now.Add(2*time.Minute)) || retry.Metadata[effects.AttemptKey] != 2 || retry.Metadata[effects.ErrorKey] != "flaky" || retry.Metadata["tenant"] != "t1" {
			t.Fatalf("retry %+v: want attempt 2 due after Backoff(2), the error and the job's metadata", retry)
		}
		if _, ok := job.Metadata[effects.ErrorKey]; ok {
			t.Fatal("the retry's metadata was written into the failed job's")
		}
	})
	t.Run("a huge error is clipped", func(t *testing.T) {
		huge := effects.NewQueue("jobs", func(context.Context, effects.Job[RunJob]) error {
			return errors.New(strings.Repeat("é", 100_000)) // a response body
		})
		if err := huge.Register(registry()); err != nil {
			t.Fatal(err)
		}
		pairs, err := huge.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{positioned(6, RunJob{N: 1})}})
		if err != nil || len(pairs) != 1 {
			t.Fatalf("pairs %+v, %v", pairs, err)
		}
		msg := pairs[0].Signals[1].(effects.Append).Messages[0].Metadata[effects.ErrorKey].(string)
		if len(msg) > 2100 || !utf8.ValidString(msg) || !strings.Contains(msg, "bytes more") {
			t.Fatalf("recorded error of %d bytes (valid UTF-8: %v), want it cut to about 2 KB at a rune", len(msg), utf8.ValidString(msg))
		}
	})
	t.Run("snoozed", func(t *testing.T) {
		snoozer := effects.NewQueue("jobs", func(context.Context, effects.Job[RunJob]) error {
			return fmt.Errorf("rate limited: %w", effects.Snooze(30*time.Second))
		})
		snoozer.Attempts = 1 // a snooze is no attempt: never out of them
		if err := snoozer.Register(registry()); err != nil {
			t.Fatal(err)
		}
		job := positioned(6, RunJob{N: 1})
		job.Metadata = map[string]any{effects.AttemptKey: float64(2), effects.ErrorKey: "earlier", "tenant": "t1"}
		pairs, err := snoozer.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{job}})
		if err != nil || len(pairs) != 1 || len(pairs[0].Signals) != 2 || pairs[0].Signals[0] != (effects.Ack{Delete: true}) {
			t.Fatalf("pairs %+v, %v: want a delete and the job again", pairs, err)
		}
		again := pairs[0].Signals[1].(effects.Append).Messages[0]
		if !again.CreatedAt.Equal(now.Add(30*time.Second)) || again.Metadata[effects.AttemptKey] != 2 || again.Metadata[effects.ErrorKey] != "earlier" || again.Metadata["tenant"] != "t1" {
			t.Fatalf("snoozed job %+v: want it due in 30s with its attempts (2) and metadata unchanged", again)
		}
		first, err := snoozer.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{positioned(7, RunJob{N: 1})}})
		if err != nil {
			t.Fatal(err)
		}
		if _, counted := first[0].Signals[1].(effects.Append).Messages[0].Metadata[effects.AttemptKey]; counted {
			t.Fatal("a first attempt snoozed comes back counting an attempt")
		}
	})
	t.Run("attempts run out", func(t *testing.T) {
		job := positioned(7, RunJob{N: 1})
		job.Metadata = map[string]any{effects.AttemptKey: 2}
		ok := positioned(6, RunJob{N: 0})
		pairs, err := q.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{ok, job}})
		var be *core.BatchError
		if !errors.As(err, &be) || be.Message.Position != 7 || be.Index != 1 || len(pairs) != 1 {
			t.Fatalf("pairs %+v, %v: want the first job's pair and a BatchError at the second", pairs, err)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		_, err := q.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{positioned(8, RunJob{N: 2})}})
		if !core.IsPermanent(err) {
			t.Fatalf("err %v, want the permanent failure at attempt 1", err)
		}
	})
	t.Run("replay", func(t *testing.T) {
		ran = nil
		pairs, err := q.HandleClaim(t.Context(), effects.Claim{Now: now, ReplayUpto: 9, Messages: []core.PositionedMessage{positioned(9, RunJob{N: 0}), positioned(10, RunJob{N: 3})}})
		if err != nil || len(pairs) != 2 || pairs[0].Signals[0] != (effects.Ack{}) || len(ran) != 1 || ran[0] != 3 {
			t.Fatalf("pairs %+v, ran %v, %v: want the replayed job acknowledged without running, the new one run", pairs, ran, err)
		}
	})
	t.Run("foreign payload", func(t *testing.T) {
		_, err := q.HandleClaim(t.Context(), effects.Claim{Now: now, Messages: []core.PositionedMessage{positioned(11, EnrolStudent{CourseID: "c"})}})
		if !core.IsPermanent(err) {
			t.Fatalf("err %v, want a permanent failure naming the payload's type", err)
		}
	})
}

func TestDefaultQueueBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 10: 512 * time.Second, 12: 2048 * time.Second, 13: time.Hour, 1 << 40: time.Hour} {
		if got := effects.DefaultQueueBackoff(attempt); got != want {
			t.Errorf("DefaultQueueBackoff(%d) = %v, want %v", attempt, got, want)
		}
	}
}
