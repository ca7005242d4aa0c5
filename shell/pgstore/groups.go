package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var (
	_ driver.Groups  = (*Store)(nil)
	_ driver.GroupTx = (*tx)(nil)
)

// groupQueries is the SQL of the consumer-group side.
type groupQueries struct {
	loadGroups, bumpConfig                 string
	insertGroup, updateConfig, updateLabel string
	groupRow, groupNames, probe            string
	groupRowLocked                         string
	ensureOffset                           string
	remark, held, release, moveTo          string
	remarkAt, raiseMoved                   string
	remarkAtLast, raiseMovedLast           string
	pastNewest                             string
	claimMany, claimQueue, ackMany         string
	// claimManyOwn and claimQueueOwn claim up to the horizon as the
	// statement sees it (the transaction's own appends in it): for a
	// transaction that appended.
	claimManyOwn, claimQueueOwn              string
	ack                                      string
	raiseHighest, recover, setStatus         string
	foldGroup, foldDrained                   string
	resetOffsets, clearPending, groupOffsets string
	discoverScan, setPending                 string
	deleteMessages, remarkDeleted            string
	drainIDs, drainKeyed, clearDrain         string
	releaseStale, heartbeat                  string
	oldClaims, releaseOld, removeWorkers     string
	renew                                    string
	groupInfo, countOffsets, readOffsets     string
	park, parked, parkedOne, unpark          string
	resetOffset                              string
	hooksOn, hooksOff, hooksPending, hookRow string
	hookRecord, hookClaim, hookFinish        string
}

func newGroupQueries(n names) groupQueries {
	q := newGroupQueriesAt(n)
	stored := fmt.Sprintf(`(SELECT last_position FROM %s WHERE id = 1)`, n.head)
	q.claimManyOwn = strings.ReplaceAll(q.claimMany, stored, n.prefix+"_horizon()")
	q.claimQueueOwn = strings.ReplaceAll(q.claimQueue, stored, n.prefix+"_horizon()")
	return q
}

// markWindow is how many messages after an offset's position the
// recomputation of its pending marker reads in position order before it
// looks through the table of key pairs (windowAfter; see next in
// newGroupQueriesAt). Fewer than the guard's: it runs at every
// acknowledgement, and an offset acknowledged is near the log's end.
const markWindow = 64

