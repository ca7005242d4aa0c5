package codec_test

import (
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
