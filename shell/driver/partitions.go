package driver

import "github.com/sourced-go/sourced/codec"

// PartitionWalk enumerates the partitions of a group that a message opens
// or wakes: the group is partitioned by names, the message is indexed
// under keys (its key pairs), and it belongs to a partition only if it
// carries every name (AND discovery); an attribute holding several values
// (a slice) puts it in one partition per combination of values. Every
// store enumerates a message's partitions this way, when it appends and
// when a group discovers its partitions in the log.
//
//	var w driver.PartitionWalk
//	for w.Init(g.PartitionBy, keys); w.Next(); {
//		key := core.AppendPartitionKey(buf[:0], g.PartitionBy, w.Values())
//		...
//	}
//
// The partitions come in the order of keys' values, the last name's
// varying fastest. Values and Pick are the current partition's, reused by
// the next call of Next. A walk of up to 4 names and 8 candidate values
// allocates nothing. An id-partitioned group (no names) has one partition
// per message, which the store builds from the message id: Init with no
// names yields one empty partition.
type PartitionWalk struct {
	keys   []codec.KeyPair
	spans  [][2]int // per name: its candidates, a range of cand
	cand   []int    // indexes into keys, grouped by name
	at     []int    // per name: the current candidate, an index of cand
	pick   []int    // per name: the current value's index in keys
	values []string // per name: the current value
	fresh  bool     // Next has not run since Init
	done   bool

	spanBuf [4][2]int
	candBuf [8]int
	atBuf   [4]int
	pickBuf [4]int
	valBuf  [4]string
}

// Init starts a walk of the partitions by names of a message indexed
// under keys (in any order; codec gives them sorted).
func (w *PartitionWalk) Init(names []string, keys []codec.KeyPair) {
	w.keys, w.fresh, w.done = keys, true, false
	w.spans, w.cand = w.spanBuf[:0], w.candBuf[:0]
	w.at, w.pick, w.values = w.atBuf[:0], w.pickBuf[:0], w.valBuf[:0]
	for _, name := range names {
		lo := len(w.cand)
		for i := range keys {
			if keys[i].Name == name {
				w.cand = append(w.cand, i)
			}
		}
		if len(w.cand) == lo {
			w.done = true // the message does not carry name: no partition
			return
		}
		w.spans = append(w.spans, [2]int{lo, len(w.cand)})
		w.at, w.pick, w.values = append(w.at, lo), append(w.pick, 0), append(w.values, "")
	}
}

// Next moves to the next partition and reports whether there is one.
func (w *PartitionWalk) Next() bool {
	if w.done {
		return false
	}
	if w.fresh {
		w.fresh = false
	} else {
		i := len(w.at) - 1
		for ; i >= 0; i-- {
			w.at[i]++
			if w.at[i] < w.spans[i][1] {
				break
			}
			w.at[i] = w.spans[i][0]
		}
		if i < 0 {
			w.done = true
			return false
		}
	}
	for i, c := range w.at {
		w.pick[i] = w.cand[c]
		w.values[i] = w.keys[w.pick[i]].Value
	}
	return true
}

// Values returns the current partition's value of each name, in names'
// order.
func (w *PartitionWalk) Values() []string { return w.values }

// Pick returns, for each name in order, the index in keys of the current
// partition's value (for a store that keeps something per key pair).
func (w *PartitionWalk) Pick() []int { return w.pick }