func newGroupQueriesAt(n names) groupQueries {
	f := func(format string, args ...any) string { return fmt.Sprintf(format, args...) }
	// The pending marker of offset o: the first message after its
	// position that its group handles, found by its id (a queue's), or
	// for a keyed partition in the next markWindow messages in position
	// order and, only when none of them is one and there are that many,
	// through the table of key pairs (which reads the partition's
	// messages after the offset's position).
	next := f(`CASE WHEN o.message_id IS NOT NULL
	THEN (SELECT m.position FROM %[1]s m WHERE m.message_id = o.message_id AND m.position > o.last_position AND (m.message_type || '') = ANY(g.handled))
	ELSE (SELECT CASE WHEN x.found IS NOT NULL OR x.n < %[2]d THEN x.found
		ELSE (SELECT min(m.position + 0) FROM %[1]s m WHERE %[4]s AND m.keys @> o.keys AND (m.message_type || '') = ANY(g.handled)) END
		FROM (SELECT min(w.position) FILTER (WHERE w.keys @> o.keys AND (w.message_type || '') = ANY(g.handled)) AS found, count(*) AS n
			FROM (%[3]s) w) x) END`, n.messages, markWindow, windowAfter(n.messages, "o.last_position", markWindow),
		keyRange{table: n.keys, after: "o.last_position"}.in("o.keys", 0))
	// The pending marker of an offset being acknowledged, from the
	// position it moves to (r.pos, see ackMany).
	nextAfterAck := strings.ReplaceAll(next, "o.last_position", "greatest(o.last_position, r.pos)")
	// Appends run beside claims and acknowledgements, each waking the
	// offsets it writes to with least(marker, its position) (see
	// appendQueries.upsert). A marker recomputed from a statement's
	// snapshot would lose the wake-up of an append that committed after
	// the snapshot but before the recomputing statement locked the row
	// (PostgreSQL then re-evaluates the statement on the new row version,
	// but its subqueries keep the old snapshot): so a recomputation
	// applies only when the row is the version the snapshot saw
	// (unchanged), and an acknowledgement of a row changed meanwhile keeps
	// the marker it finds past its position, or points just after it (the
	// next claim looks and repairs it).
	unchanged := f(`o.xmin = (SELECT o2.xmin FROM %s o2 WHERE o2.id = o.id)`, n.offsets)
	remarkAt := func(pos string) string {
		return f(`UPDATE %s o SET next_position = %s FROM %s g WHERE g.id = o.consumer_group_id AND o.consumer_group_id = $1 AND o.partition_key = $2 AND o.last_position = %s AND %s`, n.offsets, next, n.groups, pos, unchanged)
	}
	raiseMoved := func(pos string) string {
		return f(`UPDATE %[1]s SET highest_position = greatest(highest_position, %[3]s) WHERE id = $1
	AND EXISTS (SELECT 1 FROM %[2]s WHERE consumer_group_id = $1 AND partition_key = $2 AND last_position >= %[3]s)`, n.groups, n.offsets, pos)
	}
	ackNext := f(`CASE WHEN %[1]s THEN %[2]s ELSE least(%[2]s,
	CASE WHEN o.next_position > greatest(o.last_position, r.pos) THEN o.next_position ELSE greatest(o.last_position, r.pos) + 1 END) END`, unchanged, nextAfterAck)
	// horizon is the stored read horizon: claims fetch no message past
	// it, and deletes (of claimed messages) so never open a hole above it.
	horizon := f(`(SELECT last_position FROM %s WHERE id = 1)`, n.head)
	return groupQueries{
		loadGroups:   f(`SELECT id, group_id, partition_by, exclusive, handled FROM %s ORDER BY group_id`, n.groups),
		bumpConfig:   f(`UPDATE %s SET config_version = config_version + 1 WHERE id = 1 RETURNING config_version`, n.head),
		insertGroup:  f(`INSERT INTO %s (group_id, label, partition_by, exclusive, handled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`, n.groups),
		updateConfig: f(`UPDATE %s SET label = $2, partition_by = $3, exclusive = $4, handled = $5, updated_at = $6 WHERE id = $1`, n.groups),
		updateLabel:  f(`UPDATE %s SET label = $2, updated_at = $3 WHERE id = $1 AND label <> $2`, n.groups),
		groupRow:     f(`SELECT id, status, retry_at, failure, handled, partition_by, exclusive FROM %s WHERE group_id = $1`, n.groups),
		// A status change reads the row it writes locked, so that two
		// changes at once (two workers failing) each see the other's,
		// whatever other lock the transaction holds.
		groupRowLocked: f(`SELECT id, status, retry_at, failure, handled, partition_by, exclusive FROM %s WHERE group_id = $1 FOR UPDATE`, n.groups),
		groupNames:     f(`SELECT group_id FROM %s ORDER BY group_id`, n.groups),
		// The probe: the status, and whether the group has claimable
		// offsets and no operator transition waiting for its lifecycle
		// hook (see ClaimTransition).
		probe: f(`SELECT g.status, g.retry_at, EXISTS (SELECT 1 FROM %s o WHERE o.consumer_group_id = g.id AND o.next_position IS NOT NULL AND NOT o.claimed AND o.parked IS NULL AND o.next_position <= %s)
	AND NOT EXISTS (SELECT 1 FROM %s h WHERE h.consumer_group_id = g.id AND h.transitions > h.hooked)
FROM %s g WHERE g.group_id = $1`, n.offsets, horizon, n.hooks, n.groups),
		hooksOn:      f(`INSERT INTO %s (consumer_group_id) VALUES ($1) ON CONFLICT DO NOTHING`, n.hooks),
		hooksOff:     f(`DELETE FROM %s WHERE consumer_group_id = $1`, n.hooks),
		hooksPending: f(`SELECT coalesce(h.transitions > h.hooked, false) FROM %s g LEFT JOIN %s h ON h.consumer_group_id = g.id WHERE g.group_id = $1`, n.groups, n.hooks),
		hookRow:      f(`SELECT transitions, hooked, pending, coalesce(claimed_by, ''), claimed_at FROM %s WHERE consumer_group_id = $1 FOR UPDATE`, n.hooks),
		hookRecord:   f(`UPDATE %s SET transitions = $2, pending = $3 WHERE consumer_group_id = $1`, n.hooks),
		hookClaim:    f(`UPDATE %s SET claimed_by = $2, claimed_at = $3 WHERE consumer_group_id = $1`, n.hooks),
		hookFinish:   f(`UPDATE %s SET hooked = $2, pending = $3, claimed_by = NULL, claimed_at = NULL WHERE consumer_group_id = $1`, n.hooks),
		ensureOffset: f(`INSERT INTO %s (consumer_group_id, partition_key, keys, message_id, drain_check) VALUES ($1, $2, $3, $4, true)
ON CONFLICT (consumer_group_id, partition_key) DO NOTHING`, n.offsets),
		ack: f(`WITH a AS (
	UPDATE %[1]s o SET last_position = greatest(o.last_position, $3), claimed = false, claimed_at = NULL, claimed_by = NULL
	FROM %[2]s g WHERE o.id = $1 AND g.id = o.consumer_group_id AND g.group_id = $2 AND o.claimed AND o.claimed_by = $4
	RETURNING o.consumer_group_id)
SELECT g.id, g.status, g.failure FROM a JOIN %[2]s g ON g.id = a.consumer_group_id`, n.offsets, n.groups),
		// claimMany picks up to $4 claimable offsets of group $1 (the
		// furthest behind first, skipping those other transactions lock;
		// {partitions}, a bound of $4 written in for the planner, see
		// claimBound),
		// fetches up to {batch} pending messages of each (a queue's one
		// message by its id; a keyed partition's under conditional AND),
		// claims those with messages for worker $3 at $2, and repairs the
		// pending marker of those without (a marker left on a deleted
		// message): one statement, one snapshot. A stopped or failed
		// group, or a retrying one before its retry time, has nothing to
		// claim.
		claimMany: f(`WITH hz AS (SELECT %[7]s AS h),
g AS (SELECT id, handled FROM %[2]s gg
	WHERE group_id = $1 AND (status = 'active' OR status = 'retrying' AND coalesce(retry_at <= $2, true))
		AND NOT EXISTS (SELECT 1 FROM %[6]s h WHERE h.consumer_group_id = gg.id AND h.transitions > h.hooked)),
p AS (SELECT * FROM (SELECT o.id, o.partition_key, o.keys, o.message_id, o.last_position, o.replay_until FROM %[1]s o
	WHERE o.consumer_group_id = (SELECT id FROM g) AND o.next_position IS NOT NULL AND NOT o.claimed AND o.parked IS NULL
		AND o.next_position <= (SELECT h FROM hz)
	ORDER BY o.last_position, o.id LIMIT {partitions} FOR UPDATE SKIP LOCKED) bound LIMIT $4),
m AS (SELECT p.id AS offset_id, f.* FROM p CROSS JOIN g CROSS JOIN LATERAL (
	(SELECT %[3]s FROM %[4]s WHERE p.message_id IS NOT NULL AND message_id = p.message_id
		AND (position + 0) > p.last_position AND (position + 0) <= (SELECT h FROM hz) AND (message_type || '') = ANY(g.handled))
	UNION ALL
	(SELECT %[3]s FROM %[4]s WHERE p.message_id IS NULL AND %[9]s
		AND (position + 0) > p.last_position AND (position + 0) <= (SELECT h FROM hz) AND (message_type || '') = ANY(g.handled)
		AND NOT EXISTS (SELECT 1 FROM unnest(p.keys) k WHERE split_part(k, chr(31), 1) = ANY(key_names) AND NOT (k = ANY(keys)))
		ORDER BY position LIMIT {batch})) f),
c AS (UPDATE %[1]s SET claimed = true, claimed_at = $2, claimed_by = $3 WHERE id IN (SELECT offset_id FROM m)),
r AS (UPDATE %[1]s o SET next_position = %[5]s FROM g
	WHERE o.id IN (SELECT id FROM p) AND o.id NOT IN (SELECT offset_id FROM m) AND %[8]s RETURNING o.id, o.next_position)
SELECT p.id, p.partition_key, p.last_position, p.replay_until, r.next_position,
	m.position, m.message_id, m.message_type, m.payload_version, m.causation_id, m.correlation_id, m.payload, m.metadata, m.created_at
FROM p LEFT JOIN m ON m.offset_id = p.id LEFT JOIN r ON r.id = p.id
ORDER BY p.last_position, p.id, m.position`, n.offsets, n.groups, messageColumns, n.messages, next, n.hooks, horizon, unchanged,
			keyRange{table: n.keys, after: "p.last_position", upto: "(SELECT h FROM hz)"}.in("p.keys", 0)),
		// claimQueue is claimMany for the offsets of an id-partitioned
		// group (a queue: one message per offset, found by its id), as
		// one small UPDATE: the pick under FOR UPDATE SKIP LOCKED, the
		// message's join and the claim (or, with no message, the repair
		// of the marker) in one plan without subplans. The CTE of
		// claimMany took about 100 ms per call for 50 jobs while two
		// workers drained 100,000, nearly all of it in its locking pick:
		// rows that concurrent claims and settlements changed are
		// rechecked (EvalPlanQual), which most likely initialises every
		// subplan of the statement again. This one stays near a
		// millisecond. Its rows are unordered: scanClaims sorts them. It
		// never touches a keyed offset (message_id NULL).
		claimQueue: f(`UPDATE %[1]s o SET claimed = m.position IS NOT NULL,
	claimed_at = CASE WHEN m.position IS NULL THEN NULL ELSE $2 END,
	claimed_by = CASE WHEN m.position IS NULL THEN NULL ELSE $3 END,
	next_position = CASE WHEN m.position IS NULL THEN NULL ELSE o.next_position END
FROM (SELECT * FROM (SELECT id, message_id, last_position FROM %[1]s
		WHERE consumer_group_id = (SELECT id FROM %[2]s gg
			WHERE group_id = $1 AND (status = 'active' OR status = 'retrying' AND coalesce(retry_at <= $2, true))
				AND NOT EXISTS (SELECT 1 FROM %[5]s h WHERE h.consumer_group_id = gg.id AND h.transitions > h.hooked))
		AND next_position IS NOT NULL AND NOT claimed AND parked IS NULL AND message_id IS NOT NULL
		AND next_position <= %[6]s
		ORDER BY last_position, id LIMIT {partitions} FOR UPDATE SKIP LOCKED) bound LIMIT $4) p
	JOIN %[2]s g ON g.group_id = $1
	LEFT JOIN %[4]s m ON m.message_id = p.message_id AND (m.position + 0) > p.last_position AND (m.message_type || '') = ANY(g.handled)
WHERE o.id = p.id
RETURNING o.id, o.partition_key, o.last_position, o.replay_until, o.next_position,
	m.position, m.message_id, m.message_type, m.payload_version, m.causation_id, m.correlation_id, m.payload, m.metadata, m.created_at`,
			n.offsets, n.groups, messageColumns, n.messages, n.hooks, horizon),
		// ackMany acknowledges the claims of offsets $1 (of groups $2, at
		// positions $3, by workers $4) in one statement, as ack does one,
		// recovering a retrying group whose failed partition is among
		// them (at $5); it fails, aborting the transaction, unless every
		// claim was held by its worker ($6 claims): see tx.Ack. An
		// offset by message id whose message the transaction deletes
		// ($7) is marked for the drain here, so that the delete does not
		// update its row again. The claimant test is written so that it
		// cannot use the index of claimed offsets: the planner, whose
		// statistics see few claimed rows, would scan that index (and
		// its dead entries, one per claim made since the last vacuum)
		// for every acknowledgement instead of the primary key.
		ackMany: f(`WITH r AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $7::bool[]) AS r(id, grp, pos, worker, drain)),
a AS (UPDATE %[1]s o SET last_position = greatest(o.last_position, r.pos), claimed = false, claimed_at = NULL, claimed_by = NULL,
		next_position = %[3]s, drain_check = o.drain_check OR (r.drain AND o.message_id IS NOT NULL)
	FROM r, %[2]s g WHERE o.id = r.id AND g.group_id = r.grp AND g.id = o.consumer_group_id AND CASE WHEN o.claimed THEN o.claimed_by END = r.worker
	RETURNING o.id, o.consumer_group_id, r.pos),
x AS (SELECT DISTINCT g.id FROM a JOIN %[2]s g ON g.id = a.consumer_group_id
	WHERE g.status = 'retrying' AND g.failure::jsonb->>'offset_id' = a.id::text),
h AS (UPDATE %[2]s g SET status = 'active', retry_at = NULL, failure = '{"retry_count":0}', updated_at = $5
	FROM x WHERE g.id = x.id)
SELECT CASE WHEN n = $6::bigint THEN n ELSE ('%[4]s ' || ($6::bigint - n) || ' of ' || $6::bigint)::bigint END FROM (SELECT count(*) AS n FROM a) c`,
			n.offsets, n.groups, ackNext, ackNotHeld),
		remark: f(`UPDATE %s o SET next_position = %s FROM %s g WHERE g.id = o.consumer_group_id AND o.id = $1 AND %s RETURNING o.next_position`, n.offsets, next, n.groups, unchanged),
		held: f(`SELECT o.claimed, coalesce(o.claimed_by, '') FROM %s o JOIN %s g ON g.id = o.consumer_group_id
WHERE o.id = $1 AND g.group_id = $2 FOR UPDATE OF o`, n.offsets, n.groups),
		release: f(`UPDATE %s SET claimed = false, claimed_at = NULL, claimed_by = NULL WHERE id = $1`, n.offsets),
		moveTo:  f(`UPDATE %s SET last_position = greatest(last_position, $2) WHERE id = $1`, n.offsets),
		// pastNewest refuses to move an offset to position $1 past the
		// newest position (the newest message at or below the horizon, or
		// $2, the transaction's own newest), which it gives as the detail.
		pastNewest: f(`SELECT %[1]s_refuse('past the newest position', x.n::text) FROM (SELECT greatest(%[1]s_last(), $2::bigint) AS n) x WHERE $1::bigint > x.n`, n.prefix),
		// remarkAt is remark for the offset of group $1 and partition $2
		// that AdvanceOffset moved to $3 (none when it did not);
		// raiseMoved raises group $1's highest position to $3 when its
		// offset of partition $2 is at or past it. The ...Last twins are
		// the same at the session's newest position (queueAdvance's last).
		remarkAt:       remarkAt("$3"),
		remarkAtLast:   remarkAt(sessionLast(n)),
		raiseMoved:     raiseMoved("$3"),
		raiseMovedLast: raiseMoved(sessionLast(n)),
		foldGroup:      f(`UPDATE %[1]s g SET highest_position = s.pos FROM (SELECT max(last_position) AS pos FROM %[2]s WHERE consumer_group_id = $1) s WHERE g.id = $1 AND s.pos > g.highest_position`, n.groups, n.offsets),
		foldDrained: f(`UPDATE %[1]s g SET highest_position = s.pos FROM (SELECT consumer_group_id, max(last_position) AS pos FROM %[2]s WHERE drain_check GROUP BY consumer_group_id) s
	WHERE g.id = s.consumer_group_id AND s.pos > g.highest_position`, n.groups, n.offsets),
		raiseHighest: f(`UPDATE %s SET highest_position = greatest(highest_position, $2) WHERE id = $1 RETURNING status, failure`, n.groups),
		recover:      f(`UPDATE %s SET status = 'active', retry_at = NULL, failure = '{"retry_count":0}', updated_at = $2 WHERE id = $1`, n.groups),
		setStatus:    f(`UPDATE %s SET status = $2, retry_at = $3, failure = $4, updated_at = $5 WHERE id = $1`, n.groups),
		resetOffsets: f(`UPDATE %s SET replay_until = greatest(replay_until, last_position), last_position = 0,
	claimed = false, claimed_at = NULL, claimed_by = NULL, parked = NULL, parked_at = NULL WHERE consumer_group_id = $1`, n.offsets),
		clearPending: f(`UPDATE %s SET next_position = NULL WHERE consumer_group_id = $1 AND next_position IS NOT NULL`, n.offsets),
		groupOffsets: f(`SELECT partition_key, last_position FROM %s WHERE consumer_group_id = $1`, n.offsets),
		discoverScan: f(`SELECT position, message_id, keys FROM %s WHERE message_type = ANY($1::text[]) ORDER BY position`, n.messages),
		setPending: f(`INSERT INTO %s AS o (consumer_group_id, partition_key, keys, message_id, next_position) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (consumer_group_id, partition_key) DO UPDATE SET next_position = excluded.next_position`, n.offsets),
		deleteMessages: f(`WITH d AS (DELETE FROM %[1]s WHERE position = ANY($1::bigint[]) RETURNING message_type, keys, message_id),
q AS (UPDATE %[2]s o SET drain_check = true FROM d WHERE o.message_id = d.message_id AND NOT o.drain_check)
UPDATE %[2]s o SET drain_check = true FROM d, %[3]s g
WHERE cardinality(g.partition_by) > 0 AND g.id = o.consumer_group_id AND d.message_type = ANY(g.handled) AND o.keys && d.keys AND o.message_id IS NULL AND NOT o.drain_check`, n.messages, n.offsets, n.groups),
		remarkDeleted: f(`UPDATE %s o SET next_position = %s FROM %s g WHERE g.id = o.consumer_group_id AND o.next_position = ANY($1::bigint[]) AND %s`, n.offsets, next, n.groups, unchanged),
		drainIDs: f(`DELETE FROM %s o WHERE o.drain_check AND NOT o.claimed AND o.next_position IS NULL AND o.message_id IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM %s m WHERE m.message_id = o.message_id)`, n.offsets, n.messages),
		drainKeyed: f(`DELETE FROM %s o USING %s g WHERE g.id = o.consumer_group_id
	AND o.drain_check AND NOT o.claimed AND o.next_position IS NULL AND o.message_id IS NULL
	AND NOT EXISTS (SELECT 1 FROM %s mk JOIN %s m ON m.position = mk.position WHERE mk.key = ANY(o.keys) AND m.message_type = ANY(g.handled)
		AND NOT EXISTS (SELECT 1 FROM unnest(o.keys) k WHERE split_part(k, chr(31), 1) = ANY(m.key_names) AND NOT (k = ANY(m.keys))))`, n.offsets, n.groups, n.keys, n.messages),
		clearDrain: f(`UPDATE %s SET drain_check = false WHERE drain_check AND NOT claimed`, n.offsets),
		releaseStale: f(`UPDATE %s o SET claimed = false, claimed_at = NULL, claimed_by = NULL
WHERE o.claimed AND coalesce((SELECT w.last_seen FROM %s w WHERE w.id = o.claimed_by), o.claimed_at) <= $1`, n.offsets, n.workers),
		oldClaims: f(`SELECT o.id, g.group_id, g.status, o.partition_key, o.last_position, o.claimed, o.claimed_at, coalesce(o.claimed_by, ''), o.parked IS NOT NULL
FROM %s o JOIN %s g ON g.id = o.consumer_group_id WHERE o.claimed AND o.claimed_at <= $1 ORDER BY o.id`, n.offsets, n.groups),
		releaseOld:    f(`UPDATE %s SET claimed = false, claimed_at = NULL, claimed_by = NULL WHERE claimed AND claimed_at <= $1`, n.offsets),
		removeWorkers: f(`DELETE FROM %s WHERE id = ANY($1::text[])`, n.workers),
		renew: f(`UPDATE %s o SET claimed_at = $3 FROM unnest($1::bigint[], $2::text[]) AS c(id, worker)
WHERE o.id = c.id AND o.claimed AND o.claimed_by = c.worker`, n.offsets),
		heartbeat: f(`INSERT INTO %s (id, last_seen) SELECT unnest($1::text[]), $2
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen`, n.workers),
		// groupInfo reports a group's highest position as the greater
		// of its row's highest_position and its offsets' last
		// positions: an acknowledgement moves only its offset, so that
		// concurrent settlements never queue on the group row's lock;
		// the offsets are folded into the row (foldGroup, foldDrained)
		// before a reset moves them back or ReleaseDrainedOffsets
		// deletes them.
		groupInfo: f(`SELECT g.group_id, g.label, g.status, g.retry_at, g.failure, greatest(g.highest_position, coalesce(s.newest, 0)), g.partition_by, g.exclusive,
	s.n, coalesce(s.oldest, 0), coalesce(s.newest, 0), coalesce(h.transitions - h.hooked, 0)
FROM %s g LEFT JOIN LATERAL (
	SELECT count(*) AS n, min(last_position) FILTER (WHERE last_position > 0) AS oldest, max(last_position) AS newest
	FROM %s o WHERE o.consumer_group_id = g.id) s ON true
LEFT JOIN %s h ON h.consumer_group_id = g.id`, n.groups, n.offsets, n.hooks),
		countOffsets: f(`SELECT count(*) FROM %s o JOIN %s g ON g.id = o.consumer_group_id WHERE $1 = '' OR g.group_id = $1`, n.offsets, n.groups),
		readOffsets: f(`SELECT o.id, g.group_id, g.status, o.partition_key, o.last_position, o.claimed, o.claimed_at, coalesce(o.claimed_by, ''), o.parked IS NOT NULL
FROM %s o JOIN %s g ON g.id = o.consumer_group_id WHERE o.id >= $1 AND ($2 = '' OR g.group_id = $2) ORDER BY o.id LIMIT {batch}`, n.offsets, n.groups),
		park: f(`UPDATE %s SET parked = $3, parked_at = $4 WHERE id = $1 AND consumer_group_id = $2`, n.offsets),
		parked: f(`SELECT o.id, g.group_id, o.partition_key, o.last_position, o.parked, o.parked_at
FROM %s o JOIN %s g ON g.id = o.consumer_group_id WHERE o.parked IS NOT NULL AND ($1 = '' OR g.group_id = $1) ORDER BY g.group_id, o.id`, n.offsets, n.groups),
		parkedOne: f(`SELECT o.id, g.group_id, o.partition_key, o.last_position, o.parked, o.parked_at
FROM %s o JOIN %s g ON g.id = o.consumer_group_id WHERE o.consumer_group_id = $1 AND o.partition_key = $2 AND o.parked IS NOT NULL FOR UPDATE OF o`, n.offsets, n.groups),
		unpark:      f(`UPDATE %s SET parked = NULL, parked_at = NULL WHERE id = $1`, n.offsets),
		resetOffset: f(`UPDATE %s SET replay_until = greatest(replay_until, last_position), last_position = 0 WHERE id = $1`, n.offsets),
	}
}

