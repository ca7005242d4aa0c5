package driver

import (
	"fmt"
	"iter"
	"slices"

	"github.com/sourced-go/sourced/codec"
)

// CheckPartitionValues returns a *codec.ValidationError (errors.Is
// codec.ErrInvalid) when a message of type typ, indexed under keys, holds
// an empty value for an attribute that a registered consumer group
// handling typ partitions by. Such a message would open the partition
// {attribute: ""}, which no decider, projector or workflow can load (a
// partition key must have a value), and every worker claiming it would fail
// the whole group. A store refuses the append instead, with nothing
// written; the error names each empty attribute and a group partitioning
// by it.
//
// groups yields, for the registered groups handling typ, each group's id
// and its partition keys (an id-partitioned group has none and is never
// at fault). Only the partition keys of those groups must be non-empty: an
// attribute no such group partitions by may be empty, and an attribute a
// message does not carry (omitempty, a nil pointer) is not checked here
// (under conditional AND a message is matched on the partition attributes
// it carries). A group registered after a message was appended is not
// protected from it: register groups (start the runtime, or call
// RegisterGroup) before appending what they handle.
//
// The common case (no empty value) allocates nothing and does not call
// groups.
func CheckPartitionValues(typ string, keys []codec.KeyPair, groups iter.Seq2[string, []string]) error {
	if !slices.ContainsFunc(keys, func(k codec.KeyPair) bool { return k.Value == "" }) {
		return nil
	}
	var ve *codec.ValidationError
	for group, partitionBy := range groups {
		for _, name := range partitionBy {
			if !slices.Contains(keys, codec.KeyPair{Name: name, Value: ""}) {
				continue
			}
			if ve == nil {
				ve = &codec.ValidationError{Type: typ}
			}
			if slices.ContainsFunc(ve.Fields, func(f codec.FieldError) bool { return f.Field == name }) {
				continue
			}
			ve.Fields = append(ve.Fields, codec.FieldError{Field: name, Problem: fmt.Sprintf(
				"is empty, but consumer group %q partitions %s by it, and a partition key must have a value (the group could not load the partition and would stop): give it a value", group, typ)})
		}
	}
	if ve == nil {
		return nil
	}
	return ve
}
