package pgstore

import (
	"hash/fnv"
	"slices"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// An append locks what it touches, not the store (see the package doc,
// "Ordering and locking"): a transaction-level advisory lock per
// boundary key, (type, key pair) for each key pair of each message it
// writes and (type) for each type it writes, in shared mode, and in
// exclusive mode the key of each condition of its guard (the type and
// the condition's first key pair, or the type alone for a condition
// without attributes). A message that matches a condition carries the
// condition's type and every key pair of it, so its writer holds, in
// shared mode, the key the guard holds exclusively: a guarded append and
// an append that could change what its guard read wait on each other;
// appends on other boundaries, and unguarded appends on the same one, do
// not. Beside them every append holds the store's lock (lockKey) in
// shared mode, which operations that must see no append in flight
// (registering a group, a reset, promotions, sync work) take in exclusive
// mode.
//
// Keys are 32-bit hashes under a namespace of the store's (the two-int
// form of PostgreSQL's advisory locks, which never collides with the
// one-bigint form of lockKey): two boundaries whose keys collide only
// wait on each other for nothing.

// boundaryKey is one lock of an append: its hash, and whether it is
// taken in exclusive mode.
type boundaryKey struct {
	key       int32
	exclusive bool
}

// maxBoundaryKeys is how many keys one append locks at most: beyond it
// (a batch of hundreds of messages) it takes the store's lock in
// exclusive mode instead, so that PostgreSQL's lock table, a few
// thousand entries shared by every session, never fills.
const maxBoundaryKeys = 64

// boundaryNamespace is the first int of the store's boundary locks.
func boundaryNamespace(schema, prefix string) int32 {
	h := fnv.New32a()
	h.Write([]byte("sourced.pgstore.boundary:" + schema + "." + prefix))
	return int32(h.Sum32())
}

func hashKey(typ, key string) int32 {
	h := fnv.New32a()
	h.Write([]byte(typ))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int32(h.Sum32())
}

// boundarySet collects the keys of one append (or one transaction).
type boundarySet map[int32]bool

// write adds the shared keys of a message of type typ with key pairs keys.
func (b boundarySet) write(typ string, keys []codec.KeyPair) {
	b.add(hashKey(typ, ""), false)
	for _, k := range keys {
		b.add(hashKey(typ, keyString(k.Name, k.Value)), false)
	}
}

// guard adds the exclusive keys of a guard's conditions.
func (b boundarySet) guard(conds []core.Condition) {
	for _, c := range conds {
		if len(c.Attrs) == 0 {
			b.add(hashKey(c.Type, ""), true)
			continue
		}
		first := ""
		for name, value := range c.Attrs {
			if k := keyString(name, value); first == "" || k < first {
				first = k
			}
		}
		b.add(hashKey(c.Type, first), true)
	}
}

func (b boundarySet) add(k int32, exclusive bool) {
	b[k] = b[k] || exclusive
}

// missing returns the keys of b that have does not hold in a mode at
// least as strong, sorted (every transaction takes its keys in the same
// order, so two never wait on each other in a cycle).
func (b boundarySet) missing(have boundarySet) []boundaryKey {
	out := make([]boundaryKey, 0, len(b))
	for k, x := range b {
		if held, ok := have[k]; ok && (held || !x) {
			continue
		}
		out = append(out, boundaryKey{k, x})
	}
	slices.SortFunc(out, func(a, b boundaryKey) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	return out
}

// lockArgs are the arrays the lock statements take.
func lockArgs(keys []boundaryKey) ([]int32, []bool) {
	ks := make([]int32, len(keys))
	xs := make([]bool, len(keys))
	for i, k := range keys {
		ks[i], xs[i] = k.key, k.exclusive
	}
	return ks, xs
}
