package sqlitestore

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/sourced-go/sourced/shell/driver"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// DefaultPrefix is the table prefix used when Options.Prefix is empty:
// tables are named sourced_messages, sourced_key_pairs, ...
const DefaultPrefix = "sourced"

var prefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkPrefix validates a table prefix (it is spliced into SQL identifiers,
// never a value, so it must be a plain identifier).
func checkPrefix(prefix string) (string, error) {
	if prefix == "" {
		return DefaultPrefix, nil
	}
	if !prefixPattern.MatchString(prefix) {
		return "", fmt.Errorf("sqlitestore: table prefix %q must match %s (letters, digits, underscores; not starting with a digit)", prefix, prefixPattern)
	}
	return prefix, nil
}

// names are the prefixed identifiers of one store's tables.
type names struct {
	prefix          string
	messages        string
	keyPairs        string
	messageKeyPairs string
	scheduled       string
	migrations      string
	groups          string
	offsets         string
	offsetKeyPairs  string
	workers         string
	orphans         string
	counters        string
	parked          string
	snapshots       string
	hooks           string
}

func namesFor(prefix string) names {
	return names{
		prefix:          prefix,
		messages:        prefix + "_messages",
		keyPairs:        prefix + "_key_pairs",
		messageKeyPairs: prefix + "_message_key_pairs",
		scheduled:       prefix + "_scheduled_messages",
		migrations:      prefix + "_schema_migrations",
		groups:          prefix + "_consumer_groups",
		offsets:         prefix + "_offsets",
		offsetKeyPairs:  prefix + "_offset_key_pairs",
		workers:         prefix + "_workers",
		orphans:         prefix + "_key_pair_candidates",
		counters:        prefix + "_counters",
		parked:          prefix + "_parked_partitions",
		snapshots:       prefix + "_snapshots",
		hooks:           prefix + "_group_hooks",
	}
}

// requiredTables are the tables Open checks for: the store is installed
// when all of them exist. A migration that adds tables adds them here.
func (n names) requiredTables() []string {
	return []string{n.messages, n.keyPairs, n.messageKeyPairs, n.scheduled, n.groups, n.offsets, n.offsetKeyPairs, n.workers, n.orphans, n.counters, n.parked, n.snapshots, n.hooks}
}

// expand replaces {p} with the prefix in a schema template.
func expand(tmpl, prefix string) string { return strings.ReplaceAll(tmpl, "{p}", prefix) }

// migrations is the ordered list of schema scripts, written with {p} for the
// table prefix. Each script is idempotent (IF NOT EXISTS everywhere), so it
// can be re-run over a schema an app created from Schema by hand, and a
// later version appends scripts (2: consumer groups, offsets,
// offset_key_pairs, workers and the claim-latch triggers) without touching
// the ones already applied. Never edit a released script: append a new one.
//
// Design notes (the original's schema, adapted; measured where it says
// so):
//   - messages.position is INTEGER PRIMARY KEY AUTOINCREMENT: the rowid is
//     the global order and AUTOINCREMENT guarantees a position is never
//     reused once messages can be deleted (delete-on-ack queues).
//   - payload_version records the codec version the payload was written
//     with, so reads can upcast old payloads.
//   - created_at / available_at / scheduled_at are UTC, fixed width, with
//     microseconds ("2006-01-02T15:04:05.000000Z"), so comparing them as
//     text is comparing them as times (text with zone offsets and whole
//     seconds would not be).
//   - key_pairs is a dictionary of (attribute name, canonical value); each
//     message is linked to every key pair of its payload in
//     message_key_pairs, a WITHOUT ROWID table clustered on (position,
//     key pair) with a (key pair, position) index: the latter drives every
//     condition and partition read in position order, the former answers
//     "which key pairs does this message carry" for the conditional-AND
//     check. key_pairs.id is AUTOINCREMENT so an id is never reused after a
//     key pair is pruned: a stale cached id then fails the foreign key
//     instead of silently linking the wrong pair.
//   - scheduled_messages holds future-dated messages as columns (not one
//     JSON blob), the same as messages, with available_at (when due, the
//     message's created_at) and scheduled_at (when it was appended).
//   - Consumer groups (migration 2, see groups.go): offsets carry their
//     partition as a JSON array of [name, value] pairs (unambiguous: no
//     value can forge a separator; the readable form is
//     shell.PartitionKey), a pending marker
//     (next_position) indexed by a partial index of the claimable offsets,
//     and a replay mark; times are the same fixed-width UTC text. The
//     latch triggers are created with the tables, so they hold for every
//     writer. <prefix>_counters lets other processes' writers notice a
//     changed group configuration or pruned key pairs.
//   - Message ids are unique in each table by a unique index, and across
//     the log and the schedule by the append, which probes the other table
//     inside its write transaction. (Triggers would do it in SQL, but any
//     trigger that can RAISE makes SQLite open a statement journal for
//     every INSERT inside a transaction: measured 3x slower appends.)
var migrations = []string{
	// 1: the message log, its key-pair index and the schedule.
	`CREATE TABLE IF NOT EXISTS {p}_messages (
	position        INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id      TEXT    NOT NULL,
	message_type    TEXT    NOT NULL,
	payload_version INTEGER NOT NULL DEFAULT 1,
	causation_id    TEXT,
	correlation_id  TEXT,
	payload         TEXT    NOT NULL DEFAULT '{}',
	metadata        TEXT,
	created_at      TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_messages_id ON {p}_messages (message_id);
CREATE INDEX IF NOT EXISTS idx_{p}_messages_type ON {p}_messages (message_type);
CREATE INDEX IF NOT EXISTS idx_{p}_messages_correlation ON {p}_messages (correlation_id);

CREATE TABLE IF NOT EXISTS {p}_key_pairs (
	id    INTEGER PRIMARY KEY AUTOINCREMENT,
	name  TEXT NOT NULL,
	value TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_key_pairs_nv ON {p}_key_pairs (name, value);

CREATE TABLE IF NOT EXISTS {p}_message_key_pairs (
	message_position INTEGER NOT NULL REFERENCES {p}_messages (position) ON DELETE CASCADE,
	key_pair_id      INTEGER NOT NULL REFERENCES {p}_key_pairs (id),
	PRIMARY KEY (message_position, key_pair_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_{p}_message_key_pairs_key ON {p}_message_key_pairs (key_pair_id, message_position);

CREATE TABLE IF NOT EXISTS {p}_scheduled_messages (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id      TEXT    NOT NULL,
	message_type    TEXT    NOT NULL,
	payload_version INTEGER NOT NULL DEFAULT 1,
	causation_id    TEXT,
	correlation_id  TEXT,
	payload         TEXT    NOT NULL DEFAULT '{}',
	metadata        TEXT,
	available_at    TEXT    NOT NULL,
	scheduled_at    TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_scheduled_messages_id ON {p}_scheduled_messages (message_id);
CREATE INDEX IF NOT EXISTS idx_{p}_scheduled_messages_available ON {p}_scheduled_messages (available_at);`,

	// 2: consumer groups, their offsets, worker heartbeats and the
	// claim-scan latch triggers (see groups.go for the design).
	`CREATE TABLE IF NOT EXISTS {p}_consumer_groups (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	group_id         TEXT    NOT NULL,
	label            TEXT    NOT NULL,
	status           TEXT    NOT NULL DEFAULT 'active',
	partition_by     TEXT    NOT NULL DEFAULT '[]',
	exclusive        INTEGER NOT NULL DEFAULT 0,
	handled          TEXT    NOT NULL DEFAULT '[]',
	highest_position INTEGER NOT NULL DEFAULT 0,
	scan_version     INTEGER NOT NULL DEFAULT 0,
	retry_at         TEXT,
	failure          TEXT    NOT NULL DEFAULT '{"retry_count":0}',
	config_version   INTEGER NOT NULL DEFAULT 0,
	created_at       TEXT    NOT NULL,
	updated_at       TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_consumer_groups_id ON {p}_consumer_groups (group_id);

CREATE TABLE IF NOT EXISTS {p}_offsets (
	id                INTEGER PRIMARY KEY AUTOINCREMENT,
	consumer_group_id INTEGER NOT NULL REFERENCES {p}_consumer_groups (id) ON DELETE CASCADE,
	partition_key     TEXT    NOT NULL,
	last_position     INTEGER NOT NULL DEFAULT 0,
	next_position     INTEGER,
	replay_until      INTEGER NOT NULL DEFAULT 0,
	claimed           INTEGER NOT NULL DEFAULT 0,
	claimed_at        TEXT,
	claimed_by        TEXT,
	drain_check       INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_offsets_partition ON {p}_offsets (consumer_group_id, partition_key);
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_pending ON {p}_offsets (consumer_group_id, last_position)
	WHERE next_position IS NOT NULL AND claimed = 0;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_next ON {p}_offsets (next_position) WHERE next_position IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_claimed ON {p}_offsets (claimed_by) WHERE claimed = 1;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_drain ON {p}_offsets (consumer_group_id) WHERE drain_check = 1;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_group ON {p}_offsets (consumer_group_id);

CREATE TABLE IF NOT EXISTS {p}_offset_key_pairs (
	offset_id   INTEGER NOT NULL REFERENCES {p}_offsets (id) ON DELETE CASCADE,
	key_pair_id INTEGER NOT NULL REFERENCES {p}_key_pairs (id),
	PRIMARY KEY (offset_id, key_pair_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_{p}_offset_key_pairs_key ON {p}_offset_key_pairs (key_pair_id, offset_id);

CREATE TABLE IF NOT EXISTS {p}_workers (
	id        TEXT NOT NULL PRIMARY KEY,
	last_seen TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS {p}_key_pair_candidates (
	key_pair_id INTEGER PRIMARY KEY
);

CREATE TABLE IF NOT EXISTS {p}_counters (
	name  TEXT    NOT NULL PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS trg_{p}_dirty_on_message AFTER INSERT ON {p}_messages
BEGIN
	UPDATE {p}_consumer_groups SET scan_version = 1 - scan_version WHERE scan_version < 0;
END;

CREATE TRIGGER IF NOT EXISTS trg_{p}_dirty_on_release AFTER UPDATE OF claimed ON {p}_offsets
WHEN old.claimed = 1 AND new.claimed = 0
BEGIN
	UPDATE {p}_consumer_groups SET scan_version = 1 - scan_version
	WHERE id = new.consumer_group_id AND scan_version < 0;
END;`,

	// 3: parked partitions (the parking error strategy): one row per
	// parked offset, with the failure that parked it. The claim scan skips
	// the offsets that have one.
	`CREATE TABLE IF NOT EXISTS {p}_parked_partitions (
	offset_id         INTEGER PRIMARY KEY REFERENCES {p}_offsets (id) ON DELETE CASCADE,
	consumer_group_id INTEGER NOT NULL REFERENCES {p}_consumer_groups (id) ON DELETE CASCADE,
	failure           TEXT    NOT NULL,
	parked_at         TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_{p}_parked_partitions_group ON {p}_parked_partitions (consumer_group_id);`,

	// 4: deciders' snapshots (core.Snapshots, driver.SnapshotStore): one
	// row per group, partition (shell.PartitionKey) and codec version,
	// the state folded up to position. A rowid table (states may be
	// large) with the key as a unique index; group_id is the group's name,
	// not a row of consumer_groups, so a snapshot outlives nothing it
	// needs. ResetGroup deletes the group's rows.
	`CREATE TABLE IF NOT EXISTS {p}_snapshots (
	id            INTEGER PRIMARY KEY,
	group_id      TEXT    NOT NULL,
	partition_key TEXT    NOT NULL,
	state_version TEXT    NOT NULL,
	position      INTEGER NOT NULL,
	state         BLOB    NOT NULL,
	saved_at      TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_snapshots_key ON {p}_snapshots (group_id, partition_key, state_version);`,

	// 5: the lifecycle hooks of consumer groups registered with hooks
	// (driver.GroupSpec.Hooks): one row per such group, counting its
	// operator transitions (transitions) and how far their hooks ran
	// (hooked), the transitions still pending as JSON (driver.GroupTransition,
	// oldest first) and the claim on the oldest (claimed_by, claimed_at).
	// A group whose row has transitions > hooked claims no work.
	`CREATE TABLE IF NOT EXISTS {p}_group_hooks (
	consumer_group_id INTEGER PRIMARY KEY REFERENCES {p}_consumer_groups (id) ON DELETE CASCADE,
	transitions       INTEGER NOT NULL DEFAULT 0,
	hooked            INTEGER NOT NULL DEFAULT 0,
	pending           TEXT    NOT NULL DEFAULT '[]',
	claimed_by        TEXT,
	claimed_at        TEXT
);`,
}

// Migration is one versioned step of the store's schema, for an app's own
// migration tool (goose, golang-migrate, sqlitemigration...): apply them
// in Version order, each once, in a transaction. Every script is
// idempotent (IF NOT EXISTS throughout) and ends by recording its version
// in <prefix>_schema_migrations, as Install does, so that Open can tell
// the version of the schema whoever applied it.
type Migration struct {
	// Version numbers the step: 1, 2, ... in order.
	Version int
	// SQL is the script, with the prefix spliced into every name.
	SQL string
}

// SchemaVersion is the version of the schema this code reads and writes:
// the Version of the last Migration.
const SchemaVersion = 5

// The version table and the statement that records a version, around
// every script (so that a tool applying the scripts one by one records
// them too).
const (
	versionTable = `CREATE TABLE IF NOT EXISTS {p}_schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
);
`
	recordVersion = `
INSERT OR IGNORE INTO {p}_schema_migrations (version, applied_at)
VALUES (%d, strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'));`
)

// Migrations returns the store's schema as versioned steps for the given
// prefix, in order (empty prefix: DefaultPrefix); see Migration. Apps that
// manage their database with a migration tool apply these as their first
// entries. Set journal_mode=WAL once, outside a transaction: it is a
// property of the file that a migration cannot set. (sqlitemigration
// tracks its migrations in PRAGMA user_version: use it only when one
// migration list owns the file.)
func Migrations(prefix string) ([]Migration, error) {
	p, err := checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Migration, len(migrations))
	for i, m := range migrations {
		out[i] = Migration{Version: i + 1, SQL: expand(versionTable+m+fmt.Sprintf(recordVersion, i+1), p)}
	}
	return out, nil
}

