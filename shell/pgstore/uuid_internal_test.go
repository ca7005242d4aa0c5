package pgstore

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestUUIDEncodedInBinary: with registerUUID, pgx encodes a uuid.UUID
// (alone and in an array) in binary, as the 16 bytes of a pgtype.UUID,
// and not through its driver.Valuer string.
func TestUUIDEncodedInBinary(t *testing.T) {
	id := uuid.MustParse("0196a3c2-7b1e-7c3a-9a51-2f0e8d4c6b10")
	encode := func(m *pgtype.Map, oid uint32, v any) []byte {
		t.Helper()
		buf, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	m := pgtype.NewMap()
	registerUUID(m)
	want := encode(m, pgtype.UUIDOID, pgtype.UUID{Bytes: id, Valid: true})
	if got := encode(m, pgtype.UUIDOID, id); string(got) != string(want) || len(got) != 16 {
		t.Fatalf("uuid.UUID encoded as %x, want %x", got, want)
	}
	wantArr := encode(m, pgtype.UUIDArrayOID, []pgtype.UUID{{Bytes: id, Valid: true}, {Bytes: uuid.Nil, Valid: true}})
	if got := encode(m, pgtype.UUIDArrayOID, []uuid.UUID{id, uuid.Nil}); string(got) != string(wantArr) {
		t.Fatalf("[]uuid.UUID encoded as %x, want %x", got, wantArr)
	}
	plan := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id)
	if _, ok := plan.(*uuidPlan); !ok {
		t.Fatalf("plan for uuid.UUID is %T, want *uuidPlan", plan)
	}
	// Without it pgx takes another way (the one registerUUID replaces).
	if _, ok := pgtype.NewMap().PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id).(*uuidPlan); ok {
		t.Fatal("a map without registerUUID used its plan")
	}
}
