package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sourced-go/sourced/shell/driver"
)

// DefaultPrefix is the table prefix used when Options.Prefix is empty:
// tables are named sourced_messages, sourced_offsets, ...
const DefaultPrefix = "sourced"

var prefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkPrefix validates a table prefix (it is spliced into SQL identifiers,
// never a value, so it must be a plain identifier). PostgreSQL folds
// unquoted identifiers to lower case, so the prefix is used in lower case.
func checkPrefix(prefix string) (string, error) {
	if prefix == "" {
		return DefaultPrefix, nil
	}
	if !prefixPattern.MatchString(prefix) || len(prefix) > 40 {
		return "", fmt.Errorf("pgstore: table prefix %q must match %s and be at most 40 characters (letters, digits, underscores; not starting with a digit)", prefix, prefixPattern)
	}
	return strings.ToLower(prefix), nil
}

// names are the prefixed identifiers of one store's tables.
type names struct {
	prefix     string
	head       string
	messages   string
	scheduled  string
	migrations string
	groups     string
	offsets    string
	workers    string
	snapshots  string
	hooks      string
	// keys is the table of the messages' key pairs (one row per pair and
	// message, by key and position; migration 14).
	keys string
}

func namesFor(prefix string) names {
	return names{
		prefix:     prefix,
		head:       prefix + "_head",
		messages:   prefix + "_messages",
		scheduled:  prefix + "_scheduled_messages",
		migrations: prefix + "_schema_migrations",
		groups:     prefix + "_consumer_groups",
		offsets:    prefix + "_offsets",
		workers:    prefix + "_workers",
		snapshots:  prefix + "_snapshots",
		hooks:      prefix + "_group_hooks",
		keys:       prefix + "_message_keys",
	}
}

// tables are the store's tables, in the order Uninstall drops them.
func (n names) tables() []string {
	return []string{n.hooks, n.snapshots, n.offsets, n.workers, n.groups, n.scheduled, n.keys, n.messages, n.head, n.migrations}
}

// functions are the server-side functions the migrations install (each
// name has one signature).
func (n names) functions() []string {
	var fns []string
	for _, f := range []string{"refuse", "horizon", "advance", "advance_in", "raise", "fill", "lock", "settle", "last", "keys_kept"} {
		fns = append(fns, n.prefix+"_"+f)
	}
	return fns
}

// lockKey is the key of the store's advisory lock: one per prefix and
// schema (see the package doc, "Ordering and locking").
func lockKey(schema, prefix string) int64 {
	h := fnv.New64a()
	h.Write([]byte("sourced.pgstore:" + schema + "." + prefix))
	return int64(h.Sum64())
}

// Migration is one versioned schema script. Versions start at 1 and
// increase by one; a released script is never edited (a later version
// appends a new one).
type Migration struct {
	Version int
	SQL     string
}

var (
	// ErrSchemaNewer is driver.ErrSchemaNewer: Open found a schema version
	// this program does not know (a newer program migrated it); upgrade
	// the program. Nothing is written.
	ErrSchemaNewer = driver.ErrSchemaNewer
	// ErrSchemaOutdated is driver.ErrSchemaOutdated: Open found a schema
	// lacking migrations this program needs; run Install (or apply
	// Migrations with your tool).
	ErrSchemaOutdated = driver.ErrSchemaOutdated
)

// SchemaVersion is the version of the schema this code reads and writes:
// the Version of the last Migration.
const SchemaVersion = 14

// recordVersion ends every script: it records the script's version, so
// that a tool applying the scripts one by one records them too.
const recordVersion = `
CREATE TABLE IF NOT EXISTS {p}_schema_migrations (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL
);
INSERT INTO {p}_schema_migrations (version, applied_at) VALUES ({v}, now()) ON CONFLICT DO NOTHING;`

// migrations is the ordered list of schema scripts, written with {p} for
// the table prefix.
//
// Design notes (see the package doc):
//   - <p>_head is one row: the last position handed out (before version
//     8; from version 8 the stored read horizon, positions coming from
//     the sequence <p>_positions) and the configuration version of the
//     consumer groups, which writers of every process watch to reload the
//     group configuration.
//   - messages.keys holds the message's key pairs as "name\x1fvalue"
//     strings (attribute names cannot hold control characters), indexed
//     by GIN: the key-pair dictionary and link table of the SQLite schema
//     in one column, one index probe per condition. key_names lists the
//     attribute names the message carries, for conditional AND.
//   - payload and metadata are json (kept byte for byte; jsonb would
//     reorder keys and refuse \u0000).
//   - offsets carry their partition as a JSON array of [name, value]
//     pairs (unambiguous: no value can forge a separator) and as keys
//     (the same strings as messages.keys), a pending marker (next_position) indexed by a
//     partial index of the claimable offsets, and a replay mark.
var migrations = []Migration{
	{Version: 1, SQL: `CREATE TABLE IF NOT EXISTS {p}_head (
	id             integer PRIMARY KEY CHECK (id = 1),
	last_position  bigint  NOT NULL DEFAULT 0,
	config_version bigint  NOT NULL DEFAULT 0
);
INSERT INTO {p}_head (id) VALUES (1) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS {p}_messages (
	position        bigint      PRIMARY KEY,
	message_id      uuid        NOT NULL,
	message_type    text        NOT NULL,
	payload_version integer     NOT NULL DEFAULT 1,
	causation_id    uuid,
	correlation_id  uuid,
	payload         json        NOT NULL,
	metadata        json,
	created_at      timestamptz NOT NULL,
	keys            text[]      NOT NULL DEFAULT '{}',
	key_names       text[]      NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_messages_id ON {p}_messages (message_id);
CREATE INDEX IF NOT EXISTS idx_{p}_messages_type ON {p}_messages (message_type, position);
CREATE INDEX IF NOT EXISTS idx_{p}_messages_correlation ON {p}_messages (correlation_id);
CREATE INDEX IF NOT EXISTS idx_{p}_messages_keys ON {p}_messages USING gin (keys);

CREATE TABLE IF NOT EXISTS {p}_scheduled_messages (
	id              bigint      GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	message_id      uuid        NOT NULL,
	message_type    text        NOT NULL,
	payload_version integer     NOT NULL DEFAULT 1,
	causation_id    uuid,
	correlation_id  uuid,
	payload         json        NOT NULL,
	metadata        json,
	available_at    timestamptz NOT NULL,
	scheduled_at    timestamptz NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_{p}_scheduled_messages_id ON {p}_scheduled_messages (message_id);
CREATE INDEX IF NOT EXISTS idx_{p}_scheduled_messages_available ON {p}_scheduled_messages (available_at);

CREATE TABLE IF NOT EXISTS {p}_consumer_groups (
	id               bigint      GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	group_id         text        NOT NULL UNIQUE,
	label            text        NOT NULL,
	status           text        NOT NULL DEFAULT 'active',
	partition_by     text[]      NOT NULL DEFAULT '{}',
	exclusive        boolean     NOT NULL DEFAULT false,
	handled          text[]      NOT NULL DEFAULT '{}',
	highest_position bigint      NOT NULL DEFAULT 0,
	retry_at         timestamptz,
	failure          text        NOT NULL DEFAULT '{"retry_count":0}',
	created_at       timestamptz NOT NULL,
	updated_at       timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS {p}_offsets (
	id                bigint      GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	consumer_group_id bigint      NOT NULL REFERENCES {p}_consumer_groups (id) ON DELETE CASCADE,
	partition_key     text        NOT NULL,
	keys              text[]      NOT NULL,
	message_id        uuid,
	last_position     bigint      NOT NULL DEFAULT 0,
	next_position     bigint,
	replay_until      bigint      NOT NULL DEFAULT 0,
	claimed           boolean     NOT NULL DEFAULT false,
	claimed_at        timestamptz,
	claimed_by        text,
	drain_check       boolean     NOT NULL DEFAULT false,
	UNIQUE (consumer_group_id, partition_key)
);
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_pending ON {p}_offsets (consumer_group_id, last_position, id)
	WHERE next_position IS NOT NULL AND NOT claimed;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_next ON {p}_offsets (next_position) WHERE next_position IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_claimed ON {p}_offsets (claimed_by) WHERE claimed;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_drain ON {p}_offsets (consumer_group_id) WHERE drain_check;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_keys ON {p}_offsets USING gin (keys);
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_message ON {p}_offsets (message_id) WHERE message_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS {p}_workers (
	id        text        PRIMARY KEY,
	last_seen timestamptz NOT NULL
);`},
	// 2: parked partitions (the parking error strategy): an offset's
	// parked record is the failure that parked it, as JSON, and when; the
	// claim scan skips parked offsets.
	{Version: 2, SQL: `ALTER TABLE {p}_offsets ADD COLUMN IF NOT EXISTS parked text;
ALTER TABLE {p}_offsets ADD COLUMN IF NOT EXISTS parked_at timestamptz;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_parked ON {p}_offsets (consumer_group_id) WHERE parked IS NOT NULL;`},
	// 3: the GIN indexes of key pairs without their pending list
	// (fastupdate), which every lookup (a claim's fetch, a pending
	// marker, a guard, a partition read) otherwise scans whole until
	// autovacuum merges it: with it a partition's lookup cost
	// milliseconds after a few thousand appends.
	{Version: 3, SQL: `ALTER INDEX idx_{p}_messages_keys SET (fastupdate = off);
ALTER INDEX idx_{p}_offsets_keys SET (fastupdate = off);
SELECT gin_clean_pending_list('idx_{p}_messages_keys'::regclass);
SELECT gin_clean_pending_list('idx_{p}_offsets_keys'::regclass);`},
	// 4: deciders' snapshots (core.Snapshots, driver.SnapshotStore): one
	// row per group (its name), partition (core.Partition's Key) and
	// codec version, the state folded up to position. ResetGroup deletes
	// the group's rows.
	{Version: 4, SQL: `CREATE TABLE IF NOT EXISTS {p}_snapshots (
	group_id      text        NOT NULL,
	partition_key text        NOT NULL,
	state_version text        NOT NULL,
	position      bigint      NOT NULL,
	state         bytea       NOT NULL,
	saved_at      timestamptz NOT NULL,
	PRIMARY KEY (group_id, partition_key, state_version)
);`},
	// 5: the offsets' GIN index of key pairs holds keyed offsets only. A
	// queue's offsets (partitioned by message id, message_id set) are
	// never looked up by key pair, yet every update of one (its claim,
	// its ack, its drain mark: none of them HOT) inserted its keys into
	// the GIN index again.
	{Version: 5, SQL: `DROP INDEX IF EXISTS idx_{p}_offsets_keys;
CREATE INDEX IF NOT EXISTS idx_{p}_offsets_keyed ON {p}_offsets USING gin (keys) WITH (fastupdate = off) WHERE message_id IS NULL;`},
	// 6: {p}_refuse, which a standalone append's pipeline calls to refuse
	// it (a stale group configuration, a stored id, a guard conflict)
	// before it writes: an error raised on the server ends the pipeline
	// and rolls back its implicit transaction, so the append is one round
	// trip and the store's lock is never held while the server waits for
	// the client (see append.go).
	{Version: 6, SQL: `CREATE OR REPLACE FUNCTION {p}_refuse(reason text, detail text) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: ' || reason, DETAIL = detail;
END
$$;`},
	// 7: the lifecycle hooks of consumer groups registered with hooks
	// (driver.GroupSpec.Hooks): one row per such group, counting its
	// operator transitions (transitions) and how far their hooks ran
	// (hooked), the transitions still pending as JSON
	// (driver.GroupTransition, oldest first) and the claim on the oldest.
	// A group whose row has transitions > hooked claims no work.
	{Version: 7, SQL: `CREATE TABLE IF NOT EXISTS {p}_group_hooks (
	consumer_group_id bigint      PRIMARY KEY REFERENCES {p}_consumer_groups (id) ON DELETE CASCADE,
	transitions       bigint      NOT NULL DEFAULT 0,
	hooked            bigint      NOT NULL DEFAULT 0,
	pending           text        NOT NULL DEFAULT '[]',
	claimed_by        text,
	claimed_at        timestamptz
);`},
	// 8: appends that do not wait on each other (see the package doc,
	// "Ordering and locking"). Positions come from a sequence, drawn as
	// each message is inserted; <p>_head.last_position becomes the read
	// horizon: every position at or below it is committed (or filled by
	// a tombstone, a row whose type is empty, which no read returns), so readers
	// bounded by it never skip a position. <p>_horizon() is the horizon as
	// a statement's snapshot sees it (the stored one and the run of
	// positions after it), <p>_advance(upto) stores it after an append's
	// commit and returns it with the first visible position past a hole
	// and the types it newly covers, <p>_fill(positions) puts tombstones
	// in the holes of an abandoned append (rolled back, or its session
	// gone), waiting at most a few milliseconds on a position still being
	// written (its append is in flight: the hole is not abandoned), and
	// <p>_lock takes an append's locks (the store's, then its boundary
	// locks in the order given, see boundary.go; with try set it refuses,
	// "busy", when one is held) and checks the group configuration and
	// that no message id is stored, raising what <p>_refuse raises.
	{Version: 8, SQL: `CREATE SEQUENCE IF NOT EXISTS {p}_positions OWNED BY {p}_messages.position;
SELECT setval('{p}_positions', greatest(m.last, 1), m.last > 0) FROM (
	SELECT greatest((SELECT coalesce(max(position), 0) FROM {p}_messages), (SELECT last_position FROM {p}_head WHERE id = 1)) AS last) m;
ALTER TABLE {p}_messages ALTER COLUMN position SET DEFAULT nextval('{p}_positions');

CREATE OR REPLACE FUNCTION {p}_horizon() RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
	h bigint;
	n integer := 0;
BEGIN
	SELECT last_position INTO h FROM {p}_head WHERE id = 1;
	-- The run of positions after the stored horizon: probed one by one
	-- (it is short: each append advances the stored one), counted in one
	-- statement when long.
	LOOP
		IF n = 32 THEN
			RETURN h + (SELECT count(*) FROM (
				SELECT x.position - row_number() OVER (ORDER BY x.position) AS d
				FROM (SELECT position FROM {p}_messages WHERE position > h ORDER BY position LIMIT 100000) x) y
				WHERE y.d = h);
		END IF;
		EXIT WHEN NOT EXISTS (SELECT 1 FROM {p}_messages WHERE position = h + 1);
		h := h + 1;
		n := n + 1;
	END LOOP;
	RETURN h;
END
$$;

CREATE OR REPLACE FUNCTION {p}_advance(first bigint, upto bigint) RETURNS TABLE (horizon bigint, beyond bigint, types text[])
LANGUAGE plpgsql AS $$
DECLARE
	old bigint;
	h bigint;
BEGIN
	SELECT last_position INTO old FROM {p}_head WHERE id = 1;
	IF old >= upto THEN
		RETURN QUERY SELECT old, NULL::bigint, NULL::text[];
		RETURN;
	END IF;
	-- Every position up to the horizon this statement sees is settled,
	-- so it may be stored whatever other advances store meanwhile: the
	-- highest wins, and no advance waits for another but for the row's
	-- update itself. The horizon is derived state: losing its last
	-- advance in a crash only lowers it, so its commit need not wait for
	-- the disk.
	h := {p}_horizon();
	IF h > old THEN
		PERFORM set_config('synchronous_commit', 'off', true);
		UPDATE {p}_head SET last_position = h WHERE id = 1 AND last_position < h;
	END IF;
	-- The types newly covered that are not the caller's own (first to
	-- upto): another append's, which waited behind a hole.
	RETURN QUERY SELECT h,
		CASE WHEN h < upto THEN (SELECT min(position) FROM {p}_messages WHERE position > h) END,
		CASE WHEN old < first - 1 OR h > upto THEN (SELECT array_agg(DISTINCT message_type) FROM {p}_messages
			WHERE (position > old AND position < first OR position > upto AND position <= h) AND message_type <> '') END;
END
$$;

CREATE OR REPLACE FUNCTION {p}_advance_in(upto bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	old bigint;
	h bigint;
BEGIN
	-- Inside the appending transaction, just before its COMMIT: when every
	-- position up to its last is settled or its own, the stored horizon
	-- moves with the commit itself (readers see the old one until then),
	-- and the advance after the commit has nothing left to do. The head
	-- row is skipped when another transaction holds it.
	SELECT last_position INTO old FROM {p}_head WHERE id = 1 FOR UPDATE SKIP LOCKED;
	IF NOT FOUND OR old >= upto THEN
		RETURN 0;
	END IF;
	h := {p}_horizon();
	IF h >= upto THEN
		UPDATE {p}_head SET last_position = h WHERE id = 1;
		RETURN 1;
	END IF;
	RETURN 0;
END
$$;

CREATE OR REPLACE FUNCTION {p}_fill(positions bigint[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	pos bigint;
	n bigint := 0;
BEGIN
	PERFORM set_config('lock_timeout', '5ms', true);
	PERFORM set_config('synchronous_commit', 'off', true);
	FOR pos IN SELECT DISTINCT g FROM unnest(positions) g WHERE g > (SELECT last_position FROM {p}_head WHERE id = 1)
		AND NOT EXISTS (SELECT 1 FROM {p}_messages WHERE position = g) ORDER BY g LOOP
		BEGIN
			INSERT INTO {p}_messages (position, message_id, message_type, payload, created_at)
			VALUES (pos, gen_random_uuid(), '', 'null', now()) ON CONFLICT DO NOTHING;
			n := n + 1;
		EXCEPTION WHEN lock_not_available THEN
			RETURN n; -- written by an append still in flight
		END;
	END LOOP;
	RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION {p}_lock(store_key bigint, store_exclusive boolean, ns integer, keys integer[], exclusive boolean[], try boolean,
	config bigint, ids uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v bigint;
	dup text;
BEGIN
	IF store_key IS NOT NULL THEN
		IF store_exclusive THEN
			PERFORM pg_advisory_xact_lock(store_key);
		ELSE
			PERFORM pg_advisory_xact_lock_shared(store_key);
		END IF;
	END IF;
	FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
		IF try THEN
			IF NOT (CASE WHEN exclusive[i] THEN pg_try_advisory_xact_lock(ns, keys[i]) ELSE pg_try_advisory_xact_lock_shared(ns, keys[i]) END) THEN
				RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: busy';
			END IF;
		ELSIF exclusive[i] THEN
			PERFORM pg_advisory_xact_lock(ns, keys[i]);
		ELSE
			PERFORM pg_advisory_xact_lock_shared(ns, keys[i]);
		END IF;
	END LOOP;
	IF config IS NOT NULL THEN
		SELECT config_version INTO v FROM {p}_head WHERE id = 1;
		IF v <> config THEN
			RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: configuration', DETAIL = v::text;
		END IF;
	END IF;
	IF ids IS NOT NULL THEN
		SELECT d.message_id::text || E'\t' || d.place INTO dup FROM (
			SELECT message_id, 'in the log' AS place FROM {p}_messages WHERE message_id = ANY(ids)
			UNION ALL SELECT message_id, 'scheduled' FROM {p}_scheduled_messages WHERE message_id = ANY(ids) LIMIT 1) d;
		IF dup IS NOT NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: duplicate', DETAIL = dup;
		END IF;
	END IF;
	RETURN 0;
END
$$;`},
	{Version: 9, SQL: `CREATE OR REPLACE FUNCTION {p}_lock(store_key bigint, store_exclusive boolean, ns integer, keys integer[], exclusive boolean[], try boolean,
	config bigint, ids uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v bigint;
	dup text;
	mid uuid;
BEGIN
	IF store_key IS NOT NULL THEN
		IF store_exclusive THEN
			PERFORM pg_advisory_xact_lock(store_key);
		ELSE
			PERFORM pg_advisory_xact_lock_shared(store_key);
		END IF;
	END IF;
	IF try THEN
		FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
			IF NOT (CASE WHEN exclusive[i] THEN pg_try_advisory_xact_lock(ns, keys[i]) ELSE pg_try_advisory_xact_lock_shared(ns, keys[i]) END) THEN
				RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: busy';
			END IF;
		END LOOP;
	ELSIF keys IS NOT NULL THEN
		-- Every key in one statement, in the order given (a statement
		-- each cost an append more than its insert).
		PERFORM count(CASE WHEN e THEN pg_advisory_xact_lock(ns, k) ELSE pg_advisory_xact_lock_shared(ns, k) END)
		FROM unnest(keys, exclusive) AS u(k, e);
	END IF;
	IF config IS NOT NULL THEN
		SELECT config_version INTO v FROM {p}_head WHERE id = 1;
		IF v <> config THEN
			RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: configuration', DETAIL = v::text;
		END IF;
	END IF;
	IF ids IS NOT NULL THEN
		-- One equality probe of each unique index per id: a plan that
		-- cannot become a scan (version 8 matched ids = ANY(ids) with
		-- LIMIT 1, whose plan, cached while the table was small, read the
		-- whole log inside every append).
		FOREACH mid IN ARRAY ids LOOP
			SELECT CASE WHEN EXISTS (SELECT 1 FROM {p}_messages WHERE message_id = mid) THEN 'in the log'
				WHEN EXISTS (SELECT 1 FROM {p}_scheduled_messages WHERE message_id = mid) THEN 'scheduled' END INTO dup;
			IF dup IS NOT NULL THEN
				RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = 'sourced: append refused: duplicate', DETAIL = mid::text || E'\t' || dup;
			END IF;
		END LOOP;
	END IF;
	RETURN 0;
END
$$;

CREATE OR REPLACE FUNCTION {p}_settle(upto bigint, wait_ms integer) RETURNS TABLE (horizon bigint, beyond bigint, types text[])
LANGUAGE plpgsql AS $$
DECLARE
	pos bigint;
	got bigint;
	unwritten boolean;
	pauses integer := 0;
BEGIN
	-- After appends committed up to upto while the horizon stopped below
	-- them: every position between is settled here, in ascending order,
	-- and the horizon stored. A position with no visible row is probed by
	-- the insert of a tombstone, which yields to a row: one an append in
	-- flight has written makes the insert wait for that append's end (the
	-- unique index's wait: no polling) and then do nothing if it
	-- committed. A position no row holds is given a few milliseconds
	-- (the probe's insert is undone), as an append may have drawn it and
	-- not written it yet; then it gets the tombstone (an append that
	-- still writes it fails on the position and goes again). Waiting
	-- longer than wait_ms fails the call (lock_timeout); the caller tries
	-- again later. The tombstones commit with the horizon that covers
	-- them, in one transaction.
	PERFORM set_config('lock_timeout', wait_ms::text || 'ms', true);
	PERFORM set_config('synchronous_commit', 'off', true);
	pos := {p}_horizon() + 1;
	WHILE pos <= upto LOOP
		IF NOT EXISTS (SELECT 1 FROM {p}_messages WHERE position = pos) THEN
			unwritten := false;
			BEGIN
				got := NULL;
				INSERT INTO {p}_messages (position, message_id, message_type, payload, created_at)
				VALUES (pos, gen_random_uuid(), '', 'null', now()) ON CONFLICT DO NOTHING RETURNING position INTO got;
				IF got IS NOT NULL AND pauses < 10 THEN
					RAISE EXCEPTION USING ERRCODE = 'SR002'; -- undo the probe
				END IF;
			EXCEPTION WHEN SQLSTATE 'SR002' THEN
				unwritten := true;
			END;
			IF unwritten THEN
				pauses := pauses + 1;
				PERFORM pg_sleep(0.001);
				CONTINUE; -- the same position again
			END IF;
		END IF;
		pos := pos + 1;
	END LOOP;
	RETURN QUERY SELECT * FROM {p}_advance(9223372036854775807, upto);
END
$$;`},
	// 10: the newest message at or below the read horizon, <p>_last(),
	// found by plans that stay index probes however the log grows.
	// Version 9's statements wrote it as position <= <p>_horizon() ...
	// ORDER BY position DESC LIMIT 1, whose generic plan, cached by a
	// session while the log was small, was a sequential scan calling
	// <p>_horizon() once per row: 90 ms at 1,000 messages, inside the
	// exclusive lock of every router transaction.
	{Version: 10, SQL: `CREATE OR REPLACE FUNCTION {p}_last() RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
	h bigint := {p}_horizon();
	pos bigint;
BEGIN
	-- Probed down from the horizon by position, an equality probe of the
	-- primary key, past tombstones and deleted messages; a longer run of
	-- them (a queue that deletes what it acknowledges) is searched by a
	-- statement planned afresh, for the log's size at the time.
	FOR i IN 0 .. 7 LOOP
		EXIT WHEN h - i <= 0;
		SELECT position INTO pos FROM {p}_messages WHERE position = h - i AND message_type <> '';
		IF FOUND THEN
			RETURN pos;
		END IF;
	END LOOP;
	IF h <= 8 THEN
		RETURN 0;
	END IF;
	EXECUTE 'SELECT max(position) FROM {p}_messages WHERE position <= $1 AND message_type <> ''''' INTO pos USING h - 8;
	RETURN coalesce(pos, 0);
END
$$;`},
	// 11: one encoding of a partition in every store (core.Partition's
	// Key). Versions before wrote offsets' and snapshots' partition keys
	// with encoding/json, which escapes more than the key does (<, > and &
	// as \u003c..., \n, U+2028): such keys are written again, decoded and
	// re-encoded here, in their pairs' order (already the names' byte
	// order). No other key changes, and none collides: one encoding was
	// ever written.
	{Version: 11, SQL: `CREATE OR REPLACE FUNCTION {p}_key_text(s text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	out text := replace(replace(s, '\', '\\'), '"', '\"');
BEGIN
	FOR c IN 1 .. 31 LOOP
		IF strpos(out, chr(c)) > 0 THEN
			out := replace(out, chr(c), '\u00' || lpad(to_hex(c), 2, '0'));
		END IF;
	END LOOP;
	RETURN '"' || out || '"';
END
$$;
CREATE OR REPLACE FUNCTION {p}_partition_key(k text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT '[' || coalesce(string_agg('[' || {p}_key_text(e.v->>0) || ',' || {p}_key_text(e.v->>1) || ']', ',' ORDER BY e.n), '') || ']'
	FROM json_array_elements(k::json) WITH ORDINALITY AS e(v, n)
$$;
UPDATE {p}_offsets SET partition_key = {p}_partition_key(partition_key)
WHERE strpos(partition_key, '\') > 0 AND partition_key <> {p}_partition_key(partition_key);
UPDATE {p}_snapshots SET partition_key = {p}_partition_key(partition_key)
WHERE strpos(partition_key, '\') > 0 AND partition_key <> {p}_partition_key(partition_key);
DROP FUNCTION {p}_partition_key(text);
DROP FUNCTION {p}_key_text(text);`},
	// 12: the tombstones (rows with an empty type, at the positions of
	// appends that rolled back) indexed by position, for Housekeep, which
	// deletes those the read horizon passed an hour ago or more.
	{Version: 12, SQL: `CREATE INDEX IF NOT EXISTS idx_{p}_messages_tombstones ON {p}_messages (position) WHERE message_type = '';`},
	// 13: <p>_raise, which moves the stored horizon as far as its
	// statement sees settled positions go and returns it, in place of
	// <p>_advance_in (which said only whether it covered its append):
	// inside an append's transaction, or after its COMMIT in the same
	// round trip (see inlineAdvance), so that the appends of the process
	// it covers stop waiting.
	{Version: 13, SQL: `CREATE OR REPLACE FUNCTION {p}_raise(upto bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	old bigint;
	h bigint;
BEGIN
	-- In an appending transaction, just before its COMMIT (its own
	-- positions count as settled: the horizon moves with the commit
	-- itself), or in a transaction of its own just after it (the appends
	-- in flight beside it that committed first are covered too): the
	-- stored horizon raised to the run of settled positions after it,
	-- and returned; 0 when another transaction holds the head row.
	SELECT last_position INTO old FROM {p}_head WHERE id = 1 FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		RETURN 0;
	END IF;
	IF old >= upto THEN
		RETURN old;
	END IF;
	h := {p}_horizon();
	IF h > old THEN
		UPDATE {p}_head SET last_position = h WHERE id = 1;
	END IF;
	RETURN h;
END
$$;
DROP FUNCTION IF EXISTS {p}_advance_in(bigint);`},
	// 14: the messages' key pairs in a table of their own, one row per
	// pair and message, by (key, position), kept by triggers on the log's
	// every insert (COPY included), delete and change of keys, in place
	// of the GIN index of messages.keys. A lookup through the GIN index
	// yields every message a key pair ever had and bounds the positions
	// on the rows afterwards, so that a claim, a read after a position
	// and a guard's check cost O(the partition's history) (a claim 0.5
	// ms at 10 messages of history, 3.3 ms at 20,000); the btree walks
	// only the positions after the one asked for. Keys compare byte by
	// byte (COLLATE "C": lookups are by equality, and a database's
	// linguistic collation would compare every key through the locale).
	// Filled from the log here (a long log takes a while: it runs once),
	// and analysed only when that made it big enough (see keysStatsFloor).
	{Version: 14, SQL: `CREATE TABLE IF NOT EXISTS {p}_message_keys (
	key      text COLLATE "C" NOT NULL,
	position bigint           NOT NULL,
	PRIMARY KEY (key, position)
);
CREATE OR REPLACE FUNCTION {p}_keys_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	-- A statement's rows removed (deleted, or their old versions), then
	-- added (inserted, or their new versions): their key pairs follow.
	IF TG_OP IN ('DELETE', 'UPDATE') THEN
		DELETE FROM {p}_message_keys mk USING (SELECT k, r.position FROM removed r CROSS JOIN LATERAL unnest(r.keys) AS k) d
		WHERE mk.key = d.k AND mk.position = d.position;
	END IF;
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		INSERT INTO {p}_message_keys (key, position)
		SELECT k, a.position FROM added a CROSS JOIN LATERAL unnest(a.keys) AS k;
	END IF;
	RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {p}_keys_added ON {p}_messages;
CREATE TRIGGER {p}_keys_added AFTER INSERT ON {p}_messages
	REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION {p}_keys_kept();
DROP TRIGGER IF EXISTS {p}_keys_removed ON {p}_messages;
CREATE TRIGGER {p}_keys_removed AFTER DELETE ON {p}_messages
	REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION {p}_keys_kept();
DROP TRIGGER IF EXISTS {p}_keys_changed ON {p}_messages;
CREATE TRIGGER {p}_keys_changed AFTER UPDATE ON {p}_messages
	REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION {p}_keys_kept();
INSERT INTO {p}_message_keys (key, position)
SELECT k, m.position FROM {p}_messages m CROSS JOIN LATERAL unnest(m.keys) AS k
ON CONFLICT DO NOTHING;
DROP INDEX IF EXISTS idx_{p}_messages_keys;
DO $$
BEGIN
	-- Analysed only when big enough to be planned as big: see keysStatsFloor.
	IF pg_relation_size('{p}_message_keys') >= ` + strconv.Itoa(keysStatsFloor) + ` * current_setting('block_size')::bigint THEN
		ANALYZE {p}_message_keys;
	END IF;
END
$$;`},
}

// expand replaces {p} with the prefix in a schema template.
func expand(tmpl, prefix string) string { return strings.ReplaceAll(tmpl, "{p}", prefix) }

// Migrations returns the store's schema scripts for the given prefix, in
// version order (empty prefix: DefaultPrefix), for an app's own migration
// tool. Every script is idempotent and ends by recording its version in
// <prefix>_schema_migrations, as Install does, so Open can tell the
// version whoever applied them.
func Migrations(prefix string) ([]Migration, error) {
	p, err := checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Migration, len(migrations))
	for i, m := range migrations {
		out[i] = Migration{Version: m.Version, SQL: script(m, p)}
	}
	return out, nil
}