// groupConf is a registered group's configuration.
type groupConf struct {
	row         int64
	name        string
	partitionBy []string // sorted; empty for an id-partitioned group
	exclusive   bool
	handled     []string // sorted
}

func (g *groupConf) byID() bool { return len(g.partitionBy) == 0 }

func (g *groupConf) handles(typ string) bool { return slices.Contains(g.handled, typ) }

// groupSet is the configuration of every group at one config version.
type groupSet struct {
	version int64
	list    []*groupConf
	byName  map[string]*groupConf
	byType  map[string][]*groupConf
	// byID holds the handled types of id-partitioned groups: messages of
	// these types are indexed under core.IDKey only.
	byID map[string]bool
}

// checkValues refuses a message holding an empty value for a partition
// key of a group that handles its type (driver.CheckPartitionValues),
// scheduled or not.
func (gs *groupSet) checkValues(m core.Message, p prepared) error {
	keys := p.keys
	if p.scheduled {
		keys = p.typ.Keys(m.Payload, nil)
	}
	return driver.CheckPartitionValues(p.typ.Name, keys, func(yield func(string, []string) bool) {
		for _, g := range gs.byType[p.typ.Name] {
			if !yield(g.name, g.partitionBy) {
				return
			}
		}
	})
}

// loadGroups reads the configuration of every group.
func (s *Store) loadGroups(ctx context.Context, q querier, version int64) (*groupSet, error) {
	rows, err := q.Query(ctx, s.q.g.loadGroups)
	if err != nil {
		return nil, err
	}
	gs := &groupSet{version: version, byName: map[string]*groupConf{}, byType: map[string][]*groupConf{}, byID: map[string]bool{}}
	for rows.Next() {
		g := &groupConf{}
		if err := rows.Scan(&g.row, &g.name, &g.partitionBy, &g.exclusive, &g.handled); err != nil {
			rows.Close()
			return nil, err
		}
		gs.list = append(gs.list, g)
		gs.byName[g.name] = g
		for _, typ := range g.handled {
			gs.byType[typ] = append(gs.byType[typ], g)
			if g.byID() {
				gs.byID[typ] = true
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.publishGroups(gs)
	return gs, nil
}

// tuple is a partition of a group.
type tuple struct {
	key       string // the stored partition key (core.Partition's Key)
	keys      []string
	partition core.Partition
	msgID     *uuid.UUID // the message of an id-partitioned group's offset
}

func newTuple(names, values []string, msgID *uuid.UUID) tuple {
	keys := make([]string, len(names))
	partition := make(map[string]string, len(names))
	for i, n := range names {
		keys[i] = keyString(n, values[i])
		partition[n] = values[i]
	}
	return tuple{key: string(core.AppendPartitionKey(nil, names, values)), keys: keys, partition: partition, msgID: msgID}
}

func parsePartition(key string) (map[string]string, error) {
	p, err := core.ParsePartitionKey(key)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return p, nil
}

// tuples returns the partitions of g that a message carries in full (AND
// discovery): none unless it carries every partition attribute, one per
// combination of values when attributes hold several. An id-partitioned
// group has one partition per message.
func (g *groupConf) tuples(keys []codec.KeyPair, id uuid.UUID) []tuple {
	if g.byID() {
		return []tuple{newTuple([]string{core.IDKey}, []string{id.String()}, &id)}
	}
	var out []tuple
	var w driver.PartitionWalk
	for w.Init(g.partitionBy, keys); w.Next(); {
		out = append(out, newTuple(g.partitionBy, w.Values(), nil))
	}
	return out
}

// upserts collects the offsets an append creates or wakes, each once with
// the first message that wakes it (its position is read back by the
// upsert: the sequence hands it out at the insert).
type upserts struct {
	order []upsertKey
	first map[upsertKey]upsert
}

type upsertKey struct {
	group int64
	key   string
}

type upsert struct {
	tp  tuple
	msg uuid.UUID
	pos int64 // discovery's: the message's position, read with it
}

func newUpserts() *upserts { return &upserts{first: map[upsertKey]upsert{}} }

func (u *upserts) add(group int64, tp tuple, msg uuid.UUID, pos int64) {
	k := upsertKey{group, tp.key}
	if _, ok := u.first[k]; ok {
		return
	}
	u.order = append(u.order, k)
	u.first[k] = upsert{tp, msg, pos}
}

// queue queues the upserts, in the order the append met them (offset ids
// follow creation order, which breaks ties between claims).
func (u *upserts) queue(b *pgx.Batch, s *Store) {
	for _, k := range u.order {
		up := u.first[k]
		b.Queue(s.q.a.upsert, k.group, up.tp.key, up.tp.keys, up.tp.msgID, up.msg)
	}
}

// RegisterGroup creates the group (active) or updates its label,
// partitioning and handled types, keeping its status, failure, offsets and
// highest position; see driver.Groups. A new group, or one whose
// partitioning or handled types change, discovers its partitions in the
// whole log at once. The configuration is stored, and its version in
// <p>_head, so every process's appends index and create offsets for it.
func (s *Store) RegisterGroup(ctx context.Context, spec driver.GroupSpec) error {
	spec, err := driver.NormalizeGroupSpec(s.reg, spec)
	if err != nil {
		return err
	}
	handled, partitionBy, label := spec.Handled, spec.PartitionBy, spec.Label
	var registered *groupSet // the configuration the transaction wrote
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		registered = nil
		for _, o := range t.gs.list {
			if err := driver.CheckGroupConflict(spec, o.name, o.exclusive, o.handles); err != nil {
				return err
			}
		}
		q := s.q.g
		now := s.now()
		old := t.gs.byName[spec.ID]
		changed := old == nil || !slices.Equal(old.partitionBy, partitionBy) || !slices.Equal(old.handled, handled) || old.exclusive != spec.Exclusive
		if !changed {
			_, err := t.c.Exec(t.ctx, q.updateLabel, old.row, label, now)
			if err != nil {
				return t.fail("register", err)
			}
			return t.setHooks(old.row, spec.Hooks)
		}
		var err error
		if old == nil {
			_, err = t.c.Exec(t.ctx, q.insertGroup, spec.ID, label, partitionBy, spec.Exclusive, handled, now)
		} else {
			_, err = t.c.Exec(t.ctx, q.updateConfig, old.row, label, partitionBy, spec.Exclusive, handled, now)
		}
		if err != nil {
			return t.fail("register", err)
		}
		var version int64
		if err := t.c.QueryRow(t.ctx, q.bumpConfig).Scan(&version); err != nil {
			return t.fail("register", err)
		}
		gs, err := s.loadGroupsLocal(t, version)
		if err != nil {
			return t.fail("register", err)
		}
		t.gs = gs
		registered = gs
		if err := t.setHooks(gs.byName[spec.ID].row, spec.Hooks); err != nil {
			return err
		}
		return t.discover(gs.byName[spec.ID])
	})
	if err != nil {
		return fmt.Errorf("pgstore: register consumer group %s: %w", spec.ID, err)
	}
	s.publishGroups(registered)
	return nil
}

// publishGroups caches gs, a committed configuration (nil: none), unless
// the cache holds one as new: one read from the server, or one a
// registration of this store wrote (the next append checks the version
// it wrote, where the one cached before would be refused, the
// configuration read again and the append sent again).
func (s *Store) publishGroups(gs *groupSet) {
	for gs != nil {
		old := s.groups.Load()
		if old != nil && old.version >= gs.version || s.groups.CompareAndSwap(old, gs) {
			return
		}
	}
}

// loadGroupsLocal loads the configuration a transaction changed: it is
// published to the store's cache only by a later transaction that reads it
// committed.
func (s *Store) loadGroupsLocal(t *tx, version int64) (*groupSet, error) {
	cached := s.groups.Load()
	gs, err := s.loadGroups(t.ctx, t.c, version)
	if err != nil {
		return nil, err
	}
	s.groups.CompareAndSwap(gs, cached) // undo the publication: not committed yet
	return gs, nil
}

// check records err (from PostgreSQL) as the transaction's failure.
func (t *tx) check(op string, err error) error {
	if err != nil {
		return t.fail(op, err)
	}
	return nil
}

// discover recomputes the pending markers of g from the whole log,
// creating the offsets of partitions that handled messages carry in full.
func (t *tx) discover(g *groupConf) error {
	s := t.s
	q := s.q.g
	last := map[string]int64{}
	rows, err := t.c.Query(t.ctx, q.groupOffsets, g.row)
	if err != nil {
		return t.fail("discover", err)
	}
	for rows.Next() {
		var key string
		var pos int64
		if err := rows.Scan(&key, &pos); err != nil {
			rows.Close()
			return t.fail("discover", err)
		}
		last[key] = pos
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t.fail("discover", err)
	}
	if _, err := t.c.Exec(t.ctx, q.clearPending, g.row); err != nil {
		return t.fail("discover", err)
	}
	ups := newUpserts()
	rows, err = t.c.Query(t.ctx, q.discoverScan, g.handled)
	if err != nil {
		return t.fail("discover", err)
	}
	for rows.Next() {
		var pos int64
		var id uuid.UUID
		var keys []string
		if err := rows.Scan(&pos, &id, &keys); err != nil {
			rows.Close()
			return t.fail("discover", err)
		}
		for _, tp := range g.tuples(parseKeys(keys), id) {
			if l, ok := last[tp.key]; ok && pos <= l {
				continue
			}
			ups.add(g.row, tp, id, pos)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t.fail("discover", err)
	}
	b := &pgx.Batch{}
	for _, k := range ups.order {
		up := ups.first[k]
		b.Queue(q.setPending, k.group, up.tp.key, up.tp.keys, up.tp.msgID, up.pos)
	}
	if b.Len() == 0 {
		return nil
	}
	return t.check("discover", t.sendBatch(b).Close())
}

// parseKeys turns the keys column back into key pairs.
func parseKeys(keys []string) []codec.KeyPair {
	out := make([]codec.KeyPair, 0, len(keys))
	for _, k := range keys {
		name, value, _ := strings.Cut(k, keySep)
		out = append(out, codec.KeyPair{Name: name, Value: value})
	}
	return out
}

// idle answers whether group has nothing to claim now, with one
// statement outside any transaction: the group's status and whether its
// partial index of claimable offsets is empty (an O(1) probe however many
// caught-up partitions the group has). A false answer may be stale by the
// time a claim runs; a true one is as good as a claim finding nothing.
// A group whose last claim (in this store) claimed something is answered
// busy without the probe: under load the probe would find work nearly
// every time, a round trip before the claim's own; the first claim that
// finds nothing puts the probe back.
func (s *Store) idle(ctx context.Context, group string) (bool, error) {
	if b, ok := s.busy.Load(group); ok && b.(*atomic.Bool).Load() {
		return false, nil
	}
	var status driver.Status
	var retryAt *time.Time
	var pending bool
	err := s.pool.QueryRow(ctx, s.q.g.probe, group).Scan(&status, &retryAt, &pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, s.unknownGroup(ctx, s.pool, group)
	}
	if err != nil {
		return false, s.wrap(ctx, "claim "+group, err)
	}
	var at time.Time
	if retryAt != nil {
		at = *retryAt
	}
	return !pending || !driver.Claimable(status, at, s.now()), nil
}

// ClaimNext claims the partition of group with pending work whose offset
// is furthest behind (ties: the oldest offset) for workerID, with up to
// batchSize of its messages. An idle group is answered by one probe; a
// claim runs under the shared lock, so that workers claim, acknowledge
// and release side by side (FOR UPDATE SKIP LOCKED picks the offset),
// while appends wait for them and they for appends.
func (s *Store) ClaimNext(ctx context.Context, group, workerID string, batchSize int) (c *driver.ClaimedPartition, err error) {
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return nil, err
	}
	if idle, err := s.idle(ctx, group); err != nil || idle {
		return nil, err
	}
	err = s.update(ctx, lockShared, func(t *tx) error {
		c, err = t.claimNext(group, workerID, batchSize)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.claimed(group, c != nil)
	return c, nil
}

// claimed records whether a claim of group claimed something: a group
// whose last claim did is likely to have more, and its next claim goes
// without the idle probe's round trip (see idle).
func (s *Store) claimed(group string, some bool) {
	b, ok := s.busy.Load(group)
	if !ok {
		if !some {
			return
		}
		b, _ = s.busy.LoadOrStore(group, new(atomic.Bool))
	}
	b.(*atomic.Bool).Store(some)
}

// ClaimUpdate claims like ClaimNext and calls fn with the claim in the
// same transaction. The claim takes the store's lock in shared mode, as
// ClaimNext does, and fn's operations take what they need as in any
// Update: its reads none, its appends the boundary locks of what they
// write and read, tried only (the transaction holds the claim's row
// locks), fn running again under the exclusive lock when one is busy. So
// workers deciding on different boundaries commit side by side. (It took
// the exclusive lock from its start up to schema version 9: every
// router transaction of a decider, and every empty claim, then waited
// for every other and stopped every append; at 1,000 accounts,
// BenchmarkPostgresEndToEnd spent most of its time in that wait.)
func (s *Store) ClaimUpdate(ctx context.Context, group, workerID string, batchSize int, fn func(tx driver.Tx, c *driver.ClaimedPartition) error) (bool, error) {
	return s.ClaimManyUpdate(ctx, group, workerID, batchSize, 1, func(tx driver.Tx, claims []*driver.ClaimedPartition) error {
		return fn(tx, claims[0])
	})
}

// ClaimManyUpdate claims up to partitions partitions of group as ClaimMany
// does, with the first statement of a transaction holding the shared
// lock, and calls fn with them (see driver.ClaimManyUpdater); an idle
// group is answered by one probe.
func (s *Store) ClaimManyUpdate(ctx context.Context, group, workerID string, batchSize, partitions int, fn func(tx driver.Tx, claims []*driver.ClaimedPartition) error) (bool, error) {
	if err := checkClaimMany(workerID, batchSize, partitions); err != nil {
		return false, err
	}
	if idle, err := s.idle(ctx, group); err != nil || idle {
		return false, err
	}
	var claims []*driver.ClaimedPartition
	err := s.update(ctx, lockShared, func(t *tx) error {
		var err error
		if claims, err = t.claimMany(group, workerID, batchSize, partitions); err != nil || len(claims) == 0 {
			return err
		}
		return fn(t, claims)
	})
	if err == nil {
		s.claimed(group, len(claims) > 0)
	}
	return len(claims) > 0, err
}

var _ driver.ClaimManyUpdater = (*Store)(nil)

// ClaimNext claims inside the transaction; see driver.GroupTx.
func (t *tx) ClaimNext(group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	if err := t.enter(lockShared, false); err != nil {
		return nil, err
	}
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return nil, err
	}
	return t.claimNext(group, workerID, batchSize)
}

// groupState is a group's row.
type groupState struct {
	row         int64
	status      driver.Status
	retryAt     time.Time
	failure     string
	handled     []string
	partitionBy []string
	exclusive   bool
}

// state reads a group's row, or returns an *UnknownGroupError.
func (t *tx) state(group string) (groupState, error) {
	return t.readState(group, t.s.q.g.groupRow)
}

// lockState is state, locking the group's row until the transaction ends:
// for a read-modify-write of the group's status and failure (its retry
// count).
func (t *tx) lockState(group string) (groupState, error) {
	return t.readState(group, t.s.q.g.groupRowLocked)
}

func (t *tx) readState(group, query string) (groupState, error) {
	var st groupState
	var retryAt *time.Time
	err := t.c.QueryRow(t.ctx, query, group).Scan(&st.row, &st.status, &retryAt, &st.failure, &st.handled, &st.partitionBy, &st.exclusive)
	if errors.Is(err, pgx.ErrNoRows) {
		if uerr := t.s.unknownGroup(t.ctx, t.c, group); errors.As(uerr, new(*driver.UnknownGroupError)) {
			return st, uerr
		} else {
			return st, t.fail("group "+group, uerr)
		}
	}
	if err != nil {
		return st, t.fail("group "+group, err)
	}
	if retryAt != nil {
		st.retryAt = retryAt.UTC()
	}
	return st, nil
}

// maxStaleMarkers bounds how many wrong pending markers one claim repairs.
const maxStaleMarkers = 64

func (t *tx) claimNext(group, workerID string, batchSize int) (*driver.ClaimedPartition, error) {
	claims, err := t.claimMany(group, workerID, batchSize, 1)
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	return claims[0], nil
}

// ClaimMany claims up to partitions partitions of group for workerID, each
// with up to batchSize of its messages, in one statement (see
// driver.ClaimManyTx): the claimable offsets furthest behind first, those
// other transactions hold skipped, as ClaimNext claims them one after
// another. It takes the shared lock, as ClaimNext does.
func (t *tx) ClaimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	if err := t.enter(lockShared, false); err != nil {
		return nil, err
	}
	if err := checkClaimMany(workerID, batchSize, partitions); err != nil {
		return nil, err
	}
	return t.claimMany(group, workerID, batchSize, partitions)
}

// checkClaimMany checks the arguments of a claim of several partitions
// (ClaimMany, ClaimManyUpdate).
func checkClaimMany(workerID string, batchSize, partitions int) error {
	if err := driver.CheckClaim(workerID, batchSize); err != nil {
		return err
	}
	if partitions <= 0 {
		return fmt.Errorf("pgstore: claim %d partitions: the number of partitions must be positive", partitions)
	}
	return nil
}

var _ driver.ClaimManyTx = (*tx)(nil)

// claimMany runs the claim statement (claimMany) with the group's row, in
// one round trip with the statements queued before. Offsets whose marker
// turned out stale are repaired by the statement; when they were all it
// picked, it runs again (a bounded number of times).
func (t *tx) claimMany(group, workerID string, batchSize, partitions int) ([]*driver.ClaimedPartition, error) {
	s := t.s
	q := s.q.g
	now := s.now()
	var types []*codec.Type
	// A queue (by the configuration cached, checked below against the
	// group's row) claims through claimQueue.
	queue := false
	if gs := s.groups.Load(); gs != nil {
		if g := gs.byName[group]; g != nil && g.byID() {
			queue = true
		}
	}
	for attempt := range maxStaleMarkers {
		b, n := t.batchOf(false)
		if attempt == 0 {
			b.Queue(q.groupRow, group)
		}
		claimQueue, claimMany := q.claimQueue, q.claimMany
		if t.drew {
			claimQueue, claimMany = q.claimQueueOwn, q.claimManyOwn
		}
		if queue {
			b.Queue(s.limited(claimQueue, claimBound(partitions), 0), group, now, workerID, partitions)
		} else {
			b.Queue(s.limited(claimMany, claimBound(partitions), batchSize), group, now, workerID, partitions)
		}
		br, err := t.send(b, n)
		if err != nil {
			return nil, t.fail("claim "+group, err)
		}
		if attempt == 0 {
			var st groupState
			var retryAt *time.Time
			err = br.QueryRow().Scan(&st.row, &st.status, &retryAt, &st.failure, &st.handled, &st.partitionBy, &st.exclusive)
			if errors.Is(err, pgx.ErrNoRows) { // no group row
				br.Close()
				return nil, t.unknown(group)
			}
			if err != nil {
				br.Close()
				return nil, t.fail("claim "+group, err)
			}
			if retryAt != nil {
				st.retryAt = retryAt.UTC()
			}
			t.claimState = st
		}
		claims, repaired, err := t.scanClaims(br, group, workerID, queue)
		if cerr := br.Close(); err == nil && cerr != nil {
			err = t.fail("claim "+group, cerr)
		}
		if err != nil {
			return nil, err
		}
		if queue && len(t.claimState.partitionBy) > 0 {
			// The cache was stale: the group is keyed now. What
			// claimQueue claimed (offsets by id) stands; its keyed
			// offsets go through claimMany.
			queue = false
			if len(claims) == 0 {
				continue
			}
		}
		if len(claims) == 0 {
			if repaired {
				continue
			}
			return nil, nil
		}
		if types == nil {
			if types, err = s.handledTypes(t.claimState.handled); err != nil {
				return nil, fmt.Errorf("pgstore: claim %s: %w", group, err)
			}
		}
		for _, c := range claims {
			c.Guard = core.Guard{Conditions: core.ConditionsFor(c.Partition, types...), LastPosition: c.Last()}
		}
		return claims, nil
	}
	return nil, nil
}

// scanClaims reads the rows of the claim statement: the claims, in order
// (sorted here when unordered, as claimQueue's are), and whether a stale
// marker was repaired.
func (t *tx) scanClaims(br pgx.BatchResults, group, workerID string, unordered bool) (claims []*driver.ClaimedPartition, repaired bool, err error) {
	s := t.s
	rows, err := br.Query()
	if err != nil {
		return nil, false, t.fail("claim "+group, err)
	}
	defer rows.Close()
	var replay, lasts []int64
	for rows.Next() {
		var id, last, rep int64
		var key string
		var next, pos *int64
		var r msgRow
		dest := append([]any{&id, &key, &last, &rep, &next, &pos}, r.dest()[1:]...)
		if err := rows.Scan(dest...); err != nil {
			return nil, false, t.fail("claim "+group, err)
		}
		if pos == nil {
			if next != nil {
				return nil, false, fmt.Errorf("pgstore: claim %s: offset %d is pending at %d but its fetch is empty", group, id, *next)
			}
			repaired = true
			continue
		}
		r.position = *pos
		m, err := s.decode(&r)
		if err != nil {
			var de *driver.DecodeError
			if errors.As(err, &de) {
				de.Group, de.OffsetID = group, id
				de.Partition, _ = parsePartition(key)
			}
			return nil, false, err
		}
		if k := len(claims); k > 0 && claims[k-1].OffsetID == id {
			claims[k-1].Messages = append(claims[k-1].Messages, m)
			continue
		}
		partition, err := parsePartition(key)
		if err != nil {
			return nil, false, err
		}
		claims = append(claims, &driver.ClaimedPartition{Group: group, WorkerID: workerID, OffsetID: id, After: last, Partition: partition, Messages: []core.PositionedMessage{m}})
		replay = append(replay, rep)
		lasts = append(lasts, last)
	}
	if err := rows.Err(); err != nil {
		return nil, false, t.fail("claim "+group, err)
	}
	for i, c := range claims {
		c.Replaying, c.ReplayUpto = c.Last() <= replay[i], replay[i]
	}
	if unordered && len(claims) > 1 {
		// One message per offset: order (last position, offset id).
		lastOf := make(map[int64]int64, len(claims))
		for i, c := range claims {
			lastOf[c.OffsetID] = lasts[i]
		}
		slices.SortFunc(claims, func(a, b *driver.ClaimedPartition) int {
			return cmp.Or(cmp.Compare(lastOf[a.OffsetID], lastOf[b.OffsetID]), cmp.Compare(a.OffsetID, b.OffsetID))
		})
	}
	return claims, repaired, nil
}

// unknown returns the *UnknownGroupError of group.
func (t *tx) unknown(group string) error {
	err := t.s.unknownGroup(t.ctx, t.c, group)
	if !errors.As(err, new(*driver.UnknownGroupError)) {
		return t.fail("group "+group, err)
	}
	return err
}

// held checks, locking the offset's row, that the claim's worker still
// holds its offset.
func (t *tx) held(c *driver.ClaimedPartition, verb string) error {
	if err := t.usable(); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("pgstore: %s a nil claim", verb)
	}
	var claimed bool
	var by string
	err := t.c.QueryRow(t.ctx, t.s.q.g.held, c.OffsetID, c.Group).Scan(&claimed, &by)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := t.state(c.Group); err != nil {
			return err
		}
		return fmt.Errorf("pgstore: %s offset %d of %s (it is gone): %w", verb, c.OffsetID, c.Group, driver.ErrNotClaimant)
	}
	if err != nil {
		return t.fail(verb, err)
	}
	if !claimed || by != c.WorkerID {
		return fmt.Errorf("pgstore: %s offset %d of %s as %q: %w", verb, c.OffsetID, c.Group, c.WorkerID, driver.ErrNotClaimant)
	}
	return nil
}

