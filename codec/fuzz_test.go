package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

// fuzzLine and fuzzPayload hold every kind of attribute the codec indexes
// or carries: scalars, times, dates, decimals, lists, pointers, a list
// indexed from inside, raw JSON and a map.
type fuzzLine struct {
	SKU string `json:"sku"`
	Qty *int   `json:"qty"`
}

type fuzzPayload struct {
	ID     string          `json:"id" sourced:"required"`
	N      int64           `json:"n"`
	U      uint8           `json:"u"`
	F      float64         `json:"f"`
	At     time.Time       `json:"at"`
	Day    codec.Date      `json:"day"`
	Amount codec.Decimal   `json:"amount"`
	Tags   []string        `json:"tags"`
	Opt    *string         `json:"opt"`
	Lines  []fuzzLine      `json:"lines" sourced:"index=sku"`
	Raw    json.RawMessage `json:"raw"`
	Meta   map[string]any  `json:"meta"`
}

func fuzzRegistry(t testing.TB) (*codec.Registry, *codec.Type) {
	reg := codec.NewRegistry()
	if err := codec.Register[fuzzPayload](reg, "fuzz.payload"); err != nil {
		t.Fatal(err)
	}
	typ, err := reg.ByName("fuzz.payload")
	if err != nil {
		t.Fatal(err)
	}
	return reg, typ
}

var fuzzSeeds = []string{
	`{"id":"a","n":-9223372036854775808,"u":255,"f":1e308,"at":"2026-01-02T03:04:05.123456789+01:00","day":"2026-02-28","amount":"-12.3400","tags":["x","x","y"],"opt":"o","lines":[{"sku":"s1","qty":2},{"sku":"s1"},{}],"raw":{"a":[1,2,{"b":null}]},"meta":{"k":[true,1.5,"v"]}}`,
	`{"id":"","tags":null,"lines":null,"raw":null}`,
	`{"id":"\u00e9\ud83d\ude00","tags":["\u0000","a|b:c"],"amount":"1e400"}`,
	`{"id":"x","day":"2026-13-40","at":"not a time","n":1.5,"u":-1}`,
	`{"id":"x","raw":[[[[[[[[[[]]]]]]]]]],"unknown":1}`,
	`[]`, `null`, `{"id":"x","f":"NaN"}`,
}

// FuzzDecode decodes arbitrary bytes as a stored payload: no panic; what
// decodes encodes, decodes again, and encodes to the same bytes; its key
// pairs are sorted without duplicates.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	_, typ := fuzzRegistry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := typ.Decode(0, data)
		if err != nil {
			return
		}
		enc, err := typ.Encode(v)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", data, err)
		}
		v2, err := typ.Decode(0, enc)
		if err != nil {
			t.Fatalf("encoded %q does not decode again: %v", enc, err)
		}
		enc2, err := typ.Encode(v2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s (%v)", enc, enc2, err)
		}
		checkKeys(t, typ.Keys(v, nil))
	})
}

// FuzzFromMapValidateKeys builds a payload from arbitrary JSON attributes
// as a web handler would: a refusal is a *codec.ValidationError; what is
// accepted validates, yields its key pairs without error (sorted, no
// duplicates, at most codec.MaxKeyPairs), and encodes.
func FuzzFromMapValidateKeys(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	reg, typ := fuzzRegistry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var raw map[string]any
		if dec.Decode(&raw) != nil {
			return
		}
		v, err := reg.FromMap("fuzz.payload", raw)
		if err != nil {
			var ve *codec.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, codec.ErrInvalid) {
				t.Fatalf("FromMap refused with %T %v, not a *codec.ValidationError", err, err)
			}
			return
		}
		if err := reg.Validate(v); err != nil {
			t.Fatalf("FromMap accepted what Validate refuses: %v", err)
		}
		keys, err := reg.Keys(v, nil)
		if err != nil {
			t.Fatalf("keys of a valid payload: %v", err)
		}
		if len(keys) > codec.MaxKeyPairs {
			t.Fatalf("%d key pairs, over codec.MaxKeyPairs", len(keys))
		}
		checkKeys(t, keys)
		if !slices.Equal(keys, typ.Keys(v, nil)) {
			t.Fatal("Registry.Keys and Type.Keys differ")
		}
		if _, err := typ.Encode(v); err != nil {
			t.Fatalf("a valid payload does not encode: %v", err)
		}
	})
}

func checkKeys(t *testing.T, keys []codec.KeyPair) {
	t.Helper()
	for i := 1; i < len(keys); i++ {
		if keys[i-1].Compare(keys[i]) >= 0 {
			t.Fatalf("key pairs not sorted without duplicates: %v", keys)
		}
	}
}
