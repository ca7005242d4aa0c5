package sqlitestore_test

import (
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Workers counts the claims each worker holds, in the same query (the
// dashboard's partitions page read every offset to count them: issue 30,
// item 1).
func TestWorkersCountTheirClaims(t *testing.T) {
	ctx := t.Context()
	s := install(t, dbPath(t), sqlitestore.Options{})
	register(t, s, courseGroup("courses"))
	appendOK(t, s, courseCreated{"Algebra"}, courseCreated{"History"}, courseCreated{"Chemistry"})
	if err := s.Heartbeat(ctx, []string{"w1", "w2"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"w1", "w1"} {
		if c, err := s.ClaimNext(ctx, "courses", w, 10); err != nil || c == nil {
			t.Fatalf("claim as %s: %v, %v", w, c, err)
		}
	}
	ws, err := s.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].ID != "w1" || ws[0].Claims != 2 || ws[1].ID != "w2" || ws[1].Claims != 0 {
		t.Fatalf("workers %+v, want w1 with 2 claims and w2 with none", ws)
	}
}
