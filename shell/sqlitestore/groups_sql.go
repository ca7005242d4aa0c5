package sqlitestore

import (
	"fmt"
	"strings"
)

// groupQueries holds the SQL text of the consumer-group statements, built
// once from the table names and reused verbatim (see queries). Parameters
// compared with indexed columns are written "+?N" for the same reason.
type groupQueries struct {
	counters    string
	bumpCount   string
	dataVer     string
	loadGroups  string
	groupNames  string
	groupByName string

	insertGroup  string
	updateConfig string
	updateLabel  string
	groupState   string
	latch        string
	dirty        string
	rescan       string
	setStatus    string
	ackGroup     string
	foldGroup    string
	foldOffset   string
	raiseHighest string
	groupInfo    string
	groupInfos   string

	hooksOn      string
	hooksOff     string
	hooksPending string
	hookRow      string
	hookRecord   string
	hookClaim    string
	hookFinish   string

	scan           string
	scanMany       string
	claim          string
	held           string
	ack            string
	release        string
	wake           string
	insertOffset   string
	insertOffsetAt string
	linkOffset     string
	offsetKeys     string
	offsetByKey    string
	setNext        string
	advance        string
	groupOffsets   string
	resetOffsets   string
	offsetsAtNext  string

	flagDrain       string
	candidatesOfMsg string
	deleteMessage   string
	drainable       string
	clearDrain      string
	candidatesOfOff string
	deleteOffset    string
	prune           string
	clearCandidates string

	heartbeat    string
	releaseStale string
	oldClaims    string
	releaseOld   string
	removeWorker string
	renew        string

	readOffsets      string
	readGroupOffsets string
	countOffsets     string
	countGroup       string

	linkIgnore string

	park        string
	parkedAll   string
	parkedGroup string
	parkedOne   string
	parkedKeys  string
	unpark      string
	unparkGroup string
	resetOffset string
}

