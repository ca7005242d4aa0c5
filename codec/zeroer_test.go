package codec_test

import (
	"reflect"
	"testing"

	"github.com/sourced-go/sourced/codec"
)

// since is a scalar whose zero, by its IsZero, is not its Go zero value
// (a pointer receiver: Keys probes the value's address).
type since struct{ days int }

func (s since) MarshalText() ([]byte, error)  { return []byte{byte('0' + s.days)}, nil }
func (s *since) UnmarshalText(b []byte) error { s.days = int(b[0] - '0'); return nil }
func (s *since) IsZero() bool                 { return s.days < 0 }

var _ codec.Zeroer = (*since)(nil)

// zeroers holds scalars whose IsZero disagrees with their Go zero value.
type zeroers struct {
	Price codec.Decimal `json:"price,omitempty"`
	Since since         `json:"since,omitzero"`
	Kept  codec.Decimal `json:"kept"`
}

// TestKeysAskTheZeroer pins the Zeroer contract: an omitempty or omitzero
// attribute whose IsZero reports true yields no key pair, though its Go
// value is not the zero value; without the tag, the value is indexed.
func TestKeysAskTheZeroer(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[zeroers](r, "zeroers")
	typ, err := r.TypeOf(zeroers{})
	if err != nil {
		t.Fatal(err)
	}
	zero := codec.MustDecimal("0.00")
	got := typ.Keys(zeroers{Price: zero, Since: since{-1}, Kept: zero}, nil)
	if want := kp("kept", "0.00"); !reflect.DeepEqual(got, want) {
		t.Errorf("zero by IsZero: Keys = %v, want %v", got, want)
	}
	got = typ.Keys(zeroers{Price: codec.MustDecimal("0.10"), Since: since{0}, Kept: zero}, nil)
	if want := kp("kept", "0.00", "price", "0.10", "since", "0"); !reflect.DeepEqual(got, want) {
		t.Errorf("not zero by IsZero: Keys = %v, want %v", got, want)
	}
}
