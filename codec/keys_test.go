package codec_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

type (
	level    string // a named string: indexed as its value
	priority int8   // a named int: indexed as its value
	// upper is a named string whose MarshalText wins over its value.
	upper string
	// ptrText has a pointer-receiver MarshalText.
	ptrText struct{ n int }
	// failing fails to marshal when Bad is set.
	failing struct{ Bad bool }
)

func (u upper) MarshalText() ([]byte, error)    { return []byte(strings.ToUpper(string(u))), nil }
func (u *upper) UnmarshalText(b []byte) error   { *u = upper(strings.ToLower(string(b))); return nil }
func (p *ptrText) MarshalText() ([]byte, error) { return []byte{'#', byte('0' + p.n)}, nil }
func (p *ptrText) UnmarshalText(b []byte) error { p.n = int(b[1] - '0'); return nil }
func (f failing) MarshalText() ([]byte, error)  { return nil, errorIf(f.Bad) }
func (f *failing) UnmarshalText(b []byte) error { return nil }
func errorIf(b bool) error                      { return map[bool]error{true: errors.New("cannot marshal")}[b] }

type scalars struct {
	S    string    `json:"s"`
	I    int       `json:"i"`
	I8   int8      `json:"i8"`
	I16  int16     `json:"i16"`
	I32  int32     `json:"i32"`
	I64  int64     `json:"i64"`
	U    uint      `json:"u"`
	U8   uint8     `json:"u8"`
	U16  uint16    `json:"u16"`
	U32  uint32    `json:"u32"`
	U64  uint64    `json:"u64"`
	UP   uintptr   `json:"up"`
	F32  float32   `json:"f32"`
	F64  float64   `json:"f64"`
	B    bool      `json:"b"`
	T    time.Time `json:"t"`
	D    decimal   `json:"d"`
	L    level     `json:"l"`
	P    priority  `json:"p"`
	Up   upper     `json:"up_"`
	PT   ptrText   `json:"pt"`
	Dur  time.Duration
	Skip string `json:"skip" sourced:"noindex"`
}

type pointers struct {
	S *string          `json:"s"`
	I *int             `json:"i"`
	T *time.Time       `json:"t"`
	D *decimal         `json:"d"`
	U *codec.URL       `json:"u"`
	Z **string         `json:"z"`
	E *string          `json:"e,omitempty"`
	L *[]string        `json:"l"`
	N *struct{ A int } `json:"n"`
}

type omit struct {
	S  string    `json:"s,omitempty"`
	I  int       `json:"i,omitempty"`
	B  bool      `json:"b,omitzero"`
	T  time.Time `json:"t,omitempty"`
	D  decimal   `json:"d,omitempty"`
	F  float64   `json:"f,omitempty"`
	Ts []string  `json:"ts,omitempty"`
	// Without omitempty, zero values are indexed.
	ZS string    `json:"zs"`
	ZI int       `json:"zi"`
	ZB bool      `json:"zb"`
	ZT time.Time `json:"zt"`
}

type multis struct {
	Tags   []string    `json:"tags"`
	Nums   []int       `json:"nums"`
	Arr    [3]uint16   `json:"arr"`
	Times  []time.Time `json:"times"`
	Ptrs   []*string   `json:"ptrs"`
	Levels []level     `json:"levels"`
	Decs   []decimal   `json:"decs"`
	Bytes  []byte      `json:"bytes"`
	Hash   [4]byte     `json:"hash"`
	Nested []other     `json:"nested"`
	Matrix [][]int     `json:"matrix"`
	A      string      `json:"a"`
	Z      string      `json:"z"`
}

type Embedded struct {
	Inner string `json:"inner"`
}

type embeds struct {
	*Embedded
	Outer string `json:"outer"`
}