// Release frees a claim without moving its offset, under the shared
// lock. Only the claiming worker may release it (else an error matching
// driver.ErrNotClaimant).
func (s *Store) Release(ctx context.Context, c *driver.ClaimedPartition) error {
	return s.update(ctx, lockShared, func(t *tx) error { return t.Release(c) })
}

// Release frees a claim without moving its offset, in the transaction;
// see driver.GroupTx.
func (t *tx) Release(c *driver.ClaimedPartition) error {
	if err := t.enter(lockShared, true); err != nil {
		return err
	}
	if err := t.held(c, "release"); err != nil {
		return err
	}
	t.settle1(c.OffsetID)
	_, err := t.c.Exec(t.ctx, t.s.q.g.release, c.OffsetID)
	return t.check("release", err)
}

// Ack moves the claim's offset to position and frees it, in a transaction
// of its own under the shared lock, in one round trip (see tx.Ack); when
// the claim is not held, the acknowledgement is made again, checked at
// once, to tell why.
func (s *Store) Ack(ctx context.Context, c *driver.ClaimedPartition, position int64) error {
	err := s.update(ctx, lockShared, func(t *tx) error { return t.Ack(c, position) })
	if errors.As(err, new(*ackNotHeldError)) {
		err = s.update(ctx, lockShared, func(t *tx) error {
			t.eager = true
			return t.Ack(c, position)
		})
	}
	return err
}

