package driver_test

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/driver"
)

// walkAll collects the partitions a walk yields, as values and picks.
func walkAll(names []string, keys []codec.KeyPair) (values [][]string, picks [][]int) {
	var w driver.PartitionWalk
	for w.Init(names, keys); w.Next(); {
		values = append(values, slices.Clone(w.Values()))
		picks = append(picks, slices.Clone(w.Pick()))
	}
	return values, picks
}

// crossProduct is the walk written plainly: for each name the indexes of
// its values, then every combination, the last name varying fastest.
func crossProduct(names []string, keys []codec.KeyPair) [][]int {
	var out [][]int
	var walk func(i int, pick []int)
	walk = func(i int, pick []int) {
		if i == len(names) {
			out = append(out, slices.Clone(pick))
			return
		}
		for j, k := range keys {
			if k.Name == names[i] {
				walk(i+1, append(pick, j))
			}
		}
	}
	walk(0, nil)
	return out
}

func TestPartitionWalk(t *testing.T) {
	keys := []codec.KeyPair{{Name: "course_id", Value: "c1"}, {Name: "student_id", Value: "s1"}, {Name: "student_id", Value: "s2"}}
	values, _ := walkAll([]string{"course_id", "student_id"}, keys)
	want := [][]string{{"c1", "s1"}, {"c1", "s2"}}
	if !slices.EqualFunc(values, want, slices.Equal) {
		t.Errorf("partitions %v, want %v (one per value of the slice attribute)", values, want)
	}
	if values, _ := walkAll([]string{"course_id", "room"}, keys); len(values) != 0 {
		t.Errorf("a message without room opened %v, want no partition (AND discovery)", values)
	}
	if values, _ := walkAll(nil, keys); len(values) != 1 || len(values[0]) != 0 {
		t.Errorf("no names: %v, want one empty partition (the store keys it by the message id)", values)
	}
	if values, _ := walkAll([]string{"course_id"}, nil); len(values) != 0 {
		t.Errorf("no keys: %v, want no partition", values)
	}
}

// TestPartitionWalkIsTheCrossProduct: on any names and keys (names
// repeated, keys in any order), the walk yields exactly the combinations
// of the plain cross product, in its order, and a second Init starts over.
func TestPartitionWalkIsTheCrossProduct(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alphabet := []string{"a", "b", "c", "d", "e"}
		names := rapid.SliceOfNDistinct(rapid.SampledFrom(alphabet), 0, 5, rapid.ID[string]).Draw(t, "names")
		keys := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) codec.KeyPair {
			return codec.KeyPair{Name: rapid.SampledFrom(alphabet).Draw(t, "name"), Value: rapid.StringMatching(`[xy]{0,2}`).Draw(t, "value")}
		}), 0, 12).Draw(t, "keys")
		var w driver.PartitionWalk
		w.Init([]string{"zz"}, keys) // a walk left half-way must not leak into the next
		w.Next()
		want := crossProduct(names, keys)
		var got [][]int
		for w.Init(names, keys); w.Next(); {
			got = append(got, slices.Clone(w.Pick()))
			for i, j := range w.Pick() {
				if w.Values()[i] != keys[j].Value {
					t.Fatalf("value %d is %q, pick says %q", i, w.Values()[i], keys[j].Value)
				}
			}
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("walk %v, want the cross product %v", got, want)
		}
	})
}

func TestPartitionWalkAllocatesNothing(t *testing.T) {
	keys := []codec.KeyPair{{Name: "a", Value: "1"}, {Name: "b", Value: "1"}, {Name: "b", Value: "2"}, {Name: "c", Value: "3"}, {Name: "d", Value: "4"}}
	names := []string{"a", "b", "c", "d"}
	var w driver.PartitionWalk
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		for w.Init(names, keys); w.Next(); {
			n += len(w.Values())
		}
	})
	if allocs != 0 || n == 0 {
		t.Errorf("a walk of 4 names allocates %v times (walked %d values), want 0", allocs, n)
	}
}