func kp(pairs ...string) []codec.KeyPair {
	out := []codec.KeyPair{}
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, codec.KeyPair{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

func TestKeys(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[scalars](r, "scalars")
	codec.MustRegister[pointers](r, "pointers")
	codec.MustRegister[omit](r, "omit")
	codec.MustRegister[multis](r, "multis")
	codec.MustRegister[embeds](r, "embeds")
	codec.MustRegister[everything](r, "everything")

	str, empty := "x", ""
	strp := &str
	ts := time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("", -5*3600))
	u, _ := codec.ParseURL("https://example.com/x")
	cases := []struct {
		name    string
		payload any
		want    []codec.KeyPair
	}{
		{"scalars", scalars{
			S: "str", I: -42, I8: -8, I16: 16, I32: -32, I64: math.MinInt64,
			U: 7, U8: 255, U16: 65535, U32: 32, U64: math.MaxUint64, UP: 9,
			F32: 0.1, F64: 1.5e300, B: true, T: ts, D: decimal{1999}, L: "gold", P: -3,
			Up: "shout", PT: ptrText{n: 4}, Dur: time.Second, Skip: "not indexed",
		}, kp(
			"Dur", "1000000000",
			"b", "true", "d", "19.99", "f32", "0.1", "f64", "1.5e+300",
			"i", "-42", "i16", "16", "i32", "-32", "i64", "-9223372036854775808", "i8", "-8",
			"l", "gold", "p", "-3", "pt", "#4", "s", "str", "t", "2026-01-02T08:04:05.999999Z",
			"u", "7", "u16", "65535", "u32", "32", "u64", "18446744073709551615", "u8", "255",
			"up", "9", "up_", "SHOUT",
		)},
		{"nil pointers are absent", pointers{}, kp()},
		{"pointers", pointers{S: &str, I: new(int), T: &ts, D: &decimal{5}, U: u, Z: &strp, E: &empty, L: &[]string{"b", "a"}, N: &struct{ A int }{1}},
			kp("d", "0.05", "e", "", "i", "0", "l", "a", "l", "b", "s", "x", "t", "2026-01-02T08:04:05.999999Z", "u", "https://example.com/x", "z", "x")},
		{"omitempty zero values are absent, others indexed", omit{},
			kp("zb", "false", "zi", "0", "zs", "", "zt", "0001-01-01T00:00:00.000000Z")},
		{"omitempty non-zero values", omit{S: "s", I: 1, B: true, T: ts, D: decimal{1}, F: 0.5, Ts: []string{"t"}},
			kp("b", "true", "d", "0.01", "f", "0.5", "i", "1", "s", "s", "t", "2026-01-02T08:04:05.999999Z", "ts", "t",
				"zb", "false", "zi", "0", "zs", "", "zt", "0001-01-01T00:00:00.000000Z")},
		{"multi: one pair per distinct element, sorted", multis{
			Tags:   []string{"b", "a", "b", "", "a"},
			Nums:   []int{10, 9, 10, -1},
			Arr:    [3]uint16{3, 3, 1},
			Times:  []time.Time{ts, ts.UTC(), {}},
			Ptrs:   []*string{nil, &str, &str},
			Levels: []level{"x"},
			Decs:   []decimal{{1}, {1}},
			Bytes:  []byte("abc"), Hash: [4]byte{1, 2, 3, 4},
			Nested: []other{{1}}, Matrix: [][]int{{1}},
			A: "first", Z: "last",
		}, kp("a", "first",
			"arr", "1", "arr", "3",
			"decs", "0.01",
			"levels", "x",
			"nums", "-1", "nums", "10", "nums", "9",
			"ptrs", "x",
			"tags", "", "tags", "a", "tags", "b",
			"times", "0001-01-01T00:00:00.000000Z", "times", "2026-01-02T08:04:05.999999Z",
			"z", "last")},
		{"empty multis", multis{}, kp("a", "", "arr", "0", "z", "")},
		{"nil embedded pointer", embeds{Outer: "o"}, kp("outer", "o")},
		{"embedded pointer", embeds{Embedded: &Embedded{Inner: "i"}, Outer: "o"}, kp("inner", "i", "outer", "o")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ, err := r.TypeOf(c.payload)
			if err != nil {
				t.Fatal(err)
			}
			got := typ.Keys(c.payload, nil)
			if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Errorf("Keys:\n got %v\nwant %v", got, c.want)
			}
			// A pointer to the payload gives the same keys.
			ptr := reflect.New(reflect.TypeOf(c.payload))
			ptr.Elem().Set(reflect.ValueOf(c.payload))
			if again := typ.Keys(ptr.Interface(), nil); !reflect.DeepEqual(again, got) {
				t.Errorf("Keys(pointer) = %v, Keys(value) = %v", again, got)
			}
			// Registry.Keys agrees and appends after dst.
			prefix := kp("keep", "me")
			viaReg, err := r.Keys(c.payload, prefix)
			if err != nil || !reflect.DeepEqual(viaReg, append(kp("keep", "me"), got...)) {
				t.Errorf("Registry.Keys = %v, %v", viaReg, err)
			}
			// Every value agrees with Canonical of the attribute's value.
			for _, k := range got {
				if !typ.Has(k.Name) {
					t.Errorf("key %v names no attribute", k)
				}
			}
		})
	}
}