// Ack moves the claim's offset to position (never backwards), recomputes
// its pending marker and frees the claim (which raises the group's highest
// position, derived from its offsets: see groupQueries.groupInfo); a
// retrying group whose failed partition this is recovers.
// Only the claiming worker may ack.
//
// The acknowledgement is deferred: it is sent, with the transaction's
// other deferred acknowledgements in one statement, before its next
// statement or with its COMMIT, so that a worker settling several claims
// (and claiming the next ones) pays no round trip per claim. A claim its
// worker no longer holds then fails that statement, which aborts the
// transaction: the Update fails with an error matching
// driver.ErrNotClaimant and writes nothing (the router then commits each
// batch on its own). A position beyond the claim is refused at once
// (driver.ErrAckBeyondClaim, or ErrNotClaimant when the worker does not
// hold the claim either), as is a claim the transaction already
// acknowledged or released (it is checked at once: ErrNotClaimant), and
// the acknowledgement of a group this process does not know is checked at
// once too (an *UnknownGroupError).
func (t *tx) Ack(c *driver.ClaimedPartition, position int64) error {
	if err := t.enter(lockShared, false); err != nil {
		return err
	}
	if c == nil {
		return errors.New("pgstore: ack a nil claim")
	}
	if err := driver.CheckAck(c, position); err != nil {
		// A claim the worker does not hold is refused as such, whatever
		// the position (the contract of every store): checked only here,
		// on the way to an error.
		if herr := t.held(c, "ack"); herr != nil {
			return herr
		}
		return err
	}
	if !t.eager && !t.settled[c.OffsetID] {
		if gs := t.s.groups.Load(); gs != nil && gs.byName[c.Group] != nil {
			t.settle1(c.OffsetID)
			t.acks = append(t.acks, pendingAck{offset: c.OffsetID, group: c.Group, position: position, worker: c.WorkerID})
			return nil
		}
	}
	t.settle1(c.OffsetID)
	q := t.s.q.g
	// The claimant check, the move, the release and the group's status
	// position in one statement, the new pending marker in the same round
	// trip (recomputing it is right whether or not the ack happened).
	b, n := t.batch()
	b.Queue(q.ack, c.OffsetID, c.Group, position, c.WorkerID)
	b.Queue(q.remark, c.OffsetID)
	br, err := t.send(b, n)
	if err != nil {
		return t.fail("ack", err)
	}
	var groupRow int64
	var status driver.Status
	var failure string
	err = br.QueryRow().Scan(&groupRow, &status, &failure)
	acked := err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.fail("ack", err)
	}
	if !acked {
		if err := t.held(c, "ack"); err != nil {
			return err
		}
		return fmt.Errorf("pgstore: internal error: ack of offset %d of %s did not happen", c.OffsetID, c.Group)
	}
	return t.recoverFrom(groupRow, c.OffsetID, status, failure)
}

