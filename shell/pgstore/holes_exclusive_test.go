package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A transaction under the store's exclusive lock reads every committed
// message, also one committed past a hole (a position an append drew and
// rolled back, not filled yet): no append is in flight then, so the hole
// is filled and the read horizon passes it. Without that, a Handle run
// again under the lock decided without its boundary's newest message
// (storetest's "concurrent Handle keeps both invariants" lent a book
// twice).
func TestExclusiveTransactionReadsPastHoles(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := context.Background()
	if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: "d1"}), driver.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another session commits a copy of the message past a burnt
	// position, as an append committed past one rolled back.
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	p := s.Prefix()
	var hole, past int64
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT nextval('%s_positions')`, p)).Scan(&hole); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %[1]s_messages (position, message_id, message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names)
SELECT nextval('%[1]s_positions'), gen_random_uuid(), message_type, payload_version, causation_id, correlation_id, payload, metadata, created_at, keys, key_names
FROM %[1]s_messages WHERE message_type <> '' ORDER BY position LIMIT 1 RETURNING position`, p)).Scan(&past); err != nil {
		t.Fatal(err)
	}
	cond := core.Condition{Type: fixtures.TypeDeviceRegistered, Attrs: map[string]string{"device_id": "d1"}}
	var got []int64
	err = s.Update(ctx, func(tx driver.Tx) error {
		got = nil
		// A read with a limit takes the exclusive lock.
		res, err := tx.Read([]core.Condition{cond}, driver.ReadOptions{Limit: 10})
		for _, m := range res.Messages {
			got = append(got, m.Position)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != past {
		t.Fatalf("the exclusive transaction read positions %v, want 2 ending at %d (past the hole at %d)", got, past, hole)
	}
}
