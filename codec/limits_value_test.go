package codec_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
)

// TestIndexedValueLimits pins the one set of limits on indexed values:
// longer than MaxIndexedValueBytes, a NUL byte, or invalid UTF-8 is
// refused, by Validate (naming the attribute, without repeating the value)
// and by CheckIndexedValue (for the values of reads), as ErrInvalid.
func TestIndexedValueLimits(t *testing.T) {
	type tagged struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
		Body string   `json:"body" sourced:"noindex"`
	}
	reg := codec.NewRegistry()
	codec.MustRegister[tagged](reg, "limits.tagged")
	long := strings.Repeat("é", codec.MaxIndexedValueBytes/2) + "x" // one byte over
	for _, c := range []struct {
		name    string
		payload tagged
		field   string
		says    string
	}{
		{"long", tagged{Name: long}, "name", "MaxIndexedValueBytes"},
		{"NUL", tagged{Name: "a\x00b"}, "name", "NUL"},
		{"not UTF-8", tagged{Name: "\xff"}, "name", "UTF-8"},
		{"long element", tagged{Tags: []string{"a", long}}, "tags", "element 1"},
		{"NUL element", tagged{Tags: []string{"\x00"}}, "tags", "NUL"},
	} {
		err := reg.Validate(c.payload)
		var ve *codec.ValidationError
		if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != c.field || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want one problem with %s saying %q", c.name, err, c.field, c.says)
		}
		if err != nil && len(err.Error()) > 500 {
			t.Errorf("%s: the error repeats the value (%d bytes)", c.name, len(err.Error()))
		}
	}
	ok := tagged{Name: long[:len(long)-1], Tags: []string{long[:len(long)-1]}, Body: long + "\x00" + long}
	if err := reg.Validate(ok); err != nil {
		t.Errorf("values at the limit, and long text with a NUL that is not indexed: %v", err)
	}
	for _, v := range []string{long, "\x00", "\xff"} {
		if err := codec.CheckIndexedValue(v); !errors.Is(err, codec.ErrInvalid) || len(err.Error()) > 500 {
			t.Errorf("CheckIndexedValue(%d bytes): %v, want a short error matching ErrInvalid", len(v), err)
		}
	}
	if err := codec.CheckIndexedValue(long[:len(long)-1]); err != nil {
		t.Errorf("CheckIndexedValue at the limit: %v", err)
	}
}

// TestFreeFormNumbersDecodeAsFloat64 pins the choice the package doc
// states: a field of type any decodes JSON numbers as float64, which holds
// integers exactly only up to 2^53, so a larger one comes back rounded;
// a typed integer field, or a json.Number, keeps every digit.
func TestFreeFormNumbersDecodeAsFloat64(t *testing.T) {
	type counted struct {
		Exact  int64       `json:"exact"`
		Free   any         `json:"free" sourced:"noindex"`
		Digits json.Number `json:"digits" sourced:"noindex"`
	}
	reg := codec.NewRegistry()
	codec.MustRegister[counted](reg, "limits.counted")
	typ, err := reg.ByName("limits.counted")
	if err != nil {
		t.Fatal(err)
	}
	const big = 1<<53 + 1 // 9007199254740993: no float64 holds it
	data, err := typ.Encode(counted{Exact: big, Free: int64(big), Digits: json.Number("9007199254740993")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := typ.Decode(typ.Version, data)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(counted)
	if got.Exact != big || got.Digits.String() != "9007199254740993" {
		t.Fatalf("typed fields: %+v, want every digit kept", got)
	}
	if f, ok := got.Free.(float64); !ok || f != float64(1<<53) {
		t.Fatalf("a number in a field of type any came back as %T %v, want float64 %v (rounded, as the package doc says)", got.Free, got.Free, float64(1<<53))
	}
}