// pendingAck is a deferred acknowledgement (tx.Ack).
type pendingAck struct {
	offset   int64
	group    string
	position int64
	worker   string
}

// settle1 records that the transaction acknowledged or released an
// offset: a second acknowledgement of it is checked at once.
func (t *tx) settle1(offset int64) {
	if t.settled == nil {
		t.settled = map[int64]bool{}
	}
	t.settled[offset] = true
}

// ackNotHeld starts the text of the error ackMany raises when a claim is
// not held (a cast that fails, PostgreSQL's SQL having no RAISE).
const ackNotHeld = "pgstore: acknowledged claims not held by their worker:"

// ackNotHeldError is the failure of deferred acknowledgements (tx.Ack)
// one of which its worker did not hold.
type ackNotHeldError struct{ offsets []int64 }

func (e *ackNotHeldError) Error() string {
	return fmt.Sprintf("pgstore: ack of offsets %v: one at least is no longer held by its worker (reaped, released or acknowledged already): %v", e.offsets, driver.ErrNotClaimant)
}

func (e *ackNotHeldError) Unwrap() error { return driver.ErrNotClaimant }

// settle queues the deferred acknowledgements, then the deferred deletes,
// each kind as one statement, at the end of the queued statements. The
// order does not change what they leave: an acknowledgement recomputes its
// offset's marker from the log as it is, and a delete recomputes every
// marker left on a deleted message. Acknowledging first spares a queue's
// offsets two updates of their row: an acknowledged job's offset has no
// marker left for the delete to recompute, and the acknowledgement marks
// it for the drain (ReleaseDrainedOffsets) when its job is among the
// deletes.
func (t *tx) settle() {
	q := t.s.q.g
	if n := len(t.acks); n > 0 {
		var deleted map[int64]bool
		if len(t.deletes) > 0 {
			deleted = make(map[int64]bool, len(t.deletes))
			for _, p := range t.deletes {
				deleted[p] = true
			}
		}
		ids, groups, positions, workers, drain := make([]int64, n), make([]string, n), make([]int64, n), make([]string, n), make([]bool, n)
		for i, a := range t.acks {
			ids[i], groups[i], positions[i], workers[i], drain[i] = a.offset, a.group, a.position, a.worker, deleted[a.position]
		}
		t.acks = nil
		t.pre = append(t.pre, queued{
			sql:  q.ackMany,
			args: []any{ids, groups, positions, workers, t.s.now(), int64(n), drain},
			onErr: func(err error) error {
				if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "22P02" && strings.Contains(pe.Message, ackNotHeld) {
					return &ackNotHeldError{offsets: ids}
				}
				return err
			},
		})
	}
	if len(t.deletes) > 0 {
		t.queue(q.deleteMessages, t.deletes)
		t.queue(q.remarkDeleted, t.deletes)
		t.deletes = nil
	}
}

// recoverFrom recovers a retrying group whose failed partition is
// offsetID (just acknowledged).
func (t *tx) recoverFrom(groupRow, offsetID int64, status driver.Status, failure string) error {
	if status != driver.StatusRetrying || offsetID == 0 {
		return nil
	}
	var f driver.Failure
	if err := json.Unmarshal([]byte(failure), &f); err != nil || f.OffsetID != offsetID {
		return nil
	}
	_, err := t.c.Exec(t.ctx, t.s.q.g.recover, groupRow, t.s.now())
	return t.check("ack", err)
}

// Delete removes messages from the log (positions not in the log are
// ignored): their offsets' pending markers are recomputed and the offsets
// they belonged to are checked by the next ReleaseDrainedOffsets.
//
// A delete needs only the shared lock: removing messages cannot make a
// reader see a position before a smaller one (it adds none), and it never
// hides pending work from a marker (a marker it leaves on a deleted
// message is found stale by the next claim, which repairs it). Its
// statements are queued and sent with the transaction's next ones (the
// ack, in a queue).
func (t *tx) Delete(positions ...int64) error {
	if err := t.enter(lockShared, false); err != nil {
		return err
	}
	if len(positions) == 0 {
		return nil
	}
	t.deletes = append(t.deletes, positions...)
	t.gone = append(t.gone, positions...)
	if t.lastKnown && slices.Max(positions) >= t.lastPos {
		t.lastKnown = false // the newest message may be gone: LastPosition reads again
	}
	return nil
}

// AdvanceOffset moves a partition's offset to position without a claim;
// see driver.GroupTx.
//
// Unless the transaction holds the exclusive lock, it locks the
// partition's boundary for the group's handled types in exclusive mode
// (see boundary.go), as a guard on the partition would: no message of
// the partition can then be in flight below position. The locks, the
// check that position is not past the newest one and the move go in one
// round trip (advanceLocked).
func (t *tx) AdvanceOffset(group string, partition core.Partition, position int64) (bool, error) {
	if err := t.usable(); err != nil {
		return false, err
	}
	s := t.s
	if gs := s.groups.Load(); t.holds != lockExclusive && gs != nil && gs.byName[group] != nil {
		return t.advanceLocked(gs, gs.byName[group], partition, position)
	}
	if err := t.enter(lockExclusive, true); err != nil {
		return false, err
	}
	g := t.gs.byName[group]
	if g == nil {
		return false, s.unknownGroup(t.ctx, t.c, group)
	}
	if newest := max(t.head, t.ownLast()); position > newest {
		return false, fmt.Errorf("pgstore: advance %s to position %d, past the newest position %d", group, position, newest)
	}
	if position <= 0 {
		return true, nil
	}
	tp, err := g.tupleOf("advance", partition)
	if err != nil {
		return false, err
	}
	b := &pgx.Batch{}
	t.queueAdvance(b, g, tp, position, false)
	return t.advanced(t.sendBatch(b), position)
}

// advanceLocked is AdvanceOffset for a transaction without the exclusive
// lock, in one round trip: the partition's boundary lock (and those of
// the transaction's reads, checked), the server's refusal of a position
// past the newest one (the transaction's own appends count), and the
// move. A refusal of the position aborts the transaction, as any failed
// statement does.
func (t *tx) advanceLocked(gs *groupSet, g *groupConf, partition core.Partition, position int64) (bool, error) {
	if position <= 0 {
		return true, nil
	}
	tp, err := g.tupleOf("advance", partition)
	if err != nil {
		return false, err
	}
	s := t.s
	keys := boundarySet{}
	keys.guard(g.conditions(partition))
	b, pre, missing := t.lockBatch(gs, keys)
	if position > t.ownLast() { // at or below its own, a position is not past the newest
		b.Queue(s.q.g.pastNewest, position, t.ownLast())
	}
	t.queueAdvance(b, g, tp, position, false)
	br, err := t.send(b, pre)
	if err != nil {
		return false, t.fail("advance", err)
	}
	if err := t.lockedByAppend(br, gs, missing); err != nil {
		br.Close()
		return false, err
	}
	if position <= t.ownLast() {
		return t.advanced(br, position)
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		var pe *pgconn.PgError
		if isRefusal(err) && errors.As(err, &pe) {
			t.fail("advance", err)
			return false, fmt.Errorf("pgstore: advance %s to position %d, past the newest position %s", g.name, position, pe.Detail)
		}
		return false, t.fail("advance", err)
	}
	return t.advanced(br, position)
}

// conditions are the conditions of g's handled types in partition: what
// an offset's move locks.
func (g *groupConf) conditions(partition core.Partition) []core.Condition {
	conds := make([]core.Condition, len(g.handled))
	for i, typ := range g.handled {
		conds[i] = core.Condition{Type: typ, Attrs: partition}
	}
	return conds
}

// queueAdvance queues the move of g's offset of tp to position: the
// offset made sure of, then moved in one statement unless it is past
// position already or a message it has not processed lies before
// position, its pending marker recomputed and the group's highest
// position raised when it moved. With last, the position is the
// session's newest (sessionLast), that of the insert queued just before,
// whatever position says.
func (t *tx) queueAdvance(b *pgx.Batch, g *groupConf, tp tuple, position int64, last bool) {
	s := t.s
	q := s.q.g
	var args sqlArgs
	groupArg, keyArg := args.add(g.row), args.add(tp.key)
	posArg := sessionLast(s.names)
	if !last {
		posArg = args.add(position)
	}
	move := fmt.Sprintf(`WITH o AS (SELECT id, last_position FROM %[1]s WHERE consumer_group_id = %[3]s AND partition_key = %[4]s FOR UPDATE),
c AS (SELECT o.id, o.last_position, o.last_position < %[5]s AND EXISTS (
	SELECT 1 FROM %[2]s WHERE %[6]s > o.last_position AND %[6]s < %[5]s AND %[7]s) AS blocked FROM o),
u AS (UPDATE %[1]s x SET last_position = %[5]s FROM c WHERE x.id = c.id AND c.last_position < %[5]s AND NOT c.blocked RETURNING x.id)
SELECT c.last_position, c.blocked FROM c`,
		s.names.offsets, s.names.messages, groupArg, keyArg, posArg, positionFilter, partitionSQL(tp.partition, g.handled, &args, keyRange{table: s.names.keys, after: "o.last_position", upto: posArg}))
	b.Queue(q.ensureOffset, g.row, tp.key, tp.keys, tp.msgID)
	b.Queue(move, args...)
	remark, raise, at := q.remarkAt, q.raiseMoved, []any{g.row, tp.key, position}
	if last {
		remark, raise, at = q.remarkAtLast, q.raiseMovedLast, at[:2]
	}
	b.Queue(remark, at...)
	b.Queue(raise, at...)
}