func TestKeysEverythingSkipsNonScalars(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[everything](r, "everything")
	typ, _ := r.ByName("everything")
	var names []string
	for _, f := range typ.Fields {
		if f.Indexed {
			names = append(names, f.Name)
		}
	}
	want := []string{"s", "i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "f32", "f64", "b", "t", "tp", "d", "url", "tags", "nil", "dur"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("indexed attributes:\n got %v\nwant %v", names, want)
	}
	keys := typ.Keys(sampleEverything(t), nil)
	if len(keys) != len(want)-1+1 { // nil is absent; tags has 2 distinct values
		t.Errorf("got %d keys: %v", len(keys), keys)
	}
}

func TestKeysReuseDst(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[multis](r, "multis")
	typ, _ := r.ByName("multis")
	dst := make([]codec.KeyPair, 0, 64)
	first := typ.Keys(multis{Tags: []string{"b", "a"}}, dst)
	if &first[0] != &dst[:1][0] {
		t.Error("Keys did not reuse dst's capacity")
	}
	second := typ.Keys(multis{Tags: []string{"c"}}, first[:0])
	if want := kp("a", "", "arr", "0", "tags", "c", "z", ""); !reflect.DeepEqual(second, want) {
		t.Errorf("Keys with reused dst = %v, want %v", second, want)
	}
}

func TestKeysBadInput(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[scalars](r, "scalars")
	typ, _ := r.ByName("scalars")
	if got := typ.Keys((*scalars)(nil), nil); len(got) != 0 {
		t.Errorf("Keys(nil pointer) = %v", got)
	}
	if _, err := r.Keys((*scalars)(nil), nil); err == nil {
		t.Error("Registry.Keys(nil pointer) succeeded")
	}
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(p.(string), "codec_test.other") {
				t.Errorf("Keys(wrong type) panic = %v", p)
			}
		}()
		typ.Keys(other{}, nil)
	}()

	type withFailing struct {
		A string  `json:"a"`
		F failing `json:"f"`
	}
	codec.MustRegister[withFailing](r, "failing")
	ft, _ := r.ByName("failing")
	payload := withFailing{A: "a", F: failing{Bad: true}}
	if got := ft.Keys(payload, nil); !reflect.DeepEqual(got, kp("a", "a")) {
		t.Errorf("Keys with a failing TextMarshaler = %v", got)
	}
	if _, err := r.Keys(payload, nil); err == nil || !strings.Contains(err.Error(), `"f"`) || !strings.Contains(err.Error(), "cannot marshal") {
		t.Errorf("Registry.Keys with a failing TextMarshaler: %v", err)
	}
}

// small payloads fit in an interface word: Keys copies them.
type small struct {
	N int32 `json:"n"`
	B bool  `json:"b"`
}

type onePointer struct {
	S *string `json:"s"`
}

func TestKeysSmallPayloads(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[small](r, "small")
	codec.MustRegister[onePointer](r, "one-pointer")
	s := "v"
	for _, c := range []struct {
		payload any
		want    []codec.KeyPair
	}{
		{small{N: 3, B: true}, kp("b", "true", "n", "3")},
		{&small{N: 3}, kp("b", "false", "n", "3")},
		{onePointer{S: &s}, kp("s", "v")},
		{onePointer{}, kp()},
	} {
		got, err := r.Keys(c.payload, nil)
		if err != nil || (!reflect.DeepEqual(got, c.want) && len(got)+len(c.want) > 0) {
			t.Errorf("Keys(%+v) = %v, %v; want %v", c.payload, got, err, c.want)
		}
		if _, _, err := r.Encode(c.payload); err != nil {
			t.Error(err)
		}
	}
}

