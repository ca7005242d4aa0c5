package codec_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sourced-go/sourced/codec"
)

type stepEvent struct {
	RunID string `json:"run_id"`
}

func TestRegisterAs(t *testing.T) {
	reg := codec.NewRegistry()
	for _, name := range []string{"a.step", "b.step"} {
		if err := codec.RegisterAs[stepEvent](reg, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := codec.RegisterAs[stepEvent](reg, "a.step"); err == nil {
		t.Fatal("a name registered twice was accepted")
	}
	if _, err := reg.ByGoType(reflect.TypeFor[stepEvent]()); !errors.Is(err, codec.ErrUnregistered) {
		t.Fatalf("ByGoType of a shared type: %v, want ErrUnregistered", err)
	}
	typ, err := reg.TypeFor("b.step", &stepEvent{"r1"})
	if err != nil || typ.Name != "b.step" {
		t.Fatalf("TypeFor: %v %v", typ, err)
	}
	if _, err := reg.TypeFor("b.step", struct{}{}); !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("TypeFor of another Go type: %v, want ErrInvalid", err)
	}
	if _, err := reg.TypeFor("c.step", stepEvent{}); !errors.Is(err, codec.ErrUnknownType) {
		t.Fatalf("TypeFor of an unknown name: %v, want ErrUnknownType", err)
	}
	v, err := reg.Decode("a.step", 0, []byte(`{"run_id":"r2"}`))
	if err != nil || v != (stepEvent{"r2"}) {
		t.Fatalf("Decode: %v %v", v, err)
	}
	if keys := typ.Keys(stepEvent{"r3"}, nil); len(keys) != 1 || keys[0].Value != "r3" {
		t.Fatalf("keys %v", keys)
	}
}
