package props_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
)

// money is a TextMarshaler scalar (like a decimal type): "12.34 EUR".
type money struct {
	Cents    int64
	Currency string
}

func (m money) MarshalText() ([]byte, error) {
	sign, c := "", m.Cents
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Appendf(nil, "%s%d.%02d %s", sign, c/100, c%100, m.Currency), nil
}

func (m *money) UnmarshalText(b []byte) error {
	var whole, frac int64
	var cur string
	s := string(b)
	neg := strings.HasPrefix(s, "-")
	if _, err := fmt.Sscanf(strings.TrimPrefix(s, "-"), "%d.%02d %s", &whole, &frac, &cur); err != nil {
		return err
	}
	m.Cents, m.Currency = whole*100+frac, cur
	if neg {
		m.Cents = -m.Cents
	}
	return nil
}

type level string

type line struct {
	SKU   string            `json:"sku"`
	Qty   uint16            `json:"qty"`
	Price money             `json:"price"`
	Attrs map[string]string `json:"attrs"`
	Next  *line             `json:"next"`
}

// kitchenSink has an attribute of every kind the codec supports.
type kitchenSink struct {
	ID      string                 `json:"id"`
	I       int                    `json:"i"`
	I8      int8                   `json:"i8"`
	I16     int16                  `json:"i16"`
	I32     int32                  `json:"i32"`
	I64     int64                  `json:"i64"`
	U       uint                   `json:"u"`
	U8      uint8                  `json:"u8"`
	U16     uint16                 `json:"u16"`
	U32     uint32                 `json:"u32"`
	U64     uint64                 `json:"u64"`
	F32     float32                `json:"f32"`
	F64     float64                `json:"f64"`
	B       bool                   `json:"b"`
	Level   level                  `json:"level"`
	At      time.Time              `json:"at"`
	AtPtr   *time.Time             `json:"at_ptr"`
	Total   money                  `json:"total"`
	Home    *codec.URL             `json:"home"`
	Name    *string                `json:"name"`
	Count   *int64                 `json:"count"`
	Tags    []string               `json:"tags"`
	Nums    []int32                `json:"nums"`
	Times   []time.Time            `json:"times"`
	Fixed   [2]uint8               `json:"fixed"`
	Opt     string                 `json:"opt,omitempty"`
	Lines   []line                 `json:"lines"`
	Main    line                   `json:"main"`
	Extra   *line                  `json:"extra"`
	Index   map[string]int         `json:"index"`
	ByID    map[uint64][]string    `json:"by_id"`
	Free    any                    `json:"free"`
	FreeMap map[string]any         `json:"free_map"`
	Blob    []byte                 `json:"blob"`
	Nested  map[string]map[int]any `json:"nested"`
}

func genTime() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
			time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix()).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")
		offset := rapid.IntRange(-14*60, 14*60).Draw(t, "offset_minutes") * 60
		return time.Unix(sec, nsec).In(time.FixedZone("", offset))
	})
}

func genMoney() *rapid.Generator[money] {
	return rapid.Custom(func(t *rapid.T) money {
		return money{
			Cents:    rapid.Int64Range(-1e12, 1e12).Draw(t, "cents"),
			Currency: rapid.SampledFrom([]string{"EUR", "USD", "GBP"}).Draw(t, "currency"),
		}
	})
}

func genURL() *rapid.Generator[*codec.URL] {
	return rapid.Custom(func(t *rapid.T) *codec.URL {
		s := rapid.SampledFrom([]string{"http", "https"}).Draw(t, "scheme") + "://"
		if rapid.Bool().Draw(t, "user") {
			s += rapid.StringMatching(`[a-z]{1,5}(:[a-z0-9]{1,5})?`).Draw(t, "userinfo") + "@"
		}
		s += rapid.StringMatching(`[a-z]{1,8}\.(com|org)(:[0-9]{2,4})?`).Draw(t, "host")
		s += rapid.StringMatching(`(/[a-z0-9_-]{0,6}){0,3}`).Draw(t, "path")
		if rapid.Bool().Draw(t, "query") {
			s += "?" + rapid.StringMatching(`[a-z]{1,3}=[a-z0-9]{0,3}(&[a-z]{1,3}=[0-9]{1,2})?`).Draw(t, "q")
		}
		u, err := codec.ParseURL(s)
		if err != nil {
			t.Fatalf("generated a bad URL %q: %v", s, err)
		}
		return u
	})
}