// script is a migration's SQL for a prefix, recording its version at the
// end.
func script(m Migration, prefix string) string {
	return expand(m.SQL+strings.ReplaceAll(recordVersion, "{v}", strconv.Itoa(m.Version)), prefix)
}

// migrate applies the migrations not yet recorded in the prefix's
// schema_migrations table, each in its own transaction under the store's
// advisory lock that re-checks the version, so several processes
// installing at once apply each script once. It returns how many it
// applied.
func (s *Store) migrate(ctx context.Context) (applied int, err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, s.wrap(ctx, "install", err)
	}
	defer c.Release()
	for _, m := range migrations {
		done, err := func() (bool, error) {
			tx, err := c.Begin(ctx)
			if err != nil {
				return false, err
			}
			defer tx.Rollback(context.Background())
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
				return false, err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL
)`, s.names.migrations)); err != nil {
				return false, err
			}
			var have int
			if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(max(version), 0) FROM %s`, s.names.migrations)).Scan(&have); err != nil {
				return false, err
			}
			if have >= m.Version {
				return false, nil
			}
			if _, err := tx.Exec(ctx, script(m, s.names.prefix), pgx.QueryExecModeSimpleProtocol); err != nil {
				return false, fmt.Errorf("migration %d: %w", m.Version, err)
			}
			return true, tx.Commit(ctx)
		}()
		if err != nil {
			return applied, s.wrap(ctx, "install", err)
		}
		if done {
			applied++
		}
	}
	return applied, nil
}

