package codec_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
)

type cartLine struct {
	ProductID string  `json:"product_id"`
	Qty       int     `json:"qty"`
	Note      *string `json:"note,omitempty"`
}

type cartOrdered struct {
	CartID string      `json:"cart_id"`
	Items  []cartLine  `json:"items" sourced:"index=product_id,index=qty"`
	Extra  []*cartLine `json:"extra" sourced:"index=note"`
}

func TestNestedIndex(t *testing.T) {
	reg := codec.NewRegistry()
	if err := codec.Register[cartOrdered](reg, "carts.ordered"); err != nil {
		t.Fatal(err)
	}
	note := "gift"
	e := cartOrdered{CartID: "c1", Items: []cartLine{{"p1", 2, nil}, {"p2", 1, nil}, {"p1", 3, nil}}, Extra: []*cartLine{nil, {Note: &note}, {}}}
	keys, err := reg.Keys(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.String())
	}
	want := []string{"cart_id=c1", "note=gift", "product_id=p1", "product_id=p2", "qty=1", "qty=2", "qty=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	typ, _ := reg.ByName("carts.ordered")
	f, ok := typ.Field("product_id")
	if !ok || !f.Indexed || !f.Multi || f.Nested != "items" {
		t.Fatalf("nested field %+v %v", f, ok)
	}
	if _, ok := typ.Field("items"); !ok {
		t.Fatal("the list itself is still an attribute")
	}
	for _, fl := range typ.Fields {
		if fl.Name == "product_id" {
			t.Fatal("a nested index is not one of the payload's own attributes")
		}
	}
	if err := reg.Validate(e); err != nil {
		t.Fatalf("validate: %v", err)
	}
	long := cartOrdered{CartID: "c", Items: make([]cartLine, codec.MaxNestedKeys+1)}
	err = reg.Validate(long)
	var ve *codec.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "items") {
		t.Fatalf("validate a list over the limit: %v", err)
	}
	bad := cartOrdered{CartID: "c", Items: []cartLine{{ProductID: "\xff"}}}
	if err := reg.Validate(bad); !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("validate invalid UTF-8 in a nested key: %v", err)
	}
}

func TestNestedIndexRefusals(t *testing.T) {
	type notList struct {
		Line cartLine `json:"line" sourced:"index=product_id"`
	}
	type scalars struct {
		IDs []string `json:"ids" sourced:"index=product_id"`
	}
	type missing struct {
		Items []cartLine `json:"items" sourced:"index=sku"`
	}
	type clash struct {
		ProductID string     `json:"product_id"`
		Items     []cartLine `json:"items" sourced:"index=product_id"`
	}
	type deep struct {
		Items []struct {
			Tags []string `json:"tags"`
		} `json:"items" sourced:"index=tags"`
	}
	cases := map[string]func(*codec.Registry) error{
		"not a list":          func(r *codec.Registry) error { return codec.Register[notList](r, "x.a") },
		"a list of scalars":   func(r *codec.Registry) error { return codec.Register[scalars](r, "x.b") },
		"no such attribute":   func(r *codec.Registry) error { return codec.Register[missing](r, "x.c") },
		"a top-level clash":   func(r *codec.Registry) error { return codec.Register[clash](r, "x.d") },
		"not a scalar inside": func(r *codec.Registry) error { return codec.Register[deep](r, "x.e") },
	}
	for name, reg := range cases {
		err := reg(codec.NewRegistry())
		if err == nil || !strings.Contains(err.Error(), "index=") && !strings.Contains(err.Error(), "indexed from") {
			t.Errorf("%s: %v, want a registration error naming the index tag", name, err)
		}
	}
}
