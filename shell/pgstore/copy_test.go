package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
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
		batch = append(batch, core.NewMessage(fixtures.UserJoinedCourse{CourseName: fmt.Sprint("c", i%7), UserID: fmt.Sprint("u", i)}).
			WithMetadata(map[string]any{"i": float64(i)}))
	}
	if _, err := lite.Append(ctx, batch, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Update(ctx, func(tx driver.Tx) error { return tx.Delete(10) }); err != nil {
		t.Fatal(err)
	}
	pg := open(t, pgstore.Options{Registry: reg})
	n, err := pgstore.Copy(ctx, lite, pg)
	if err != nil || n != 1233 {
		t.Fatalf("copied %d, %v; want 1233", n, err)
	}
	var a, b []core.PositionedMessage
	for m, err := range lite.All(ctx, driver.ReadAllOptions{Limit: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, m)
	}
	for m, err := range pg.All(ctx, driver.ReadAllOptions{Limit: 200}) {
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
	res, err := pg.ReadPartition(ctx, map[string]string{"course_name": "c3"}, []string{"user.joined_course"}, driver.ReadOptions{})
	if err != nil || len(res.Messages) != 176 {
		t.Fatalf("partition read on the copy: %d messages, %v", len(res.Messages), err)
	}
	// The copy again: every id is there already.
	if _, err := pgstore.Copy(ctx, lite, pg); err == nil {
		t.Fatal("a second copy into the same store succeeded")
	}
}

type looseNote struct {
	Topic string `json:"topic"`
	Body  string `json:"body" sourced:"noindex"`
}

type strictNote struct {
	Topic string `json:"topic"`
	Body  string `json:"body"`
}

// oldLog is a source log written before the limits on indexed values:
// its notes are read as strictNote, whose body is indexed, whatever they
// hold.
type oldLog struct{ driver.Store }

func (o oldLog) All(ctx context.Context, opts driver.ReadAllOptions) iter.Seq2[core.PositionedMessage, error] {
	return func(yield func(core.PositionedMessage, error) bool) {
		for m, err := range o.Store.All(ctx, opts) {
			if n, ok := m.Payload.(looseNote); ok {
				m.Type, m.Payload = "copy.note", strictNote(n)
			}
			if !yield(m, err) {
				return
			}
		}
	}
}

// TestCopyReportsWhatItCannotCopy: messages the source took that the
// PostgreSQL store refuses (indexed values over codec.MaxIndexedValueBytes
// or holding a NUL, which SQLite took before the limits) no longer stop
// the copy at the first: every other message is copied, and a
// *pgstore.CopyError lists the ones left out by their source positions.
func TestCopyReportsWhatItCannotCopy(t *testing.T) {
	ctx := t.Context()
	srcReg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	dstReg, _ := storetest.NewRegistry()
	codec.MustRegister[strictNote](dstReg, "copy.note")
	codec.MustRegister[looseNote](srcReg, "copy.loose_note")
	lite, err := sqlitestore.Install(ctx, ":memory:", sqlitestore.Options{Registry: srcReg})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	var batch []core.Message
	for i := range 1100 {
		var p any = fixtures.UserJoinedCourse{CourseName: "c", UserID: fmt.Sprint("u", i)}
		switch i {
		case 3:
			p = looseNote{Topic: "t", Body: "a\x00b"}
		case 600:
			p = looseNote{Topic: "t", Body: strings.Repeat("x", 4000)}
		case 601:
			p = looseNote{Topic: "t", Body: "fine"}
		}
		batch = append(batch, core.NewMessage(p))
	}
	if _, err := lite.Append(ctx, batch, driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	pg := open(t, pgstore.Options{Registry: dstReg})
	n, err := pgstore.Copy(ctx, oldLog{lite}, pg)
	var ce *pgstore.CopyError
	if !errors.As(err, &ce) || !errors.Is(err, codec.ErrInvalid) || n != 1098 || ce.Copied != 1098 {
		t.Fatalf("copy: %d, %v; want 1098 copied and a *pgstore.CopyError", n, err)
	}
	var got []int64
	for _, m := range ce.NotCopied {
		got = append(got, m.Position)
		if m.Type != "copy.note" || !errors.Is(m.Err, codec.ErrInvalid) {
			t.Fatalf("left out %+v, want a copy.note refused as codec.ErrInvalid", m)
		}
	}
	if !slices.Equal(got, []int64{4, 601}) {
		t.Fatalf("left out positions %v, want [4 601]", got)
	}
	if len(err.Error()) > 2000 {
		t.Fatalf("the error is %d bytes long", len(err.Error()))
	}
	var notes []strictNote
	for m, err := range pg.All(ctx, driver.ReadAllOptions{Limit: 500}) {
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := m.Payload.(strictNote); ok {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || notes[0].Body != "fine" {
		t.Fatalf("notes copied: %v, want the fine one alone", notes)
	}
}

// TestCopyCopiesTheSchedule: scheduled messages are copied with their ids
// and due times, so reminders days ahead fire from the copy instead of
// being lost (before, Copy left the schedule behind, and reactions re-run
// on the copied log scheduled them again).
func TestCopyCopiesTheSchedule(t *testing.T) {
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
	now := time.Now().UTC().Truncate(time.Millisecond)
	soon := core.NewMessage(fixtures.CourseCreated{CourseName: "soon"}).At(now.Add(time.Hour))
	later := core.NewMessage(fixtures.CourseCreated{CourseName: "later"}).At(now.Add(48 * time.Hour))
	res, err := lite.Append(ctx, []core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: "now"}), later, soon}, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pg := open(t, pgstore.Options{Registry: reg})
	n, err := pgstore.Copy(ctx, lite, pg)
	if err != nil || n != 3 {
		t.Fatalf("copied %d, %v; want the log's message and the two scheduled", n, err)
	}
	got, err := pg.ReadScheduled(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != res.Messages[2].ID || got[1].ID != res.Messages[1].ID ||
		!got[0].CreatedAt.Equal(now.Add(time.Hour)) || !got[1].CreatedAt.Equal(now.Add(48*time.Hour)) {
		t.Fatalf("the copy's schedule: %+v, want soon (in an hour) then later (in two days) with their ids", got)
	}
	all, err := pg.ReadAll(ctx, driver.ReadAllOptions{})
	if err != nil || len(all.Messages) != 1 {
		t.Fatalf("the copy's log: %d messages, %v; want 1", len(all.Messages), err)
	}
}