// checkVersion fails unless the schema is installed at this build's
// version.
func (s *Store) checkVersion(ctx context.Context) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.names.migrations).Scan(&exists); err != nil {
		return s.wrap(ctx, "open", err)
	}
	if !exists {
		return fmt.Errorf("%w: no table %s (prefix %q): run pgstore.Install or `sourced migrate`", errNotInstalled, s.names.migrations, s.names.prefix)
	}
	var have int
	if err := s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(max(version), 0) FROM %s`, s.names.migrations)).Scan(&have); err != nil {
		return s.wrap(ctx, "open", err)
	}
	switch want := SchemaVersion; {
	case have == 0:
		return fmt.Errorf("%w: prefix %q has no migration applied: run pgstore.Install", errNotInstalled, s.names.prefix)
	case have > want:
		return fmt.Errorf("%w: prefix %q is at version %d, this program knows up to %d", ErrSchemaNewer, s.names.prefix, have, want)
	case have < want:
		return fmt.Errorf("%w: prefix %q is at version %d, this program needs %d: run pgstore.Install or `sourced migrate`", ErrSchemaOutdated, s.names.prefix, have, want)
	}
	return nil
}

// Uninstall drops the store's tables and functions (its prefix only), for
// tests and for tools that remove a store. The store is unusable afterwards.
func (s *Store) Uninstall(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := s.uninstall(ctx)
		var pe *pgconn.PgError
		if err == nil || attempt == 4 || !errors.As(err, &pe) || pe.Code != "40P01" {
			return s.wrap(ctx, "uninstall", err)
		}
		// Deadlocked with a reader of this store's tables, which locked
		// one table before the drop reached it and waited for another:
		// the server chose the drop to fail; try again.
	}
}

// uninstall drops the tables (and the sequence they own) and the
// functions, under the store's exclusive lock, in one transaction.
func (s *Store) uninstall(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
		return err
	}
	for _, t := range s.names.tables() {
		if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+t+" CASCADE"); err != nil {
			return err
		}
	}
	for _, f := range s.names.functions() {
		if _, err := tx.Exec(ctx, "DROP FUNCTION IF EXISTS "+f); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
