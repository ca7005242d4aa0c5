package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestCopyFromSQLite copies a SQLite log with a gap (a deleted message)
// into PostgreSQL: the same messages in the same order, renumbered, and
// guarded reads on the copy work.
func TestCopyFromSQLite(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	lite, err := sqlitestore.Install(ctx, ":memory:", sqlitestore.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	var batch []core.Message
	for i := range 1234 {
		batch = append(batch, core.NewMessage(storetest.UserJoinedCourse{CourseName: fmt.Sprint("c", i%7), UserID: fmt.Sprint("u", i)}).
			WithMetadata(map[string]any{"i": float64(i)}))
	}
	if _, err := lite.Append(ctx, batch, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Update(ctx, func(tx shell.Tx) error { return tx.Delete(10) }); err != nil {
		t.Fatal(err)
	}
	pg := open(t, pgstore.Options{Registry: reg})
	n, err := pgstore.Copy(ctx, lite, pg)
	if err != nil || n != 1233 {
		t.Fatalf("copied %d, %v; want 1233", n, err)
	}
	var a, b []core.PositionedMessage
	for m, err := range lite.All(ctx, shell.ReadAllOptions{Limit: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, m)
	}
	for m, err := range pg.All(ctx, shell.ReadAllOptions{Limit: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, m)
	}
	if len(a) != len(b) {
		t.Fatalf("source %d messages, copy %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if y.Position != int64(i+1) || x.ID != y.ID || x.Type != y.Type || !x.CreatedAt.Equal(y.CreatedAt) ||
			x.CausationID != y.CausationID || x.CorrelationID != y.CorrelationID || fmt.Sprint(x.Payload) != fmt.Sprint(y.Payload) || fmt.Sprint(x.Metadata) != fmt.Sprint(y.Metadata) {
			t.Fatalf("message %d: source %+v, copy %+v", i, x, y)
		}
	}
	res, err := pg.ReadPartition(ctx, map[string]string{"course_name": "c3"}, []string{"user.joined_course"}, shell.ReadOptions{})
	if err != nil || len(res.Messages) != 176 {
		t.Fatalf("partition read on the copy: %d messages, %v", len(res.Messages), err)
	}
	// The copy again: every id is there already.
	if _, err := pgstore.Copy(ctx, lite, pg); err == nil {
		t.Fatal("a second copy into the same store succeeded")
	}
}
