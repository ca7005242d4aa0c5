package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestHousekeepDeletesOldTombstones: the tombstones that rolled-back
// appends leave at their positions (rows no read returns) are deleted by
// Housekeep once the read horizon passed them and they are an hour old,
// so a log with many rollbacks does not keep a row for each; younger ones
// and every message stay, and positions go on as before.
func TestHousekeepDeletesOldTombstones(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	add := func(id string) int64 {
		t.Helper()
		res, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: id, Name: "n"}), driver.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Last
	}
	rollback := func() {
		t.Helper()
		errAbandon := errors.New("abandon")
		err := s.Update(ctx, func(tx driver.Tx) error {
			if _, err := tx.Append(core.Messages(fixtures.DeviceRegistered{DeviceID: "gone", Name: "n"}, fixtures.DeviceRegistered{DeviceID: "gone2", Name: "n"}), driver.AppendOptions{}); err != nil {
				return err
			}
			return errAbandon
		})
		if !errors.Is(err, errAbandon) {
			t.Fatalf("update: %v, want the abandon", err)
		}
	}
	count := func(where string) int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s_messages WHERE %s`, s.Prefix(), where)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	add("d1")
	rollback()
	add("d2")
	if n := count(`message_type = ''`); n != 2 {
		t.Fatalf("%d tombstones after a rolled-back append of two, want 2", n)
	}
	if err := s.Housekeep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(`message_type = ''`); n != 2 {
		t.Fatalf("%d tombstones after Housekeep, want both: they are not an hour old", n)
	}
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`UPDATE %s_messages SET created_at = now() - interval '2 hours' WHERE message_type = ''`, s.Prefix())); err != nil {
		t.Fatal(err)
	}
	rollback() // two younger ones
	if err := s.Housekeep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(`message_type = ''`); n != 2 {
		t.Fatalf("%d tombstones after Housekeep, want the 2 younger ones", n)
	}
	last := add("d3")
	var ids []string
	for m, err := range s.All(ctx, driver.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Payload.(fixtures.DeviceRegistered).DeviceID)
	}
	if fmt.Sprint(ids) != "[d1 d2 d3]" {
		t.Fatalf("the log reads %v, want [d1 d2 d3]", ids)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.MaxPosition != last || last != 7 {
		t.Fatalf("stats %+v, %v: want the newest position %d (= 7: positions go on past the deleted tombstones)", st, err, last)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Housekeep(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Housekeep on a cancelled context: %v, want context.Canceled", err)
	}
}
