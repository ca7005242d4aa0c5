package core

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sourced-go/sourced/codec"
)

// PartitionOf returns the partition a message of type typ decides in: the
// value of each attribute of by among the message's key pairs (see
// codec.Type.Keys). It is the rule for every message that must carry all
// partition keys (commands, the messages reactions dispatch, a machine's
// events) and is what synchronous handling, loading and the router apply
// before they read or write anything.
//
// A key the message does not carry, carries with the empty value, or
// carries with several values (a slice attribute) is a
// *codec.ValidationError (errors.Is codec.ErrInvalid) naming the attribute:
// without the rule, every command lacking a key would share the one
// partition "" and be decided against each other's history. Declare such
// attributes `sourced:"required"` so that validation catches them first.
func PartitionOf(typ string, by []string, keys []codec.KeyPair) (Partition, error) {
	partition := make(Partition, len(by))
	var ve *codec.ValidationError
	problem := func(field, format string, args ...any) {
		if ve == nil {
			ve = &codec.ValidationError{Type: typ}
		}
		ve.Fields = append(ve.Fields, codec.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	for _, k := range slices.Sorted(slices.Values(by)) {
		n := 0
		for _, kp := range keys {
			if kp.Name != k {
				continue
			}
			n++
			partition[k] = kp.Value
		}
		switch {
		case n == 0:
			problem(k, "partition key is missing: every message decided in a partition carries every key of %v", by)
		case n > 1:
			problem(k, "partition key holds %d values: a message decides in one partition", n)
		case partition[k] == "":
			problem(k, "partition key is empty: messages with an empty key would all share one partition")
		}
	}
	if ve != nil {
		return nil, ve
	}
	return partition, nil
}

// PartitionPairs returns a partition's values as key pairs, sorted by name:
// PartitionOf("partition", keys, PartitionPairs(p)) checks that a
// partition given by a caller has a value for each of keys and none empty.
func PartitionPairs(partition Partition) []codec.KeyPair {
	out := make([]codec.KeyPair, 0, len(partition))
	for _, k := range slices.Sorted(maps.Keys(partition)) {
		out = append(out, codec.KeyPair{Name: k, Value: partition[k]})
	}
	return out
}
