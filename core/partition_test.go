package core_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

func TestPartitionOf(t *testing.T) {
	kp := func(pairs ...string) []codec.KeyPair {
		var out []codec.KeyPair
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, codec.KeyPair{Name: pairs[i], Value: pairs[i+1]})
		}
		return out
	}
	by := []string{"member_id", "book_id"}
	p, err := core.PartitionOf("library.lend", by, kp("book_id", "b1", "member_id", "m1", "note", "x"))
	if err != nil || !maps.Equal(p, map[string]string{"book_id": "b1", "member_id": "m1"}) {
		t.Fatalf("PartitionOf = %v, %v", p, err)
	}
	cases := []struct {
		name  string
		keys  []codec.KeyPair
		field string
		want  string
	}{
		{"missing key", kp("book_id", "b1"), "member_id", "missing"},
		{"empty key", kp("book_id", "b1", "member_id", ""), "member_id", "empty"},
		{"several values", kp("book_id", "b1", "book_id", "b2", "member_id", "m1"), "book_id", "2 values"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := core.PartitionOf("library.lend", by, tc.keys)
			var ve *codec.ValidationError
			if p != nil || !errors.Is(err, codec.ErrInvalid) || !errors.As(err, &ve) {
				t.Fatalf("PartitionOf = %v, %v; want a *codec.ValidationError", p, err)
			}
			if ve.Type != "library.lend" || len(ve.Fields) != 1 || ve.Fields[0].Field != tc.field {
				t.Fatalf("error %+v, want one problem with %q", ve, tc.field)
			}
			if !strings.Contains(ve.Fields[0].Problem, tc.want) {
				t.Fatalf("problem %q, want it to say %q", ve.Fields[0].Problem, tc.want)
			}
		})
	}
	if _, err := core.PartitionOf("partition", []string{"course_id"}, core.PartitionPairs(map[string]string{"course_id": ""})); !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("an empty value in a given partition: %v", err)
	}
}