// genJSON generates free-form JSON data, as encoding/json decodes it into any.
func genJSON(depth int) *rapid.Generator[any] {
	scalars := []*rapid.Generator[any]{
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
	}
	if depth == 0 {
		return rapid.OneOf(scalars...)
	}
	inner := genJSON(depth - 1)
	return rapid.OneOf(append(scalars,
		rapid.Map(rapid.SliceOfN(inner, 0, 3), func(s []any) any { return s }),
		rapid.Map(rapid.MapOfN(rapid.String(), inner, 0, 3), func(m map[string]any) any { return m }),
	)...)
}

func genLine(depth int) *rapid.Generator[line] {
	return rapid.Custom(func(t *rapid.T) line {
		l := line{
			SKU:   rapid.String().Draw(t, "sku"),
			Qty:   rapid.Uint16().Draw(t, "qty"),
			Price: genMoney().Draw(t, "price"),
		}
		if rapid.Bool().Draw(t, "has_attrs") {
			l.Attrs = rapid.MapOfN(rapid.String(), rapid.String(), 0, 3).Draw(t, "attrs")
		}
		if depth > 0 && rapid.Bool().Draw(t, "has_next") {
			next := genLine(depth-1).Draw(t, "next")
			l.Next = &next
		}
		return l
	})
}

// maybeNil returns nil or a non-nil (possibly empty) slice, so both survive.
func maybeNil[E any](t *rapid.T, label string, g *rapid.Generator[E]) []E {
	if rapid.Bool().Draw(t, label+"_nil") {
		return nil
	}
	return rapid.SliceOfN(g, 0, 4).Draw(t, label)
}

// genIndexedString draws text a message may be indexed under: no NUL,
// at most codec.MaxIndexedValueBytes (100 runes of at most 4 bytes).
func genIndexedString() *rapid.Generator[string] {
	return rapid.Map(rapid.StringN(0, 100, -1), func(s string) string { return strings.ReplaceAll(s, "\x00", "") })
}

func genKitchenSink() *rapid.Generator[kitchenSink] {
	return rapid.Custom(func(t *rapid.T) kitchenSink {
		k := kitchenSink{
			ID:    genIndexedString().Draw(t, "id"),
			I:     rapid.Int().Draw(t, "i"),
			I8:    rapid.Int8().Draw(t, "i8"),
			I16:   rapid.Int16().Draw(t, "i16"),
			I32:   rapid.Int32().Draw(t, "i32"),
			I64:   rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64})).Draw(t, "i64"),
			U:     rapid.Uint().Draw(t, "u"),
			U8:    rapid.Uint8().Draw(t, "u8"),
			U16:   rapid.Uint16().Draw(t, "u16"),
			U32:   rapid.Uint32().Draw(t, "u32"),
			U64:   rapid.OneOf(rapid.Uint64(), rapid.Just(uint64(math.MaxUint64))).Draw(t, "u64"),
			F32:   rapid.Float32().Draw(t, "f32"),
			F64:   rapid.Float64().Draw(t, "f64"),
			B:     rapid.Bool().Draw(t, "b"),
			Level: level(rapid.SampledFrom([]string{"", "gold", "silver"}).Draw(t, "level")),
			At:    genTime().Draw(t, "at"),
			AtPtr: rapid.Ptr(genTime(), true).Draw(t, "at_ptr"),
			Total: genMoney().Draw(t, "total"),
			Name:  rapid.Ptr(genIndexedString(), true).Draw(t, "name"),
			Count: rapid.Ptr(rapid.Int64(), true).Draw(t, "count"),
			Tags:  maybeNil(t, "tags", rapid.SampledFrom([]string{"a", "b", "c", ""})),
			Nums:  maybeNil(t, "nums", rapid.Int32Range(-3, 3)),
			Times: maybeNil(t, "times", genTime()),
			Fixed: [2]uint8{rapid.Uint8().Draw(t, "fixed0"), rapid.Uint8().Draw(t, "fixed1")},
			Opt:   rapid.SampledFrom([]string{"", "set"}).Draw(t, "opt"),
			Lines: maybeNil(t, "lines", genLine(1)),
			Main:  genLine(2).Draw(t, "main"),
			Extra: rapid.Ptr(genLine(0), true).Draw(t, "extra"),
			Free:  genJSON(2).Draw(t, "free"),
			Blob:  maybeNil(t, "blob", rapid.Byte()),
		}
		if rapid.Bool().Draw(t, "has_home") {
			k.Home = genURL().Draw(t, "home")
		}
		if rapid.Bool().Draw(t, "has_index") {
			k.Index = rapid.MapOfN(rapid.String(), rapid.Int(), 0, 3).Draw(t, "index")
		}
		if rapid.Bool().Draw(t, "has_by_id") {
			k.ByID = rapid.MapOfN(rapid.Uint64(), rapid.SliceOfN(rapid.String(), 0, 2), 0, 3).Draw(t, "by_id")
		}
		if rapid.Bool().Draw(t, "has_free_map") {
			k.FreeMap = rapid.MapOfN(rapid.String(), genJSON(1), 0, 3).Draw(t, "free_map")
		}
		if rapid.Bool().Draw(t, "has_nested") {
			k.Nested = rapid.MapOfN(rapid.String(), rapid.MapOfN(rapid.Int(), genJSON(0), 0, 2), 0, 2).Draw(t, "nested")
		}
		return k
	})
}

