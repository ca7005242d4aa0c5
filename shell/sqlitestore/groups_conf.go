package sqlitestore

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	"zombiezen.com/go/sqlite"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// groupConf is the configuration of a registered consumer group, as the
// writer caches it: what the append path needs for eager offsets and the
// index basis, and the claim path for its fetch and guard.
type groupConf struct {
	row         int64 // consumer_groups.id
	name        string
	partitionBy []string // sorted; empty for an id-partitioned group
	exclusive   bool
	handled     []string      // sorted, distinct
	types       []*codec.Type // the handled types, for claim guards
	missing     error         // a handled type this registry does not know
}

func (g *groupConf) byID() bool { return len(g.partitionBy) == 0 }

func (g *groupConf) handles(typ string) bool {
	_, ok := slices.BinarySearch(g.handled, typ)
	return ok
}

// groupSet is every registered group of the store.
type groupSet struct {
	list   []*groupConf // by name
	byName map[string]*groupConf
	byRow  map[int64]*groupConf
	byType map[string][]*groupConf
	// basis holds how messages of a type are indexed: by message id for
	// the handled types of an id-partitioned group, else by payload.
	basis map[string]indexBasis
	// types is the registry's Len when the set was loaded: the handled
	// types it resolved are those registered then, so a type registered
	// since (a workflow's lifecycle events, registered by NewRuntime
	// after the store opened) makes the set stale (see writer.sync).
	types int
}

// stale reports whether types were registered since gs was loaded.
func (gs *groupSet) stale(s *Store) bool { return gs.types != s.reg.Len() }

func (gs *groupSet) names() []string {
	out := make([]string, len(gs.list))
	for i, g := range gs.list {
		out[i] = g.name
	}
	return out
}

// partitionKeys yields the id and partition keys of each group handling
// typ, for driver.CheckPartitionValues.
func (gs *groupSet) partitionKeys(typ string) iter.Seq2[string, []string] {
	return func(yield func(string, []string) bool) {
		for _, g := range gs.byType[typ] {
			if !yield(g.name, g.partitionBy) {
				return
			}
		}
	}
}

// lookup returns a registered group, or an *UnknownGroupError naming the
// registered ones.
func (gs *groupSet) lookup(name string) (*groupConf, error) {
	if g, ok := gs.byName[name]; ok {
		return g, nil
	}
	return nil, &driver.UnknownGroupError{Group: name, Known: gs.names()}
}

// Counter names in <prefix>_counters: bumped by a change that other
// processes' writers must notice (they read the counters when another
// connection committed since their last transaction).
const (
	counterGroups = "groups"    // a group's partitioning or handled types changed
	counterPruned = "key_pairs" // key pairs were deleted (cached ids may be stale)
	// counterDeleted: messages were deleted from the log (Delete, Clear):
	// the states cached for Handle (Store.StateCache) may be stale.
	counterDeleted = "deleted"
)

// sync brings the writer's caches up to date at the start of a
// transaction. PRAGMA data_version on the writer connection changes only
// when another connection (another process, another Store on the file)
// committed since the last call; only then are the counters read, and the
// group configuration reloaded or the key pair cache emptied if they
// moved. A change this writer made itself marks the configuration stale.
func (w *writer) sync(s *Store) error {
	dv, err := queryInt(w.conn, s.q.g.dataVer)
	if err != nil {
		return err
	}
	if w.groups != nil && !w.groupsStale && dv == w.dataVersion && !w.groups.stale(s) {
		return nil
	}
	w.dataVersion = dv
	var groups, pruned, deleted int64
	err = w.rows(s.q.g.counters, nil, func(stmt *sqlite.Stmt) {
		switch stmt.ColumnText(0) {
		case counterGroups:
			groups = stmt.ColumnInt64(1)
		case counterPruned:
			pruned = stmt.ColumnInt64(1)
		case counterDeleted:
			deleted = stmt.ColumnInt64(1)
		}
	})
	if err != nil {
		return err
	}
	if deleted != w.deletedVersion {
		// Another process deleted messages (or cleared the log): a cached
		// state may hold them. Dropped before this transaction's work
		// takes any.
		s.states.Drop("")
		w.deletedVersion = deleted
	}
	if pruned != w.prunedVersion {
		w.reset()
		w.prunedVersion = pruned
	}
	if w.groups == nil || w.groupsStale || groups != w.groupsVersion || w.groups.stale(s) {
		gs, err := loadGroups(w.conn, s)
		if err != nil {
			return err
		}
		w.groups, w.groupsVersion, w.groupsStale = gs, groups, false
	}
	return nil
}

// rows runs a constant query and calls fn for each row.
func (w *writer) rows(query string, bind func(*sqlite.Stmt), fn func(*sqlite.Stmt)) error {
	return queryRows(w.conn, query, bind, fn)
}

