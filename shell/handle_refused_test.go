package shell_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

// A refused command stores nothing, and Handle's result says so: the
// command as it was stamped (its id, to report), no position, no events.
func TestHandleRefusedReturnsNoPosition(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(namesRegistry())
	if _, err := shell.Handle(ctx, store, names, ClaimName{Username: "ann", AccountID: "a1"}, nil); err != nil {
		t.Fatal(err)
	}
	before, err := store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := shell.Handle(ctx, store, names, ClaimName{Username: "ann", AccountID: "a2"}, nil)
	if err == nil {
		t.Fatal("a second claim of the name was accepted")
	}
	if res.Position != 0 || res.Events != nil {
		t.Errorf("refused command: Position %d, Events %v, want 0 and none", res.Position, res.Events)
	}
	if res.Command.ID == uuid.Nil {
		t.Error("refused command: the result lost the command's id")
	}
	after, err := store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.MaxPosition != before.MaxPosition {
		t.Errorf("the log moved from %d to %d for a refused command", before.MaxPosition, after.MaxPosition)
	}
}