func sinkRegistry(t *testing.T) (*codec.Registry, *codec.Type) {
	t.Helper()
	r := codec.NewRegistry()
	if err := codec.Register[kitchenSink](r, "props.kitchen_sink"); err != nil {
		t.Fatal(err)
	}
	typ, err := r.ByName("props.kitchen_sink")
	if err != nil {
		t.Fatal(err)
	}
	return r, typ
}

// sameInstant reports whether a and b are the same instant at the same UTC
// offset (the zone name is not stored).
func sameInstant(a, b time.Time) bool {
	_, ao := a.Zone()
	_, bo := b.Zone()
	return a.Equal(b) && ao == bo
}

// normalise replaces what JSON cannot keep byte for byte (zone names, the
// URL's internal layout) by comparable stand-ins, after checking them.
func normalise(t *rapid.T, got, want *kitchenSink) {
	if !sameInstant(got.At, want.At) {
		t.Fatalf("At = %v, want %v", got.At, want.At)
	}
	got.At, want.At = time.Time{}, time.Time{}
	if (got.AtPtr == nil) != (want.AtPtr == nil) || (got.AtPtr != nil && !sameInstant(*got.AtPtr, *want.AtPtr)) {
		t.Fatalf("AtPtr = %v, want %v", got.AtPtr, want.AtPtr)
	}
	got.AtPtr, want.AtPtr = nil, nil
	if len(got.Times) != len(want.Times) || (got.Times == nil) != (want.Times == nil) {
		t.Fatalf("Times = %v, want %v", got.Times, want.Times)
	}
	for i := range got.Times {
		if !sameInstant(got.Times[i], want.Times[i]) {
			t.Fatalf("Times[%d] = %v, want %v", i, got.Times[i], want.Times[i])
		}
	}
	got.Times, want.Times = nil, nil
	if (got.Home == nil) != (want.Home == nil) || (got.Home != nil && got.Home.String() != want.Home.String()) {
		t.Fatalf("Home = %v, want %v", got.Home, want.Home)
	}
	got.Home, want.Home = nil, nil
}

func TestCodecRoundTrip(t *testing.T) {
	r, _ := sinkRegistry(t)
	rapid.Check(t, func(t *rapid.T) {
		want := genKitchenSink().Draw(t, "payload")
		typ, data, err := r.Encode(want)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := json.Marshal(want)
		if err != nil || !bytes.Equal(data, plain) {
			t.Fatalf("Encode differs from encoding/json: %s vs %s (%v)", data, plain, err)
		}
		decoded, err := r.Decode(typ.Name, typ.Version, data)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decoded.(kitchenSink)
		if !ok {
			t.Fatalf("Decode returned a %T", decoded)
		}
		// The key pairs survive the trip too (times are indexed in UTC).
		if k1, k2 := typ.Keys(want, nil), typ.Keys(got, nil); !slices.Equal(k1, k2) {
			t.Fatalf("keys changed through JSON:\n before %v\n after  %v", k1, k2)
		}
		normalise(t, &got, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
		}
	})
}