func newGroupQueries(n names) *groupQueries {
	g, o, okp := n.groups, n.offsets, n.offsetKeyPairs
	// A group's figures: one pass over its offsets.
	// The highest position: the furthest of the offsets' and of the
	// positions folded into the group row (see foldGroup).
	info := fmt.Sprintf(`SELECT g.group_id, g.label, g.status, g.retry_at, g.failure, max(g.highest_position, coalesce(max(o.last_position), 0)), g.partition_by, g.exclusive,
	count(o.id), coalesce(min(CASE WHEN o.last_position > 0 THEN o.last_position END), 0), coalesce(max(o.last_position), 0),
	coalesce((SELECT h.transitions - h.hooked FROM %s h WHERE h.consumer_group_id = g.id), 0)
FROM %s g LEFT JOIN %s o ON o.consumer_group_id = g.id`, n.hooks, g, o)
	offsetCols := fmt.Sprintf(`o.id, g.group_id, g.status, o.partition_key, o.last_position, o.claimed, o.claimed_at, o.claimed_by,
	EXISTS (SELECT 1 FROM %s p WHERE p.offset_id = o.id)`, n.parked)
	parkedCols := fmt.Sprintf(`p.offset_id, g.group_id, o.partition_key, o.last_position, p.failure, p.parked_at
FROM %s p CROSS JOIN %s o ON o.id = p.offset_id CROSS JOIN %s g ON g.id = p.consumer_group_id`, n.parked, o, g)
	recovers := `status = 'retrying' AND json_extract(failure, '$.offset_id') = +?3`
	return &groupQueries{
		counters:    fmt.Sprintf(`SELECT name, value FROM %s`, n.counters),
		bumpCount:   fmt.Sprintf(`INSERT INTO %s (name, value) VALUES (?1, 1) ON CONFLICT (name) DO UPDATE SET value = value + 1`, n.counters),
		dataVer:     `PRAGMA data_version`,
		loadGroups:  fmt.Sprintf(`SELECT id, group_id, partition_by, exclusive, handled FROM %s ORDER BY group_id`, g),
		groupNames:  fmt.Sprintf(`SELECT group_id FROM %s ORDER BY group_id`, g),
		groupByName: fmt.Sprintf(`SELECT id FROM %s WHERE group_id = ?1`, g),

		insertGroup: fmt.Sprintf(`INSERT INTO %s (group_id, label, partition_by, exclusive, handled, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)`, g),
		updateConfig: fmt.Sprintf(`UPDATE %s SET label = ?2, partition_by = ?3, exclusive = ?4, handled = ?5, updated_at = ?6 WHERE id = ?1`, g),
		updateLabel:  fmt.Sprintf(`UPDATE %s SET label = ?2, updated_at = ?3 WHERE id = ?1 AND label <> ?2`, g),
		// The state, and whether operator transitions wait for their
		// lifecycle hooks (the group's work is not claimed then).
		groupState: fmt.Sprintf(`SELECT status, retry_at, scan_version, failure, highest_position,
	coalesce((SELECT h.transitions > h.hooked FROM %s h WHERE h.consumer_group_id = ?1), 0) FROM %s WHERE id = ?1`, n.hooks, g),

		hooksOn:      fmt.Sprintf(`INSERT INTO %s (consumer_group_id) VALUES (?1) ON CONFLICT DO NOTHING`, n.hooks),
		hooksOff:     fmt.Sprintf(`DELETE FROM %s WHERE consumer_group_id = ?1`, n.hooks),
		hooksPending: fmt.Sprintf(`SELECT coalesce(h.transitions > h.hooked, 0) FROM %s g LEFT JOIN %s h ON h.consumer_group_id = g.id WHERE g.group_id = ?1`, g, n.hooks),
		hookRow:      fmt.Sprintf(`SELECT transitions, hooked, pending, claimed_by, claimed_at FROM %s WHERE consumer_group_id = ?1`, n.hooks),
		hookRecord:   fmt.Sprintf(`UPDATE %s SET transitions = ?2, pending = ?3 WHERE consumer_group_id = ?1`, n.hooks),
		hookClaim:    fmt.Sprintf(`UPDATE %s SET claimed_by = ?2, claimed_at = ?3 WHERE consumer_group_id = ?1`, n.hooks),
		hookFinish:   fmt.Sprintf(`UPDATE %s SET hooked = ?2, pending = ?3, claimed_by = NULL, claimed_at = NULL WHERE consumer_group_id = ?1`, n.hooks),
		// The latch: compare-and-set clean against the version scanned.
		latch: fmt.Sprintf(`UPDATE %s SET scan_version = -(+?2) - 1 WHERE id = ?1 AND scan_version = +?2`, g),
		// Dirty: a version above every earlier one.
		dirty:     fmt.Sprintf(`UPDATE %s SET scan_version = abs(scan_version) + 1 WHERE id = ?1`, g),
		rescan:    fmt.Sprintf(`UPDATE %s SET scan_version = 0 WHERE id = ?1`, g),
		setStatus: fmt.Sprintf(`UPDATE %s SET status = ?2, retry_at = ?3, failure = ?4, updated_at = ?5 WHERE id = ?1`, g),
		// An ack recovers a retrying group whose failed partition this is;
		// it writes nothing otherwise (the highest position is the
		// offset's, see foldGroup).
		ackGroup: fmt.Sprintf(`UPDATE %[1]s SET status = 'active', retry_at = NULL, failure = '{"retry_count":0}', updated_at = ?2
WHERE id = ?1 AND %[2]s`, g, recovers),
		// The highest position of a group is its offsets' furthest, or the
		// furthest of offsets that moved back or went: a reset or a
		// deletion folds their positions into the group row first, so that
		// acks and advances need not write it.
		foldGroup: fmt.Sprintf(`UPDATE %[1]s SET highest_position = (SELECT max(last_position) FROM %[2]s WHERE consumer_group_id = ?1)
WHERE id = ?1 AND highest_position < (SELECT coalesce(max(last_position), 0) FROM %[2]s WHERE consumer_group_id = ?1)`, g, o),
		foldOffset: fmt.Sprintf(`UPDATE %[1]s SET highest_position = (SELECT last_position FROM %[2]s WHERE id = ?1)
WHERE id = (SELECT consumer_group_id FROM %[2]s WHERE id = ?1) AND highest_position < (SELECT last_position FROM %[2]s WHERE id = ?1)`, g, o),
		raiseHighest: fmt.Sprintf(`UPDATE %s SET highest_position = +?2 WHERE id = ?1 AND highest_position < +?2`, g),
		groupInfo:    info + ` WHERE g.group_id = ?1 GROUP BY g.id`,
		groupInfos:   info + ` GROUP BY g.id ORDER BY g.group_id`,

		// The claim scan: the unclaimed offset with pending work furthest
		// behind, ties by id, from the partial index of pending offsets
		// (which holds nothing else, so a group whose partitions are all
		// caught up answers from an empty range of it).
		scan: fmt.Sprintf(`SELECT id, partition_key, last_position, replay_until FROM %[1]s INDEXED BY idx_%[2]s_offsets_pending
WHERE consumer_group_id = +?1 AND next_position IS NOT NULL AND claimed = 0
AND NOT EXISTS (SELECT 1 FROM %[3]s p WHERE p.offset_id = %[1]s.id)
ORDER BY last_position, id LIMIT 1`, o, n.prefix, n.parked),
		// The claim scan of ClaimMany: the same, up to ?2 offsets.
		scanMany: fmt.Sprintf(`SELECT id, partition_key, last_position, replay_until FROM %[1]s INDEXED BY idx_%[2]s_offsets_pending
WHERE consumer_group_id = +?1 AND next_position IS NOT NULL AND claimed = 0
AND NOT EXISTS (SELECT 1 FROM %[3]s p WHERE p.offset_id = %[1]s.id)
ORDER BY last_position, id LIMIT +?2`, o, n.prefix, n.parked),
		claim:   fmt.Sprintf(`UPDATE OR FAIL %s SET claimed = 1, claimed_at = ?2, claimed_by = ?3 WHERE id = ?1 AND claimed = 0`, o),
		held:    fmt.Sprintf(`SELECT last_position, claimed, claimed_by, partition_key FROM %s WHERE id = ?1 AND consumer_group_id = ?2`, o),
		ack:     fmt.Sprintf(`UPDATE OR FAIL %s SET last_position = ?2, next_position = ?3, claimed = 0, claimed_at = NULL, claimed_by = NULL WHERE id = ?1`, o),
		release: fmt.Sprintf(`UPDATE OR FAIL %s SET claimed = 0, claimed_at = NULL, claimed_by = NULL WHERE id = ?1`, o),
		// Eager offsets: a new message marks its partition's offset pending
		// unless it is already.
		wake:         fmt.Sprintf(`UPDATE %s SET next_position = +?3 WHERE consumer_group_id = +?1 AND partition_key = +?2 AND next_position IS NULL AND last_position < +?3`, o),
		insertOffset: fmt.Sprintf(`INSERT INTO %s (consumer_group_id, partition_key, next_position, drain_check) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (consumer_group_id, partition_key) DO NOTHING`, o),
		// An offset created already advanced (AdvanceOffset absorbing a wake).
		insertOffsetAt: fmt.Sprintf(`INSERT INTO %s (consumer_group_id, partition_key, last_position, next_position, drain_check) VALUES (?1, ?2, ?3, ?4, 0) ON CONFLICT (consumer_group_id, partition_key) DO NOTHING`, o),
		linkOffset:     fmt.Sprintf(`INSERT INTO %s (offset_id, key_pair_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING`, okp),
		offsetKeys:     fmt.Sprintf(`SELECT key_pair_id FROM %s WHERE offset_id = ?1`, okp),
		offsetByKey:    fmt.Sprintf(`SELECT id, last_position FROM %s WHERE consumer_group_id = +?1 AND partition_key = +?2`, o),
		setNext:        fmt.Sprintf(`UPDATE %s SET next_position = ?2 WHERE id = ?1 AND next_position IS NOT ?2`, o),
		advance:        fmt.Sprintf(`UPDATE %s SET last_position = ?2, next_position = ?3 WHERE id = ?1`, o),
		groupOffsets:   fmt.Sprintf(`SELECT id, partition_key, last_position, next_position FROM %s WHERE consumer_group_id = ?1`, o),
		resetOffsets: fmt.Sprintf(`UPDATE %s SET replay_until = max(replay_until, last_position), last_position = 0,
	claimed = 0, claimed_at = NULL, claimed_by = NULL WHERE consumer_group_id = ?1`, o),
		offsetsAtNext: fmt.Sprintf(`SELECT id, consumer_group_id, last_position FROM %s WHERE next_position = +?1`, o),

		flagDrain: fmt.Sprintf(`UPDATE OR FAIL %[1]s SET drain_check = 1 WHERE drain_check = 0 AND id IN (
	SELECT ok.offset_id FROM %[2]s l CROSS JOIN %[3]s ok ON ok.key_pair_id = l.key_pair_id WHERE l.message_position = ?1)`, o, n.messageKeyPairs, okp),
		candidatesOfMsg: fmt.Sprintf(`INSERT OR IGNORE INTO %s (key_pair_id) SELECT key_pair_id FROM %s WHERE message_position = ?1`, n.orphans, n.messageKeyPairs),
		deleteMessage:   fmt.Sprintf(`DELETE FROM %s WHERE position = ?1`, n.messages),
		drainable:       fmt.Sprintf(`SELECT id, consumer_group_id, partition_key, claimed, next_position FROM %s WHERE drain_check = 1`, o),
		clearDrain:      fmt.Sprintf(`UPDATE %s SET drain_check = 0 WHERE id = ?1`, o),
		candidatesOfOff: fmt.Sprintf(`INSERT OR IGNORE INTO %s (key_pair_id) SELECT key_pair_id FROM %s WHERE offset_id = ?1`, n.orphans, okp),
		deleteOffset:    fmt.Sprintf(`DELETE FROM %s WHERE id = ?1`, o),
		prune: fmt.Sprintf(`DELETE FROM %[1]s WHERE id IN (SELECT key_pair_id FROM %[2]s)
AND NOT EXISTS (SELECT 1 FROM %[3]s l WHERE l.key_pair_id = %[1]s.id)
AND NOT EXISTS (SELECT 1 FROM %[4]s ok WHERE ok.key_pair_id = %[1]s.id)
RETURNING name, value`, n.keyPairs, n.orphans, n.messageKeyPairs, okp),
		clearCandidates: fmt.Sprintf(`DELETE FROM %s`, n.orphans),

		heartbeat: fmt.Sprintf(`INSERT INTO %s (id, last_seen) VALUES (?1, ?2) ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen`, n.workers),
		// A claim is stale when its worker was last seen at or before the
		// cutoff, or, for a worker that never heartbeat, when it was made
		// at or before the cutoff (else a worker that died before its
		// first heartbeat would hold its claims for ever).
		releaseStale: fmt.Sprintf(`UPDATE %[1]s SET claimed = 0, claimed_at = NULL, claimed_by = NULL
WHERE claimed = 1 AND coalesce((SELECT w.last_seen FROM %[2]s w WHERE w.id = %[1]s.claimed_by), claimed_at) <= ?1`, o, n.workers),

		// Claims made at or before a cutoff, whoever holds them: through the
		// partial index of claimed offsets.
		oldClaims: fmt.Sprintf(`SELECT %s FROM %s o CROSS JOIN %s g ON g.id = o.consumer_group_id
WHERE o.claimed = 1 AND o.claimed_at <= ?1`, offsetCols, o, g),
		releaseOld:   fmt.Sprintf(`UPDATE %s SET claimed = 0, claimed_at = NULL, claimed_by = NULL WHERE claimed = 1 AND claimed_at <= ?1`, o),
		removeWorker: fmt.Sprintf(`DELETE FROM %s WHERE id = ?1`, n.workers),
		// A running batch's claim, renewed by its live worker.
		renew: fmt.Sprintf(`UPDATE %s SET claimed_at = ?3 WHERE id = ?1 AND claimed = 1 AND claimed_by = ?2`, o),

		readOffsets: fmt.Sprintf(`SELECT %s FROM %s o CROSS JOIN %s g ON g.id = o.consumer_group_id
WHERE o.id >= +?1 ORDER BY o.id LIMIT +?2`, offsetCols, o, g),
		readGroupOffsets: fmt.Sprintf(`SELECT %s FROM %s o CROSS JOIN %s g ON g.id = o.consumer_group_id
WHERE o.consumer_group_id = +?3 AND o.id >= +?1 ORDER BY o.id LIMIT +?2`, offsetCols, o, g),
		countOffsets: fmt.Sprintf(`SELECT count(*) FROM %s`, o),
		countGroup:   fmt.Sprintf(`SELECT count(*) FROM %s WHERE consumer_group_id = ?1`, o),

		// Parking: an upsert of the offset's record, only for an offset of
		// the group (one reset away is gone: nothing to park).
		park: fmt.Sprintf(`INSERT INTO %s (offset_id, consumer_group_id, failure, parked_at)
SELECT id, consumer_group_id, ?3, ?4 FROM %s WHERE id = ?1 AND consumer_group_id = ?2
ON CONFLICT (offset_id) DO UPDATE SET failure = excluded.failure, parked_at = excluded.parked_at`, n.parked, o),
		parkedAll:   `SELECT ` + parkedCols + ` ORDER BY g.group_id, p.offset_id`,
		parkedGroup: `SELECT ` + parkedCols + ` WHERE p.consumer_group_id = ?1 ORDER BY p.offset_id`,
		parkedOne:   `SELECT ` + parkedCols + ` WHERE o.consumer_group_id = ?1 AND o.partition_key = ?2`,
		parkedKeys:  fmt.Sprintf(`SELECT o.partition_key FROM %s p CROSS JOIN %s o ON o.id = p.offset_id WHERE p.consumer_group_id = ?1`, n.parked, o),
		unpark:      fmt.Sprintf(`DELETE FROM %s WHERE offset_id = ?1`, n.parked),
		unparkGroup: fmt.Sprintf(`DELETE FROM %s WHERE consumer_group_id = ?1`, n.parked),
		resetOffset: fmt.Sprintf(`UPDATE %s SET replay_until = max(replay_until, last_position), last_position = 0 WHERE id = ?1`, o),

		linkIgnore: fmt.Sprintf(`INSERT INTO %s (message_position, key_pair_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING`, n.messageKeyPairs),
	}
}

