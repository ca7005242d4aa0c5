package codec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
)

// A list indexed from inside whose elements hold no text (so the UTF-8
// check does not walk it) is refused over MaxNestedKeys all the same, and
// Keys never cuts it short.
type qtyLine struct {
	Qty int `json:"qty"`
}

type qtyOrdered struct {
	Lines []qtyLine `json:"lines" sourced:"index=qty"`
}

func TestNestedListOverTheLimitIsRefusedWithoutIndexedText(t *testing.T) {
	reg := codec.NewRegistry()
	if err := codec.Register[qtyOrdered](reg, "limits.qty_ordered"); err != nil {
		t.Fatal(err)
	}
	long := qtyOrdered{Lines: make([]qtyLine, codec.MaxNestedKeys+1)}
	for i := range long.Lines {
		long.Lines[i].Qty = i
	}
	err := reg.Validate(long)
	var ve *codec.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, codec.ErrInvalid) || !strings.Contains(err.Error(), "lines") || !strings.Contains(err.Error(), "MaxNestedKeys") {
		t.Fatalf("validate a nested list of %d: %v, want a ValidationError naming lines", len(long.Lines), err)
	}
	if _, err := reg.FromMap("limits.qty_ordered", map[string]any{"lines": make([]any, codec.MaxNestedKeys+1)}); !errors.As(err, &ve) {
		t.Fatalf("FromMap of a nested list over the limit: %v", err)
	}
	typ, _ := reg.ByName("limits.qty_ordered")
	if keys := typ.Keys(long, nil); len(keys) != codec.MaxNestedKeys+1 {
		t.Fatalf("Keys of %d distinct values: %d pairs; an index must never be cut short", codec.MaxNestedKeys+1, len(keys))
	}
	if _, err := reg.Keys(long, nil); err == nil {
		t.Fatal("Registry.Keys of a list over the limit: no error")
	}
	ok := qtyOrdered{Lines: long.Lines[:codec.MaxNestedKeys]}
	if err := reg.Validate(ok); err != nil {
		t.Fatalf("validate a nested list of exactly MaxNestedKeys: %v", err)
	}
}

type tagged struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
	Nums []int    `json:"nums"`
}

func TestKeyPairsPerMessageAreCapped(t *testing.T) {
	reg := codec.NewRegistry()
	if err := codec.Register[tagged](reg, "limits.tagged"); err != nil {
		t.Fatal(err)
	}
	// id counts one: tags and nums together may hold MaxKeyPairs-1.
	half := (codec.MaxKeyPairs - 1) / 2
	at := tagged{ID: "x", Tags: make([]string, half), Nums: make([]int, codec.MaxKeyPairs-1-half)}
	if err := reg.Validate(at); err != nil {
		t.Fatalf("validate exactly MaxKeyPairs values: %v", err)
	}
	over := tagged{ID: "x", Tags: make([]string, half), Nums: make([]int, codec.MaxKeyPairs-half)}
	err := reg.Validate(over)
	var ve *codec.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "MaxKeyPairs") {
		t.Fatalf("validate MaxKeyPairs+1 values: %v, want a ValidationError naming MaxKeyPairs", err)
	}
	huge := tagged{Tags: make([]string, 1<<20)}
	if err := reg.Validate(huge); !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("validate a list of 1M values: %v", err)
	}
	if len(err.Error()) > 1000 {
		t.Fatalf("the refusal repeats its input: %d bytes", len(err.Error()))
	}
}