// FromMap on the stored JSON decoded into a map (as an HTTP handler would,
// with json.Number to keep 64-bit integers) builds the same payload.
func TestCodecFromMapOfEncoded(t *testing.T) {
	r, typ := sinkRegistry(t)
	rapid.Check(t, func(t *rapid.T) {
		want := genKitchenSink().Draw(t, "payload")
		_, data, err := r.Encode(want)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		built, err := r.FromMap(typ.Name, raw)
		if err != nil {
			t.Fatal(err)
		}
		got := built.(kitchenSink)
		// Free-form values came through json.Number: compare their JSON.
		for _, pair := range [][2]any{{got.Free, want.Free}, {got.FreeMap, want.FreeMap}, {got.Nested, want.Nested}} {
			a, _ := json.Marshal(pair[0])
			b, _ := json.Marshal(pair[1])
			if !bytes.Equal(a, b) {
				t.Fatalf("free-form value %s, want %s", a, b)
			}
		}
		got.Free, want.Free, got.FreeMap, want.FreeMap, got.Nested, want.Nested = nil, nil, nil, nil, nil, nil
		normalise(t, &got, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("FromMap:\n got %#v\nwant %#v", got, want)
		}
	})
}

func TestKeysSortedDeduplicatedDeterministic(t *testing.T) {
	r, typ := sinkRegistry(t)
	rapid.Check(t, func(t *rapid.T) {
		payload := genKitchenSink().Draw(t, "payload")
		keys := typ.Keys(payload, nil)
		for i := 1; i < len(keys); i++ {
			if keys[i-1].Compare(keys[i]) >= 0 {
				t.Fatalf("keys not strictly sorted at %d: %v, %v", i, keys[i-1], keys[i])
			}
		}
		if again := typ.Keys(&payload, nil); !slices.Equal(keys, again) {
			t.Fatalf("Keys(value) = %v, Keys(pointer) = %v", keys, again)
		}
		prefix := []codec.KeyPair{{Name: "zzz", Value: "first"}}
		viaReg, err := r.Keys(payload, prefix)
		if err != nil || !slices.Equal(viaReg[1:], keys) || viaReg[0] != prefix[0] {
			t.Fatalf("Registry.Keys after a prefix = %v, %v", viaReg, err)
		}
		for _, k := range keys {
			f, ok := typ.Field(k.Name)
			if !ok || !f.Indexed {
				t.Fatalf("key %v is not an indexed attribute", k)
			}
		}
	})
}

// Keys agrees with a model built from Canonical: every indexed attribute's
// value (each element of a slice, nothing for a nil pointer or an empty
// omitempty value), canonicalised, as a sorted set.
func TestCanonicalAgreesWithKeys(t *testing.T) {
	_, typ := sinkRegistry(t)
	rapid.Check(t, func(t *rapid.T) {
		payload := genKitchenSink().Draw(t, "payload")
		rv := reflect.ValueOf(payload)
		var model []codec.KeyPair
		add := func(name string, v reflect.Value) {
			for v.Kind() == reflect.Pointer {
				if v.IsNil() {
					return
				}
				v = v.Elem()
			}
			s, err := codec.Canonical(v.Interface())
			if err != nil {
				t.Fatalf("Canonical(%s): %v", name, err)
			}
			model = append(model, codec.KeyPair{Name: name, Value: s})
		}
		for _, f := range typ.Fields {
			if !f.Indexed {
				continue
			}
			v := rv.FieldByIndex(f.Index)
			switch {
			case f.Multi:
				for i := range v.Len() {
					add(f.Name, v.Index(i))
				}
			case f.OmitEmpty && v.Kind() != reflect.Pointer && v.IsZero():
			default:
				add(f.Name, v)
			}
		}
		slices.SortFunc(model, codec.KeyPair.Compare)
		model = slices.Compact(model)
		if got := typ.Keys(payload, nil); !slices.Equal(got, model) {
			t.Fatalf("Keys:\n got %v\nwant %v", got, model)
		}
	})
}

// Canonical times sort as the instants do, whatever their zones.
func TestCanonicalTimeOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genTime().Draw(t, "a"), genTime().Draw(t, "b")
		ca, _ := codec.Canonical(a)
		cb, _ := codec.Canonical(b)
		at, bt := a.Truncate(time.Microsecond), b.Truncate(time.Microsecond)
		if want := at.Compare(bt); strings.Compare(ca, cb) != want {
			t.Fatalf("Canonical(%v) = %s, Canonical(%v) = %s: order %d, want %d", a, ca, b, cb, strings.Compare(ca, cb), want)
		}
		if want := a.UTC().Format(codec.TimeLayout); ca != want {
			t.Fatalf("Canonical(%v) = %s, want %s", a, ca, want)
		}
	})
}
