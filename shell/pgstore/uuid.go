package pgstore

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgx has no plan of its own for uuid.UUID: it tries several (a failed
// attempt formats an error) and ends with the type's driver.Valuer, a
// string parsed back by the server. On the append path that took a
// sixth of the client's time (go tool pprof at 16 writers:
// encodePlanDriverValuer and newEncodeError). registerUUID gives each
// connection of the pool a plan that sends uuid.UUID in binary, as
// pgtype.UUID is sent, for single values and arrays alike.
func registerUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, m.TryWrapEncodePlanFuncs...)
}

// binaryUUID is a uuid.UUID that pgx's uuid codec encodes itself.
type binaryUUID uuid.UUID

// UUIDValue implements pgtype.UUIDValuer.
func (u binaryUUID) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: u, Valid: true}, nil }

// uuidPlan encodes a uuid.UUID as the binaryUUID it is.
type uuidPlan struct{ next pgtype.EncodePlan }

func (p *uuidPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(binaryUUID(value.(uuid.UUID)), buf)
}

func tryWrapUUID(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidPlan{}, binaryUUID(u), true
	}
	return nil, nil, false
}