// Schema returns the whole schema for the given prefix as one SQL script
// (the concatenation of Migrations, each headed by a comment naming its
// version), for an app's own migration tool. It panics if prefix is not a
// valid identifier (see Options.Prefix): the prefix is a constant of the
// program.
func Schema(prefix string) string {
	ms, err := Migrations(prefix)
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	b.WriteString("-- Sourced message store schema (prefix ")
	b.WriteString(prefixOrDefault(prefix))
	b.WriteString(").\n-- Run once, outside a transaction: PRAGMA journal_mode = WAL;\n\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "-- migration %d\n%s\n\n", m.Version, m.SQL)
	}
	return b.String()
}

func prefixOrDefault(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	return p
}

// migrate applies every migration, each in its own BEGIN IMMEDIATE
// transaction: the ones not yet recorded in the prefix's own
// schema_migrations table, and the recorded ones again, which restores
// any table, index or trigger of theirs that is missing (every script is
// idempotent). A file recording a newer version than this code knows is
// refused (ErrSchemaNewer) before anything is written; two processes
// installing at once are serialised by the write lock. PRAGMA
// user_version is deliberately not used: it is one number per file, and
// two stores with different prefixes (or the app's own migrations) share
// the file. applied counts the versions newly recorded.
func migrate(ctx context.Context, conn *sqlite.Conn, n names, path string) (applied int, err error) {
	defer conn.SetInterrupt(conn.SetInterrupt(ctx.Done()))
	ms, err := Migrations(n.prefix)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		fresh, err := func() (fresh bool, err error) {
			end, err := sqlitex.ImmediateTransaction(conn)
			if err != nil {
				return false, err
			}
			defer end(&err)
			have, err := schemaVersion(conn, n)
			if err != nil {
				return false, err
			}
			if have > SchemaVersion {
				return false, newerError(path, n, have)
			}
			if err := sqlitex.ExecuteScript(conn, m.SQL, nil); err != nil {
				if sqlite.ErrCode(err).ToPrimary() == sqlite.ResultConstraint {
					return false, fmt.Errorf("migration %d: an index cannot be restored because the table holds rows that violate it (remove the duplicates, then install again): %w", m.Version, err)
				}
				return false, fmt.Errorf("migration %d: %w", m.Version, err)
			}
			return have < int64(m.Version), nil
		}()
		if err != nil {
			return applied, fmt.Errorf("sqlitestore: install: %w", err)
		}
		if fresh {
			applied++
		}
	}
	return applied, nil
}

