package codec_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

type address struct {
	Street string `json:"street"`
	Zip    *int   `json:"zip"`
}

type everything struct {
	S    string              `json:"s"`
	I    int                 `json:"i"`
	I8   int8                `json:"i8"`
	I16  int16               `json:"i16"`
	I32  int32               `json:"i32"`
	I64  int64               `json:"i64"`
	U    uint                `json:"u"`
	U8   uint8               `json:"u8"`
	U16  uint16              `json:"u16"`
	U32  uint32              `json:"u32"`
	U64  uint64              `json:"u64"`
	F32  float32             `json:"f32"`
	F64  float64             `json:"f64"`
	B    bool                `json:"b"`
	T    time.Time           `json:"t"`
	TP   *time.Time          `json:"tp"`
	D    decimal             `json:"d"`
	URL  *codec.URL          `json:"url"`
	Tags []string            `json:"tags"`
	M    map[string][]int    `json:"m"`
	IM   map[uint64]string   `json:"im"`
	A    address             `json:"a"`
	AP   *address            `json:"ap"`
	As   []address           `json:"as"`
	Nil  *string             `json:"nil"`
	Any  any                 `json:"any"`
	Bin  []byte              `json:"bin"`
	Dur  time.Duration       `json:"dur"`
	Set  map[decimal]bool    `json:"set"`
	Deep map[string]*address `json:"deep"`
}

func sampleEverything(t *testing.T) everything {
	zip := 75011
	tp := time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(9*3600+30*60)))
	u, err := codec.ParseURL("https://ada:secret@example.com:8443/a%20b/c?q=1&r=%C3%A9#frag")
	if err != nil {
		t.Fatal(err)
	}
	return everything{
		S: "héllo \"world\"\n", I: -1 << 62, I8: math.MinInt8, I16: math.MaxInt16, I32: math.MinInt32,
		I64: math.MinInt64, U: math.MaxUint, U8: math.MaxUint8, U16: math.MaxUint16, U32: math.MaxUint32,
		U64: math.MaxUint64, F32: 3.1415927, F64: 1e-300, B: true,
		T:  time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.FixedZone("CET", 3600)),
		TP: &tp, D: decimal{-12345}, URL: u,
		Tags: []string{"b", "a", "b"}, M: map[string][]int{"x": {1, 2}, "y": nil},
		IM: map[uint64]string{math.MaxUint64: "max"},
		A:  address{Street: "rue", Zip: &zip}, AP: &address{Street: "p"}, As: []address{{}, {Street: "s"}},
		Any: map[string]any{"k": []any{1.5, "v", nil, true}},
		Bin: []byte{0, 1, 255}, Dur: 90 * time.Second,
		Set:  map[decimal]bool{{100}: true},
		Deep: map[string]*address{"a": nil, "b": {Street: "x"}},
	}
}

// equalEverything compares with Equal for times (the zone name is not
// kept, the offset is) and reflect.DeepEqual for the rest.
func equalEverything(t *testing.T, got, want everything) {
	t.Helper()
	sameTime := func(name string, a, b time.Time) {
		_, ao := a.Zone()
		_, bo := b.Zone()
		if !a.Equal(b) || ao != bo {
			t.Errorf("%s = %v, want %v (offsets %d, %d)", name, a, b, ao, bo)
		}
	}
	sameTime("T", got.T, want.T)
	sameTime("TP", *got.TP, *want.TP)
	if got.URL.String() != want.URL.String() || got.URL.User.String() != "ada:secret" {
		t.Errorf("URL = %v, want %v", got.URL, want.URL)
	}
	got.T, want.T, got.TP, want.TP, got.URL, want.URL = time.Time{}, time.Time{}, nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[everything](r, "everything")
	want := sampleEverything(t)

	for name, payload := range map[string]any{"value": want, "pointer": &want} {
		t.Run(name, func(t *testing.T) {
			typ, data, err := r.Encode(payload)
			if err != nil {
				t.Fatal(err)
			}
			if typ.Name != "everything" {
				t.Errorf("Encode type = %q", typ.Name)
			}
			plain, _ := json.Marshal(payload)
			if string(data) != string(plain) {
				t.Errorf("Encode differs from encoding/json:\n got %s\nwant %s", data, plain)
			}
			for _, version := range []int{0, 1} {
				got, err := r.Decode("everything", version, data)
				if err != nil {
					t.Fatal(err)
				}
				v, ok := got.(everything)
				if !ok {
					t.Fatalf("Decode returned a %T, want the struct value", got)
				}
				equalEverything(t, v, want)
			}
		})
	}
}

func TestEncodedForm(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[everything](r, "everything")
	_, data, err := r.Encode(sampleEverything(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"u64":18446744073709551615`,
		`"t":"2026-01-02T15:04:05.123456789+01:00"`,
		`"tp":"1999-12-31T23:59:59.999999999-09:30"`,
		`"d":"-123.45"`,
		`"url":"https://ada:secret@example.com:8443/a%20b/c?q=1\u0026r=%C3%A9#frag"`,
		`"nil":null`,
		`"im":{"18446744073709551615":"max"}`,
		`"set":{"1.00":true}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("encoded payload lacks %s:\n%s", want, data)
		}
	}
}

type floaty struct {
	F float64 `json:"f"`
}