// sessionLast is the position the session's last insert into the log
// drew, as SQL.
func sessionLast(n names) string { return fmt.Sprintf("currval('%s_positions')", n.prefix) }

// advanced reads the results of queueAdvance's statements (the rest of
// br) and closes br: whether the offset is at position now.
func (t *tx) advanced(br pgx.BatchResults, position int64) (bool, error) {
	var last int64
	var blocked bool
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&last, &blocked)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, t.fail("advance", err)
	}
	return last >= position || !blocked, nil
}

// tupleOf is the partition of g that partition names, or an error when it
// does not name exactly g's partition attributes (or, for an
// id-partitioned group, a message id).
func (g *groupConf) tupleOf(verb string, partition core.Partition) (tuple, error) {
	if g.byID() {
		id, err := uuid.Parse(partition[core.IDKey])
		if len(partition) != 1 || err != nil {
			return tuple{}, fmt.Errorf("pgstore: %s %s: partition %v is not {%q: message id}", verb, g.name, partition, core.IDKey)
		}
		return newTuple([]string{core.IDKey}, []string{id.String()}, &id), nil
	}
	if !slices.Equal(slices.Sorted(maps.Keys(partition)), g.partitionBy) {
		return tuple{}, fmt.Errorf("pgstore: %s %s: partition %v does not hold exactly its partition attributes %v", verb, g.name, partition, g.partitionBy)
	}
	values := make([]string, len(g.partitionBy))
	for i, name := range g.partitionBy {
		values[i] = partition[name]
	}
	return newTuple(g.partitionBy, values, nil), nil
}

// operate runs an operator command on a group: the transition, then
// change, in one transaction that writes nothing when the status does not
// accept the command.
func (s *Store) operate(ctx context.Context, group string, cmd driver.GroupCommand, change func(t *tx, st *groupState, f *driver.Failure) error) error {
	return s.update(ctx, lockExclusive, func(t *tx) error {
		st, err := t.lockState(group)
		if err != nil {
			return err
		}
		next, err := driver.Transition(group, st.status, cmd)
		if err != nil {
			return err
		}
		var f driver.Failure
		if err := json.Unmarshal([]byte(st.failure), &f); err != nil {
			return fmt.Errorf("pgstore: consumer group %s: failure: %w", group, err)
		}
		st.status = next
		if err := change(t, &st, &f); err != nil {
			return err
		}
		if err := t.recordTransition(st.row, cmd, f.Reason); err != nil {
			return err
		}
		return t.setStatus(st, f)
	})
}

// announce has the transaction announce a group's handled types after it
// commits, as an append of them would: the group was resumed (started, or
// a partition unparked), and its workers wake at once instead of at the
// next catch-up poll.
func (t *tx) announce(handled []string) {
	for _, typ := range handled {
		t.types = appendDistinct(t.types, typ)
	}
}

// setStatus writes a group's status, retry time and failure.
func (t *tx) setStatus(st groupState, f driver.Failure) error {
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("pgstore: encode failure: %w", err)
	}
	var retryAt *time.Time
	if !st.retryAt.IsZero() {
		retryAt = &st.retryAt
	}
	_, err = t.c.Exec(t.ctx, t.s.q.g.setStatus, st.row, string(st.status), retryAt, string(data), t.s.now())
	return t.check("set status", err)
}

// StopGroup stops a group: its failure keeps its fields and gets reason,
// its retry time is cleared.
func (s *Store) StopGroup(ctx context.Context, group, reason string) error {
	return s.operate(ctx, group, driver.CmdStop, func(t *tx, st *groupState, f *driver.Failure) error {
		st.retryAt = time.Time{}
		f.Reason = reason
		return nil
	})
}

// StartGroup makes a group active, clearing its retry time and failure;
// its handled types are announced after the commit (to this process and,
// through NOTIFY, to the others), so that workers wake at once.
func (s *Store) StartGroup(ctx context.Context, group string) error {
	return s.operate(ctx, group, driver.CmdStart, func(t *tx, st *groupState, f *driver.Failure) error {
		st.retryAt, *f = time.Time{}, driver.Failure{}
		t.announce(st.handled)
		return nil
	})
}

// ResetGroup moves every offset of the group back to the beginning (claims
// included), recording how far each had been acknowledged (claims up to
// there report Replaying), and rediscovers the log; the status and highest
// position stay; the group's snapshots (driver.Snapshot) are deleted. It
// does nothing else to an exclusive group: a delete-on-ack queue cannot
// be replayed.
func (s *Store) ResetGroup(ctx context.Context, group string) error {
	return s.operate(ctx, group, driver.CmdReset, func(t *tx, st *groupState, f *driver.Failure) error {
		if err := t.deleteSnapshots(group); err != nil {
			return err
		}
		if st.exclusive {
			return nil
		}
		if _, err := t.c.Exec(t.ctx, s.q.g.foldGroup, st.row); err != nil {
			return t.fail("reset", err)
		}
		if _, err := t.c.Exec(t.ctx, s.q.g.resetOffsets, st.row); err != nil {
			return t.fail("reset", err)
		}
		g := t.gs.byName[group]
		if g == nil {
			return fmt.Errorf("pgstore: reset %s: internal error: group not in the configuration", group)
		}
		return t.discover(g)
	})
}

// RetryGroup moves the group to retrying until at with the failure, when
// its status accepts it; otherwise the group stays as it is.
func (s *Store) RetryGroup(ctx context.Context, group string, at time.Time, failure driver.Failure) error {
	return s.work(ctx, group, driver.CmdRetry, func(st *groupState) driver.Failure {
		st.retryAt = at.UTC().Truncate(time.Microsecond)
		return failure
	})
}

// FailGroup moves the group to failed with the failure, when its status
// accepts it; otherwise the group stays as it is.
func (s *Store) FailGroup(ctx context.Context, group string, failure driver.Failure) error {
	return s.work(ctx, group, driver.CmdFail, func(st *groupState) driver.Failure {
		st.retryAt = time.Time{}
		return failure
	})
}

// work runs a worker command: like operate, but a status that does not
// accept the command is no error (the group stays as it is).
func (s *Store) work(ctx context.Context, group string, cmd driver.GroupCommand, change func(st *groupState) driver.Failure) error {
	return s.update(ctx, lockExclusive, func(t *tx) error {
		st, err := t.lockState(group)
		if err != nil {
			return err
		}
		next, err := driver.Transition(group, st.status, cmd)
		if err != nil {
			return nil
		}
		st.status = next
		return t.setStatus(st, change(&st))
	})
}

// ChangeGroup decides a worker command on the group's state and applies
// it, in one transaction under the exclusive lock; see driver.Groups.
func (s *Store) ChangeGroup(ctx context.Context, group string, decide func(driver.GroupState) (driver.GroupChange, error)) (out driver.GroupState, err error) {
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		st, err := t.lockState(group)
		if err != nil {
			return err
		}
		cur := driver.GroupState{Status: st.status, RetryAt: st.retryAt}
		if err := json.Unmarshal([]byte(st.failure), &cur.Failure); err != nil {
			return fmt.Errorf("pgstore: consumer group %s: failure: %w", group, err)
		}
		out = cur
		ch, err := decide(cur)
		if err != nil || ch.Command == "" {
			return err
		}
		if ch.Command == driver.CmdPark {
			out, err = t.park(st, cur, ch.Failure)
			return err
		}
		if ch.Command != driver.CmdRetry && ch.Command != driver.CmdFail {
			return fmt.Errorf("pgstore: consumer group %s: ChangeGroup applies a worker command (retry, fail or park), not %q", group, ch.Command)
		}
		next, err := driver.Transition(group, st.status, ch.Command)
		if err != nil {
			return nil // a worker command: the group stays as it is
		}
		st.status, st.retryAt = next, time.Time{}
		if ch.Command == driver.CmdRetry {
			st.retryAt = ch.RetryAt.UTC().Truncate(time.Microsecond)
		}
		if err := t.setStatus(st, ch.Failure); err != nil {
			return err
		}
		// What the store gives back: times at its precision, the failure
		// through JSON.
		out = driver.GroupState{Status: st.status, RetryAt: st.retryAt}
		data, err := json.Marshal(ch.Failure)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &out.Failure)
	})
	if err != nil {
		return driver.GroupState{}, err
	}
	return out, nil
}

// ReleaseClaimsOlderThan releases, in one transaction, every claim made at
// or before cutoff, whoever holds it, and returns the released offsets as
// they were.
func (s *Store) ReleaseClaimsOlderThan(ctx context.Context, cutoff time.Time) (out []driver.Offset, err error) {
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		out = nil
		rows, err := t.c.Query(t.ctx, s.q.g.oldClaims, cutoff)
		if err != nil {
			return t.fail("release old claims", err)
		}
		out, err = scanOffsets(rows)
		if err != nil {
			return t.fail("release old claims", err)
		}
		if len(out) == 0 {
			return nil
		}
		_, err = t.c.Exec(t.ctx, s.q.g.releaseOld, cutoff)
		return t.check("release old claims", err)
	})
	return out, err
}

// RenewClaims sets the claim time of each claim its worker still holds to
// at, in one statement; see driver.ClaimRenewer.
func (s *Store) RenewClaims(ctx context.Context, claims []*driver.ClaimedPartition, at time.Time) (int, error) {
	if len(claims) == 0 {
		return 0, ctx.Err()
	}
	ids, workers := make([]int64, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		if c == nil {
			return 0, errors.New("pgstore: renew a nil claim")
		}
		ids[i], workers[i] = c.OffsetID, c.WorkerID
	}
	tag, err := s.pool.Exec(ctx, s.q.g.renew, ids, workers, at)
	if err != nil {
		return 0, s.wrap(ctx, "renew claims", err)
	}
	return int(tag.RowsAffected()), nil
}

// RemoveWorkers deletes the workers' heartbeat rows.
func (s *Store) RemoveWorkers(ctx context.Context, workerIDs []string) error {
	if len(workerIDs) == 0 {
		return ctx.Err()
	}
	if _, err := s.pool.Exec(ctx, s.q.g.removeWorkers, workerIDs); err != nil {
		return s.wrap(ctx, "remove workers", err)
	}
	return nil
}

// Group returns a group's status and figures.
func (s *Store) Group(ctx context.Context, group string) (driver.GroupInfo, error) {
	infos, err := s.groupInfos(ctx, s.pool, group)
	if err != nil {
		return driver.GroupInfo{}, s.wrapGroupErr(ctx, "group", err)
	}
	if len(infos) == 0 {
		return driver.GroupInfo{}, s.unknownGroup(ctx, s.pool, group)
	}
	return infos[0], nil
}