// schemaVersion returns the highest version recorded for the prefix, 0
// when none is (or the version table does not exist), -1 when the table
// does not exist.
func schemaVersion(conn *sqlite.Conn, n names) (int64, error) {
	exists, err := queryInt(conn, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, n.migrations)
	if err != nil || exists == 0 {
		return -1, err
	}
	return queryInt(conn, fmt.Sprintf(`SELECT coalesce(max(version), 0) FROM %s`, n.migrations))
}

func newerError(path string, n names, have int64) error {
	return fmt.Errorf("%w: %s records schema version %d for prefix %q, and this program knows versions up to %d: a newer program wrote it; upgrade this one (nothing was written)", driver.ErrSchemaNewer, path, have, n.prefix, SchemaVersion)
}

// objectPattern finds the name of every table, index and trigger a
// migration script creates.
var objectPattern = regexp.MustCompile(`(?i)CREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX|TRIGGER)\s+IF\s+NOT\s+EXISTS\s+(\w+)`)

// schemaObject is a table, index or trigger of the schema.
type schemaObject struct{ kind, name string }

// schemaObjects returns every object the migrations create, in order.
func schemaObjects(n names) []schemaObject {
	var out []schemaObject
	for _, m := range migrations {
		for _, sub := range objectPattern.FindAllStringSubmatch(expand(m, n.prefix), -1) {
			out = append(out, schemaObject{strings.ToLower(sub[1]), sub[2]})
		}
	}
	return out
}

