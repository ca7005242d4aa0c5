package codec_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

type freeItem struct {
	Value any `json:"value"`
}

type freeNode struct {
	Next *freeNode `json:"next"`
	Tags []string  `json:"tags"`
}

type freeTree struct {
	Node  freeNode `json:"node"`
	Child *struct {
		Loop *freeTree `json:"loop"`
		Data any       `json:"data"`
	} `json:"child"`
}

type freeForm struct {
	ID    string         `json:"id"`
	Notes any            `json:"notes"`
	Items []freeItem     `json:"items"`
	Meta  map[string]any `json:"meta"`
	Tree  freeTree       `json:"tree"`
}

// Free-form (any) attributes hold JSON data; a value JSON would store as
// something else (a time as a string, a struct as a map, bytes as base64,
// integer keys as strings) is refused by Validate, naming the attribute
// and the path inside it, instead of changing on its way through the store.
func TestValidateRefusesNonJSONInFreeFormAttributes(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[freeForm](r, "free.form")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name    string
		payload freeForm
		field   string // "" when valid
		path    string
	}{
		{"JSON data", freeForm{Notes: []any{1, int64(2), 2.5, "a", nil, true, map[string]any{"x": []any{"y"}}}, Meta: map[string]any{"n": json.Number("12")}}, "", ""},
		{"typed slices and maps of JSON data", freeForm{Notes: map[string][]string{"k": {"v"}}, Items: []freeItem{{Value: []int{1, 2}}}}, "", ""},
		{"a time", freeForm{Notes: at}, "notes", "notes holds a time.Time"},
		{"a pointer to a time", freeForm{Notes: &at}, "notes", "time.Time"},
		{"a struct", freeForm{Notes: struct{ A int }{1}}, "notes", "struct { A int }"},
		{"bytes", freeForm{Notes: []byte("hi")}, "notes", "[]uint8"},
		{"integer keys", freeForm{Notes: map[int]string{1: "a"}}, "notes", "map[int]string"},
		{"a time deep in a map", freeForm{Meta: map[string]any{"a": []any{1, map[string]any{"at": at}}}}, "meta", `meta["a"][1]["at"] holds a time.Time`},
		{"a time in a list of structs", freeForm{Items: []freeItem{{Value: 1}, {Value: at}}}, "items", "items[1].value holds a time.Time"},
		{"a duration is a number", freeForm{Notes: time.Second}, "", ""},
		{"a recursive type", freeForm{Tree: freeTree{Child: &struct {
			Loop *freeTree `json:"loop"`
			Data any       `json:"data"`
		}{Data: at}}}, "tree", "tree.child.data holds a time.Time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fields := fieldsOf(t, r.Validate(c.payload))
			if c.field == "" {
				if len(fields) != 0 {
					t.Fatalf("refused: %v", fields)
				}
				return
			}
			if len(fields) != 1 || fields[0].Field != c.field || !strings.Contains(fields[0].Problem, c.path) || !strings.Contains(fields[0].Problem, "typed field") {
				t.Fatalf("problems %v, want one for %q saying %q", fields, c.field, c.path)
			}
		})
	}
}
