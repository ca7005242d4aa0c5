package codec_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/sourced-go/sourced/codec"
)

type created struct {
	CourseID string `json:"course_id" sourced:"required"`
	Name     string `json:"name"`
}

type other struct {
	X int `json:"x"`
}

// Payloads the codec must refuse, each with the attribute path it names.
type (
	withChan    struct{ C chan int }
	withFunc    struct{ F func() }
	withComplex struct {
		C complex128 `json:"c"`
	}
	withUnsafe struct{ P unsafe.Pointer }
	badKey     struct{ M map[[2]int]string }
	withIface  struct{ S fmt.Stringer }
	nestedChan struct {
		Address struct {
			Tags []map[string]chan int `json:"tags"`
		} `json:"address"`
	}
	withURL     struct{ Home *url.URL }
	withMutex   struct{ Mu sync.Mutex }
	onlyMarshal struct{ V marshalOnly }
	reservedID  struct {
		ID string `json:"__id"`
	}
	reservedAny struct {
		X string `json:"__x"`
	}
	badTag struct {
		X string `sourced:"requird"`
	}
	selfMarshal struct{ X int }
	hidden      struct{ *inner }
	inner       struct{ A string }
)

type marshalOnly struct{}

func (marshalOnly) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

func (selfMarshal) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }
func (*selfMarshal) UnmarshalJSON([]byte) error  { return nil }

// Payloads the codec accepts.
type (
	withAny struct {
		Data any            `json:"data"`
		Map  map[string]any `json:"map"`
	}
	intKeys   struct{ M map[int64]string }
	textKeys  struct{ M map[decimal]int }
	recursive struct {
		Name     string      `json:"name"`
		Children []recursive `json:"children"`
	}
	emptyMarker struct {
		Done struct{} `json:"done"`
	}
)

