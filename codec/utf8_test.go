package codec_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/sourced-go/sourced/codec"
)

type label string

func (l label) MarshalText() ([]byte, error) { return []byte(l), nil }
func (l *label) UnmarshalText(b []byte) error {
	*l = label(b)
	return nil
}

type texts struct {
	Name  string   `json:"name"`
	Tags  []string `json:"tags"`
	Alias *string  `json:"alias"`
	Label label    `json:"label"`
	Note  string   `json:"note" sourced:"noindex"`
}

// An indexed value that is not valid UTF-8 would be indexed under its
// bytes but stored (by encoding/json) with U+FFFD in their place: Validate
// refuses it, naming the attribute. A value that is not indexed is not
// checked.
func TestValidateRefusesInvalidUTF8InIndexedValues(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[texts](r, "texts")
	bad := "caf\xe9"
	for _, tc := range []struct {
		name    string
		payload texts
		field   string
	}{
		{"a string", texts{Name: bad}, "name"},
		{"a slice element", texts{Tags: []string{"ok", bad}}, "tags"},
		{"a pointer", texts{Alias: &bad}, "alias"},
		{"a TextMarshaler", texts{Label: label(bad)}, "label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []any{tc.payload, &tc.payload} {
				err := r.Validate(p)
				var ve *codec.ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, codec.ErrInvalid) {
					t.Fatalf("Validate(%T) = %v, want a *ValidationError", p, err)
				}
				if len(ve.Fields) != 1 || ve.Fields[0].Field != tc.field {
					t.Fatalf("Validate fields %+v, want one problem with %q", ve.Fields, tc.field)
				}
			}
		})
	}
	if err := r.Validate(texts{Name: "café", Tags: []string{"naïve"}, Note: bad}); err != nil {
		t.Fatalf("valid UTF-8 (and an unindexed invalid note) refused: %v", err)
	}
}

// A FieldError marshals as {"field", "problem"}, for HTTP handlers.
func TestFieldErrorJSON(t *testing.T) {
	got, err := json.Marshal(codec.FieldError{Field: "seats", Problem: "must be positive"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"field":"seats","problem":"must be positive"}`; string(got) != want {
		t.Fatalf("json %s, want %s", got, want)
	}
	var back codec.FieldError
	if err := json.Unmarshal(got, &back); err != nil || back != (codec.FieldError{Field: "seats", Problem: "must be positive"}) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}

// Field.NoIndex tells a scalar left out by its tag from one that cannot
// be indexed at all.
func TestFieldNoIndex(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[texts](r, "texts")
	typ, _ := r.ByName("texts")
	note, _ := typ.Field("note")
	name, _ := typ.Field("name")
	if !note.NoIndex || note.Indexed || name.NoIndex || !name.Indexed {
		t.Fatalf("note %+v, name %+v: want note NoIndex and not Indexed, name the reverse", note, name)
	}
	if got := typ.Keys(texts{Name: "a", Note: "b"}, nil); !reflect.DeepEqual(got, []codec.KeyPair{{Name: "label"}, {Name: "name", Value: "a"}}) {
		t.Fatalf("keys %v", got)
	}
}