// buildWake: the first message after a position that wakes a partition:
// one of the types, linked to every one of the key pairs (full AND: Pending
// work in shell/storetest's package doc). Same parameters as buildKeys; selects the position only.
func (q *queries) buildWake(sh shape) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT l1.message_position FROM %s l1", q.n.messageKeyPairs)
	for i := 2; i <= sh.attrs; i++ {
		fmt.Fprintf(&b, "\nCROSS JOIN %[1]s l%[2]d ON l%[2]d.message_position = l1.message_position AND l%[2]d.key_pair_id = +?%[3]d",
			q.n.messageKeyPairs, i, firstListParam+i-1)
	}
	fmt.Fprintf(&b, "\nCROSS JOIN %s m ON m.position = l1.message_position", q.n.messages)
	fmt.Fprintf(&b, "\nWHERE l1.key_pair_id = +?%d AND l1.message_position > +?1 AND l1.message_position <= +?2", firstListParam)
	fmt.Fprintf(&b, "\nAND m.message_type IN (%s)", placeholders(firstListParam+sh.attrs, sh.types))
	b.WriteString("\nORDER BY l1.message_position LIMIT +?3")
	return b.String()
}

// buildDiscover: the key pairs of the given attribute names carried by the
// messages of the types, in position order (discovering a group's
// partitions). Params: ?1.. types, then names.
func (q *queries) buildDiscover(sh shape) string {
	return fmt.Sprintf(`SELECT m.position, k.id, k.name, k.value FROM %s m
CROSS JOIN %s l ON l.message_position = m.position
CROSS JOIN %s k ON k.id = l.key_pair_id
WHERE m.message_type IN (%s) AND k.name IN (%s)
ORDER BY m.position`, q.n.messages, q.n.messageKeyPairs, q.n.keyPairs,
		placeholders(1, sh.types), placeholders(1+sh.types, sh.attrs))
}

// buildTyped: the positions and ids of the messages of the types, in
// position order (discovering an id-partitioned group's partitions).
// Params: ?1.. types.
func (q *queries) buildTyped(sh shape) string {
	return fmt.Sprintf(`SELECT position, message_id FROM %s WHERE message_type IN (%s) ORDER BY position`,
		q.n.messages, placeholders(1, sh.types))
}