func TestRegisterErrors(t *testing.T) {
	noop := func(m map[string]any) (map[string]any, error) { return m, nil }
	cases := []struct {
		name string
		reg  func(r *codec.Registry) error
		want []string // substrings of the error
	}{
		{"empty name", func(r *codec.Registry) error { return codec.Register[other](r, "") }, []string{"empty"}},
		{"space in name", func(r *codec.Registry) error { return codec.Register[other](r, "courses created") }, []string{`"courses created"`, "invalid type string"}},
		{"upper case", func(r *codec.Registry) error { return codec.Register[other](r, "Courses.created") }, []string{"invalid type string"}},
		{"leading dot", func(r *codec.Registry) error { return codec.Register[other](r, ".x") }, []string{"invalid type string"}},
		{"pointer type", func(r *codec.Registry) error { return codec.Register[*other](r, "x") }, []string{"struct", "not a pointer"}},
		{"non struct", func(r *codec.Registry) error { return codec.Register[int](r, "x") }, []string{"must be a struct"}},
		{"duplicate name", func(r *codec.Registry) error { return codec.Register[other](r, "courses.created") }, []string{`"courses.created"`, "codec_test.other", "codec_test.created"}},
		{"duplicate Go type", func(r *codec.Registry) error { return codec.Register[created](r, "courses.made") }, []string{`"courses.made"`, `"courses.created"`, "codec_test.created"}},
		{"chan", func(r *codec.Registry) error { return codec.Register[withChan](r, "x") }, []string{`"x"`, "codec_test.withChan", `attribute "C"`, "chan int"}},
		{"func", func(r *codec.Registry) error { return codec.Register[withFunc](r, "x") }, []string{`attribute "F"`, "func()"}},
		{"complex", func(r *codec.Registry) error { return codec.Register[withComplex](r, "x") }, []string{`attribute "c"`, "complex128"}},
		{"unsafe.Pointer", func(r *codec.Registry) error { return codec.Register[withUnsafe](r, "x") }, []string{`attribute "P"`, "unsafe.Pointer"}},
		{"map key", func(r *codec.Registry) error { return codec.Register[badKey](r, "x") }, []string{`attribute "M"`, "key type [2]int"}},
		{"interface with methods", func(r *codec.Registry) error { return codec.Register[withIface](r, "x") }, []string{`attribute "S"`, "fmt.Stringer", "use any"}},
		{"nested path", func(r *codec.Registry) error { return codec.Register[nestedChan](r, "x") }, []string{`attribute "address.tags[][]"`, "chan int"}},
		{"url.URL", func(r *codec.Registry) error { return codec.Register[withURL](r, "x") }, []string{`attribute "Home"`, "url.URL", "codec.URL"}},
		{"no exported fields", func(r *codec.Registry) error { return codec.Register[withMutex](r, "x") }, []string{`attribute "Mu"`, "sync.Mutex", "no exported fields"}},
		{"marshaler without unmarshaler", func(r *codec.Registry) error { return codec.Register[onlyMarshal](r, "x") }, []string{`attribute "V"`, "json.Unmarshaler"}},
		{"reserved __id", func(r *codec.Registry) error { return codec.Register[reservedID](r, "x") }, []string{`"__id"`, "reserved"}},
		{"reserved prefix", func(r *codec.Registry) error { return codec.Register[reservedAny](r, "x") }, []string{`"__x"`, "reserved"}},
		{"unknown sourced option", func(r *codec.Registry) error { return codec.Register[badTag](r, "x") }, []string{`"requird"`}},
		{"payload marshaler", func(r *codec.Registry) error { return codec.Register[selfMarshal](r, "x") }, []string{"json.Marshaler", "its fields"}},
		{"embedded pointer to unexported", func(r *codec.Registry) error { return codec.Register[hidden](r, "x") }, []string{`attribute "A"`, "embedded pointer"}},
		{"version 0", func(r *codec.Registry) error { return codec.Register[other](r, "x", codec.Version(0)) }, []string{"Version(0)"}},
		{"missing upcaster", func(r *codec.Registry) error {
			return codec.Register[other](r, "x", codec.Version(4), codec.Upcast(2, noop))
		}, []string{"Upcast(1)", "Upcast(3)"}},
		{"upcaster past version", func(r *codec.Registry) error {
			return codec.Register[other](r, "x", codec.Version(2), codec.Upcast(1, noop), codec.Upcast(2, noop))
		}, []string{"Upcast(2)", "past the current Version(2)"}},
		{"upcaster twice", func(r *codec.Registry) error {
			return codec.Register[other](r, "x", codec.Version(2), codec.Upcast(1, noop), codec.Upcast(1, noop))
		}, []string{"Upcast(1) given twice"}},
		{"nil upcaster", func(r *codec.Registry) error {
			return codec.Register[other](r, "x", codec.Version(2), codec.Upcast(1, nil))
		}, []string{"nil"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := codec.NewRegistry()
			codec.MustRegister[created](r, "courses.created")
			err := c.reg(r)
			if err == nil {
				t.Fatal("Register succeeded, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// A failed registration changes nothing.
			if got := len(r.Types()); got != 1 {
				t.Errorf("registry has %d types after a failed Register, want 1", got)
			}
		})
	}
}

func TestRegisterAccepts(t *testing.T) {
	r := codec.NewRegistry()
	for name, reg := range map[string]func() error{
		"any":        func() error { return codec.Register[withAny](r, "any") },
		"int keys":   func() error { return codec.Register[intKeys](r, "int-keys") },
		"text keys":  func() error { return codec.Register[textKeys](r, "text_keys") },
		"recursive":  func() error { return codec.Register[recursive](r, "tree.v1") },
		"empty type": func() error { return codec.Register[emptyMarker](r, "0marker") },
		"versions": func() error {
			return codec.Register[other](r, "other", codec.Version(2),
				codec.Upcast(1, func(m map[string]any) (map[string]any, error) { return m, nil }))
		},
	} {
		if err := reg(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMustRegisterPanics(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[created](r, "courses.created")
	defer func() {
		if recover() == nil {
			t.Fatal("MustRegister of a duplicate did not panic")
		}
	}()
	codec.MustRegister[created](r, "courses.created")
}

func TestLookups(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[created](r, "courses.created")
	codec.MustRegister[other](r, "a.other")

	typ, err := r.ByName("courses.created")
	if err != nil || typ.GoType != reflect.TypeFor[created]() || typ.Version != 1 {
		t.Fatalf("ByName = %v, %v", typ, err)
	}
	for _, payload := range []any{created{}, &created{}, (*created)(nil)} {
		if got, err := r.TypeOf(payload); err != nil || got != typ {
			t.Errorf("TypeOf(%T) = %v, %v", payload, got, err)
		}
	}
	if got, err := r.ByGoType(reflect.TypeFor[*created]()); err != nil || got != typ {
		t.Errorf("ByGoType(*created) = %v, %v", got, err)
	}

	_, err = r.ByName("courses.creatd")
	if !errors.Is(err, codec.ErrUnknownType) || !strings.Contains(err.Error(), `"courses.creatd"`) {
		t.Errorf("ByName(unknown) error = %v", err)
	}
	if _, err := r.Decode("nope", 1, []byte(`{}`)); !errors.Is(err, codec.ErrUnknownType) {
		t.Errorf("Decode(unknown) error = %v", err)
	}
	if _, err := r.FromMap("nope", nil); !errors.Is(err, codec.ErrUnknownType) {
		t.Errorf("FromMap(unknown) error = %v", err)
	}
	type unregistered struct{ A int }
	for _, payload := range []any{unregistered{}, &unregistered{}, 42, nil} {
		_, err := r.TypeOf(payload)
		if !errors.Is(err, codec.ErrUnregistered) {
			t.Errorf("TypeOf(%T) error = %v, want ErrUnregistered", payload, err)
		}
		if _, _, err := r.Encode(payload); !errors.Is(err, codec.ErrUnregistered) {
			t.Errorf("Encode(%T) error = %v, want ErrUnregistered", payload, err)
		}
		if _, err := r.Keys(payload, nil); !errors.Is(err, codec.ErrUnregistered) {
			t.Errorf("Keys(%T) error = %v, want ErrUnregistered", payload, err)
		}
		if err := r.Validate(payload); !errors.Is(err, codec.ErrUnregistered) {
			t.Errorf("Validate(%T) error = %v, want ErrUnregistered", payload, err)
		}
	}
	if _, err := r.TypeOf(unregistered{}); !strings.Contains(err.Error(), "codec_test.unregistered") {
		t.Errorf("TypeOf error %q does not name the Go type", err)
	}

	var names []string
	for _, typ := range r.Types() {
		names = append(names, typ.Name)
	}
	if want := []string{"a.other", "courses.created"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Types() = %v, want %v", names, want)
	}

	var zero codec.Registry // the zero value is usable
	if _, err := zero.ByName("x"); !errors.Is(err, codec.ErrUnknownType) {
		t.Errorf("zero Registry ByName error = %v", err)
	}
	codec.MustRegister[created](&zero, "courses.created")
	if _, err := zero.ByName("courses.created"); err != nil {
		t.Error(err)
	}
}

type base struct {
	CourseID string `json:"course_id"`
	Shadowed string `json:"shadowed"`
}

type Extra struct {
	Note string `json:"note"`
}

type fieldsPayload struct {
	base
	*Extra
	Shadowed  int               `json:"shadowed"`
	Title     string            `json:"title,omitempty" sourced:"required"`
	Tags      []string          `json:"tags"`
	Scores    [3]int            `json:"scores"`
	Maybe     *int              `json:"maybe"`
	Blob      []byte            `json:"blob"`
	Nested    other             `json:"nested"`
	Labels    map[string]string `json:"labels"`
	Free      any               `json:"free"`
	Long      string            `json:"long" sourced:"noindex"`
	Skipped   string            `json:"-"`
	unexposed string            //lint:ignore U1000 an unexported field is what the test skips
	NoTag     bool
}

func TestFields(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[fieldsPayload](r, "fields")
	typ, _ := r.ByName("fields")

	type row struct {
		name                            string
		required, indexed, multi, empty bool
	}
	want := []row{
		{name: "course_id", indexed: true},
		{name: "note", indexed: true},
		{name: "shadowed", indexed: true},
		{name: "title", required: true, indexed: true, empty: true},
		{name: "tags", indexed: true, multi: true},
		{name: "scores", indexed: true, multi: true},
		{name: "maybe", indexed: true},
		{name: "blob"},
		{name: "nested"},
		{name: "labels"},
		{name: "free"},
		{name: "long"},
		{name: "NoTag", indexed: true},
	}
	var got []row
	for _, f := range typ.Fields {
		got = append(got, row{f.Name, f.Required, f.Indexed, f.Multi, f.OmitEmpty})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fields:\n got %+v\nwant %+v", got, want)
	}
	if f, ok := typ.Field("shadowed"); !ok || f.GoType != reflect.TypeFor[int]() {
		t.Errorf("Field(shadowed) = %+v, %v: the outer int field should win", f, ok)
	}
	if f, _ := typ.Field("note"); !reflect.DeepEqual(f.Index, []int{1, 0}) {
		t.Errorf("Field(note).Index = %v, want [1 0]", f.Index)
	}
	if !typ.Has("course_id") || typ.Has("Skipped") || typ.Has("unexposed") || typ.Has("base") {
		t.Error("Has disagrees with the JSON attributes")
	}
	if _, ok := typ.Field("missing"); ok {
		t.Error("Field(missing) found")
	}
}

func TestConcurrentRegisterAndLookup(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[created](r, "courses.created")
	var wg sync.WaitGroup
	wg.Go(func() {
		codec.MustRegister[other](r, "other")
		codec.MustRegister[withAny](r, "any")
		codec.MustRegister[recursive](r, "tree")
	})
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if _, _, err := r.Encode(created{CourseID: "c1"}); err != nil {
					t.Error(err)
					return
				}
				_ = r.Types()
			}
		})
	}
	wg.Wait()
	if len(r.Types()) != 4 {
		t.Errorf("got %d types, want 4", len(r.Types()))
	}
}

// decimal is a fixed-point number in the style of shopspring/decimal: a
// TextMarshaler stored as a JSON string.
type decimal struct {
	units int64 // hundredths
}

func (d decimal) MarshalText() ([]byte, error) {
	sign := ""
	u := d.units
	if u < 0 {
		sign, u = "-", -u
	}
	return fmt.Appendf(nil, "%s%d.%02d", sign, u/100, u%100), nil
}

func (d *decimal) UnmarshalText(b []byte) error {
	var whole, frac int64
	s := string(b)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if _, err := fmt.Sscanf(s, "%d.%02d", &whole, &frac); err != nil {
		return fmt.Errorf("decimal %q: %w", b, err)
	}
	d.units = whole*100 + frac
	if neg {
		d.units = -d.units
	}
	return nil
}

// rawHolder checks json.RawMessage (a json.Marshaler with a pointer
// unmarshaler) is accepted.
type rawHolder struct {
	Raw json.RawMessage `json:"raw"`
}

func TestRegisterRawMessage(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[rawHolder](r, "raw")
	_, data, err := r.Encode(rawHolder{Raw: json.RawMessage(`{"a":[1,2]}`)})
	if err != nil || string(data) != `{"raw":{"a":[1,2]}}` {
		t.Fatalf("Encode = %s, %v", data, err)
	}
}

// Tricky embeddings: the attributes must be exactly the keys encoding/json writes.
type (
	EmbA struct {
		Dup    string `json:"dup"`
		OnlyA  string
		Tagged string `json:"tagged"`
	}
	EmbB struct {
		Dup    string `json:"dup"`
		OnlyB  string
		Tagged string
	}
	EmbDeep struct{ EmbA }
	tricky  struct {
		EmbA
		*EmbB
		EmbDeep
		Own   int    `json:"own,string"`
		Named EmbA   `json:"named"`
		Weird string `json:"we!rd"`
		Bad   string `json:"b\"ad"` //lint:ignore SA5008 a malformed tag is what the test refuses
		Omit  string `json:",omitempty"`
	}
)

func TestFieldsMatchEncodingJSON(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[tricky](r, "tricky")
	typ, _ := r.ByName("tricky")
	var names []string
	for _, f := range typ.Fields {
		names = append(names, f.Name)
	}
	data, err := json.Marshal(tricky{EmbB: &EmbB{}, Omit: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.Token()
	for dec.More() {
		tok, _ := dec.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if !reflect.DeepEqual(names, keys) {
		t.Errorf("Fields = %v, encoding/json writes %v", names, keys)
	}
}

func TestNames(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[created](r, "courses.created")
	got, err := r.Names(reflect.TypeFor[created]())
	if err != nil || len(got) != 1 || got[0] != "courses.created" {
		t.Fatalf("Names = %v, %v", got, err)
	}
	type stranger struct{ A string }
	_, err = r.Names(reflect.TypeFor[created](), reflect.TypeFor[stranger]())
	if !errors.Is(err, codec.ErrUnregistered) || !strings.Contains(err.Error(), "stranger") {
		t.Fatalf("an unregistered type: %v", err)
	}
}

// Len counts the registered types and grows with every registration, a
// refused one excepted: stores compare it to know a cache of handled types
// is stale.
func TestRegistryLen(t *testing.T) {
	type a struct{ X string }
	type b struct{ Y string }
	reg := codec.NewRegistry()
	if n := reg.Len(); n != 0 {
		t.Fatalf("empty registry: Len = %d", n)
	}
	codec.MustRegister[a](reg, "test.a")
	if err := codec.Register[a](reg, "test.a"); err == nil {
		t.Fatal("registered test.a twice")
	}
	if n := reg.Len(); n != 1 {
		t.Fatalf("Len = %d, want 1", n)
	}
	codec.MustRegister[b](reg, "test.b")
	if n := reg.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	if n := (&codec.Registry{}).Len(); n != 0 {
		t.Fatalf("zero registry: Len = %d", n)
	}
}