// checkSchema is Open's check of the file: the prefix's schema must be
// exactly this code's version, with every table, index and trigger.
func checkSchema(conn *sqlite.Conn, n names, path string) error {
	have, err := schemaVersion(conn, n)
	if err != nil {
		return err
	}
	missing, err := missingObjects(conn, n)
	if err != nil {
		return err
	}
	var tables []string
	for _, o := range missing {
		if o.kind == "table" {
			tables = append(tables, o.name)
		}
	}
	install := fmt.Sprintf("run sqlitestore.Install or 'sourced -db %s -prefix %s migrate'", path, n.prefix)
	switch {
	case have > SchemaVersion:
		return newerError(path, n, have)
	case have <= 0 && len(tables) == len(n.requiredTables()):
		return fmt.Errorf("%w: %s has no table %v (prefix %q): %s, or apply sqlitestore.Migrations", driver.ErrNotInstalled, path, tables, n.prefix, install)
	case have < SchemaVersion:
		return fmt.Errorf("%w: %s records schema version %d for prefix %q, and this program needs version %d: %s, or apply sqlitestore.Migrations %d to %d with your migration tool", driver.ErrSchemaOutdated, path, max(have, 0), n.prefix, SchemaVersion, install, max(have, 0)+1, SchemaVersion)
	case len(missing) > 0:
		names := make([]string, len(missing))
		for i, o := range missing {
			names[i] = o.kind + " " + o.name
		}
		return fmt.Errorf("%w: %s lacks %s of schema version %d (prefix %q), dropped by hand: %s to restore them", driver.ErrNotInstalled, path, strings.Join(names, ", "), SchemaVersion, n.prefix, install)
	}
	return nil
}

// missingObjects returns the schema's objects the file lacks.
func missingObjects(conn *sqlite.Conn, n names) ([]schemaObject, error) {
	have := map[schemaObject]bool{}
	err := sqlitex.Execute(conn, `SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'index', 'trigger')`, &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error {
			have[schemaObject{stmt.ColumnText(0), stmt.ColumnText(1)}] = true
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	var missing []schemaObject
	for _, o := range schemaObjects(n) {
		if !have[o] {
			missing = append(missing, o)
		}
	}
	return missing, nil
}