func TestCanonical(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6_000, time.FixedZone("", 3600))
	s := "p"
	var nilTime *time.Time
	for _, c := range []struct {
		in   any
		want string
	}{
		{"c1", "c1"}, {"", ""}, {true, "true"}, {false, "false"},
		{42, "42"}, {int8(-8), "-8"}, {int16(16), "16"}, {int32(-32), "-32"}, {int64(math.MinInt64), "-9223372036854775808"},
		{uint(1), "1"}, {uint8(8), "8"}, {uint16(16), "16"}, {uint32(32), "32"}, {uint64(math.MaxUint64), "18446744073709551615"},
		{uintptr(3), "3"},
		{float32(0.1), "0.1"}, {0.1, "0.1"}, {1e21, "1e+21"}, {0.0, "0"}, {math.Inf(1), "+Inf"},
		{ts, "2026-01-02T02:04:05.000006Z"}, {&ts, "2026-01-02T02:04:05.000006Z"},
		{time.Time{}, "0001-01-01T00:00:00.000000Z"},
		{time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), "9999-12-31T23:59:59.999999Z"},
		{time.Date(1969, 12, 31, 23, 59, 59, 1_000, time.UTC), "1969-12-31T23:59:59.000001Z"},
		{time.Date(-1, 3, 1, 0, 0, 0, 0, time.UTC), "-1-03-01T00:00:00.000000Z"},
		{time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC), "12345-01-01T00:00:00.000000Z"},
		{decimal{-5}, "-0.05"}, {&decimal{5}, "0.05"},
		{level("gold"), "gold"}, {priority(-1), "-1"}, {upper("a"), "A"}, {ptrText{n: 2}, "#2"},
		{&s, "p"}, {time.Minute, "60000000000"},
	} {
		got, err := codec.Canonical(c.in)
		if err != nil || got != c.want {
			t.Errorf("Canonical(%T %v) = %q, %v; want %q", c.in, c.in, got, err, c.want)
		}
	}
	for _, bad := range []any{nil, nilTime, []string{"a"}, other{}, map[string]int{}, struct{}{}, failing{Bad: true}, complex(1, 2)} {
		if got, err := codec.Canonical(bad); err == nil {
			t.Errorf("Canonical(%T) = %q, want an error", bad, got)
		}
	}
}

func TestCanonicalTimeMatchesFormat(t *testing.T) {
	// Walk days across leap years, centuries and the epoch.
	start := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	for tm := start; tm.Year() < 9999; tm = tm.Add(97*24*time.Hour + 3*time.Hour + 7*time.Minute + 11*time.Second + 123_457*time.Nanosecond) {
		got, _ := codec.Canonical(tm)
		if want := tm.Format(codec.TimeLayout); got != want {
			t.Fatalf("Canonical(%v) = %q, want %q", tm, got, want)
		}
	}
}

type omitAll struct {
	I8  int8     `json:"i8,omitempty"`
	I16 int16    `json:"i16,omitempty"`
	I32 int32    `json:"i32,omitempty"`
	I64 int64    `json:"i64,omitempty"`
	U   uint     `json:"u,omitempty"`
	U8  uint8    `json:"u8,omitempty"`
	U16 uint16   `json:"u16,omitempty"`
	U32 uint32   `json:"u32,omitempty"`
	U64 uint64   `json:"u64,omitempty"`
	UP  uintptr  `json:"up,omitempty"`
	F32 float32  `json:"f32,omitempty"`
	L   level    `json:"l,omitempty"`
	PT  ptrText  `json:"pt,omitempty"`
	Up  upper    `json:"up_,omitempty"`
	P   *int     `json:"p,omitempty"`
	Dur priority `json:"dur,omitzero"`
}

func TestKeysOmitEmptyEveryKind(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[omitAll](r, "omit-all")
	typ, _ := r.ByName("omit-all")
	if got := typ.Keys(omitAll{}, nil); len(got) != 0 {
		t.Errorf("Keys(zero) = %v, want none", got)
	}
	zero := 0
	got := typ.Keys(omitAll{I8: 1, I16: 1, I32: 1, I64: 1, U: 1, U8: 1, U16: 1, U32: 1, U64: 1, UP: 1, F32: 1, L: "l", PT: ptrText{1}, Up: "u", P: &zero, Dur: 1}, nil)
	if len(got) != 16 {
		t.Errorf("Keys(non-zero) = %v, want 16 pairs", got)
	}
}