func TestEncodeErrors(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[floaty](r, "floaty")
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, _, err := r.Encode(floaty{F: f})
		if err == nil || !strings.Contains(err.Error(), `"floaty"`) || !strings.Contains(err.Error(), "unsupported value") {
			t.Errorf("Encode(%v) error = %v", f, err)
		}
	}
	if _, _, err := r.Encode((*floaty)(nil)); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("Encode(nil pointer) error = %v", err)
	}
	typ, _ := r.ByName("floaty")
	if _, err := typ.Encode(other{}); err == nil {
		t.Error("Type.Encode of another type succeeded")
	}
}

func TestDecodeErrors(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[floaty](r, "floaty")
	for _, c := range []struct {
		version int
		data    string
		want    string
	}{
		{1, `{"f":"x"}`, `decode "floaty" version 1`},
		{1, `not json`, `decode "floaty"`},
		{1, ``, `decode "floaty"`},
		{2, `{}`, "newer build"},
		{-1, `{}`, "current version is 1"},
	} {
		if _, err := r.Decode("floaty", c.version, []byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(v%d, %q) error = %v, want it to mention %q", c.version, c.data, err, c.want)
		}
	}
	// Unknown attributes are ignored; missing ones keep their zero value.
	got, err := r.Decode("floaty", 1, []byte(`{"gone":1}`))
	if err != nil || got != (floaty{}) {
		t.Errorf("Decode with unknown attribute = %v, %v", got, err)
	}
}

// The v3 shape of a payload first stored as {"title": ..., "amount": ...}
// (v1), then {"name": ..., "amount": ...} (v2).
type renamed struct {
	Name     string `json:"name"`
	Amount   uint64 `json:"amount"`
	Currency string `json:"currency"`
}

func TestUpcast(t *testing.T) {
	var calls []string
	r := codec.NewRegistry()
	codec.MustRegister[renamed](r, "renamed",
		codec.Version(3),
		codec.Upcast(2, func(old map[string]any) (map[string]any, error) {
			calls = append(calls, "2->3")
			if _, ok := old["currency"]; !ok {
				old["currency"] = "EUR"
			}
			return old, nil
		}),
		codec.Upcast(1, func(old map[string]any) (map[string]any, error) {
			calls = append(calls, "1->2")
			// Numbers arrive as json.Number: no precision lost.
			if _, ok := old["amount"].(json.Number); !ok {
				return nil, errors.New("amount is not a json.Number")
			}
			return map[string]any{"name": old["title"], "amount": old["amount"]}, nil
		}),
	)
	typ, _ := r.ByName("renamed")
	if typ.Version != 3 {
		t.Fatalf("Version = %d", typ.Version)
	}
	for _, c := range []struct {
		version int
		data    string
		calls   []string
		want    renamed
	}{
		{1, `{"title":"t","amount":18446744073709551615}`, []string{"1->2", "2->3"}, renamed{"t", math.MaxUint64, "EUR"}},
		{2, `{"name":"n","amount":1}`, []string{"2->3"}, renamed{"n", 1, "EUR"}},
		{2, `{"name":"n","amount":1,"currency":"USD"}`, []string{"2->3"}, renamed{"n", 1, "USD"}},
		{3, `{"name":"n","amount":2,"currency":"GBP"}`, nil, renamed{"n", 2, "GBP"}},
		{0, `{"name":"n","amount":2,"currency":"GBP"}`, nil, renamed{"n", 2, "GBP"}},
	} {
		calls = nil
		got, err := r.Decode("renamed", c.version, []byte(c.data))
		if err != nil {
			t.Errorf("Decode(v%d) error: %v", c.version, err)
			continue
		}
		if got != c.want || !reflect.DeepEqual(calls, c.calls) {
			t.Errorf("Decode(v%d) = %+v with upcasters %v, want %+v with %v", c.version, got, calls, c.want, c.calls)
		}
	}
}

func TestUpcastErrors(t *testing.T) {
	boom := errors.New("boom")
	r := codec.NewRegistry()
	codec.MustRegister[renamed](r, "renamed",
		codec.Version(2),
		codec.Upcast(1, func(old map[string]any) (map[string]any, error) {
			if old["fail"] == true {
				return nil, boom
			}
			if old["nil"] == true {
				return nil, nil // treated as {}
			}
			old["amount"] = "not a number"
			return old, nil
		}))
	_, err := r.Decode("renamed", 1, []byte(`{"fail":true}`))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "upcast from version 1 to 2") {
		t.Errorf("failing upcaster: %v", err)
	}
	if got, err := r.Decode("renamed", 1, []byte(`{"nil":true}`)); err != nil || got != (renamed{}) {
		t.Errorf("nil upcast result = %v, %v", got, err)
	}
	_, err = r.Decode("renamed", 1, []byte(`{"name":"x"}`))
	if err == nil || !strings.Contains(err.Error(), "upcast to 2") {
		t.Errorf("upcast to an undecodable shape: %v", err)
	}
	if _, err := r.Decode("renamed", 1, []byte(`[1]`)); err == nil {
		t.Error("upcasting a non-object succeeded")
	}
}

func TestURL(t *testing.T) {
	for _, s := range []string{"https://example.com", "mailto:ada@example.com", "/relative?x=1", "http://u:p@h/p#f", ""} {
		u, err := codec.ParseURL(s)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := u.MarshalText()
		var back codec.URL
		if err := back.UnmarshalText(text); err != nil || back.String() != s || u.String() != s {
			t.Errorf("URL %q: text %q, back %q, %v", s, text, back.String(), err)
		}
	}
	if _, err := codec.ParseURL("http://[::1"); err == nil {
		t.Error("ParseURL accepted a bad URL")
	}
	var u codec.URL
	if err := u.UnmarshalText([]byte("http://[::1")); err == nil {
		t.Error("UnmarshalText accepted a bad URL")
	}
}