// wrapGroupErr wraps err unless it is an *UnknownGroupError.
func (s *Store) wrapGroupErr(ctx context.Context, op string, err error) error {
	if errors.As(err, new(*driver.UnknownGroupError)) {
		return err
	}
	return s.wrap(ctx, op, err)
}

// groupInfos describes every group (or only group), by id.
func (s *Store) groupInfos(ctx context.Context, q querier, group string) ([]driver.GroupInfo, error) {
	sql := s.q.g.groupInfo + " ORDER BY g.group_id"
	var args []any
	if group != "" {
		sql = s.q.g.groupInfo + " WHERE g.group_id = $1"
		args = append(args, group)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.GroupInfo
	for rows.Next() {
		var info driver.GroupInfo
		var retryAt *time.Time
		var failure string
		if err := rows.Scan(&info.ID, &info.Label, &info.Status, &retryAt, &failure, &info.HighestPosition, &info.PartitionBy, &info.Exclusive,
			&info.Partitions, &info.OldestProcessed, &info.NewestProcessed, &info.HooksPending); err != nil {
			return nil, err
		}
		if retryAt != nil {
			info.RetryAt = retryAt.UTC()
		}
		if err := json.Unmarshal([]byte(failure), &info.Failure); err != nil {
			return nil, fmt.Errorf("consumer group %s: failure: %w", info.ID, err)
		}
		if len(info.PartitionBy) == 0 {
			info.PartitionBy = nil
		}
		out = append(out, info)
	}
	return out, rows.Err()
}

// unknownGroup returns the *UnknownGroupError of group, naming the
// registered groups.
func (s *Store) unknownGroup(ctx context.Context, q querier, group string) error {
	rows, err := q.Query(ctx, s.q.g.groupNames)
	if err != nil {
		return s.wrap(ctx, "group "+group, err)
	}
	known, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s.wrap(ctx, "group "+group, err)
	}
	return &driver.UnknownGroupError{Group: group, Known: known}
}

// Heartbeat records that the workers are alive at at.
func (s *Store) Heartbeat(ctx context.Context, workerIDs []string, at time.Time) error {
	if slices.Contains(workerIDs, "") {
		return errors.New("pgstore: heartbeat of a worker with no id")
	}
	if len(workerIDs) == 0 {
		return ctx.Err()
	}
	ids := slices.Compact(slices.Sorted(slices.Values(workerIDs)))
	if _, err := s.pool.Exec(ctx, s.q.g.heartbeat, ids, at); err != nil {
		return s.wrap(ctx, "heartbeat", err)
	}
	return nil
}

// ReleaseStaleClaims releases, in one transaction, the claims of workers
// last seen at or before now-ttl, and those of workers that never
// heartbeat made at or before now-ttl; it returns how many.
func (s *Store) ReleaseStaleClaims(ctx context.Context, now time.Time, ttl time.Duration) (n int, err error) {
	if err := driver.CheckTTL(ttl); err != nil {
		return 0, err
	}
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		tag, err := t.c.Exec(t.ctx, s.q.g.releaseStale, now.Add(-ttl))
		n = int(tag.RowsAffected())
		return t.check("release stale claims", err)
	})
	return n, err
}

// ReleaseDrainedOffsets deletes the unclaimed offsets whose partition no
// longer holds a message of the group's handled types (under conditional
// AND: a message carrying only some of a composite partition's
// attributes keeps it); only offsets that may have drained are checked
// (those a deleted message belonged to, and those AdvanceOffset created),
// in three statements whatever their number.
func (s *Store) ReleaseDrainedOffsets(ctx context.Context) (n int, err error) {
	err = s.update(ctx, lockExclusive, func(t *tx) error {
		q := s.q.g
		b := &pgx.Batch{}
		b.Queue(q.foldDrained)
		b.Queue(q.drainIDs)
		b.Queue(q.drainKeyed)
		b.Queue(q.clearDrain)
		br := t.sendBatch(b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return t.fail("release drained offsets", err)
		}
		for range 2 {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return t.fail("release drained offsets", err)
			}
			n += int(tag.RowsAffected())
		}
		return t.check("release drained offsets", br.Close())
	})
	return n, err
}

// PruneOrphanKeyPairs returns 0: key pairs live in each message's keys
// column (and each offset's), so they go with it; there is no dictionary
// to prune.
func (s *Store) PruneOrphanKeyPairs(ctx context.Context) (int, error) { return 0, ctx.Err() }

// ReadOffsets returns a page of offsets by ascending id from q.From; Total
// counts the offsets of q.Group (all groups when empty).
func (s *Store) ReadOffsets(ctx context.Context, oq driver.OffsetQuery) (page driver.OffsetPage, err error) {
	limit := oq.Limit
	if limit <= 0 {
		limit = driver.DefaultPageSize
	}
	err = s.snapshot(ctx, func(q querier) error {
		if err := s.knownGroup(ctx, q, oq.Group); err != nil {
			return err
		}
		if err := q.QueryRow(ctx, s.q.g.countOffsets, oq.Group).Scan(&page.Total); err != nil {
			return err
		}
		rows, err := q.Query(ctx, s.limited(s.q.g.readOffsets, 0, limit), oq.From, oq.Group)
		if err != nil {
			return err
		}
		page.Offsets, err = scanOffsets(rows)
		if page.Offsets == nil {
			page.Offsets = []driver.Offset{}
		}
		return err
	})
	if err != nil {
		return driver.OffsetPage{}, s.wrapGroupErr(ctx, "read offsets", err)
	}
	return page, nil
}

// Offsets iterates the offsets of q lazily, a page of q.Limit at a time.
func (s *Store) Offsets(ctx context.Context, q driver.OffsetQuery) iter.Seq2[driver.Offset, error] {
	return driver.PageOffsets(ctx, s.ReadOffsets, q)
}

// scanOffsets reads offset rows (id, group, status, partition key, last
// position, claimed, claimed at, claimed by).
func scanOffsets(rows pgx.Rows) ([]driver.Offset, error) {
	defer rows.Close()
	var out []driver.Offset
	for rows.Next() {
		var o driver.Offset
		var key string
		var claimedAt *time.Time
		if err := rows.Scan(&o.ID, &o.Group, &o.GroupStatus, &key, &o.LastPosition, &o.Claimed, &claimedAt, &o.ClaimedBy, &o.Parked); err != nil {
			return nil, err
		}
		var err error
		if o.Partition, err = parsePartition(key); err != nil {
			return nil, err
		}
		if claimedAt != nil {
			o.ClaimedAt = claimedAt.UTC()
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// AdvanceOffsetDeferred is AdvanceOffset sent with the transaction's next
// batch, its COMMIT's at the latest (see driver.DeferredAdvancer): the
// partition's boundary lock, the server's refusal of a position past the
// newest one and the move, with no answer read. Where AdvanceOffset would
// take the exclusive lock (a group this process has not loaded, a
// transaction holding it already), or the position lies beyond the
// transaction's own positions known so far, it moves the offset at once.
func (t *tx) AdvanceOffsetDeferred(group string, partition core.Partition, position int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	s := t.s
	gs := s.groups.Load()
	if t.holds == lockExclusive || gs == nil || gs.byName[group] == nil || s.unorderedPositions || t.drawing && position > t.ownLast() {
		_, err := t.AdvanceOffset(group, partition, position)
		return err
	}
	if position <= 0 {
		return nil
	}
	g := gs.byName[group]
	tp, err := g.tupleOf("advance", partition)
	if err != nil {
		return err
	}
	t.deferAdvance(gs, g, partition, tp, position, false)
	return nil
}

// deferAdvance queues the move of g's offset of partition (tuple tp)
// with the transaction's next batch, under the lock of its boundary
// (deferLocked): to position, refused if that is past the newest
// position, or with last to the session's newest (queueAdvance).
func (t *tx) deferAdvance(gs *groupSet, g *groupConf, partition core.Partition, tp tuple, position int64, last bool) {
	s := t.s
	keys := boundarySet{}
	keys.guard(g.conditions(partition))
	past := fmt.Sprintf("pgstore: advance %s to position %d, past the newest position", g.name, position)
	t.deferLocked(gs, keys, func(b *pgx.Batch) {
		if !last && position > t.ownLast() {
			b.Queue(s.q.g.pastNewest, position, t.ownLast())
		}
		t.queueAdvance(b, g, tp, position, last)
	}, func(i int, q *queued) {
		if q.sql == s.q.g.pastNewest {
			q.onErr = func(err error) error {
				var pe *pgconn.PgError
				if isRefusal(err) && errors.As(err, &pe) {
					return fmt.Errorf("%s %s", past, pe.Detail)
				}
				return err
			}
		}
	})
}

// AppendCommandDeferred appends cmd, decided by group in partition, and
// moves group's offset of partition past it, both with the transaction's
// next batch (its COMMIT's, for Handle), as driver.DeferredCommandAppender
// says: the offset's move is written at the position the command's
// insert draws in that batch (sessionLast). A transaction holding the
// exclusive lock, or a group this store has not loaded, appends and
// moves at once, as Append and AdvanceOffsetDeferred do.
func (t *tx) AppendCommandDeferred(cmd core.Message, group string, partition core.Partition) (core.Message, func() (int64, error), error) {
	if err := t.usable(); err != nil {
		return core.Message{}, nil, err
	}
	s := t.s
	gs := s.groups.Load()
	var g *groupConf
	if gs != nil {
		g = gs.byName[group]
	}
	var tp tuple
	var err error
	if g != nil {
		if tp, err = g.tupleOf("advance", partition); err != nil {
			return core.Message{}, nil, err
		}
	}
	k := len(t.own)
	res, err := t.Append([]core.Message{cmd}, driver.AppendOptions{Deferred: g != nil && t.holds != lockExclusive})
	if err != nil {
		return core.Message{}, nil, err
	}
	if res.Positions != nil {
		// Appended at once.
		pos := res.Last
		if pos > 0 {
			if err := t.AdvanceOffsetDeferred(group, partition, pos); err != nil {
				return core.Message{}, nil, err
			}
		}
		return res.Messages[0], func() (int64, error) { return pos, nil }, nil
	}
	t.deferAdvance(gs, g, partition, tp, 0, true)
	return res.Messages[0], func() (int64, error) {
		if len(t.own) <= k && t.usable() == nil {
			if err := t.flush(); err != nil {
				return 0, err
			}
		}
		if len(t.own) <= k {
			return 0, fmt.Errorf("pgstore: the position of command %s is unknown (its transaction failed)", cmd.Type)
		}
		return t.own[k], nil
	}, nil
}

var _ driver.DeferredCommandAppender = (*tx)(nil)