func queryRows(conn *sqlite.Conn, query string, bind func(*sqlite.Stmt), fn func(*sqlite.Stmt)) error {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return err
	}
	if bind != nil {
		bind(stmt)
	}
	for {
		has, err := stmt.Step()
		if err != nil {
			stmt.Reset()
			return err
		}
		if !has {
			break
		}
		fn(stmt)
	}
	return stmt.Reset()
}

// exec runs a constant statement that returns no rows, and returns the
// number of rows it changed.
func exec(conn *sqlite.Conn, query string, bind func(*sqlite.Stmt)) (int, error) {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return 0, err
	}
	if bind != nil {
		bind(stmt)
	}
	_, err = stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	return conn.Changes(), nil
}

// loadGroups reads every group's configuration.
func loadGroups(conn *sqlite.Conn, s *Store) (*groupSet, error) {
	gs := &groupSet{
		byName: map[string]*groupConf{},
		byRow:  map[int64]*groupConf{},
		byType: map[string][]*groupConf{},
		basis:  map[string]indexBasis{},
		types:  s.reg.Len(), // before the lookups: a registration meanwhile reloads
	}
	var perr error
	err := queryRows(conn, s.q.g.loadGroups, nil, func(stmt *sqlite.Stmt) {
		g := &groupConf{row: stmt.ColumnInt64(0), name: stmt.ColumnText(1), exclusive: stmt.ColumnInt(3) != 0}
		if err := json.Unmarshal([]byte(stmt.ColumnText(2)), &g.partitionBy); err != nil && perr == nil {
			perr = fmt.Errorf("sqlitestore: consumer group %s: partition_by: %w", g.name, err)
		}
		if err := json.Unmarshal([]byte(stmt.ColumnText(4)), &g.handled); err != nil && perr == nil {
			perr = fmt.Errorf("sqlitestore: consumer group %s: handled: %w", g.name, err)
		}
		gs.list = append(gs.list, g)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: load consumer groups: %w", err)
	}
	if perr != nil {
		return nil, perr
	}
	for _, g := range gs.list {
		slices.Sort(g.handled)
		slices.Sort(g.partitionBy)
		for _, name := range g.handled {
			typ, err := s.reg.ByName(name)
			if err != nil {
				g.missing = &driver.DecodeError{Group: g.name, MessageType: name, Err: fmt.Errorf("sqlitestore: consumer group %s handles %s: %w", g.name, name, err)}
				continue
			}
			g.types = append(g.types, typ)
			gs.byType[name] = append(gs.byType[name], g)
			if g.byID() {
				gs.basis[name] = indexID
			}
		}
		gs.byName[g.name] = g
		gs.byRow[g.row] = g
	}
	return gs, nil
}

// partitionKey appends the canonical key of a partition (core.Partition's
// Key): the offset's unique key.
func partitionKey(dst []byte, names, values []string) []byte {
	return core.AppendPartitionKey(dst, names, values)
}

// parsePartition decodes a partition key, keeping its values' bytes.
func parsePartition(key string) (map[string]string, error) {
	p, err := core.ParsePartitionKey(key)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	return p, nil
}

// partitionOf returns the partition of g a map names, encoded, and an
// error when it does not name exactly g's partition attributes (or, for
// an id-partitioned group, a message id).
func partitionOf(g *groupConf, partition core.Partition) (map[string]string, []byte, error) {
	if g.byID() {
		id, ok := partition[core.IDKey]
		if len(partition) != 1 || !ok {
			return nil, nil, fmt.Errorf("sqlitestore: partition %v of %s is not {%q: message id}", partition, g.name, core.IDKey)
		}
		u, err := parseUUID(id)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlitestore: partition %v of %s is not {%q: message id}: %w", partition, g.name, core.IDKey, err)
		}
		p := map[string]string{core.IDKey: u}
		return p, partitionKey(nil, []string{core.IDKey}, []string{u}), nil
	}
	if len(partition) != len(g.partitionBy) {
		return nil, nil, fmt.Errorf("sqlitestore: partition %v of %s does not hold exactly its partition attributes %v", partition, g.name, g.partitionBy)
	}
	values := make([]string, len(g.partitionBy))
	for i, name := range g.partitionBy {
		v, ok := partition[name]
		if !ok {
			return nil, nil, fmt.Errorf("sqlitestore: partition %v of %s does not hold exactly its partition attributes %v", partition, g.name, g.partitionBy)
		}
		values[i] = v
	}
	p := make(map[string]string, len(partition))
	for k, v := range partition {
		p[k] = v
	}
	return p, partitionKey(nil, g.partitionBy, values), nil
}
