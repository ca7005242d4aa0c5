package codec

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// jsonField is one JSON attribute of a struct type, as encoding/json sees it.
type jsonField struct {
	name      string
	tagged    bool  // name came from a json tag
	index     []int // reflect field index path (through embedded structs)
	typ       reflect.Type
	omitEmpty bool // json ",omitempty" or ",omitzero"
	sf        reflect.StructField
}

// jsonFields lists the JSON attributes of struct type t in the order
// encoding/json writes them, applying its rules: exported fields only,
// `json:"-"` skipped, tag names, embedded structs flattened, and Go's
// shadowing rules for embedded fields (a tagged field dominates; two fields
// with the same name at the same depth annihilate each other). It is a port
// of encoding/json's typeFields, minus the encoders.
func jsonFields(t reflect.Type) []jsonField {
	current := []jsonField{}
	next := []jsonField{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []jsonField

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}

		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true

			for i := 0; i < f.typ.NumField(); i++ {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !isValidJSONName(name) {
					name = ""
				}
				index := make([]int, len(f.index)+1)
				copy(index, f.index)
				index[len(f.index)] = i

				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					fields = append(fields, jsonField{
						name:      name,
						tagged:    tagged,
						index:     index,
						typ:       sf.Type,
						omitEmpty: hasOption(opts, "omitempty") || hasOption(opts, "omitzero"),
						sf:        sf,
					})
					if count[f.typ] > 1 {
						// Several embedded instances of f.typ at this depth: add
						// a duplicate so the annihilation below drops the name.
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, jsonField{name: ft.Name(), index: index, typ: ft})
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b jsonField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})

	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		fi := fields[i]
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].name != fi.name {
				break
			}
		}
		if advance == 1 {
			out = append(out, fi)
			continue
		}
		// Dominant field: the shallowest, tagged one, if it is alone.
		if len(fields[i].index) == len(fields[i+1].index) && fields[i].tagged == fields[i+1].tagged {
			continue
		}
		out = append(out, fi)
	}
	fields = out
	slices.SortFunc(fields, func(a, b jsonField) int { return slices.Compare(a.index, b.index) })
	return fields
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// isValidJSONName is encoding/json's isValidTag.
func isValidJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
