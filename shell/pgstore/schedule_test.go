package pgstore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestPromoteSetsAsideWhatPostgresRefuses: scheduled rows that PostgreSQL
// cannot index (a NUL, a 4 KB value in an indexed attribute: stored
// before the limits were checked, or by another store's copy) no longer
// fail every PromoteScheduled with a raw server error, holding up what is
// due after them: they are set aside, listed in a *driver.UnpromotedError,
// and the rest is promoted.
func TestPromoteSetsAsideWhatPostgresRefuses(t *testing.T) {
	ctx := t.Context()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	prefix := pgtest.Prefix()
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix, Now: func() time.Time { return now }})
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	due := now.Add(time.Minute)
	var bad []uuid.UUID
	for _, value := range []string{`Alg\u0000ebra`, strings.Repeat("x", 4000) + fmt.Sprint(time.Now().UnixNano())} {
		id := uuid.New()
		bad = append(bad, id)
		if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s_scheduled_messages (message_id, message_type, payload, available_at, scheduled_at) VALUES ($1, $2, $3, $4, $4)`, prefix),
			id, fixtures.TypeCourseCreated, `{"course_name":"`+value+`"}`, due); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Append(ctx, []core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: "History"}).At(due)}, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // reported again, nothing lost
		n, err := s.PromoteScheduled(ctx, due)
		var ue *driver.UnpromotedError
		if !errors.As(err, &ue) || len(ue.Messages) != 2 || n != 1-i {
			t.Fatalf("promote: %d, %v; want %d and a *driver.UnpromotedError listing two messages", n, err, 1-i)
		}
		var got []uuid.UUID
		for _, m := range ue.Messages {
			got = append(got, m.ID)
			if !errors.Is(m.Err, codec.ErrInvalid) {
				t.Fatalf("set aside %s: %v, want codec.ErrInvalid", m.ID, m.Err)
			}
		}
		if !slices.Equal(got, bad) {
			t.Fatalf("set aside %v, want %v", got, bad)
		}
		log, err := s.ReadAll(ctx, driver.ReadAllOptions{})
		if err != nil || len(log.Messages) != 1 || log.Messages[0].ID != res.Messages[0].ID {
			t.Fatalf("log %v, %v: want the promotable message alone", log.Messages, err)
		}
		if st, err := s.Stats(ctx); err != nil || st.Scheduled != 2 {
			t.Fatalf("stats %+v, %v: want the two set aside still scheduled", st, err)
		}
	}
}
