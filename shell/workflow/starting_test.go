package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

type (
	Book struct {
		BookingID string `json:"booking_id" sourced:"required"`
		Guest     string `json:"guest" sourced:"required"`
	}
	Booked struct {
		BookingID string `json:"booking_id"`
		Guest     string `json:"guest"`
	}
)

var errBookedAlready = errors.New("booked already")

// bookings decides a booking and starts its greeting run in the same
// decision (workflow.Starting): both stored in one transaction.
func bookings(wf *workflow.Definition[string, string]) core.Decider[bool] {
	return core.Decider[bool]{Group: "bookings", PartitionBy: []string{"booking_id"}}.With(
		core.Evolve(func(bool, Booked) bool { return true }),
		core.Decide(func(booked bool, c Book) ([]any, error) {
			if booked {
				return nil, errBookedAlready
			}
			greet, err := workflow.Starting(wf, c.Guest, workflow.WithID("greeting-"+c.BookingID))
			if err != nil {
				return nil, err
			}
			return []any{Booked(c), greet}, nil
		}),
	)
}

// A decision starts a workflow run as one of its messages: the run is
// stored with the decision (a refused decision starts none) and the
// runtime drives it like a started one.
func TestADecisionStartsAWorkflow(t *testing.T) {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[Book](reg, "bookings.book")
	codec.MustRegister[Booked](reg, "bookings.booked")
	store := memstore.New(reg)
	wf, _, _ := greeting(0)
	d := bookings(wf)
	runtime(t, store, d, wf)
	res, err := shell.Handle(ctx, store, d, Book{BookingID: "b1", Guest: "Ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 2 {
		t.Fatalf("the decision stored %d messages, want the booking and the run's start", len(res.Events))
	}
	out, err := wait(t, workflow.Attach(store, wf, "greeting-b1"))
	if err != nil || out != "Hello Ada, your IP is 10.0.0.1 and its location is Lisbon" {
		t.Fatalf("the run the decision started: %q, %v", out, err)
	}
	// A refused decision stores nothing, so starts no run.
	if _, err := shell.Handle(ctx, store, d, Book{BookingID: "b1", Guest: "Bob"}, nil); !errors.Is(err, errBookedAlready) {
		t.Fatalf("booking b1 again: %v", err)
	}
	started, err := store.Read(ctx, []core.Condition{{Type: "greeting_task.workflow_started"}}, shell.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(started.Messages) != 1 {
		t.Fatalf("%d runs started, want the one of the accepted booking", len(started.Messages))
	}
}
